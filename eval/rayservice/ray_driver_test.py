"""Tests of the Ray suite runner's node-side pieces (the cluster itself: cmd/pyrualean TestEvalRay)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import ray_driver  # noqa: E402


def test_pack_unpack_round_trip_drops_links(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "workspace").mkdir(parents=True)
    (run / "result.json").write_text('{"status": "completed"}')
    (run / "workspace" / "cell.py").write_text("print(1)")
    (run / "workspace" / "escape").symlink_to("/etc/passwd")
    out = tmp_path / "out"
    ray_driver.unpack(ray_driver.pack(str(run)), str(out))
    assert (out / "result.json").read_text() == '{"status": "completed"}'
    assert (out / "workspace" / "cell.py").read_text() == "print(1)"
    assert not (out / "workspace" / "escape").exists() and not (out / "workspace" / "escape").is_symlink()


def test_pack_leaves_a_flooded_workspace_behind_and_says_so(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "workspace" / "deep").mkdir(parents=True)
    (run / "result.json").write_text('{"status": "completed"}')
    (run / "trace.ipynb").write_bytes(os.urandom(300))  # the episode's own files always come back
    (run / "workspace" / "small.txt").write_bytes(b"x" * 100)
    for i in range(5):  # what an agent writes to fill the workspace: incompressible
        (run / "workspace" / "deep" / f"blob{i}").write_bytes(os.urandom(1000))
    blob = ray_driver.pack(str(run), max_workspace=2600)
    assert len(blob) < 4000
    out = tmp_path / "out"
    ray_driver.unpack(blob, str(out))
    assert (out / "result.json").exists() and (out / "trace.ipynb").stat().st_size == 300
    kept = [p for p in (out / "workspace").rglob("*") if p.is_file()]
    note = json.loads((out / ray_driver.OMITTED).read_text())
    assert note["limit_bytes"] == 2600 and note["count"] == len(note["omitted"]) >= 3
    assert sum(p.stat().st_size for p in kept) <= 2600 and len(kept) + note["count"] == 6
    assert all(o["path"].startswith("workspace/deep/blob") and o["bytes"] == 1000 for o in note["omitted"])


def test_sweep_removes_only_dead_workers_folders(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "job-a" / f"{dead.pid}-abc").mkdir(parents=True)
    (tmp_path / "job-b" / f"{os.getpid()}-def").mkdir(parents=True)
    ray_driver.sweep(str(tmp_path))
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*")) == [f"job-b/{os.getpid()}-def"]


def test_load_plan_reads_what_go_writes(tmp_path: Path) -> None:
    plan = {"submission": "s", "command": ["pyrualean", "episode"], "retries": 2, "backoff_s": 1.5,
            "retryable": ["", "pending", "interrupted"], "env": None,
            "jobs": [{"id": "a/b", "twin": "a/c", "episode": {"id": "a/b"},
                      "resources": {"num_cpus": 1, "memory": 1073741824, "num_gpus": 0}}]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    p = ray_driver.load_plan(str(path))
    assert p.retries == 2 and p.env == {} and "interrupted" in p.retryable
    assert p.jobs[0].resources == ray_driver.Resources(num_cpus=1, memory=1 << 30, num_gpus=0)
    assert p.jobs[0].after == "" and p.jobs[0].twin_file == ""
    with pytest.raises(AttributeError):
        p.jobs[0].id = "x"  # type: ignore[misc]


def test_run_on_node_reports_a_command_that_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    job = {"id": "tabletop/default/t/0/cells/replay/default", "twin": "", "episode": {}}
    outcome, blob = ray_driver.run_on_node(job, {}, ["false"], "sub", None)
    assert outcome["status"] == "boot_error" and "exited 1" in outcome["error"]
    assert blob == b""
    assert not (tmp_path / "pyrualean-ray").exists()  # nothing of the job stays on the node


def test_unplaceable_names_requests_no_node_has() -> None:
    def job(i: str, gpus: float) -> ray_driver.EpisodeJob:
        return ray_driver.EpisodeJob(id=i, twin="", after="", twin_file="", episode={},
                                     resources=ray_driver.Resources(num_cpus=1, memory=1 << 30, num_gpus=gpus))
    nodes = [{"CPU": 8.0, "memory": 16.0 * (1 << 30)}]
    msgs = ray_driver.unplaceable([job("a", 0), job("b", 1), job("c", 1)], nodes)
    assert len(msgs) == 1 and "1 GPUs" in msgs[0] and "b" in msgs[0]
    assert ray_driver.unplaceable([job("b", 1)], nodes + [{"CPU": 4.0, "GPU": 1.0, "memory": 32.0 * (1 << 30)}]) == []
