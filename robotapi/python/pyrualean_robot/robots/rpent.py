"""Robots whose simulator lives in another process behind RPent's env-server contract: RoboTwin 2.0 and
RoboCasa365 (RPent env servers; GPU, Vulkan or multi-GB assets, so never on this machine) and RoboDojo
(Isaac Sim; reached through the XPolicyLab policy directory in robotapi/robodojo, which serves the same
contract to the kernel).

The contract (RPent's env RPC, ``rpent/robots/components/env_client_base.py``): methods ``env.get_env_meta``,
``env.reset``, ``env.step(action)`` -> ``[obs, reward, terminated, truncated, info]``, ``env.render_camera(
camera_name, height, width, depth)``, ``env.get_camera_meta(camera_name, height, width)``,
``env.get_task_language``, ``env.raw_obs``, plus ``env.success_criteria`` (RoboCasa).

RPent carries it over a pickle socket; pyrualean speaks this HTTP/JSON binding of the same calls (no pickle
crosses a process boundary)::

    POST <url>/rpc   {"method": "env.step", "args": [...], "kwargs": {...}}
    200              {"ok": true, "result": ...}     |     {"ok": false, "error": "<what went wrong>"}

numpy arrays travel as ``{"__nd__": {"dtype": "uint8", "shape": [h, w, 3], "b64": "..."}}``.
Where the env server is: ``make(..., env_url="http://host:port")``, else ``$PYRUALEAN_ENV_SERVER``, else
``$RPENT_ROOT`` + ``$PYRUALEAN_RPENT_ENV_CMD`` (a command, run in RPENT_ROOT, that starts an env server
speaking this binding on ``{port}``); with none of these ``make`` raises :class:`EnvServerUnavailable`
naming what to install.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import math
import os
import shlex
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

import numpy as np

from ..base import Robot, TaskInfo, tool
from ..errors import ToolError


class EnvServerUnavailable(RuntimeError):
    """No env server for a remote robot: nothing to connect to and nothing installed to start one."""


INSTALL_HINTS = {
    "robotwin": ("RoboTwin 2.0 runs in RPent's env server on an NVIDIA GPU (SAPIEN 3.0.0b1 + mplib + CuRobo, "
                 "CUDA 12) with RoboTwin's assets (~10 GB from Hugging Face)"),
    "robocasa": ("RoboCasa365 runs in RPent's env server (robosuite 1.5.2 + robocasa, EGL) with "
                 "`robocasa-download-assets` (~10 GB)"),
    "robodojo_xpl_rgb": ("RoboDojo runs on Isaac Sim 5.1 / Isaac Lab 2.3 with an NVIDIA GPU; its episodes reach "
                         "pyrualean through the XPolicyLab policy dir robotapi/robodojo (see its README), which "
                         "sets PYRUALEAN_ENV_SERVER for the kernel"),
}


# ----- wire encoding ---------------------------------------------------------------------------------------
def encode(obj: Any) -> Any:
    """JSON-safe form: numpy arrays as {"__nd__": ...}, numpy scalars as Python numbers."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return {"__nd__": {"dtype": a.dtype.str, "shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode()}}
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    return obj


def decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        nd = obj.get("__nd__")
        if isinstance(nd, dict) and len(obj) == 1:
            try:
                dt = np.dtype(nd["dtype"])
                if dt.hasobject:
                    raise ValueError("object arrays are not accepted")
                return np.frombuffer(base64.b64decode(nd["b64"]), dtype=dt).reshape(nd["shape"]).copy()
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"malformed array on the wire: {e}") from e
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj


