"""The Ray job driver of ``pyrualean eval --engine ray`` (suite/ray.go submits it; Go embeds this file).

It runs in the job's working_dir next to ``plan.json`` (the episodes, the command a node runs one
with, the retry rule) and ``twins/`` (finished cells twins of replayed tools episodes, from an
earlier run). Each episode is one Ray task with the plan's resource requests; the task runs the
node's ``pyrualean episode`` into a node-local folder and returns the outcome and the run folder
(tar.gz). Everything the Go side learns comes back as protocol lines on this driver's stdout, which
it follows through the dashboard's log tail::

    @pyrualean-ray {"n": 1, "kind": "start", "id": ..., "attempt": 1, "node": "<Ray node id>", "pid": ...}
    @pyrualean-ray {"n": 2, "kind": "end", "id": ..., "attempt": 1, "outcome": {..., "node": ...}, "files": "<base64 tar.gz>"}
    @pyrualean-ray {"n": 3, "kind": "lost", "id": ..., "attempt": 1, "status": "interrupted", "error": ...}
    @pyrualean-ray {"n": 4, "kind": "done"}

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
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from typing import Any

PREFIX = "@pyrualean-ray "


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
    """plan.json, written by suite/ray.go."""

    submission: str
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
    return Plan(submission=raw["submission"], command=list(raw["command"]), retries=int(raw["retries"]),
                backoff_s=float(raw["backoff_s"]), retryable=frozenset(raw["retryable"]),
                env=dict(raw.get("env") or {}), jobs=jobs)


_seq = 0


def emit(kind: str, **fields: Any) -> None:
    """Print one protocol line (numbered, so a reader that reconnects skips what it has seen)."""
    global _seq
    _seq += 1
    line = {"n": _seq, "kind": kind, "at": round(time.time(), 3), **fields}
    sys.stdout.write(PREFIX + json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def pack(folder: str) -> bytes:
    """A run folder as tar.gz bytes (paths relative to it; links stored as links, never followed)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        tar.add(folder, arcname=".", recursive=True)
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
                twin: bytes | None, node: str = "") -> tuple[dict[str, Any], bytes]:
    """Run one episode on this node: `pyrualean episode` into a node-local eval folder, then return
    its outcome and its run folder packed. The folder is removed afterwards."""
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
                                   "--node", node],
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


def main() -> int:
    """Run the plan's episodes on the cluster and report them on stdout."""
    import ray

    plan = load_plan("plan.json")
    # No worker's output is copied into this driver's stdout (Ray's default): the protocol stream then
    # holds only what emit() writes, and nothing a node runs can put a line in it.
    ray.init(log_to_driver=False)

    @ray.remote(num_cpus=0)
    class Progress:
        """Where a task says it started (its worker's pid, its node), for the driver to report."""

        def __init__(self) -> None:
            self.events: list[dict[str, Any]] = []

        def started(self, id: str, node: str, pid: int) -> None:
            self.events.append({"id": id, "node": node, "pid": pid})

        def drain(self) -> list[dict[str, Any]]:
            out, self.events = self.events, []
            return out

    @ray.remote(num_returns=2)
    def episode(job: dict[str, Any], plan_env: dict[str, str], command: list[str], submission: str,
                progress: Any, twin: bytes | None) -> tuple[dict[str, Any], bytes]:
        node = ray.get_runtime_context().get_node_id()
        ray.get(progress.started.remote(job["id"], node, os.getpid()))
        outcome, blob = run_on_node(job, plan_env, command, submission, twin, node)
        return {**outcome, "node": node}, blob

    # The progress actor lives on the driver's node: a node lost mid-suite must not take it along.
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    progress = Progress.options(scheduling_strategy=here).remote()
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
                                                            progress, twins.get(job.id))
        inflight[out_ref] = (job, blob_ref)

    def report_starts() -> None:
        for ev in ray.get(progress.drain.remote()):
            i = ev["id"]
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
            with open(job.twin_file, "rb") as f:
                twins[job.id] = f.read()
        if job.after in ids:
            waiting.setdefault(job.after, []).append(job)
        else:
            submit(job)
    while inflight or timers:
        now = time.monotonic()
        for due, job in [t for t in timers if t[0] <= now]:
            timers.remove((due, job))
            submit(job)
        wait_s = 0.25 if not timers else max(0.0, min(0.25, min(t[0] for t in timers) - now))
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
    for jobs in waiting.values():  # twins that never ran (cannot happen: each job ends above)
        for w in jobs:
            emit("lost", id=w.id, attempt=attempts[w.id] + 1, status="interrupted", error="its cells twin never ended")
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
