"""The Ray service of ``pyrualean eval --engine ray``: one long-lived Ray job per cluster that runs
suites' episodes (ray_driver.run_suite), so a suite pays neither a job's start nor fresh workers.

eval finds it among the cluster's jobs (metadata ``pyrualean: service``, the version of these files
and the hash of eval's user's token) or submits it, and reads where it listens from its first line::

    @pyrualean-ray-service {"port": 8275, "ray": "2.60.0", "slots": 2}

Then it speaks HTTP to it, every request with ``Authorization: Bearer <token>``. The token comes in
the job's package (file ``token``), never in its log or its details, which hold only its hash::

    POST /suites                 a suite's package (zip: plan.json, twins/): starts it
    GET  /suites/<id>/lines?after=N   its protocol lines after N (JSON lines), as they come, to its "done"
    POST /suites/<id>/ack?n=N    lines up to N are read: the service forgets them
    POST /suites/<id>/cancel     Ctrl-C: running attempts are cancelled and end interrupted, then "done"
    GET  /suites/<id>            its state
    GET  /health

A suite nobody follows for its plan's ``lease_s`` (an eval killed with SIGKILL) is cancelled; a new
suite of the same owner (the same eval folder, run again) cancels the owner's older one.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hmac
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from typing import Any

from aiohttp import web

import ray_driver

SERVICE_PREFIX = "@pyrualean-ray-service "
MAX_PACKAGE = 512 << 20  # a suite's package: the plan and its twins' results
SUITE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


class Suite:
    """One suite's run and the protocol lines eval has not acknowledged yet."""

    def __init__(self, plan: ray_driver.Plan, folder: str, loop: asyncio.AbstractEventLoop) -> None:
        self.plan = plan
        self.folder = folder
        self.loop = loop
        self.lock = threading.Lock()
        self.lines: collections.deque[tuple[int, bytes]] = collections.deque()
        self.n = 0
        self.done = False
        self.cancelled = threading.Event()
        self.changed = asyncio.Event()  # set on the loop's thread whenever a line is added
        self.readers = 0
        self.last_read = time.monotonic()
        self.started = time.time()
        self.error = ""

    def emit(self, kind: str, **fields: Any) -> None:
        """Add one protocol line (numbered, so a reader that reconnects asks for what it lacks)."""
        with self.lock:
            self.n += 1
            line = {"n": self.n, "kind": kind, "at": round(time.time(), 3), **fields}
            self.lines.append((self.n, (json.dumps(line, separators=(",", ":")) + "\n").encode()))
            if kind == "done":
                self.done = True
        self.loop.call_soon_threadsafe(self.changed.set)

    def after(self, n: int) -> list[tuple[int, bytes]]:
        with self.lock:
            return [(m, b) for m, b in self.lines if m > n]

    def ack(self, n: int) -> None:
        with self.lock:
            while self.lines and self.lines[0][0] <= n:
                self.lines.popleft()

    def state(self) -> dict[str, Any]:
        with self.lock:
            return {"suite": self.plan.submission, "owner": self.plan.owner, "episodes": len(self.plan.jobs),
                    "lines": self.n, "unread": len(self.lines), "done": self.done,
                    "cancelled": self.cancelled.is_set(), "readers": self.readers, "error": self.error}


def read_package(body: bytes, folder: str) -> ray_driver.Plan:
    """Unpack a suite's package (plan.json and twins/*.tar.gz only) into folder and read its plan."""
    with zipfile.ZipFile(io.BytesIO(body)) as zf:
        for info in zf.infolist():
            name = info.filename
            parts = name.split("/")
            if not (name == "plan.json" or (len(parts) == 2 and parts[0] == "twins" and parts[1].endswith(".tar.gz")
                                            and "\\" not in name and parts[1] not in ("", ".", ".."))):
                raise ValueError(f"unexpected file {name[:200]!r} in the package")
            if info.file_size > MAX_PACKAGE:
                raise ValueError(f"{name[:200]!r}: too large")
            os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
            with zf.open(info) as src, open(os.path.join(folder, name), "wb") as dst:
                shutil.copyfileobj(src, dst)
    plan = ray_driver.load_plan(os.path.join(folder, "plan.json"))
    for job in plan.jobs:
        if job.twin_file and not re.fullmatch(r"twins/[0-9]+\.tar\.gz", job.twin_file):
            raise ValueError(f"{job.id}: twin file {job.twin_file[:200]!r} outside the package")
    return plan


