"""How ``pyrualean eval --engine ray`` runs a suite's episodes on a Ray cluster (ray_service.py
serves suites with it; Go embeds both files).

A suite is a plan (``plan.json``: the episodes, the command a node runs one with, the retry rule)
and ``twins/`` (finished cells twins of replayed tools episodes, from an earlier run). Each episode
is one Ray task with the plan's resource requests; the task runs the node's ``pyrualean episode``
into a node-local folder and returns the outcome and the run folder (tar.gz). Everything the Go
side learns comes back as protocol lines (JSON, numbered), which the service streams to eval::

    {"n": 1, "kind": "start", "id": ..., "attempt": 1, "node": "<Ray node id>", "pid": ...}
    {"n": 2, "kind": "end", "id": ..., "attempt": 1, "outcome": {..., "node": ...}, "files": "<base64 tar.gz>"}
    {"n": 3, "kind": "lost", "id": ..., "attempt": 1, "status": "interrupted", "error": ...}
    {"n": 4, "kind": "done"}

Every start is closed by one end or lost, in order; a lost without a start is an attempt that never
began. Retries: a worker or node lost mid-episode is retried by Ray (``max_retries``, the attempts
left); an outcome the suite retries (the plan's ``retryable`` statuses) is resubmitted here after
the plan's backoff, doubling, the same rule and budget as the Go runner's. A replayed tools episode
starts once its cells twin has its final outcome, with the twin's run folder as its input.

No secret travels in the plan: API keys are read by the episode from its node's environment, by the
variable names its settings give (``api-key-env``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

@dataclass(frozen=True)
class Resources:
    """What one episode's task asks the cluster for."""

    num_cpus: float
    memory: int  # bytes
    num_gpus: float


@dataclass(frozen=True)
class EpisodeJob:
    """One episode of the plan."""

    id: str
    twin: str  # the other arm's episode id
    after: str  # an episode of this plan that must end first (a replayed tools episode's cells twin)
    twin_file: str  # the twin's run folder from an earlier run (a tar.gz in the package), or ""
    episode: dict[str, Any]  # suite.Episode, as the node's `pyrualean episode` reads it
    resources: Resources


@dataclass(frozen=True)
class Plan:
    """plan.json, written by eval/ray.go."""

    submission: str  # the suite's id (its work folders on the nodes are named after it)
    owner: str  # who runs it (an eval folder on a machine): a new suite of the same owner ends the old
    lease_s: float  # the suite is cancelled when no reader has followed it for this long
    command: list[str]
    retries: int
    backoff_s: float
    retryable: frozenset[str]
    env: dict[str, str]
    jobs: list[EpisodeJob]


