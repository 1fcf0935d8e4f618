"""The robot-server forker: imports the robot server's modules (mujoco, numpy, the robot package) once, then
forks a ready-to-run robot server per request, so a sealed episode does not pay ~0.3 CPU-s of imports
each time. The simulator and its renderer are made after the fork, in the child, as an exec'd server makes
them: nothing of one episode's robot lives in the forker.

    python -m pyrualean_robot.served.forker --socket DIR/fork.sock [--preload-robot tabletop]

prints ``ready`` once the socket listens, and exits when stdin closes (its owner died or closed it), once
the servers it forked have exited. The socket (SOCK_SEQPACKET, 0600, in the owner's private folder) takes
one request per connection: a JSON packet ``{"argv", "env", "cwd", "limits": {"as", "nofile", "fsize",
"cpu"}}`` carrying three file descriptors (the server's stdin, stdout, stderr) as SCM_RIGHTS. The reply is
``{"pid": N}`` (or ``{"error": why}``), then ``{"exit": code}`` when the server exits (negative: killed by
that signal). The child is what ``python -m pyrualean_robot.served ARGV`` would be: a session and process
group of its own, only those three descriptors, the request's environment, folder and resource limits.

Only the owner (same uid, checked with SO_PEERCRED) may ask. Requests whose PYTHONPATH or MUJOCO_GL differ
from the forker's are refused: both choose what was imported before the fork (the owner then execs).
"""

from __future__ import annotations

import argparse
import array
import importlib
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Optional

#: One request packet: argv, environment and folder are small; 256 KiB bounds what one peer can make us hold.
MAX_REQUEST_BYTES = 256 << 10
#: The variables that choose what the forker imported before any fork: a request must agree with them.
PINNED_ENV = ("PYTHONPATH", "MUJOCO_GL")
LIMIT_KEYS = {"as": resource.RLIMIT_AS, "nofile": resource.RLIMIT_NOFILE, "fsize": resource.RLIMIT_FSIZE,
              "cpu": resource.RLIMIT_CPU}


class RequestError(ValueError):
    """A fork request the forker refuses (its message is the reply's ``error``)."""