class EnvServerClient:
    """Calls RPent env-server methods over the HTTP/JSON binding. Errors become ToolError("env_server", ...)."""

    def __init__(self, url: str, *, timeout_s: float = 120.0):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"env server URL must be http(s)://host:port, not {url!r}")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def call(self, method: str, *args: Any, timeout_s: Optional[float] = None, **kwargs: Any) -> Any:
        body = json.dumps({"method": method, "args": encode(list(args)), "kwargs": encode(kwargs)}).encode()
        req = urllib.request.Request(self.url + "/rpc", data=body, headers={"Content-Type": "application/json"})
        timeout = timeout_s or self.timeout_s

        def fetch() -> bytes:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.read()

        try:
            # The socket I/O runs on a worker thread: the kernel sandbox's audit hook polices the agent's cell
            # thread (no sockets from policy code), while the robot's own env-server link must keep working.
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="env-server") as pool:
                raw = pool.submit(fetch).result()
        except urllib.error.HTTPError as e:
            detail = e.read()[:500].decode(errors="replace")
            raise ToolError("env_server", f"{method}: HTTP {e.code} from {self.url}: {detail}") from e
        except (urllib.error.URLError, OSError) as e:
            raise ToolError("env_server", f"{method}: env server {self.url} unreachable: {e}") from e
        try:
            reply = json.loads(raw)
        except ValueError as e:
            raise ToolError("env_server", f"{method}: malformed reply ({len(raw)} bytes): {e}") from e
        if not isinstance(reply, dict) or "ok" not in reply:
            raise ToolError("env_server", f"{method}: malformed reply: {str(reply)[:200]}")
        if not reply["ok"]:
            raise ToolError("env_server", f"{method}: {reply.get('error') or 'failed'}", reply)
        return decode(reply.get("result"))


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
            client.call("env.get_env_meta", timeout_s=5)
            return
        except ToolError as e:
            last = e
            time.sleep(0.2)
    raise EnvServerUnavailable(f"env server {client.url} not ready after {timeout_s:.0f} s: {last}")


def connect_env_server(robot: str, *, task: str, seed: int, suite: Optional[str], env_url: Optional[str],
                       ready_timeout_s: float = 300.0) -> tuple[EnvServerClient, Optional[subprocess.Popen]]:
    """Find (or start) the env server for a remote robot; see the module docstring for the order."""
    url = env_url or os.environ.get("PYRUALEAN_ENV_SERVER")
    if url:
        client = EnvServerClient(url)
        _wait_ready(client, None, min(ready_timeout_s, 30.0))
        return client, None
    root = os.environ.get("RPENT_ROOT")
    hint = INSTALL_HINTS.get(robot, robot)
    if not root:
        raise EnvServerUnavailable(
            f"robot {robot!r} needs an env server and none is configured. {hint}. Install RLinf/RPent "
            f"(https://github.com/RLinf/RPent) with that benchmark on a GPU machine and set RPENT_ROOT=<checkout> "
            f"and PYRUALEAN_RPENT_ENV_CMD, or set PYRUALEAN_ENV_SERVER=http://host:port of a running env server. "
            f"On this machine `pyrualean suites` lists what runs locally (libero, tabletop).")
    if not os.path.isdir(root):
        raise EnvServerUnavailable(f"RPENT_ROOT={root!r} is not a directory (an RLinf/RPent checkout)")
    cmd = os.environ.get("PYRUALEAN_RPENT_ENV_CMD")
    if not cmd:
        raise EnvServerUnavailable(
            f"RPENT_ROOT is set but PYRUALEAN_RPENT_ENV_CMD is not: give the command that starts RPent's {robot} "
            f"env server with pyrualean's HTTP binding, with {{port}}, {{task}}, {{seed}}, {{suite}} placeholders")
    port = _free_port()
    argv = shlex.split(cmd.format(port=port, task=task, seed=seed, suite=suite or "", robot=robot))
    proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL, start_new_session=True)
    client = EnvServerClient(f"http://127.0.0.1:{port}")
    try:
        _wait_ready(client, proc, ready_timeout_s)
    except BaseException:
        proc.terminate()
        raise
    return client, proc


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


@dataclass(frozen=True)
class RemoteState:
    """State of a remote robot as its env server reports it (fields depend on the robot; see `raw`)."""
    step: int
    task: str
    success: bool
    terminated: bool
    truncated: bool
    raw: dict

    def brief(self) -> dict:
        return {"step": self.step, "success": self.success, "terminated": self.terminated,
                "truncated": self.truncated}


