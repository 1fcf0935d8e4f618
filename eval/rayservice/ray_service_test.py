"""Tests of the Ray service's HTTP face with aiohttp's own test client: the token, hostile packages,
the stream of a suite's lines (from a number, acknowledged, to its end), cancel and the lease. The
suite's run is a stand-in here (no cluster); TestEvalRay runs the real one on Ray."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

sys.path.insert(0, str(Path(__file__).parent))
import ray_driver  # noqa: E402
import ray_service  # noqa: E402

AUTH = {"Authorization": "Bearer tok"}


def package(submission: str = "s1", owner: str = "me", lease_s: float = 60, extra: dict[str, bytes] | None = None,
            twin_file: str = "") -> bytes:
    plan = {"submission": submission, "owner": owner, "lease_s": lease_s, "command": ["pyrualean", "episode"],
            "retries": 0, "backoff_s": 0, "retryable": [], "env": {},
            "jobs": [{"id": "a/b", "twin": "a/c", "twin_file": twin_file, "episode": {"id": "a/b"},
                      "resources": {"num_cpus": 1, "memory": 0, "num_gpus": 0}}]}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("plan.json", json.dumps(plan))
        for name, body in (extra or {}).items():
            zf.writestr(name, body)
    return buf.getvalue()


def fake_run(lines: int, release: threading.Event) -> Any:
    """A stand-in for run_suite: some lines, then (once released or cancelled) the last."""

    def run(plan: ray_driver.Plan, folder: str, emit: Any, cancelled: threading.Event, episode: Any, progress: Any,
            hosts: dict[str, Any] | None = None) -> None:
        for i in range(lines):
            emit("start", id="a/b", attempt=i + 1)
        while not (release.is_set() or cancelled.is_set()):
            cancelled.wait(0.01)
        if cancelled.is_set():
            emit("lost", id="a/b", attempt=lines, status="interrupted", error="eval cancelled the suite (Ctrl-C)")
            emit("done", cancelled=True)
        else:
            emit("done")
    return run


def with_client(tmp_path: Path, test: Any) -> None:
    service = ray_service.Service("tok", None, None, str(tmp_path))

    async def main() -> None:
        async with TestClient(TestServer(service.app())) as client:
            await test(client, service)
    asyncio.run(main())


def test_every_route_wants_the_token(tmp_path: Path) -> None:
    async def test(client: TestClient, service: ray_service.Service) -> None:
        for method, path in [("GET", "/health"), ("POST", "/suites"), ("GET", "/suites/x/lines"), ("POST", "/suites/x/cancel")]:
            for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "tok"}]:
                resp = await client.request(method, path, headers=headers)
                assert resp.status == 401, (method, path, headers)
        assert (await client.get("/health", headers=AUTH)).status == 200
    with_client(tmp_path, test)


@pytest.mark.parametrize("body,why", [
    (b"not a zip", "unreadable"),
    (package(extra={"../escape": b"x"}), "unexpected file"),
    (package(extra={"twins/../../x.tar.gz": b"x"}), "unexpected file"),
    (package(extra={"/etc/x": b"x"}), "unexpected file"),
    (package(twin_file="../../../etc/passwd"), "outside the package"),
    (package(submission=""), "want letters"),
    (package(submission="../../etc"), "want letters"),
    (package(submission=".."), "want letters"),
    (b"PK\x05\x06" + b"\x00" * 18, "unreadable"),  # an empty zip: no plan.json
])
def test_hostile_packages_are_refused_and_leave_nothing(tmp_path: Path, body: bytes, why: str) -> None:
    async def test(client: TestClient, service: ray_service.Service) -> None:
        resp = await client.post("/suites", data=body, headers=AUTH)
        assert resp.status in (400, 409) and why in (await resp.json())["error"]
        assert service.suites == {} and list(tmp_path.iterdir()) == []
    with_client(tmp_path, test)


def test_a_suite_streams_from_a_number_and_forgets_what_is_acknowledged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setattr(ray_driver, "run_suite", fake_run(3, release))

    async def test(client: TestClient, service: ray_service.Service) -> None:
        assert (await client.post("/suites", data=package(), headers=AUTH)).status == 201
        assert (await client.post("/suites", data=package(), headers=AUTH)).status == 409  # the same id twice
        s = service.suites["s1"]
        for _ in range(500):
            if s.n >= 3:
                break
            await asyncio.sleep(0.01)
        assert [json.loads(b)["kind"] for _, b in s.after(0)] == ["start"] * 3
        assert (await client.post("/suites/s1/ack?n=1", headers=AUTH)).status == 200
        assert [n for n, _ in s.after(0)] == [2, 3]
        assert (await client.post("/suites/s1/ack?n=x", headers=AUTH)).status == 400
        release.set()
        resp = await client.get("/suites/s1/lines?after=2", headers=AUTH)
        lines = [json.loads(x) for x in (await resp.text()).splitlines() if x]
        assert [(m["n"], m["kind"]) for m in lines] == [(3, "start"), (4, "done")]
        assert (await client.get("/suites/nope/lines", headers=AUTH)).status == 404
    with_client(tmp_path, test)


def test_cancel_and_a_new_suite_of_the_same_owner_end_the_running_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_driver, "run_suite", fake_run(1, threading.Event()))

    async def test(client: TestClient, service: ray_service.Service) -> None:
        await client.post("/suites", data=package("s1", owner="me"), headers=AUTH)
        await client.post("/suites", data=package("s2", owner="other"), headers=AUTH)
        await client.post("/suites", data=package("s3", owner="me"), headers=AUTH)  # the same eval again
        resp = await client.get("/suites/s1/lines", headers=AUTH)
        kinds = [json.loads(x)["kind"] for x in (await resp.text()).splitlines() if x]
        assert kinds == ["start", "lost", "done"]
        assert not service.suites["s2"].cancelled.is_set()
        resp = await client.post("/suites/s2/cancel", headers=AUTH)
        assert resp.status == 202
        resp = await client.get("/suites/s2/lines", headers=AUTH)
        assert (await resp.text()).splitlines()[-1].endswith('"cancelled":true}')
        assert not service.suites["s3"].cancelled.is_set()
        service.suites["s3"].cancelled.set()
    with_client(tmp_path, test)


def test_a_suite_nobody_follows_is_cancelled_after_its_lease(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_driver, "run_suite", fake_run(1, threading.Event()))

    async def test(client: TestClient, service: ray_service.Service) -> None:
        await client.post("/suites", data=package("s1", lease_s=0.5), headers=AUTH)
        watch = asyncio.create_task(service.watch())
        try:
            for _ in range(100):
                if service.suites.get("s1") is None or service.suites["s1"].done:
                    break
                await asyncio.sleep(0.05)
            s = service.suites.get("s1")
            assert s is None or s.cancelled.is_set()
        finally:
            watch.cancel()
    with_client(tmp_path, test)


def test_the_service_ends_when_ray_stop_kills_its_supervisor_and_leaves_it_a_zombie(tmp_path: Path) -> None:
    """The process tree of a Ray job (raylet -> ray::JobSupervisor -> sh -c -> driver), with real
    processes: the "raylet" never reaps, so the killed supervisor stays a zombie, which Ray's own
    watcher (kill -s 0) takes for alive. The driver must still end, after its cleanup."""
    import os
    import signal
    import subprocess
    import time

    here = Path(__file__).parent
    (tmp_path / "driver.py").write_text(
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(here)!r})\n"
        "import ray_service\n"
        "pids = ray_service.ray_ancestors(os.getpid())\n"
        "print(' '.join(map(str, pids)), flush=True)\n"
        "ray_service.exit_with_ray(pids, lambda: open('cleaned', 'w').close(), period_s=0.05)\n"
        "time.sleep(60)\n")
    (tmp_path / "supervisor.sh").write_text(f"sh -c '{sys.executable} driver.py'\ntrue\n")
    raylet = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time\n"
         "subprocess.Popen(['bash', '-c', 'exec -a ray::JobSupervisor bash supervisor.sh'])\n"
         "time.sleep(60)\n"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert raylet.stdout is not None
        line = raylet.stdout.readline().split()
        assert len(line) == 2, line
        supervisor, parent = map(int, line)
        assert parent == raylet.pid
        assert Path(f"/proc/{supervisor}/cmdline").read_bytes().startswith(b"ray::JobSupervisor")
        drivers = [p for p in os.listdir("/proc") if p.isdigit() and b"driver.py" in Path(f"/proc/{p}/cmdline").read_bytes()
                   and not Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sh")]
        assert len(drivers) == 1, drivers
        assert ray_service.parent_of(int(drivers[0])) > 0

        os.kill(supervisor, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while ray_service.parent_of(int(drivers[0])) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ray_service.parent_of(int(drivers[0])) == 0, "the driver outlived its supervisor"
        assert ray_service.parent_of(supervisor) == 0  # a zombie counts as gone
        assert Path(f"/proc/{supervisor}").exists(), "the supervisor was reaped: the zombie case was not tested"
        assert (tmp_path / "cleaned").exists()
    finally:
        raylet.kill()
        raylet.wait()


def test_no_ray_ancestors_no_watch() -> None:
    """Run by hand (no ray:: ancestor) the service does not watch anything."""
    import os
    assert ray_service.ray_ancestors(os.getpid()) == []
    assert not ray_service.exit_with_ray([], lambda: None).is_alive()
