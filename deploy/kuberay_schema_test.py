"""deploy/kuberay.yaml checked offline against KubeRay's RayCluster schema (deploy/schema/)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

HERE = Path(__file__).parent
SCHEMA = HERE / "schema" / "raycluster-ray.io-v1.json"


def strict(node: Any) -> Any:
    """The schema with unknown fields refused where the CRD lists an object's fields (kubectl's strict
    field validation does the same; the API server would otherwise drop a misspelt field silently)."""
    if isinstance(node, list):
        return [strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    """A validator of RayCluster (ray.io/v1) objects."""
    schema = strict(json.loads(SCHEMA.read_text(encoding="utf-8")))
    schema.pop("$comment", None)
    return jsonschema.Draft7Validator(schema)


def raycluster() -> dict[str, Any]:
    """The RayCluster object of deploy/kuberay.yaml."""
    docs = [d for d in yaml.safe_load_all((HERE / "kuberay.yaml").read_text(encoding="utf-8")) if d]
    clusters = [d for d in docs if d.get("kind") == "RayCluster"]
    assert len(clusters) == 1, [d.get("kind") for d in docs]
    assert clusters[0]["apiVersion"] == "ray.io/v1"
    return clusters[0]


def errors(v: jsonschema.Draft7Validator, obj: dict[str, Any]) -> list[str]:
    """Every schema error, with where it is."""
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj)]


def test_kuberay_yaml_is_a_valid_raycluster(validator: jsonschema.Draft7Validator) -> None:
    assert errors(validator, raycluster()) == []


@pytest.mark.parametrize("mutate", [
    lambda c: c["spec"]["headGroupSpec"].__setitem__("rayStartParam", {}),  # misspelt field
    lambda c: c["spec"]["workerGroupSpecs"][0].__setitem__("replicas", "two"),  # wrong type
    lambda c: c["spec"]["headGroupSpec"].pop("template"),  # required field gone
])
def test_the_check_refuses_a_broken_manifest(validator: jsonschema.Draft7Validator, mutate: Any) -> None:
    broken = copy.deepcopy(raycluster())
    mutate(broken)
    assert errors(validator, broken) != []
