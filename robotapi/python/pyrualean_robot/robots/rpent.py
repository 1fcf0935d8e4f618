"""Robots whose simulator lives in another process behind RPent's env-server contract: RoboTwin 2.0 and
RoboCasa365 (RPent env servers; GPU, Vulkan or multi-GB assets, so never on this machine) and RoboDojo
(Isaac Sim; reached through the XPolicyLab policy directory in robotapi/robodojo, which serves the same
contract to the kernel).

The contract is RPent's env RPC (``rpent/utils/rpc``, ``rpent/robots/components/env_client_base.py``):
methods ``healthz``, ``env.get_env_meta``, ``env.reset``, ``env.step(action)`` -> ``[obs, reward,
terminated, truncated, info]``, ``env.chunk_step(actions, return_all_frames=...)``, ``env.render_camera``,
``env.get_camera_meta``, ``env.get_task_language`` and the robot-specific ones each adapter names.
Both of RPent's transports are spoken, chosen by the endpoint's scheme:

- ``http://host:port`` -- ``POST /call`` with ``{"method", "args", "kwargs"}``; the reply is always HTTP 200
  with ``{"ok": true, "result": ...}`` or ``{"ok": false, "error", "traceback"}``; numpy arrays travel as
  ``{"__ndarray__": <base64 bytes>, "dtype": "uint8", "shape": [h, w, 3]}``.
- ``unix:///path/to.sock`` -- the http transport over a unix stream socket (pyrualean's own served robots,
  :mod:`pyrualean_robot.served`: a sealed kernel has no network, only the socket bound into its sandbox).
- ``socket://host:port`` -- one request per TCP connection, each way one frame: a 4-byte big-endian length
  and a pickle of ``{"method", "args", "kwargs", "session_id"}`` / the same reply envelope. Pickle runs
  code on load, so this transport is only for an env server you started or trust (RPent's own choice:
  "both processes are spawned by the same user on the same host").

Where the env server is: ``make(..., env_url=...)``, else ``$PYRUALEAN_ENV_SERVER``, else ``$RPENT_ROOT``
(an RLinf/RPent checkout with the benchmark installed): the adapter launches RPent's own env server for the
task there (each adapter knows its command; ``$PYRUALEAN_RPENT_ENV_CMD`` overrides it, with ``{port}``,
``{task}``, ``{seed}``, ``{suite}`` placeholders). With none of these ``make`` raises
:class:`EnvServerUnavailable` naming what to install.
"""

from __future__ import annotations

import base64
import concurrent.futures
import http.client
import json
import os
import pickle
import shlex
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, ClassVar, Optional

import numpy as np

from ..base import Robot, tool
from ..errors import ToolError


class EnvServerUnavailable(RuntimeError):
    """No env server for a remote robot: nothing to connect to and nothing installed to start one."""


class EnvMetaMismatch(EnvServerUnavailable):
    """The env server's ``env.get_env_meta`` is not the identity this episode needs: it was started for
    another task / config / seed (a stale or foreign server). RPent's env clients refuse it the same way."""


