"""The package's import graph has no cycles: every intra-package import, at module level or inside a function
(a function-level import hides a cycle from Python, not from this check), points one way."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pyrualean_robot

PACKAGE_DIR = Path(pyrualean_robot.__file__).parent


def module_name(path: Path, root: Path, package: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [package, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the package modules it imports (ast: every Import/ImportFrom node, at any depth).

    ``from X import n`` counts as importing X.n when that is a module, else X. Parent packages implied by a
    dotted import are not edges (a package importing its own submodules is the normal direction)."""
    files = {module_name(p, root, package): p for p in root.rglob("*.py")}
    packages = {m for m, p in files.items() if p.name == "__init__.py"}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        base = mod.split(".") if mod in packages else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = base[:len(base) - node.level + 1]
                    src = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in files else src for a in node.names]
            else:
                continue
            for t in targets:
                if t in files and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_cycle():
    graph = import_graph(PACKAGE_DIR, "pyrualean_robot")
    assert len(graph) > 20  # the walk found the package
    assert cycles(graph) == []


def test_the_checker_finds_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("def g():\n    from ..a import thing\n")
    assert cycles(import_graph(pkg, "pkg")) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


LAYERS = {
    # a module may import only modules of a lower layer (the documented direction of the package)
    "pyrualean_robot.errors": 0, "pyrualean_robot.images": 0, "pyrualean_robot.results": 0, "pyrualean_robot.hints": 0,
    "pyrualean_robot.robots._args": 0,
    "pyrualean_robot.base": 1, "pyrualean_robot.sandbox": 1,
    "pyrualean_robot.notebook": 2,
}


def test_the_core_modules_import_downward_only():
    graph = import_graph(PACKAGE_DIR, "pyrualean_robot")
    for mod, layer in LAYERS.items():
        for dep in graph[mod]:
            assert LAYERS.get(dep, 99) < layer, f"{mod} imports {dep}"
    # robots never reach up into the notebook: make() attaches them
    for mod, deps in graph.items():
        if mod.startswith("pyrualean_robot.robots."):
            assert "pyrualean_robot.notebook" not in deps and "pyrualean_robot.sandbox" not in deps, mod


@pytest.mark.parametrize("mod", sorted(LAYERS) + ["pyrualean_robot.robots.tabletop", "pyrualean_robot.robots.libero"])
def test_each_core_module_imports_alone_in_a_fresh_interpreter(mod):
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    r = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
