"""The robot server: one robot (simulator, task predicate, ledger) in its own process, outside the agent's
kernel, served over RPent's env RPC (http transport on unix sockets, :class:`..robots.rpent.RpcServer`).

Two sockets, two audiences:

* the **agent socket** (bound into the sealed kernel) serves the robot's public API and nothing else:
  ``robot.describe``, ``robot.call(name, args, kwargs)`` for the class's public primitives only,
  ``robot.get(name)`` for its public properties, ``robot.env_steps``, ``robot.on_motion_images``,
  ``robot.cell_report(flags)`` (the kernel's feedback window), ``robot.card`` and ``robot.repr``;
* the **host socket** (never bound into the kernel) is the judge's: ``host.report`` (env steps, ledger
  records and the success flag since the last host report; its own window, which the agent cannot move),
  ``host.card``, ``host.ledger``, ``host.stop(reason)`` (``host.report`` also lists the agent's RPCs the
  server refused: private names asked for over the raw socket), ``host.check_source(code)`` (the static
  check's flags for a cell, computed here), ``host.judge(code)`` (both in one call: what the host asks
  once per cell), ``host.span(owner, cell)`` (whose execute the kernel runs now: each ledger record is
  tagged with the span its call started in) and RPent's ``healthz`` / ``shutdown``.

The agent socket is bounded (:data:`MAX_REQUEST_BYTES` per request body, :data:`MAX_CONNECTIONS` open at
once): past either, the call gets an error envelope, which the proxy raises in the cell as a ToolError, and
the server goes on serving.

Every robot call runs on one thread (the one that built the robot: its GL context lives there), in order.
Only JSON crosses either socket.

    python -m pyrualean_robot.served --robot tabletop --task stack_blocks --seed 0 --workspace DIR \\
        --agent-socket A.sock --host-socket H.sock

prints ``ready`` on stdout once both sockets listen, and exits when stdin closes (its owner died) or on
``shutdown``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import inspect
import os
import sys
from typing import Any, Callable, Optional

from .. import notebook
from ..apiref import tool_methods
from ..base import ReportWindow
from ..robots import DEFAULT_ROBOT, create
from ..robots.rpent import RpcServer
from .wire import to_json, to_wire


#: The agent socket's bounds (the kernel side is hostile): a primitive's arguments are small, so one request
#: body of 8 MiB is far more than any call needs; the proxy keeps one connection open, so 32 at once leave
#: room for threads of the agent's own and still bound the server's threads (a refused call gets an error).
MAX_REQUEST_BYTES = 8 << 20
MAX_CONNECTIONS = 32


def public_properties(cls: type) -> list[str]:
    """The robot class's public properties (task, done, env_steps, ledger and the robot's own)."""
    return [n for n in dir(cls) if not n.startswith("_") and isinstance(inspect.getattr_static(cls, n), property)]


class RobotService:
    """Serves one robot: the agent's methods and the host's, each a dict for :class:`RpcServer`."""

    def __init__(self, robot: Any, worker: concurrent.futures.Executor, max_request_bytes: int = MAX_REQUEST_BYTES):
        self.robot = robot
        self.max_request_bytes = max_request_bytes
        self.worker = worker
        cls = type(robot)
        # every primitive the class declares; the robot itself refuses VLA calls in a no-vla run (ledgered)
        self.tools = {name for name, _, _ in tool_methods(cls, "full")}
        self.properties = set(public_properties(cls))
        self._host_window = ReportWindow()  # the host's reports: its own window, which the agent cannot move
        self._refused: list[str] = []  # agent RPCs naming what the API does not offer, since the last report
        # whose cell the kernel runs now, as the host says (host.span); never anything the kernel says
        self._span: dict = {"owner": "between", "cell": 0}

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.worker.submit(fn, *args).result()

    def _run_agent(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an agent RPC on the robot's thread; the ledger records it adds carry the span it started in."""

        def tagged() -> Any:
            span, start = self._span, len(self.robot._ledger)
            try:
                return fn(*args)
            finally:
                for rec in self.robot._ledger[start:]:
                    rec["span"] = dict(span)

        return self.worker.submit(tagged).result()

    # ----- the agent's socket -----------------------------------------------------------------------------
    def agent_methods(self) -> dict[str, Callable[..., Any]]:
        return {
            "robot.describe": lambda: self._run(self._describe),
            "robot.call": lambda name, args=(), kwargs=None: self._run_agent(self._call, name, args, kwargs or {}),
            "robot.get": lambda name: self._run_agent(self._get, name),
            "robot.env_steps": lambda: self._run(lambda: int(self.robot._env_steps())),
            "robot.on_motion_images": lambda: self._run(self._on_motion_images),
            "robot.cell_report": lambda flags=(): self._run(lambda: to_wire(self.robot._cell_report(list(flags)))),
            "robot.card": lambda: self._run(lambda: to_wire(self.robot._episode_card())),
            "robot.repr": lambda: self._run(lambda: repr(self.robot)),
        }

    def _describe(self) -> dict:
        r = self.robot
        return {"robot": r.NAME, "class": type(r).__name__, "task": r.task_name, "seed": r.seed,
                "images": r.images, "primitives": r.primitives, "suite": r.suite, "max_env_steps": r.max_env_steps,
                "max_request_bytes": self.max_request_bytes}

    def _call(self, name: Any, args: Any, kwargs: Any) -> dict:
        if not isinstance(name, str) or name not in self.tools:
            self._refused.append(f"robot.call {str(name)[:80]}")
            # a raw RPC naming a private method (_mark_terminated, _sim, ...) gets what the proxy would say
            return {"value": None, "images": [], "raised": {
                "type": "AttributeError", "message": f"{type(self.robot).__name__!r} object has no public "
                                                     f"primitive {name!r}"}}
        if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
            return {"value": None, "images": [], "raised": {"type": "TypeError",
                                                             "message": "args must be a list, kwargs an object"}}
        raised: Optional[dict] = None
        value: Any = None
        try:
            value = getattr(self.robot, name)(*args, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # EpisodeFinished is a BaseException on purpose; it crosses as itself
            raised = {"type": type(e).__name__, "message": str(e), "reason": getattr(e, "reason", None),
                      "tool": getattr(e, "tool", None), "tool_message": getattr(e, "message", None)}
        return {"value": to_wire(value), "images": self._drain_images(), "raised": raised}

    def _get(self, name: Any) -> Any:
        if not isinstance(name, str) or name not in self.properties:
            self._refused.append(f"robot.get {str(name)[:80]}")
            raise AttributeError(f"{type(self.robot).__name__!r} object has no public property {name!r}")
        return to_wire(getattr(self.robot, name))

    def _on_motion_images(self) -> list:
        from ..base import png_bytes

        return [[cam, to_wire(png_bytes(img))] for cam, img in self.robot._on_motion_images()]

    @staticmethod
    def _drain_images() -> list:
        """PNGs the call displayed (show(); outside IPython they wait in the session): the proxy shows them."""
        s = notebook.session()
        out = [[to_wire(png), meta] for png, meta in s.emitted]
        s.emitted.clear()
        return out

    # ----- the host's socket ------------------------------------------------------------------------------
    def host_methods(self) -> dict[str, Callable[..., Any]]:
        return {
            "host.report": lambda: self._run(self._host_report),
            "host.card": lambda: self._run(lambda: to_json(self.robot._episode_card())),
            "host.ledger": lambda: self._run(lambda: to_json(self.robot.ledger)),
            "host.stop": lambda reason: self._run(self.robot._stop_episode, str(reason)),
            "host.describe": lambda: self._run(self._describe),
            "host.check_source": self._check_source,
            "host.span": self._set_span,
            "host.judge": self._judge,
        }

    def _set_span(self, owner: Any, cell: Any = 0) -> dict:
        """The host says whose execute the kernel runs from now: ``agent`` (the agent's cell ``cell``),
        ``person`` (a person's cell ``cell``) or ``between`` (none: code the agent left running, after its
        call ``cell``). Every ledger record then carries the span its call started in (``span``), which
        the host's attribution reads; it takes effect for calls that start after it, at once (a call
        already running keeps its own)."""
        if owner not in ("agent", "person", "between") or not isinstance(cell, int) or isinstance(cell, bool):
            raise ValueError(f"host.span wants agent|person|between and a cell number, not {owner!r}, {cell!r}")
        self._span = {"owner": owner, "cell": cell}
        return {"ok": True}

    def _judge(self, code: Any = None) -> dict:
        """One cell's verdict in one call: the host report since the last one, with the static check's
        flags for the agent's source (``code``; none for a person's cell or the episode's final settle)."""
        report = self._run(self._host_report)
        report["sandbox_flags"] = self._check_source(code)["flags"] if isinstance(code, str) and code else []
        return report

    @staticmethod
    def _check_source(code: Any) -> dict:
        """The in-kernel static check, run here on the source the host sent: its flags are the judge's
        record of what a cell tried, which nothing in the kernel (a replaced cell_report) can hide."""
        from ..sandbox import check_source

        if not isinstance(code, str):
            return {"flags": []}
        _, flags = check_source(code, os.devnull)
        return {"flags": flags}

    def _host_report(self) -> dict:
        report = self.robot._report(self._host_window)
        report["refused"], self._refused = self._refused, []
        return to_json(report)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyrualean_robot.served", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default=DEFAULT_ROBOT)
    ap.add_argument("--task")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--workspace", required=True, help="the robot's own folder (its calls.jsonl)")
    ap.add_argument("--images", default="on-motion")
    ap.add_argument("--primitives", default="full")
    ap.add_argument("--suite")
    ap.add_argument("--max-env-steps", type=int, help="the simulator's step budget (default: the robot's own)")
    ap.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                    help="one of the robot's own make() options (e.g. vla_endpoint=socket://..., env_url=..., "
                         "sam3_endpoint=http://...), as given: make() turns it into its kind; repeatable")
    ap.add_argument("--max-request-bytes", type=int, default=MAX_REQUEST_BYTES,
                    help="the agent socket's bound on one request's body (default %(default)s)")
    ap.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                    help="the agent socket's bound on connections open at once, a thread each (default %(default)s)")
    ap.add_argument("--agent-socket", required=True)
    ap.add_argument("--host-socket", required=True)
    a = ap.parse_args(argv)

    extra: dict[str, Any] = {}
    for kv in a.opt:
        k, sep, v = kv.partition("=")
        if not sep or not k.isidentifier():
            ap.error(f"--opt wants KEY=VALUE, not {kv!r}")
        extra[k] = v
    if a.max_env_steps is not None:
        extra["max_env_steps"] = a.max_env_steps
    worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="robot")
    robot = worker.submit(lambda: create(a.robot, task=a.task, seed=a.seed, workspace=a.workspace, images=a.images,
                                         primitives=a.primitives, suite=a.suite, **extra)).result()
    notebook.attach(robot)  # as make() does: shown images wait in the session, the proxy drains them
    service = RobotService(robot, worker, a.max_request_bytes)
    for p in (a.agent_socket, a.host_socket):
        if os.path.exists(p):
            os.unlink(p)
    agent = RpcServer(service.agent_methods(), transport="unix", path=a.agent_socket,
                      max_body=a.max_request_bytes, max_connections=a.max_connections)
    host = RpcServer(service.host_methods(), transport="unix", path=a.host_socket)
    # the sealed kernel runs as an unprivileged user of its own: it may connect to the agent socket (only
    # its folder is bound into the sandbox; the folder above is the owner's alone), never to the host's
    os.chmod(a.agent_socket, 0o666)
    os.chmod(a.host_socket, 0o600)
    print("ready", flush=True)
    try:
        host.serve_until_shutdown(parent_watch=True)
    finally:
        agent.close()
        for p in (a.agent_socket, a.host_socket):
            try:
                os.unlink(p)
            except OSError:
                pass
        close = getattr(robot, "close", None)
        if callable(close):
            worker.submit(close).result()
        worker.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