# ----- wire encoding (RPent's http_rpc) ------------------------------------------------------------------
def encode(obj: Any) -> Any:
    """JSON-safe form: numpy arrays as RPent's ``{"__ndarray__", "dtype", "shape"}``, numpy scalars as numbers."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        if a.dtype.hasobject:
            raise ValueError("object arrays cannot cross the env RPC")
        return {"__ndarray__": base64.b64encode(a.tobytes()).decode("ascii"), "dtype": str(a.dtype),
                "shape": list(a.shape)}
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    return obj


def decode(obj: Any) -> Any:
    """Inverse of :func:`encode`; a malformed array raises ValueError (never an object array)."""
    if isinstance(obj, dict):
        if "__ndarray__" in obj and set(obj) <= {"__ndarray__", "dtype", "shape"}:
            try:
                dt = np.dtype(obj.get("dtype"))
                if dt.hasobject:
                    raise ValueError("object arrays are not accepted")
                arr = np.frombuffer(base64.b64decode(obj["__ndarray__"], validate=True), dtype=dt)
                return arr.reshape(obj.get("shape", (-1,))).copy()
            except (TypeError, ValueError) as e:
                raise ValueError(f"malformed array on the wire: {e}") from e
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj


# The unix transport's binary reply (asked for with Accept: BUFFERS_TYPE): a 4-byte big-endian JSON length,
# the JSON envelope with each array as {"__buffer__": i, "dtype", "shape"}, then the arrays' raw bytes in
# order. A served robot's images then cost a copy, not base64 and a 260 KB JSON string each way.
BUFFERS_TYPE = "application/x-pyrualean-buffers"


def encode_buffers(obj: Any) -> bytes:
    """The binary reply body for ``obj`` (see BUFFERS_TYPE)."""
    bufs: list[bytes] = []

    def walk(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v)
            if a.dtype.hasobject:
                raise ValueError("object arrays cannot cross the env RPC")
            bufs.append(a.tobytes())
            return {"__buffer__": len(bufs) - 1, "dtype": str(a.dtype), "shape": list(a.shape)}
        if isinstance(v, (np.floating, np.integer, np.bool_)):
            return v.item()
        if isinstance(v, dict):
            return {str(k): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    head = json.dumps({"envelope": walk(obj), "sizes": [len(b) for b in bufs]}).encode()
    return b"".join([_FRAME.pack(len(head)), head, *bufs])


def decode_buffers(body: bytes) -> Any:
    """Inverse of :func:`encode_buffers`; malformed input raises ValueError."""
    try:
        (n,) = _FRAME.unpack_from(body, 0)
        head = json.loads(body[4:4 + n])
        offsets, pos = [], 4 + n
        for size in head["sizes"]:
            offsets.append((pos, pos + int(size)))
            pos += int(size)
        if pos != len(body):
            raise ValueError(f"{len(body)} bytes, the header says {pos}")
    except (struct.error, KeyError, TypeError) as e:
        raise ValueError(f"malformed binary reply: {e}") from e

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"__buffer__", "dtype", "shape"}:
                dt = np.dtype(v["dtype"])
                if dt.hasobject:
                    raise ValueError("object arrays are not accepted")
                lo, hi = offsets[int(v["__buffer__"])]
                return np.frombuffer(body, dtype=dt, count=(hi - lo) // max(dt.itemsize, 1), offset=lo
                                     ).reshape(v["shape"]).copy()
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(head["envelope"])


_FRAME = struct.Struct(">I")
MAX_FRAME = 1 << 30


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed mid-frame ({len(buf)}/{n} bytes)")
        buf.extend(chunk)
    return bytes(buf)


def _read_frame(sock: socket.socket) -> Any:
    (n,) = _FRAME.unpack(_read_exact(sock, _FRAME.size))
    if n > MAX_FRAME:
        raise ValueError(f"frame of {n} bytes is over the {MAX_FRAME}-byte limit")
    return pickle.loads(_read_exact(sock, n))


def _write_frame(sock: socket.socket, obj: Any) -> None:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_FRAME.pack(len(body)) + body)


def error_envelope(exc: BaseException) -> dict:
    """RPent's ``make_error_response``: what went wrong and the server-side traceback."""
    import traceback

    return {"ok": False, "error": str(exc) or type(exc).__name__,
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


class EnvServerClient:
    """Calls an RPent RPC server (env server or model server) over ``http://`` or ``socket://``.

    Every failure -- unreachable, timed out, malformed reply, ``ok: false`` -- becomes
    ``ToolError("env_server", "<method>: <what happened>")`` with the server's traceback in ``payload``."""

    def __init__(self, url: str, *, timeout_s: float = 120.0, tool_name: str = "env_server"):
        self.timeout_s = timeout_s
        self.tool_name = tool_name
        #: the server's bound on a request body, if it announced one (a served robot's describe)
        self.max_body: Optional[int] = None
        if url.startswith("unix://"):  # the http transport over a unix socket (a served robot, local only)
            self.scheme, self.host, self.port, self.path = "unix", "", 0, url[len("unix://"):]
            # one kept-alive connection, opened off the calling thread (see call()) and then used in place:
            # a served robot's primitive costs one round trip, not a thread hand-off and a connect
            self._conn: Optional[_UnixHTTPConnection] = None
            self._conn_lock = threading.Lock()
            if not self.path.startswith("/"):
                raise ValueError(f"unix RPC endpoint must be unix:///absolute/path, not {url!r}")
            self.url = url
            return
        parts = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https", "socket", "tcp") or not parts.hostname or not parts.port:
            raise ValueError(f"RPC endpoint must be http://host:port or socket://host:port, not {url!r}")
        self.scheme = "socket" if parts.scheme in ("socket", "tcp") else parts.scheme
        self.host, self.port = parts.hostname, parts.port
        self.url = f"{self.scheme}://{self.host}:{self.port}"
        self.path = ""

    def _fail(self, method: str, what: str, details: Any = None) -> ToolError:
        return ToolError(self.tool_name, f"{method}: {what}", details)

    def _http(self, method: str, payload: dict, timeout: float) -> Any:
        body = json.dumps(encode(payload)).encode()
        req = urllib.request.Request(self.url + "/call", data=body, headers={"Content-Type": "application/json"},
                                     method="POST")
        # RPent bypasses proxies for loopback; so do we for every env server (they are never behind one).
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:  # RPent always answers 200; anything else is not its server
            raw = e.read()
            if e.code != 200:
                try:
                    return decode(json.loads(raw))
                except ValueError:
                    raise self._fail(method, f"HTTP {e.code} from {self.url}: "
                                             f"{raw[:300].decode(errors='replace')}") from e
        try:
            return decode(json.loads(raw))
        except ValueError as e:
            raise self._fail(method, f"malformed reply ({len(raw)} bytes) from {self.url}: {e}") from e

    def _unix(self, method: str, payload: dict, timeout: float) -> Any:
        body = json.dumps(encode(payload)).encode()
        if self.max_body is not None and len(body) > self.max_body:
            # the server would refuse it unread and close the connection mid-send: say why here
            raise self._fail(method, f"request body of {len(body)} bytes refused: the server takes at most "
                                     f"{self.max_body} bytes per request")
        with self._conn_lock:
            conn = self._conn
            if conn is None or conn.sock is None:
                # connect on a worker thread: the kernel sandbox's audit hook polices the cell's own thread
                conn = _UnixHTTPConnection(self.path, timeout)
                with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="env-rpc") as pool:
                    pool.submit(conn.connect).result()
                self._conn = conn
            try:
                conn.sock.settimeout(timeout)
                conn.request("POST", "/call", body=body,
                             headers={"Content-Type": "application/json", "Accept": BUFFERS_TYPE})
                resp = conn.getresponse()
                raw = resp.read()
                binary = resp.getheader("Content-Type") == BUFFERS_TYPE
                if resp.will_close:
                    conn.close()
            except BaseException as e:
                # never resent (a primitive may have run); the next call opens a fresh connection
                refusal = _refusal(conn.sock) if isinstance(e, (BrokenPipeError, ConnectionResetError)) else None
                conn.close()
                self._conn = None
                if refusal:
                    raise self._fail(method, refusal) from e
                raise
        try:
            return decode_buffers(raw) if binary else decode(json.loads(raw))
        except ValueError as e:
            raise self._fail(method, f"malformed reply ({len(raw)} bytes) from {self.url}: {e}") from e

    def _socket(self, method: str, payload: dict, timeout: float) -> Any:
        with socket.create_connection((self.host, self.port), timeout=min(timeout, 10.0)) as sock:
            sock.settimeout(timeout)
            _write_frame(sock, {**payload, "args": tuple(payload["args"]), "session_id": None})
            try:
                return _read_frame(sock)
            except (pickle.UnpicklingError, EOFError, ValueError, struct.error) as e:
                raise self._fail(method, f"malformed reply from {self.url}: {e}") from e

    def call(self, method: str, *args: Any, timeout_s: Optional[float] = None, **kwargs: Any) -> Any:
        payload = {"method": method, "args": list(args), "kwargs": kwargs}
        timeout = timeout_s or self.timeout_s

        def fetch() -> Any:
            send = {"socket": self._socket, "unix": self._unix}.get(self.scheme, self._http)
            return send(method, payload, timeout)

        try:
            if self.scheme == "unix":  # its socket I/O never trips the audit hook: no worker thread needed
                reply = fetch()
            else:
            # The socket I/O runs on a worker thread: the kernel sandbox's audit hook polices the agent's cell
            # thread (no sockets from policy code), while the robot's own env-server link must keep working.
                with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="env-rpc") as pool:
                    reply = pool.submit(fetch).result()
        except ToolError:
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:  # IncompleteRead: died mid-reply
            raise self._fail(method, f"server {self.url} unreachable, timed out or gone mid-reply: {e!r}") from e
        if not isinstance(reply, dict) or "ok" not in reply:
            raise self._fail(method, f"malformed reply envelope: {str(reply)[:200]}")
        if not reply["ok"]:
            raise self._fail(method, str(reply.get("error") or "<no error message>"),
                             {"traceback": reply.get("traceback")})
        return reply.get("result")