def parent_of(pid: int) -> int:
    """The parent of a live process (0 once it is gone or a zombie), from /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return 0
    fields = stat[stat.rfind(")") + 2:].split()  # the name, in parentheses, may hold spaces
    if len(fields) < 2 or fields[0] in ("Z", "X"):
        return 0
    return int(fields[1])


def ray_ancestors(pid: int) -> list[int]:
    """The Ray processes this job's driver runs under: its job supervisor (a worker titled
    ``ray::JobSupervisor``, reached through the shell that runs the entrypoint) and that worker's
    raylet. Empty where there is no /proc or no such ancestor (run by hand)."""
    out: list[int] = []
    for _ in range(16):
        pid = parent_of(pid)
        if pid <= 1:
            break
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read(256)
        except OSError:
            break
        if title.startswith(b"ray::"):
            out.append(pid)
        elif out:  # the supervisor's parent: its raylet
            out.append(pid)
            break
    return out


def exit_with_ray(pids: list[int], cleanup: Any, period_s: float = 1.0) -> threading.Thread:
    """Start a thread that ends this process once any of pids is gone or a zombie.

    `ray stop --force` kills the job's supervisor and the raylet, not this driver: Ray's own watcher
    (``kill -s 0`` on the supervisor) keeps waiting while the killed supervisor is an unreaped
    zombie, and the driver's core worker may wait a minute for the GCS. Meanwhile the service held
    its port, so the next cluster's service could not listen there."""

    def run() -> None:
        while all(parent_of(p) for p in pids):
            time.sleep(period_s)
        print(f"the job's Ray processes {pids} are gone (ray stop?): the service ends", file=sys.stderr, flush=True)
        try:
            cleanup()
        finally:
            os._exit(3)  # not sys.exit: ray's exit hooks would wait on the dead cluster

    t = threading.Thread(target=run, name="exit-with-ray", daemon=True)
    if pids:
        t.start()
    return t