class RemoteRobot(Robot):
    """Shared plumbing for robots behind an env server: connection, stepping, success, cameras."""

    NAME: ClassVar[str] = "remote"
    CAMERA_SIZE: ClassVar[tuple[int, int]] = (240, 320)  # (height, width)

    def __init__(self, *, task: Optional[str] = None, seed: int = 0, workspace: Optional[str] = None,
                 images: str = "on-motion", primitives: str = "full", suite: Optional[str] = None,
                 vla_endpoint: Optional[str] = None, max_env_steps: int = 10000, env_url: Optional[str] = None):
        task = task or self.default_task()
        super().__init__(task=task, seed=seed, workspace=workspace, images=images, primitives=primitives,
                         suite=suite, vla_endpoint=vla_endpoint, max_env_steps=max_env_steps)
        self._client, self._proc = connect_env_server(self.NAME, task=task, seed=self.seed, suite=suite,
                                                      env_url=env_url)
        self.env_meta = self._client.call("env.get_env_meta")
        obs = self._client.call("env.reset", timeout_s=300)
        self._language = self._client.call("env.get_task_language") or task
        self._steps = 0
        self._success = False
        self._obs: dict = {}
        self._absorb(obs, False, False, {})
        from .. import notebook

        notebook.attach(self)  # the kernel's active robot: on-motion images, cell_report, episode_card

    @classmethod
    def default_task(cls) -> str:
        return ""

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
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()

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
        """Camera model {intrinsic_K, extrinsic_cv (world->camera, OpenCV axes), cam2world_gl, width, height}."""
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

    def _pixels_xyz(self, camera: str, pixels: Sequence[Sequence[int]], neighborhood: int = 1) -> list:
        self._check_camera(camera)
        pts = [tuple(int(v) for v in p) for p in pixels]
        wm = world_map_from(self._depth_image(camera), self._meta(camera))
        h, w = wm.shape[:2]
        out = []
        for r, c in pts:
            if not (0 <= r < h and 0 <= c < w):
                raise ToolError("back_project", f"pixel ({r}, {c}) is outside the {h}x{w} image")
            win = wm[max(0, r - neighborhood):r + neighborhood + 1, max(0, c - neighborhood):c + neighborhood + 1]
            win = win.reshape(-1, 3)
            win = win[np.isfinite(win).all(axis=1)]
            out.append(None if not len(win) else tuple(float(v) for v in np.median(win, axis=0)))
        return out