def load_plan(path: str) -> Plan:
    """Read plan.json."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    jobs = [
        EpisodeJob(id=j["id"], twin=j.get("twin", ""), after=j.get("after", ""), twin_file=j.get("twin_file", ""),
                   episode=j["episode"], resources=Resources(**j["resources"]))
        for j in raw["jobs"]
    ]
    return Plan(submission=raw["submission"], owner=str(raw.get("owner") or ""),
                lease_s=float(raw.get("lease_s") or 60), command=list(raw["command"]), retries=int(raw["retries"]),
                backoff_s=float(raw["backoff_s"]), retryable=frozenset(raw["retryable"]),
                env=dict(raw.get("env") or {}), jobs=jobs)


# What of an agent's workspace comes back with a run folder: the agent may fill it (a sealed
# episode up to 4 GiB), and the run folder travels as one protocol line through the service's
# memory and eval's; the rest of the run folder (trace, result, calls) is the episode's own.
MAX_WORKSPACE_BYTES = 256 << 20
OMITTED = "workspace-omitted.json"


def pack(folder: str, max_workspace: int = MAX_WORKSPACE_BYTES) -> bytes:
    """A run folder as tar.gz bytes (paths relative to it; links stored as links, never followed).
    Workspace files past ``max_workspace`` bytes in all stay behind; ``workspace-omitted.json``
    names them (path and size), so the run folder says what it lacks."""
    used = 0
    omitted: list[dict[str, Any]] = []

    def take(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        nonlocal used
        if info.isfile() and info.name.startswith("./workspace/"):
            if used + info.size > max_workspace:
                omitted.append({"path": info.name[2:], "bytes": info.size})
                return None
            used += info.size
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        tar.add(folder, arcname=".", recursive=True, filter=take)
        if omitted:
            note = json.dumps({"limit_bytes": max_workspace, "omitted": omitted[:10000], "count": len(omitted)},
                              indent=1).encode()
            info = tarfile.TarInfo("./" + OMITTED)
            info.size, info.mtime = len(note), int(time.time())
            tar.addfile(info, io.BytesIO(note))
    return buf.getvalue()


def unpack(blob: bytes, folder: str) -> None:
    """Unpack a run folder packed by pack() (files and folders only, nothing outside ``folder``)."""
    os.makedirs(folder, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(folder, members=[m for m in tar.getmembers() if m.isfile() or m.isdir()], filter="data")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(root: str) -> None:
    """Remove the work folders (root/<job>/<pid>-...) whose worker died: killed, or stopped with its
    job. Any job's task on the node does it, so a stopped job's leftovers go with the next job."""
    try:
        jobs = os.listdir(root)
    except FileNotFoundError:
        return
    for job in jobs:
        try:
            names = os.listdir(os.path.join(root, job))
        except OSError:
            continue
        for name in names:
            pid = name.split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(os.path.join(root, job, name), ignore_errors=True)


def unplaceable(jobs: list[EpisodeJob], nodes: list[dict[str, float]]) -> list[str]:
    """Say which resource requests no node of the cluster has now (their tasks wait: an autoscaling
    cluster may add such a node; a fixed one never will)."""
    seen: set[Resources] = set()
    out = []
    for job in jobs:
        r = job.resources
        if r in seen:
            continue
        seen.add(r)
        if not any(n.get("CPU", 0) >= r.num_cpus and n.get("GPU", 0) >= r.num_gpus and n.get("memory", 0) >= r.memory
                   for n in nodes):
            out.append(f"no node of the cluster has {r.num_cpus:g} CPUs, {r.num_gpus:g} GPUs and "
                       f"{r.memory / (1 << 30):.1f} GiB of memory for an episode such as {job.id}: its task waits for one")
    return out


def run_on_node(job: dict[str, Any], plan_env: dict[str, str], command: list[str], submission: str,
                twin: bytes | None, node: str = "", forker: str = "") -> tuple[dict[str, Any], bytes]:
    """Run one episode on this node: `pyrualean episode` into a node-local eval folder, then return
    its outcome and its run folder packed. The folder is removed afterwards. ``forker`` is the node's
    robot-server forker's socket, if it has one (its robot server is then forked, not exec'd)."""
    base = os.path.join(tempfile.gettempdir(), "pyrualean-ray", submission)
    sweep(os.path.dirname(base))
    work = _work_dir(base)
    try:
        suite = os.path.join(work, "suite")
        run_dir = os.path.join(suite, "episodes", *job["id"].split("/"))
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        if twin:
            unpack(twin, os.path.join(suite, "episodes", *job["twin"].split("/")))
        job_file = os.path.join(work, "job.json")
        out_file = os.path.join(work, "outcome.json")
        with open(job_file, "w", encoding="utf-8") as f:
            json.dump({"episode": job["episode"], "dir": run_dir, "suite": suite}, f)
        env = {**os.environ, **plan_env}
        try:
            proc = subprocess.run([*command, "--job", job_file, "--outcome", out_file, "--parent-pid", str(os.getpid()),
                                   "--node", node, "--reference-cache", os.path.join(os.path.dirname(base), "reference"),
                                   *(["--robot-forker", forker] if forker else [])],
                                  cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, check=False)
        except OSError as e:
            return {"status": "boot_error", "error": f"cannot run {command[0]!r} on this node: {e}"}, b""
        try:
            with open(out_file, encoding="utf-8") as f:
                outcome = json.load(f)
        except (OSError, ValueError):
            tail = proc.stderr.decode("utf-8", "replace").strip()[-2000:]
            outcome = {"status": "boot_error", "error": f"{' '.join(command)} exited {proc.returncode}: {tail}"}
        blob = pack(run_dir) if os.path.isdir(run_dir) else b""
        return outcome, blob
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for d in (base, os.path.dirname(base)):  # once empty: nothing of the job stays on the node
            try:
                os.rmdir(d)
            except OSError:
                break


def _work_dir(base: str) -> str:
    """A fresh work folder under base, named after this worker (sweep() knows it by that); base may
    be removed by a task that just ended, so it is made again if need be."""
    for _ in range(5):
        os.makedirs(base, exist_ok=True)
        try:
            return tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base)
        except FileNotFoundError:
            continue
    return tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base)


class Emit(Protocol):
    """Where a suite's protocol lines go (the service keeps them for eval's stream)."""

    def __call__(self, kind: str, **fields: Any) -> None: ...


def run_suite(plan: Plan, folder: str, emit: Emit, cancelled: threading.Event, episode: Any, progress: Any,
              hosts: dict[str, Any] | None = None) -> None:
    """Run the plan's episodes on the cluster and report them through emit, until each has its
    final outcome or the suite is cancelled (then every attempt still running is cancelled and ends
    interrupted). ``episode`` is the Ray task that runs one (run_on_node on its node); ``progress``
    the actor its tasks tell where they started; ``hosts`` the nodes' host actors (by node id) that
    keep a robot-server forker; ``folder`` holds the plan's twin files."""
    import ray

    ids = {j.id for j in plan.jobs}
    attempts: dict[str, int] = {j.id: 0 for j in plan.jobs}  # closed attempts
    open_: dict[str, bool] = {}
    waiting: dict[str, list[EpisodeJob]] = {}
    twins: dict[str, Any] = {}  # a tools job's twin input (bytes or an object ref)
    inflight: dict[Any, tuple[EpisodeJob, Any]] = {}
    timers: list[tuple[float, EpisodeJob]] = []

    def submit(job: EpisodeJob) -> None:
        left = max(0, plan.retries - attempts[job.id])
        opts: dict[str, Any] = {"num_cpus": job.resources.num_cpus, "max_retries": left, "retry_exceptions": False}
        if job.resources.memory > 0:
            opts["memory"] = job.resources.memory
        if job.resources.num_gpus > 0:
            opts["num_gpus"] = job.resources.num_gpus
        spec = {"id": job.id, "twin": job.twin, "episode": job.episode}
        out_ref, blob_ref = episode.options(**opts).remote(spec, plan.env, plan.command, plan.submission,
                                                            progress, twins.get(job.id), hosts or {})
        inflight[out_ref] = (job, blob_ref)

    def report_starts() -> None:
        for ev in ray.get(progress.drain.remote(plan.submission)):
            i = ev["id"]
            if i not in attempts:
                continue
            if open_.get(i):  # Ray retried the task: its earlier worker died mid-episode
                attempts[i] += 1
                emit("lost", id=i, attempt=attempts[i], status="interrupted",
                     error="the worker running the episode died; Ray retried the task")
            open_[i] = True
            emit("start", id=i, attempt=attempts[i] + 1, node=ev["node"], pid=ev["pid"])

    emit("hello", ray=ray.__version__, episodes=len(plan.jobs),
         cpus=ray.cluster_resources().get("CPU", 0), gpus=ray.cluster_resources().get("GPU", 0))
    for message in unplaceable(plan.jobs, [n["Resources"] for n in ray.nodes() if n.get("Alive")]):
        emit("warning", message=message)
    for job in plan.jobs:
        if job.twin_file:
            with open(os.path.join(folder, job.twin_file), "rb") as f:
                twins[job.id] = f.read()
        if job.after in ids:
            waiting.setdefault(job.after, []).append(job)
        else:
            submit(job)
    while (inflight or timers) and not cancelled.is_set():
        now = time.monotonic()
        for due, job in [t for t in timers if t[0] <= now]:
            timers.remove((due, job))
            submit(job)
        wait_s = 0.05 if not timers else max(0.0, min(0.05, min(t[0] for t in timers) - now))
        ready, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=wait_s) if inflight else ([], [])
        if not inflight:
            time.sleep(wait_s)
        # Ends before the starts they made room for (the live view's running count stays true),
        # each after its own start (a task that started and ended within one wait).
        for ref in ready:
            job, blob_ref = inflight.pop(ref)
            if not open_.get(job.id):
                report_starts()
            started = open_.pop(job.id, False)
            attempts[job.id] += 1
            try:
                outcome, blob = ray.get(ref), ray.get(blob_ref)
            except Exception as e:  # the task failed as a task: a worker or node lost, retries spent
                status = "interrupted" if started else "boot_error"
                emit("lost", id=job.id, attempt=attempts[job.id], status=status, error=f"{type(e).__name__}: {e}"[:4000])
                final_ref = None
            else:
                status = outcome.get("status") or "error"
                emit("end", id=job.id, attempt=attempts[job.id], outcome=outcome,
                     files=base64.b64encode(blob).decode("ascii"))
                final_ref = blob_ref
            if status in plan.retryable and attempts[job.id] <= plan.retries:
                timers.append((time.monotonic() + plan.backoff_s * 2 ** (attempts[job.id] - 1), job))
                continue
            for w in waiting.pop(job.id, []):
                if final_ref is not None:
                    twins[w.id] = final_ref
                submit(w)
        report_starts()
    if cancelled.is_set():
        # Force: the worker dies, and its `pyrualean episode` (--parent-pid) with it, as a stopped job's.
        for ref in inflight:
            ray.cancel(ref, force=True, recursive=True)
        for ref in list(inflight):
            try:
                ray.get(ref, timeout=30)
            except Exception:  # cancelled, as asked; a task that finished just now lands nowhere
                pass
        report_starts()
        for i, is_open in open_.items():
            if is_open:
                attempts[i] += 1
                emit("lost", id=i, attempt=attempts[i], status="interrupted", error="eval cancelled the suite (Ctrl-C)")
        emit("done", cancelled=True)
        return
    for jobs in waiting.values():  # twins that never ran (cannot happen: each job ends above)
        for w in jobs:
            emit("lost", id=w.id, attempt=attempts[w.id] + 1, status="interrupted", error="its cells twin never ended")
    emit("done")