def _refusal(sock: Optional[socket.socket]) -> Optional[str]:
    """The error a bounded server (``RpcServer(max_connections=...)``) wrote before it closed a connection
    it would not serve, if that is why sending failed: it waits in the socket, unread."""
    if sock is None:
        return None
    try:
        sock.settimeout(0.5)
        raw = sock.recv(65536)
    except OSError:
        return None
    head, _, body = raw.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 503"):
        return None
    try:
        return str(json.loads(body).get("error") or "") or None
    except (ValueError, AttributeError):
        return None


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a unix stream socket (the ``unix://`` form of the http transport)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def is_unknown_method(err: ToolError, method: str) -> bool:
    """The server answered that it does not serve ``method`` (RPent's ``RpcFacade``: ``unknown RPC method:
    'name'``), i.e. it is an older server generation, not a failure of the call itself."""
    return f"unknown RPC method: {method!r}" in err.message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(client: EnvServerClient, proc: Optional[subprocess.Popen], timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    last: Exception | None = None
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise EnvServerUnavailable(f"the env server command exited with status {proc.returncode} before "
                                       f"it was ready")
        try:
            client.call("healthz", timeout_s=5)
            return
        except ToolError as e:
            last = e
            time.sleep(0.2)
    raise EnvServerUnavailable(f"env server {client.url} not ready after {timeout_s:.0f} s: {last}")


def connect_env_server(robot: str, *, task: str, seed: int, suite: Optional[str], env_url: Optional[str],
                       launch_argv: Optional[Any] = None, ready_timeout_s: float = 900.0, hint: str = "",
                       ) -> tuple[EnvServerClient, Optional[subprocess.Popen]]:
    """Find (or start) the env server for a remote robot; see the module docstring for the order.

    ``launch_argv(port, root)`` returns the argv that starts RPent's env server for this robot and task in
    the checkout ``root`` (run there, on ``port``, HTTP transport); None when the adapter cannot launch one.
    ``hint``: what that env server runs on (the robot class's ``ENV_SERVER_HINT``), told when none is found."""
    url = env_url or os.environ.get("PYRUALEAN_ENV_SERVER")
    if url:
        client = EnvServerClient(url)
        _wait_ready(client, None, min(ready_timeout_s, 30.0))
        return client, None
    root = os.environ.get("RPENT_ROOT")
    if not root:
        raise EnvServerUnavailable(
            f"robot {robot!r} needs an env server and none is configured. {hint + '. ' if hint else ''}Install "
            f"RLinf/RPent (https://github.com/RLinf/RPent) with that benchmark on a GPU machine and set "
            f"RPENT_ROOT=<checkout>, or set PYRUALEAN_ENV_SERVER=http://host:port (or socket://host:port) of a "
            f"running RPent env server. On this machine `pyrualean suites` lists what runs locally.")
    if not os.path.isdir(root):
        raise EnvServerUnavailable(f"RPENT_ROOT={root!r} is not a directory (an RLinf/RPent checkout)")
    port = _free_port()
    cmd = os.environ.get("PYRUALEAN_RPENT_ENV_CMD")
    if cmd:
        argv = shlex.split(cmd.format(port=port, task=task, seed=seed, suite=suite or "", robot=robot))
    elif launch_argv is not None:
        argv = list(launch_argv(port, root))
    else:
        raise EnvServerUnavailable(
            f"RPENT_ROOT is set but pyrualean does not know how to start RPent's {robot} env server: set "
            f"PYRUALEAN_RPENT_ENV_CMD to the command (with {{port}}, {{task}}, {{seed}}, {{suite}} placeholders)")
    try:
        proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.PIPE, start_new_session=True)
    except OSError as e:
        raise EnvServerUnavailable(f"cannot start the {robot} env server ({argv[0]}): {e}") from e
    # stdin stays open: RPent's servers (parent_watch) exit when it closes, i.e. when this kernel dies.
    client = EnvServerClient(f"http://127.0.0.1:{port}")
    try:
        _wait_ready(client, proc, ready_timeout_s)
    except BaseException:
        proc.terminate()
        raise
    return client, proc


def rpent_python(root: str) -> str:
    """The interpreter that runs RPent's env servers: ``$RPENT_PYTHON`` (must be executable), else the
    checkout's ``.venv/bin/python``, else this one."""
    python = os.environ.get("RPENT_PYTHON") or ""
    if python:
        if not os.access(python, os.X_OK):
            raise EnvServerUnavailable(f"RPENT_PYTHON={python!r} is not an executable Python (the interpreter of "
                                       f"RPent's environment, with the benchmark installed)")
        return python
    venv = os.path.join(root, ".venv", "bin", "python")
    return venv if os.access(venv, os.X_OK) else sys.executable


def stop_env_server(proc: Optional[subprocess.Popen], grace_s: float = 10.0) -> None:
    """Stop an env server this process launched: close its stdin first (RPent's ``--parent-watch`` then shuts
    it down cleanly), terminate it after ``grace_s``, kill it if that is ignored too."""
    if proc is None or proc.poll() is not None:
        return
    try:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(grace_s)
        return
    except (subprocess.TimeoutExpired, OSError):
        pass
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# ----- camera geometry shared by remote robots ----------------------------------------------------------
def back_project_pixels(depth: np.ndarray, meta: dict, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """World xyz of pixels from metric depth (along the optical axis) and an OpenCV camera model."""
    K = np.asarray(meta["intrinsic_K"], float)
    E = np.asarray(meta["extrinsic_cv"], float)  # world -> camera
    d = depth[rows, cols]
    x = (cols - K[0, 2]) / K[0, 0] * d
    y = (rows - K[1, 2]) / K[1, 1] * d
    pc = np.stack([x, y, d], axis=-1)
    R, t = E[:3, :3], E[:3, 3]
    return (pc - t) @ R  # R^T (p - t)


def world_map_from(depth: np.ndarray, meta: dict) -> np.ndarray:
    h, w = depth.shape[:2]
    rows, cols = np.mgrid[0:h, 0:w]
    out = back_project_pixels(depth, meta, rows, cols).astype(np.float32)
    out[~np.isfinite(depth) | (depth <= 0)] = np.nan
    return out


class RemoteRobot(Robot):
    """Plumbing for a robot behind a generic env server (RoboDojo's bridge): connection, stepping, success,
    cameras. RoboTwin and RoboCasa follow their own RPent env servers' richer contracts and use only the
    connection and wire helpers of this module."""

    NAME: ClassVar[str] = "remote"
    ENV_SERVER_HINT: ClassVar[str] = ""  # what its env server runs on (connect_env_server's hint)
    CAMERA_SIZE: ClassVar[tuple[int, int]] = (240, 320)  # (height, width)

    def __init__(self, *, task: Optional[str] = None, seed: int = 0, workspace: Optional[str] = None,
                 images: str = "on-motion", primitives: str = "full", suite: Optional[str] = None,
                 vla_endpoint: Optional[str] = None, max_env_steps: int = 10000, env_url: Optional[str] = None):
        task = task or self.default_task()
        super().__init__(task=task, seed=seed, workspace=workspace, images=images, primitives=primitives,
                         suite=suite, vla_endpoint=vla_endpoint, max_env_steps=max_env_steps)
        self._client, self._proc = connect_env_server(self.NAME, task=task, seed=self.seed, suite=suite,
                                                      env_url=env_url, launch_argv=self._rpent_env_argv,
                                                      hint=self.ENV_SERVER_HINT)
        self.env_meta = self._client.call("env.get_env_meta")
        obs = self._client.call("env.reset", timeout_s=300)
        self._language = self._client.call("env.get_task_language") or task
        self._steps = 0
        self._success = False
        self._obs: dict = {}
        self._absorb(obs, False, False, {})

    @classmethod
    def default_task(cls) -> str:
        return ""

    def _rpent_env_argv(self, port: int, root: str) -> Optional[list[str]]:
        """The argv that starts RPent's env server for this robot/task in checkout ``root`` on ``port`` (HTTP
        transport); None where the adapter does not know it (then PYRUALEAN_RPENT_ENV_CMD is required)."""
        return None

    # ----- base hooks -----
    def _env_steps(self) -> int:
        return self._steps

    def _solved(self) -> bool:
        return self._success

    def _task_language(self) -> str:
        return str(self._language)

    def _render_rgb(self, camera: str, size: int) -> np.ndarray:
        h, w = self.CAMERA_SIZE
        return np.asarray(self._client.call("env.render_camera", camera_name=camera, height=h, width=w, depth=False))

    def _episode_facts(self) -> dict:
        return {"env_meta": self.env_meta, "env_server": self._client.url}

    def close(self) -> None:
        """Stop the env server this robot started (if any)."""
        stop_env_server(self._proc)

    # ----- stepping -----
    def _absorb(self, obs: Any, terminated: Any, truncated: Any, info: Any) -> None:
        if isinstance(obs, dict):
            self._obs = obs
        if bool(np.asarray(terminated).any()) or bool(self._obs.get("success", False)) or (
                isinstance(info, dict) and info.get("success")):
            self._success = True
            self._mark_terminated()
        if bool(np.asarray(truncated).any()):
            self._mark_truncated()

    def _env_step(self, action: Any) -> tuple[dict, dict]:
        """One env.step; returns (obs, info). Stops (returns info with 'stopped') once the episode is over."""
        if self._success or self._steps >= self.max_env_steps:
            if self._steps >= self.max_env_steps:
                self._mark_truncated()
            return self._obs, {"stopped": True}
        res = self._client.call("env.step", action)
        if not isinstance(res, list) or len(res) != 5:
            raise ToolError("env_server", f"env.step: expected [obs, reward, terminated, truncated, info], got "
                                          f"{str(res)[:200]}")
        obs, _, term, trunc, info = res
        self._steps += int(info.get("steps", 1)) if isinstance(info, dict) else 1
        self._absorb(obs, term, trunc, info)
        if self._steps >= self.max_env_steps and not self._success:
            self._mark_truncated()
        return self._obs, info if isinstance(info, dict) else {}

    def _ended(self) -> tuple[bool, bool]:
        return self._success, self._truncated and not self._success

    # ----- cameras -----
    def _meta(self, camera: str) -> dict:
        h, w = self.CAMERA_SIZE
        meta = self._client.call("env.get_camera_meta", camera_name=camera, height=h, width=w)
        if not isinstance(meta, dict) or "intrinsic_K" not in meta:
            raise ToolError("camera_meta", f"env server has no camera model for {camera!r}")
        return meta

    def _depth_image(self, camera: str) -> np.ndarray:
        h, w = self.CAMERA_SIZE
        d = np.asarray(self._client.call("env.render_camera", camera_name=camera, height=h, width=w, depth=True),
                       dtype=np.float32)
        return d.reshape(d.shape[0], d.shape[1])

    @tool(stateful=False)
    def image(self, camera: Optional[str] = None) -> np.ndarray:
        """The camera's current RGB image (H, W, 3) uint8. Not shown to you: use show() or display()."""
        camera = camera or self.CAMERAS[0]
        self._check_camera(camera)
        return self._render_rgb(camera, 0)

    @tool(stateful=False)
    def show(self, camera: Optional[str] = None) -> None:
        """Attach the camera's current image to this turn. Costs tokens: look only when a decision depends on it."""
        camera = camera or self.CAMERAS[0]
        self._check_camera(camera)
        self._emit_image(self._render_rgb(camera, 0), camera, "show")
        self._shown.append(camera)

    @tool(stateful=False)
    def camera_meta(self, camera: Optional[str] = None) -> dict:
        """Calibration of the camera's current image: intrinsic_K (3x3), extrinsic_cv (4x4 world->camera,
        OpenCV axes: x right, y down, z forward), cam2world (its inverse), width, height."""
        camera = camera or self.CAMERAS[0]
        self._check_camera(camera)
        return self._meta(camera)

    @tool(stateful=False)
    def depth(self, camera: Optional[str] = None) -> np.ndarray:
        """Metric depth (H, W) float32 along the optical axis (NaN or 0 where nothing is hit)."""
        camera = camera or self.CAMERAS[0]
        self._check_camera(camera)
        return self._depth_image(camera)

    @tool(stateful=False)
    def world_map(self, camera: Optional[str] = None) -> np.ndarray:
        """Per-pixel world xyz (H, W, 3) float32 of a camera image; NaN where invalid."""
        camera = camera or self.CAMERAS[0]
        self._check_camera(camera)
        return world_map_from(self._depth_image(camera), self._meta(camera))


# ----- serving RPent's env RPC (RoboDojo bridge, test fakes) ---------------------------------------------
class RpcServer:
    """Serves an object over RPent's RPC, either transport: method ``"env.reset"`` calls ``target.reset()``,
    ``"env.step"`` calls ``target.step(...)`` and so on (or ``target`` is a dict of method name -> callable).
    ``healthz`` and ``shutdown`` are built in, as in RPent's ``RpcFacade``. Calls are serialised (one
    simulator). Malformed requests and failing methods get RPent's ``ok: false`` envelope; the server keeps
    serving. Runs in daemon threads; ``close()`` stops it.

    ``max_body`` and ``max_connections`` bound what a hostile client can make the server hold (the http and
    unix transports): a request body larger than ``max_body`` bytes is answered with an error envelope
    without being read, and a connection past ``max_connections`` open ones gets an error envelope (HTTP
    503) and is closed before a thread is started for it. None: no bound (RPent's own servers)."""

    def __init__(self, target: Any, host: str = "127.0.0.1", port: int = 0, *, transport: str = "http",
                 path: str = "", max_body: Optional[int] = None, max_connections: Optional[int] = None):
        import socketserver
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        if transport not in ("http", "socket", "unix"):
            raise ValueError(f"transport must be 'http', 'socket' or 'unix', not {transport!r}")
        if transport == "unix" and not path.startswith("/"):
            raise ValueError(f"the unix transport needs an absolute socket path, not {path!r}")
        for name, v in (("max_body", max_body), ("max_connections", max_connections)):
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive int or None, not {v!r}")
        lock = threading.Lock()
        self.shutdown_requested = threading.Event()

        def dispatch(method: Any, args: Any, kwargs: Any) -> Any:
            if not isinstance(method, str):
                raise ValueError(f"method must be a string, not {method!r}")
            if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
                raise ValueError("args must be a list and kwargs an object")
            if method == "healthz":
                return {"status": "ok"}
            if method == "shutdown":
                self.shutdown_requested.set()
                return {"ok": True}
            if isinstance(target, dict):
                fn = target.get(method)
            else:
                name = method[4:] if method.startswith("env.") else ""
                fn = getattr(target, name, None) if name and not name.startswith("_") else None
            if not callable(fn):
                raise ValueError(f"unknown RPC method: {method!r}")
            with lock:
                return fn(*args, **kwargs)

        if transport in ("http", "unix"):
            class Handler(BaseHTTPRequestHandler):
                def log_message(self, fmt: str, *args: Any) -> None:  # quiet
                    pass

                def do_POST(self) -> None:  # noqa: N802 - http.server API
                    if self.path != "/call":
                        self.send_response(404)
                        self.end_headers()
                        return
                    # only the unix transport answers in binary, and only when asked
                    binary = transport == "unix" and self.headers.get("Accept") == BUFFERS_TYPE
                    try:
                        n = int(self.headers.get("Content-Length") or 0)
                        if n < 0 or (max_body is not None and n > max_body):
                            # not read: the rest of the stream is garbage now, so the connection closes
                            self.close_connection = True
                            raise ValueError(f"request body of {n} bytes refused: the server takes at most "
                                             f"{max_body} bytes per request")
                        req = json.loads(self.rfile.read(n) or b"null")
                        if not isinstance(req, dict):
                            raise ValueError('expected {"method": str, "args": [...], "kwargs": {...}}')
                        result = dispatch(req.get("method"), decode(req.get("args", [])),
                                          decode(req.get("kwargs", {})))
                        if binary:
                            data = encode_buffers({"ok": True, "result": result})
                        else:
                            data = json.dumps({"ok": True, "result": encode(result)}).encode()
                    except Exception as e:  # the caller sees what went wrong; the server keeps serving
                        data = json.dumps(error_envelope(e)).encode()
                        binary = False
                    self.send_response(200)  # RPent: always 200, failures inside the body
                    self.send_header("Content-Type", BUFFERS_TYPE if binary else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if self.close_connection:
                        self.send_header("Connection", "close")  # the client opens a fresh one
                    self.end_headers()
                    try:
                        self.wfile.write(data)
                    except (BrokenPipeError, ConnectionResetError):
                        pass

            if transport == "unix":
                class UnixHTTPServer(_ConnectionCap, socketserver.ThreadingUnixStreamServer):
                    daemon_threads = True

                class UnixHandler(Handler):
                    protocol_version = "HTTP/1.1"  # kept-alive connections: a served robot's calls are many

                    def address_string(self) -> str:  # a unix peer has no (host, port)
                        return "unix"

                self._server = UnixHTTPServer(path, UnixHandler)
            else:
                class CappedHTTPServer(_ConnectionCap, ThreadingHTTPServer):
                    pass

                self._server = CappedHTTPServer((host, port), Handler)
            self._server.max_connections = max_connections
        else:
            class SockHandler(socketserver.BaseRequestHandler):
                def handle(self) -> None:
                    try:
                        req = _read_frame(self.request)
                    except Exception:  # a half frame or garbage: nothing to answer
                        return
                    try:
                        if not isinstance(req, dict):
                            raise ValueError("expected a dict frame {method, args, kwargs}")
                        resp = {"ok": True, "result": dispatch(req.get("method"), req.get("args") or (),
                                                               req.get("kwargs") or {})}
                    except Exception as e:
                        resp = error_envelope(e)
                    try:
                        _write_frame(self.request, resp)
                    except OSError:
                        pass

            class SockServer(socketserver.ThreadingTCPServer):
                allow_reuse_address = True
                daemon_threads = True

            self._server = SockServer((host, port), SockHandler)
        self._server.daemon_threads = True
        self.url = (f"unix://{path}" if transport == "unix"
                    else f"{transport}://{host}:{self._server.server_address[1]}")
        # close() waits for the loop to see the shutdown flag: at the default 0.5 s poll an episode's
        # robot server took ~0.9 s to exit (two servers), on every episode's path
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="rpent-rpc", daemon=True)
        self._thread.start()

    def serve_until_shutdown(self, *, parent_watch: bool = False) -> None:
        """Block until a ``shutdown`` call or Ctrl-C (with ``parent_watch`` also until stdin closes, as RPent's
        ``--parent-watch``: the server dies with the process that started it), then close."""
        if parent_watch:
            watch_stdin(self.shutdown_requested.set)
        try:
            self.shutdown_requested.wait()
        except KeyboardInterrupt:
            pass
        finally:
            self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _ConnectionCap:
    """A threading socketserver mix-in: at most ``max_connections`` connections are served at once (one
    thread each); one more is answered with an error envelope (HTTP 503) and closed on the accepting
    thread, so a flood of idle connections costs neither threads nor memory."""

    max_connections: Optional[int] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open = 0
        self._open_lock = threading.Lock()
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            full = self.max_connections is not None and self._open >= self.max_connections
            if not full:
                self._open += 1
        if full:
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)  # type: ignore[misc]
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self._release()

    def _release(self) -> None:
        with self._open_lock:
            self._open -= 1

    def _refuse(self, request: Any) -> None:
        body = json.dumps({"ok": False, "error": f"connection refused: the server already serves "
                                                 f"{self.max_connections} connections (its limit); close "
                                                 f"some and call again"}).encode()
        head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            request.settimeout(1.0)  # never let one refused peer stall the accepting thread
            request.sendall(head + body)
        except OSError:
            pass
        self.shutdown_request(request)  # type: ignore[attr-defined]


def watch_stdin(on_eof: Any) -> None:
    """Call ``on_eof()`` from a daemon thread once stdin reaches end of file (the parent closed it or died)."""
    import threading

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(1 << 16):
                pass
        except (OSError, ValueError):
            pass
        on_eof()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