class Service:
    """The suites this service runs, and its HTTP face."""

    def __init__(self, token: str, episode: Any, progress: Any, root: str, hosts: Any = None) -> None:
        self.token = token
        self.episode = episode
        self.progress = progress
        self.root = root
        self.hosts = hosts  # hosts(binary) -> {node id: host actor}
        self.suites: dict[str, Suite] = {}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_PACKAGE, middlewares=[self.auth])
        app.add_routes([
            web.get("/health", self.health),
            web.post("/suites", self.submit),
            web.get("/suites/{id}", self.get),
            web.get("/suites/{id}/lines", self.follow),
            web.post("/suites/{id}/ack", self.ack),
            web.post("/suites/{id}/cancel", self.cancel),
        ])
        return app

    @web.middleware
    async def auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        got = request.headers.get("Authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {self.token}".encode()):
            return web.json_response({"error": "want Authorization: Bearer <the token in the service job's log>"}, status=401)
        return await handler(request)

    def suite(self, request: web.Request) -> Suite:
        s = self.suites.get(request.match_info["id"])
        if s is None:
            raise web.HTTPNotFound(text=json.dumps({"error": "no such suite"}), content_type="application/json")
        return s

    @staticmethod
    def number(request: web.Request, name: str) -> int:
        try:
            return max(0, int(request.query.get(name, "0")))
        except ValueError:
            raise web.HTTPBadRequest(text=json.dumps({"error": f"{name}: want a number"}), content_type="application/json")

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "suites": len(self.suites)})

    async def get(self, request: web.Request) -> web.Response:
        return web.json_response(self.suite(request).state())

    async def submit(self, request: web.Request) -> web.Response:
        body = await request.read()
        folder = tempfile.mkdtemp(prefix="suite-", dir=self.root)
        try:
            plan = read_package(body, folder)
        except Exception as e:  # anything the package holds that is not a suite
            shutil.rmtree(folder, ignore_errors=True)
            return web.json_response({"error": f"unreadable suite package: {type(e).__name__}: {e}"[:2000]}, status=400)
        if not SUITE_ID.fullmatch(plan.submission):
            shutil.rmtree(folder, ignore_errors=True)  # it names the suite's work folders on the nodes
            return web.json_response({"error": f"suite id {plan.submission[:200]!r}: want letters, digits, '.', '_', '-'"}, status=400)
        if plan.submission in self.suites:
            shutil.rmtree(folder, ignore_errors=True)
            return web.json_response({"error": f"suite {plan.submission!r} exists"}, status=409)
        for other in self.suites.values():
            if plan.owner and other.plan.owner == plan.owner and not other.done and not other.cancelled.is_set():
                print(f"suite {other.plan.submission}: its owner started {plan.submission}; cancelling it", flush=True)
                other.cancelled.set()
        s = Suite(plan, folder, asyncio.get_running_loop())
        self.suites[plan.submission] = s
        threading.Thread(target=self.run, args=(s,), name=plan.submission, daemon=True).start()
        return web.json_response({"suite": plan.submission}, status=201)

    def run(self, s: Suite) -> None:
        try:
            hosts = self.hosts(s.plan.command[0]) if self.hosts and s.plan.command else {}
            ray_driver.run_suite(s.plan, s.folder, s.emit, s.cancelled, self.episode, self.progress, hosts)
        except Exception as e:  # the suite ends; the service goes on
            s.error = f"{type(e).__name__}: {e}"[:4000]
            print(f"suite {s.plan.submission}: {s.error}", file=sys.stderr, flush=True)
            s.emit("warning", message=f"the service could not run the suite: {s.error}")
            s.emit("done", failed=True)
        finally:
            if self.progress is not None:  # a start told after the suite's last look is forgotten
                self.progress.drain.remote(s.plan.submission)

    async def follow(self, request: web.Request) -> web.StreamResponse:
        s = self.suite(request)
        after = self.number(request, "after")
        s.ack(after)
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-store"})
        await resp.prepare(request)
        s.readers += 1
        try:
            while True:
                s.changed.clear()
                batch = s.after(after)
                for n, line in batch:
                    await resp.write(line)
                    after = n
                if s.done and not s.after(after):
                    break
                if not batch:
                    try:
                        await asyncio.wait_for(s.changed.wait(), timeout=10)
                    except asyncio.TimeoutError:
                        await resp.write(b"\n")  # a dead reader shows up as a failed write
        finally:
            s.readers -= 1
            s.last_read = time.monotonic()
        await resp.write_eof()
        return resp

    async def ack(self, request: web.Request) -> web.Response:
        self.suite(request).ack(self.number(request, "n"))
        return web.json_response({"ok": True})

    async def cancel(self, request: web.Request) -> web.Response:
        s = self.suite(request)
        s.cancelled.set()
        return web.json_response(s.state(), status=202)

    async def watch(self) -> None:
        """Cancel suites nobody follows; forget ended ones once read (or after ten minutes)."""
        while True:
            await asyncio.sleep(1)
            now = time.monotonic()
            for sid, s in list(self.suites.items()):
                idle = s.readers == 0 and now - s.last_read
                if not s.done and not s.cancelled.is_set() and idle and idle > s.plan.lease_s:
                    print(f"suite {sid}: nobody has followed it for {s.plan.lease_s:g} s; cancelling it", flush=True)
                    s.cancelled.set()
                if s.done and s.readers == 0 and (not s.after(0) or now - s.last_read > 600):
                    del self.suites[sid]
                    shutil.rmtree(s.folder, ignore_errors=True)