def _num(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, not {v!r}")
    return float(v)


def _vec(v: Any, n: int, name: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {n} numbers, not {v!r}") from None
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be {n} finite numbers, not {v!r}")
    return a


def _tasks_from(names: Sequence[tuple[str, str, str]]) -> list[TaskInfo]:
    return [TaskInfo(name=n, family=f, instruction=i, solution="") for n, f, i in names]


# ----- serving the binding (RoboDojo bridge, test fakes) --------------------------------------------------
class RpcServer:
    """Serves an object's env methods over the HTTP/JSON binding: "env.reset" calls ``target.reset()``,
    "env.step" calls ``target.step(...)``, and so on. Bad requests get a clear error reply; the server keeps
    serving. Runs in a daemon thread; ``close()`` stops it."""

    def __init__(self, target: Any, host: str = "127.0.0.1", port: int = 0):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        lock = threading.Lock()  # one simulator: calls are serialised

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:  # quiet
                pass

            def _reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                if self.path.rstrip("/") != "/rpc":
                    self._reply(404, {"ok": False, "error": f"no such path {self.path}; POST /rpc"})
                    return
                try:
                    n = int(self.headers.get("Content-Length") or 0)
                    req = json.loads(self.rfile.read(n) or b"null")
                    if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                        raise ValueError('expected {"method": str, "args": [...], "kwargs": {...}}')
                    args, kwargs = decode(req.get("args") or []), decode(req.get("kwargs") or {})
                    if not isinstance(args, list) or not isinstance(kwargs, dict):
                        raise ValueError("args must be a list and kwargs an object")
                except ValueError as e:
                    self._reply(400, {"ok": False, "error": f"malformed request: {e}"})
                    return
                method = req["method"]
                name = method[4:] if method.startswith("env.") else ""
                fn = getattr(target, name, None) if name and not name.startswith("_") else None
                if not callable(fn):
                    self._reply(200, {"ok": False, "error": f"unknown method {method!r}"})
                    return
                try:
                    with lock:
                        result = fn(*args, **kwargs)
                    self._reply(200, {"ok": True, "result": encode(result)})
                except Exception as e:  # the caller sees what went wrong; the server keeps serving
                    self._reply(200, {"ok": False, "error": f"{type(e).__name__}: {e}"})

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://{host}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="rpent-rpc", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# ----- RoboDojo (through the XPolicyLab policy dir's bridge) ------------------------------------------------
@dataclass(frozen=True)
class DojoArm:
    """One ARX X5 arm as RoboDojo reports it: 6 joint angles (rad), gripper joint, eef pose [x,y,z,qw,qx,qy,qz]."""
    joints: tuple[float, ...]
    gripper: float
    ee_pose: tuple[float, ...]


@dataclass(frozen=True)
class DojoState:
    """RoboDojo robot state; ``action_type`` says which motions this run accepts (joint or ee)."""
    step: int
    task: str
    action_type: str
    left: DojoArm
    right: DojoArm
    episode_over: bool
    terminated: bool
    truncated: bool

    def brief(self) -> dict:
        return {"step": self.step, "left_joints": [round(v, 3) for v in self.left.joints],
                "right_joints": [round(v, 3) for v in self.right.joints],
                "grippers": [round(self.left.gripper, 3), round(self.right.gripper, 3)],
                "episode_over": self.episode_over, "truncated": self.truncated}


@dataclass(frozen=True)
class DojoMotion:
    """Outcome of a motion: the actions RoboDojo executed and where the arms ended up."""
    actions_sent: int
    left: DojoArm
    right: DojoArm
    episode_over: bool
    terminated: bool
    truncated: bool


class RoboDojoRobot(RemoteRobot):
    """A dual ARX X5 in a RoboDojo task (Isaac Sim), reached through the PyRUA_Lean XPolicyLab policy.

    Each motion becomes a chunk of absolute RoboDojo actions (interpolated over `steps` control steps) and
    returns once RoboDojo has executed them. The run's action type is fixed by deploy.yml: "joint" runs take
    move_joints(), "ee" runs take move_to(). Images are RGB (RoboDojo's BGR frames are converted).
    Success is scored by RoboDojo itself after the episode; state().episode_over says RoboDojo ended it."""

    NAME: ClassVar[str] = "robodojo_xpl_rgb"
    ARMS: ClassVar[tuple[str, ...]] = ("left", "right")
    CAMERAS: ClassVar[tuple[str, ...]] = ("head", "left_wrist", "right_wrist")
    ON_MOTION_IMAGES: ClassVar[tuple[str, ...]] = ("head",)
    CAMERA_SIZE: ClassVar[tuple[int, int]] = (240, 320)
    CONSTANTS: ClassVar[tuple[str, ...]] = ("ARMS", "CAMERAS", "ON_MOTION_IMAGES")
    KNOWLEDGE: ClassVar[str] = ("# RoboDojo notes\n- Dual ARX X5: 6 joints + 1 gripper joint per arm; absolute "
                                "targets.\n- Motions are interpolated; keep steps >= 10 for large moves.\n")

    @classmethod
    def default_task(cls) -> str:
        return "robodojo_task"

    @classmethod
    def tasks(cls) -> list[TaskInfo]:
        """RoboDojo tasks come from the RoboDojo checkout (scripts/robodojo.sh tasks); none are listed here."""
        return []

    @property
    def action_type(self) -> str:
        return str(self.env_meta.get("action_type", "joint"))

    def _dojo_arm(self, side: str) -> DojoArm:
        st = self._obs.get("state") or {}

        def vec(key: str) -> tuple[float, ...]:
            v = st.get(key)
            return tuple(float(x) for x in np.asarray(v, float).reshape(-1)) if v is not None else ()

        g = vec(f"{side}_ee_joint_state")
        return DojoArm(joints=vec(f"{side}_arm_joint_state"), gripper=g[0] if g else math.nan,
                       ee_pose=vec(f"{side}_ee_pose"))

    def _raw_state(self) -> DojoState:
        term, trunc = self._ended()
        return DojoState(step=self._steps, task=self._task_language(), action_type=self.action_type,
                         left=self._dojo_arm("left"), right=self._dojo_arm("right"),
                         episode_over=bool(self._obs.get("episode_over")), terminated=term, truncated=trunc)

    @tool(stateful=False)
    def state(self) -> DojoState:
        """Both arms' joints, grippers and eef poses, and whether RoboDojo ended the episode."""
        return self._raw_state()

    def _send(self, targets: dict[str, dict[str, np.ndarray]], steps: int) -> DojoMotion:
        """Interpolate from the current state to per-arm targets over `steps` actions; one env.step."""
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 200:
            raise ValueError(f"steps must be an int in 1..200, not {steps!r}")
        pose_name = "joints" if self.action_type == "joint" else "ee_pose"
        pose_key = "arm_joint_state" if self.action_type == "joint" else "ee_pose"
        start = {}
        for side in self.ARMS:
            arm = self._dojo_arm(side)
            cur = np.array(getattr(arm, pose_name))
            if not cur.size or math.isnan(arm.gripper):
                raise ToolError("robodojo", f"RoboDojo's observation has no {side} {pose_name}/gripper state")
            start[side] = (cur, arm.gripper)
        actions = []
        for k in range(1, steps + 1):
            f = k / steps
            act = {}
            for side in self.ARMS:
                cur, g0 = start[side]
                tgt = targets.get(side, {})
                pose = cur + (tgt["pose"] - cur) * f if "pose" in tgt else cur
                if self.action_type == "ee" and "pose" in tgt:
                    q = pose[3:7]
                    pose = np.concatenate([pose[:3], q / max(np.linalg.norm(q), 1e-9)])
                g = g0 + (tgt["gripper"] - g0) * f if "gripper" in tgt else g0
                act[f"{side}_{pose_key}"] = np.asarray(pose, float)
                act[f"{side}_ee_joint_state"] = np.array([g], float)
            actions.append(act)
        s0 = self._steps
        self._env_step({"type": self.action_type, "actions": actions})
        if self._obs.get("episode_over"):
            self._mark_truncated()
        term, trunc = self._ended()
        return DojoMotion(actions_sent=self._steps - s0, left=self._dojo_arm("left"), right=self._dojo_arm("right"),
                          episode_over=bool(self._obs.get("episode_over")), terminated=term, truncated=trunc)

    @tool(stateful=True)
    def move_joints(self, *, left: Optional[Sequence[float]] = None, right: Optional[Sequence[float]] = None,
                    left_gripper: Optional[float] = None, right_gripper: Optional[float] = None,
                    steps: int = 20) -> DojoMotion:
        """Move arms to absolute joint targets (6 angles each, radians) and/or grippers, interpolated over
        `steps` control steps. Only in runs with action_type "joint"."""
        if self.action_type != "joint":
            raise ValueError("this run takes end-effector actions (deploy.yml action_type: ee): use move_to()")
        targets: dict[str, dict[str, np.ndarray]] = {}
        for side, q, g in (("left", left, left_gripper), ("right", right, right_gripper)):
            t: dict[str, Any] = {}
            if q is not None:
                t["pose"] = _vec(q, len(self._dojo_arm(side).joints) or 6, f"{side}")
            if g is not None:
                t["gripper"] = _num(g, f"{side}_gripper")
            if t:
                targets[side] = t
        if not targets:
            raise ValueError("give at least one of left, right, left_gripper, right_gripper")
        return self._send(targets, steps)

    @tool(stateful=True)
    def move_to(self, arm: str, xyz: Sequence[float], *, quat: Optional[Sequence[float]] = None,
                gripper: Optional[float] = None, steps: int = 20) -> DojoMotion:
        """Move one arm's end effector to xyz (and quat [w,x,y,z] if given) in a straight line over `steps`
        control steps. Only in runs with action_type "ee"."""
        if self.action_type != "ee":
            raise ValueError("this run takes joint actions (deploy.yml action_type: joint): use move_joints()")
        if arm not in self.ARMS:
            raise ValueError(f"arm must be one of {self.ARMS}, not {arm!r}")
        cur = np.array(self._dojo_arm(arm).ee_pose)
        pose = np.concatenate([_vec(xyz, 3, "xyz"), _vec(quat, 4, "quat") if quat is not None else cur[3:7]])
        t: dict[str, Any] = {"pose": pose}
        if gripper is not None:
            t["gripper"] = _num(gripper, "gripper")
        return self._send({arm: t}, steps)

    @tool(stateful=True)
    def set_gripper(self, arm: str, val: float, steps: int = 10) -> DojoMotion:
        """Move one gripper joint to `val` (RoboDojo's gripper joint units) over `steps` control steps."""
        if arm not in self.ARMS:
            raise ValueError(f"arm must be one of {self.ARMS}, not {arm!r}")
        return self._send({arm: {"gripper": _num(val, "val")}}, steps)