@dataclass(frozen=True)
class Request:
    """One validated fork request."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    limits: dict[str, int]
    fds: tuple[int, int, int]


def _text(v: Any, what: str) -> str:
    if not isinstance(v, str) or "\x00" in v:
        raise RequestError(f"{what} must be a string without NUL bytes")
    return v


def parse_request(msg: bytes, fds: list[int], pinned: dict[str, Optional[str]]) -> Request:
    """The request in ``msg`` with its descriptors, checked; :class:`RequestError` says what is wrong."""
    if len(fds) != 3:
        raise RequestError(f"a request carries 3 file descriptors (stdin, stdout, stderr), not {len(fds)}")
    try:
        req = json.loads(msg)
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestError(f"the request is not JSON: {e}") from None
    if not isinstance(req, dict):
        raise RequestError("the request must be a JSON object")
    unknown = set(req) - {"argv", "env", "cwd", "limits"}
    if unknown:
        raise RequestError(f"unknown request fields: {', '.join(sorted(unknown))}")
    argv = req.get("argv")
    if not isinstance(argv, list) or not argv or len(argv) > 512:
        raise RequestError("argv must be a list of 1 to 512 arguments")
    argv = [_text(a, "each argument") for a in argv]
    env = req.get("env")
    if not isinstance(env, dict):
        raise RequestError("env must be an object of strings")
    for k, v in env.items():
        if not k or "=" in k or "\x00" in k:
            raise RequestError(f"bad environment variable name {k!r}")
        _text(v, f"env[{k!r}]")
    for k in PINNED_ENV:
        if env.get(k) != pinned.get(k):
            raise RequestError(f"{k}={env.get(k)!r} differs from the forker's {pinned.get(k)!r}: it chose what was "
                               f"imported before the fork; exec the server instead")
    cwd = _text(req.get("cwd"), "cwd")
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise RequestError(f"cwd {cwd!r} is not an absolute path of a folder")
    limits = req.get("limits")
    if not isinstance(limits, dict) or set(limits) != set(LIMIT_KEYS):
        raise RequestError(f"limits must name exactly {', '.join(sorted(LIMIT_KEYS))}")
    for k, v in limits.items():
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise RequestError(f"limits.{k} must be a positive integer")
    return Request(tuple(argv), dict(env), cwd, dict(limits), (fds[0], fds[1], fds[2]))


def _child(req: Request) -> None:
    """In the forked child: become the server ``python -m pyrualean_robot.served ARGV``; never returns."""
    code = 1
    try:
        os.setsid()
        for target, fd in enumerate(req.fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 1 << 16)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(req.cwd)
        os.environ.clear()
        os.environ.update(req.env)
        for k, v in req.limits.items():
            resource.setrlimit(LIMIT_KEYS[k], (v, v))
        sys.argv = ["pyrualean_robot.served", *req.argv]
        from . import server

        code = server.main(list(req.argv))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


def _recv(conn: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    msg, anc, flags, _ = conn.recvmsg(MAX_REQUEST_BYTES, socket.CMSG_SPACE(8 * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise RequestError(f"the request is larger than {MAX_REQUEST_BYTES} bytes or carries too many descriptors")
    return msg, list(fds)


def _send(conn: socket.socket, obj: dict) -> None:
    try:
        conn.send(json.dumps(obj).encode())
    except OSError:
        pass  # the owner went away; the child lives on until its stdin closes


class Forker:
    """The forker's loop: one thread, a selector over the listening socket, stdin and each child's pidfd."""

    def __init__(self, path: str, pinned: dict[str, Optional[str]]):
        self.pinned = pinned
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        old = os.umask(0o177)
        try:
            self.listener.bind(path)
        finally:
            os.umask(old)
        self.path = path
        self.listener.listen(64)
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the requester's connection)
        self.closing = False

    def serve(self) -> None:
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
        print("ready", flush=True)
        while not self.closing or self.children:
            for key, _ in self.sel.select():
                if key.data == "accept":
                    self._accept()
                elif key.data == "stdin":
                    if not os.read(key.fd, 1 << 16):
                        self._stop_listening()
                else:
                    self._reap(key.fd)

    def _stop_listening(self) -> None:
        self.closing = True
        self.sel.unregister(sys.stdin.fileno())
        self.sel.unregister(self.listener)
        self.listener.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        fds: list[int] = []
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", creds)
            if uid != os.getuid():
                raise RequestError(f"uid {uid} may not ask this forker (owner {os.getuid()})")
            conn.settimeout(5)
            msg, fds = _recv(conn)
            req = parse_request(msg, fds, self.pinned)
        except (RequestError, OSError) as e:
            for fd in fds:
                os.close(fd)
            _send(conn, {"error": str(e)})
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, conn)
        self.sel.register(pidfd, selectors.EVENT_READ, "child")
        _send(conn, {"pid": pid})

    def _reap(self, pidfd: int) -> None:
        pid, conn = self.children.pop(pidfd)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _send(conn, {"exit": code})
        conn.close()


def preload(robots: list[str]) -> None:
    """Import what every server imports, and each named robot's module (not its simulator)."""
    from ..robots import REGISTRY
    from . import server  # noqa: F401  (mujoco, numpy and the package come with it)

    for name in robots:
        importlib.import_module(REGISTRY[name].module)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyrualean_robot.served.forker", description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True, help="the socket to listen on (in a folder only the owner may enter)")
    ap.add_argument("--preload-robot", action="append", default=None,
                    help="a robot whose module is imported before any fork (default: tabletop); repeatable")
    a = ap.parse_args(argv)
    # what chose the imports, as they were before any import (a request must agree)
    pinned = {k: os.environ.get(k) for k in PINNED_ENV}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the owner stops it by closing stdin
    preload(a.preload_robot or ["tabletop"])
    Forker(a.socket, pinned).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