def main() -> int:
    """Start the service: Ray, warm workers, the HTTP server; then serve until the job is stopped."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8275)
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--pyrualean", default="", help="the nodes' pyrualean: each node's host starts with the service")
    args = ap.parse_args()
    # The token came in this job's package (eval's user's, never in a log or the job's details). Read
    # before ray.init: the package's folder is Ray's, and after ray.init it was found without the file.
    with open("token", encoding="utf-8") as f:
        token = f.read().strip()
    if len(token) < 32:
        print("the service's package has no token", file=sys.stderr, flush=True)
        return 2
    # No worker's output is copied into this job's log (Ray's default): the log then holds only
    # what the service prints, and nothing a node runs can put a line in it.
    ray.init(log_to_driver=False)

    @ray.remote(num_cpus=0)
    class Progress:
        """Where a task says it started (its worker's pid, its node), per suite, for its reports."""

        def __init__(self) -> None:
            self.events: dict[str, list[dict[str, Any]]] = {}

        def started(self, suite: str, id: str, node: str, pid: int) -> None:
            self.events.setdefault(suite, []).append({"id": id, "node": node, "pid": pid})

        def drain(self, suite: str) -> list[dict[str, Any]]:
            return self.events.pop(suite, [])

    @ray.remote(num_cpus=0, max_restarts=0)
    class NodeHost:
        """One per node and pyrualean binary: keeps the node's robot-server forker (`pyrualean
        robot-forker`, which ends with this actor), so its episodes fork their robot servers."""

        def __init__(self, binary: str) -> None:
            self.socket_path = ""
            try:
                self.proc = subprocess.Popen([binary, "robot-forker", "--parent-pid", str(os.getpid())],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            except OSError as e:
                print(f"node host: cannot run {binary!r}: {e}", file=sys.stderr, flush=True)
                self.proc = None
                return
            line = self.proc.stdout.readline().decode("utf-8", "replace").strip() if self.proc.stdout else ""
            if line.startswith("ready "):
                self.socket_path = line[len("ready "):]

        def socket(self) -> str:
            return self.socket_path if self.proc is not None and self.proc.poll() is None else ""

    @ray.remote(num_returns=2)
    def episode(job: dict[str, Any], plan_env: dict[str, str], command: list[str], submission: str,
                progress: Any, twin: bytes | None, hosts: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        node = ray.get_runtime_context().get_node_id()
        ray.get(progress.started.remote(submission, job["id"], node, os.getpid()))
        forker = ""
        if node in hosts:  # a host still starting (or gone with its node) is not waited for
            ready, _ = ray.wait([hosts[node].socket.remote()], timeout=0.2)
            try:
                forker = ray.get(ready[0]) if ready else ""
            except Exception:
                forker = ""
        outcome, blob = ray_driver.run_on_node(job, plan_env, command, submission, twin, node, forker)
        return {**outcome, "node": node}, blob

    host_actors: dict[tuple[str, str], Any] = {}
    host_lock = threading.Lock()

    def hosts(binary: str) -> dict[str, Any]:
        """The live nodes' host actors for this binary, started where missing."""
        out = {}
        with host_lock:
            for n in ray.nodes():
                if not n.get("Alive") or n.get("Resources", {}).get("CPU", 0) <= 0:
                    continue  # a node that runs no episodes (a head with num-cpus 0) needs no forker
                key = (n["NodeID"], binary)
                if key not in host_actors:
                    strategy = NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
                    host_actors[key] = NodeHost.options(scheduling_strategy=strategy).remote(binary)
                out[n["NodeID"]] = host_actors[key]
        return out

    @ray.remote(num_cpus=1)
    def warm() -> int:
        return os.getpid()

    # The progress actor lives on the service's node: a node lost mid-suite must not take it along.
    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    progress = Progress.options(scheduling_strategy=here).remote()
    ray.get(progress.drain.remote(""))
    # A worker per CPU, started now: a suite's first episodes then start on warm workers.
    slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
    try:  # a cluster busy with other jobs' tasks: the service serves anyway, its workers start later
        ray.get([warm.remote() for _ in range(slots)], timeout=60)
    except Exception as e:
        print(f"warm workers: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    root = tempfile.mkdtemp(prefix="pyrualean-service-")
    exit_with_ray(ray_ancestors(os.getpid()), lambda: shutil.rmtree(root, ignore_errors=True))
    if args.pyrualean:
        try:  # a node whose host cannot start runs its episodes with their robot servers exec'd
            ray.get([h.socket.remote() for h in hosts(args.pyrualean).values()], timeout=60)
        except Exception as e:
            print(f"node hosts: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    service = Service(token, episode, progress, root, hosts)

    async def serve() -> None:
        runner = web.AppRunner(service.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else args.port
        print(SERVICE_PREFIX + json.dumps({"port": port, "ray": ray.__version__, "slots": slots},
                                          separators=(",", ":")), flush=True)
        await service.watch()

    try:
        asyncio.run(serve())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
