"""``make("robotwin", task="beat_block_hammer", suite="demo_randomized", seed=100000)``: RoboTwin 2.0
(aloha-agilex, two 6-DoF arms) through RPent's own RoboTwin env server, with the original's RobotwinRobot API.

The contract this adapter speaks is RPent's (RLinf/RPent ``robots/robotwin/{robot_spec,env_server,env_client,
primitives,toolkit,tools,vla_client}.py``), reimplemented here:

* identity: ``env.get_env_meta`` must equal :func:`env_runtime_contract` (task_name, task_config, seed,
  seed_mode "exact", action layouts qpos14/eef16, step_limit, the three cameras); anything else raises
  :class:`EnvMetaMismatch` before the episode is touched (RPent: ``BaseEnvClient.__init__``).
* ``env.reset`` -> ``(obs, info)``; ``env.step(action14, action_type="qpos")`` and
  ``env.chunk_step(actions[N,16], action_type="ee", return_all_frames=False)`` -> ``(obs, reward, terminated,
  truncated, info)``; every ``info`` carries ``episode_status`` {eval_success, take_action_cnt, step_lim,
  actual_seed} and ``robot_state`` {qpos_target14, left/right_eef_pose, left/right_tcp_pose,
  left/right_gripper, ...}; ``chunk_step`` adds ``executed_actions``.
* ``move_to``: ``env.plan_arm_path(arm, [x,y,z,qw,qx,qy,qz])`` -> ``{"status": "Success", "position": [N,6]}``,
  the joint path subsampled to ``substeps`` waypoints, each one qpos14 ``env.step`` built from
  ``robot_state.qpos_target14`` (the other arm holds its targets). ``set_gripper`` interpolates the gripper
  in qpos14 steps. ``lingbot_act`` sends the three RGB views + the eef16 state + the native instruction to
  the LingBot-VLA server and executes the first 50 actions of each chunk with one ``env.chunk_step``.
* after every state-changing call the adapter records a step, as RPent's toolkit does: for each camera
  ``env.render_camera(name, depth=True)`` -> ``(rgb, depth)`` and ``env.get_camera_meta(name)`` ->
  ``{intrinsic_K, extrinsic_cv, cam2world_gl, width, height}``; the world map is the depth back-projected
  through ``cam2world_gl`` (OpenGL axes). Steps are saved under ``<workspace>/robotwin_states/step_NNN/``.

Where the env server is: ``env_url=`` / ``$PYRUALEAN_ENV_SERVER`` (http:// or socket://), else
``$RPENT_ROOT``: the adapter starts ``robots/robotwin/env_server.py`` of that checkout (HTTP transport,
``--parent-watch``) with the interpreter ``$RPENT_PYTHON`` (default ``$RPENT_ROOT/.venv/bin/python`` if present,
else this one) and the assets of ``assets_path=`` / ``$ROBOTWIN_ASSETS_PATH``. The LingBot-VLA server is
``vla_endpoint=`` / ``$PYRUALEAN_VLA_ENDPOINT`` (``[ws://]host:port``; RPent's ``robots/robotwin/vla_server.py``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import json
import math
import os
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Optional, Sequence

import numpy as np

from ..base import Robot, TaskInfo, load_guide, tool
from ..images import png_bytes
from ..errors import ToolError
from ._args import _bounded, _floats, _pixel_pairs
from .rpent import EnvMetaMismatch, EnvServerUnavailable, connect_env_server, rpent_python, stop_env_server

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]

# The 50 RoboTwin 2.0 tasks and RPent's two native task configs (robots/robotwin/robot_spec.py).
TASKS = ("adjust_bottle", "beat_block_hammer", "blocks_ranking_rgb", "blocks_ranking_size", "click_alarmclock",
         "click_bell", "dump_bin_bigbin", "grab_roller", "handover_block", "handover_mic", "hanging_mug",
         "lift_pot", "move_can_pot", "move_pillbottle_pad", "move_playingcard_away", "move_stapler_pad",
         "open_laptop", "open_microwave", "pick_diverse_bottles", "pick_dual_bottles", "place_a2b_left",
         "place_a2b_right", "place_bread_basket", "place_bread_skillet", "place_burger_fries", "place_can_basket",
         "place_cans_plasticbox", "place_container_plate", "place_dual_shoes", "place_empty_cup",
         "place_fan", "place_mouse_pad", "place_object_basket", "place_object_scale", "place_object_stand",
         "place_phone_stand", "place_shoe", "press_stapler", "put_bottles_dustbin", "put_object_cabinet",
         "rotate_qrcode", "scan_object", "shake_bottle", "shake_bottle_horizontally", "stack_blocks_three",
         "stack_blocks_two", "stack_bowls_three", "stack_bowls_two", "stamp_seal", "turn_switch")
SUITES = ("demo_randomized", "demo_clean")
DEFAULT_SUITE = "demo_randomized"
CAMERAS = ("head", "left_wrist", "right_wrist")
STATUS_KEYS = ("eval_success", "take_action_cnt", "step_lim", "actual_seed")
READ_TIMEOUT_S = 120.0          # idempotent env queries (RPent ROBOTWIN_READ_TIMEOUT_S)
STATE_CHANGE_TIMEOUT_S = 600.0  # step / chunk_step (RPent ROBOTWIN_STATE_CHANGE_TIMEOUT_S)
RESET_TIMEOUT_S = 120.0         # RPent BaseEnvClient._TIMEOUT_S["env.reset"]
VLA_TIMEOUT_S = 120.0           # RPent BaseVLAClient._TIMEOUT_S["predict"]
#: Distance from the EEF (what move_to targets) to the TCP (gripper centre) along the approach axis.
EEF_TO_TCP_M = 0.12
#: Native actions executed per LingBot-VLA chunk (use_length, fixed by the runtime).
VLA_CHUNK_ACTIONS = 50
REACH_TOL_M = 0.01


def env_runtime_contract(*, task_name: str, task_config: str, seed: int, max_episode_steps: int = 10000) -> dict:
    """The identity a RoboTwin env server must report (RPent ``robot_spec.env_runtime_contract``)."""
    layouts = ["qpos14", "eef16"]
    return {
        "runtime": "rlinf_robotwin_env",
        "task_name": task_name,
        "task_config": task_config,
        "seed": int(seed),
        "seed_mode": "exact",
        "action_layouts": list(layouts),
        "execution": {"reset": True, "step": True, "chunk_step": True, "action_layouts": list(layouts),
                      "chunk_step_all_frames": True, "step_limit": int(max_episode_steps)},
        "extensions": {"render_camera": {"camera_names": list(CAMERAS), "metric_depth": True},
                       "get_camera_meta": True, "get_task_language": True, "plan_arm_path": True},
    }


def vla_runtime_contract() -> dict:
    """The metadata a LingBot RoboTwin server must send on connect (RPent ``robot_spec.vla_runtime_contract``)."""
    return {"runtime": "lingbotvla", "policy_name": "robotwin_eef",
            "camera_order": ["cam_high", "cam_left_wrist", "cam_right_wrist"], "state_layout": "eef16",
            "action_layout": "eef16", "use_length": VLA_CHUNK_ACTIONS}


def _plain(v: Any) -> Any:
    """Wire values -> comparable Python values (tuples from the pickle transport become lists)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, np.generic):
        return v.item()
    return v


def rpent_env_argv(root: str, port: int, *, task: str, suite: str, seed: int, max_episode_steps: int = 10000,
                   assets_path: Optional[str] = None) -> list[str]:
    """The argv that starts RPent's RoboTwin env server as RPent itself does (robots/robotwin/robot_spec.py
    ``_spawn_env_server``): ``robots/robotwin/env_server.py`` of the checkout, HTTP transport on ``port``,
    ``--parent-watch``, ROBOTWIN_ASSETS_PATH in its environment. The interpreter is ``$RPENT_PYTHON``, else the
    checkout's ``.venv/bin/python``, else this one. Raises EnvServerUnavailable naming what is missing."""
    assets = assets_path or os.environ.get("ROBOTWIN_ASSETS_PATH")
    if not assets:
        raise EnvServerUnavailable(
            "RPENT_ROOT is set but the RoboTwin assets are not: set ROBOTWIN_ASSETS_PATH (or "
            "make(..., assets_path=...)) to the RoboTwin 2.0 asset snapshot RPent's env server loads "
            "(~10 GB from Hugging Face; see RPent's RoboTwin setup)")
    assets = os.path.abspath(os.path.expanduser(assets))
    if not os.path.isdir(assets):
        raise EnvServerUnavailable(f"ROBOTWIN_ASSETS_PATH={assets!r} is not a directory (the RoboTwin 2.0 "
                                   f"asset snapshot)")
    script = os.path.join(root, "robots", "robotwin", "env_server.py")
    try:
        with open(script, encoding="utf-8", errors="replace") as f:
            source = f.read()
    except OSError:
        raise EnvServerUnavailable(f"RPENT_ROOT={root!r} has no readable robots/robotwin/env_server.py: it is not "
                                   f"an RLinf/RPent checkout with the RoboTwin robot") from None
    budget: list[str] = ["--max-episode-steps", str(int(max_episode_steps))]
    if "--max-episode-steps" not in source:
        # Older RPent: the server has no budget flag and reports step_limit 10000 in its identity.
        if int(max_episode_steps) != 10000:
            raise EnvServerUnavailable(f"this RPent checkout's env_server.py has no --max-episode-steps; run with "
                                       f"max_env_steps=10000 or update RPent")
        budget = []
    return ["env", f"ROBOTWIN_ASSETS_PATH={assets}", rpent_python(root), script, "--task-name", task, "--task-config", suite,
            "--seed", str(int(seed)), *budget, "--assets-path", assets, "--transport", "http",
            "--host", "127.0.0.1", "--port", str(int(port)), "--parent-watch"]


def launch_missing() -> list[str]:
    """What this machine lacks to run RoboTwin episodes (for ``pyrualean suites``); [] when an env server is
    configured (PYRUALEAN_ENV_SERVER) or RPent can be launched here (checkout, assets, NVIDIA GPU)."""
    if os.environ.get("PYRUALEAN_ENV_SERVER"):
        return []
    missing = []
    root = os.environ.get("RPENT_ROOT")
    if not root or not os.path.isfile(os.path.join(root, "robots", "robotwin", "env_server.py")):
        missing.append("an RLinf/RPent checkout with RoboTwin installed (RPENT_ROOT), or PYRUALEAN_ENV_SERVER="
                       "http://host:port of a running RPent RoboTwin env server")
    assets = os.environ.get("ROBOTWIN_ASSETS_PATH")
    if not assets or not os.path.isdir(assets):
        missing.append("RoboTwin 2.0 assets (~10 GB, Hugging Face) at ROBOTWIN_ASSETS_PATH")
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")):
        missing.append("an NVIDIA GPU (SAPIEN 3.0.0b1 + CuRobo, CUDA 12)")
    return missing


# ----- the LingBot-VLA wire (openpi's websocket policy protocol, which LingBot's deploy/ speaks) ----------
def _pack_default(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in "VOc":
        raise ValueError(f"unsupported dtype on the VLA wire: {obj.dtype}")
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def _unpack_hook(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        dt = np.dtype(obj[b"dtype"])
        if dt.kind in "VOc":
            raise ValueError(f"unsupported dtype on the VLA wire: {dt}")
        return np.frombuffer(obj[b"data"], dtype=dt).reshape(obj[b"shape"]).copy()
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def vla_packb(obj: Any) -> bytes:
    import msgpack

    return msgpack.packb(obj, default=_pack_default, use_bin_type=True)


def vla_unpackb(data: bytes) -> Any:
    import msgpack

    return msgpack.unpackb(data, object_hook=_unpack_hook, raw=False)


def parse_vla_endpoint(endpoint: str) -> tuple[str, int]:
    """``[ws://]host:port`` -> (host, port), as RPent's ``_parse_vla_endpoint``."""
    value = str(endpoint).split("://", 1)[-1].rstrip("/")
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"the LingBot-VLA endpoint must be [ws://]host:port, not {endpoint!r}")
    return host, int(port)


class LingBotClient:
    """A LingBot-VLA websocket client: on connect the server sends its metadata (checked against
    :func:`vla_runtime_contract`); each ``infer(payload)`` sends one msgpack frame and gets ``{"action": [T,16]}``
    back (a text frame is the server's traceback). All I/O runs on one worker thread: the kernel sandbox
    polices sockets on the agent's cell thread, not the robot's own links."""

    def __init__(self, endpoint: str, *, timeout_s: float = VLA_TIMEOUT_S):
        self.host, self.port = parse_vla_endpoint(endpoint)
        self.url = f"ws://{self.host}:{self.port}"
        self.timeout_s = timeout_s
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lingbot-vla")
        self._conn: Any = None
        self._stack: Optional[contextlib.ExitStack] = None
        self.metadata: Optional[dict] = None

    def _run(self, fn: Any) -> Any:
        try:
            return self._pool.submit(fn).result()
        except ToolError:
            raise
        except ImportError as e:
            raise ToolError("lingbot_act", f"the LingBot-VLA client needs websockets and msgpack "
                                           f"(pip install -r requirements/libero.txt): {e}") from e
        except (OSError, TimeoutError, EOFError) as e:
            self._drop()
            raise ToolError("lingbot_act", f"LingBot-VLA server {self.url} unreachable or timed out: {e}") from e
        except Exception as e:  # websockets' ConnectionClosed, malformed msgpack
            self._drop()
            raise ToolError("lingbot_act", f"LingBot-VLA server {self.url}: {type(e).__name__}: {e}") from e

    def _connect(self) -> None:
        from websockets.sync.client import connect

        stack = contextlib.ExitStack()  # the connection lives until close(): enter it without a with-block
        conn = stack.enter_context(connect(self.url, compression=None, max_size=None, ping_interval=None,
                                           open_timeout=10, close_timeout=2, proxy=None))
        try:
            meta = vla_unpackb(conn.recv(timeout=30))
        except BaseException:
            stack.close()
            raise
        expected = vla_runtime_contract()
        if _plain(meta) != expected:
            stack.close()
            raise ToolError("lingbot_act", f"LingBot VLA metadata mismatch: expected={expected!r} actual={meta!r}. "
                                           f"Connect to the RoboTwin EEF16 LingBot server.")
        self._conn, self._stack, self.metadata = conn, stack, meta

    def infer(self, payload: dict) -> dict:
        def go() -> dict:
            if self._conn is None:
                self._connect()
            self._conn.send(vla_packb(payload))
            reply = self._conn.recv(timeout=self.timeout_s)
            if isinstance(reply, str):
                self._drop()
                raise ToolError("lingbot_act", f"LingBot-VLA server error:\n{reply[-2000:]}")
            out = vla_unpackb(reply)
            if not isinstance(out, dict) or "action" not in out:
                raise ToolError("lingbot_act", f"LingBot-VLA reply has no 'action': {str(out)[:200]}")
            return out

        return self._run(go)

    def _drop(self) -> None:
        stack, self._conn, self._stack = self._stack, None, None
        if stack is not None:
            try:
                stack.close()
            except Exception:
                pass

    def close(self) -> None:
        try:
            self._pool.submit(self._drop).result(timeout=5)
        except Exception:
            pass
        self._pool.shutdown(wait=False)


# ----- result types ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArmState:
    """One arm at a recorded step.

    eef_pos: end-effector (wrist link, what ``move_to`` targets) [x, y, z], metres, world frame.
    eef_quat: EEF orientation [w, x, y, z].
    tcp_pos: tool centre point (gripper centre, where an object is held): 0.12 m beyond the EEF along the
        gripper's approach axis. tcp_quat: its orientation (same as the EEF).
    gripper: the commanded gripper value, 0.0 closed .. 1.0 open (a command, not a contact sensor).
    """
    eef_pos: Vec3
    eef_quat: Quat
    tcp_pos: Vec3
    tcp_quat: Quat
    gripper: float

    @property
    def approach(self) -> Vec3:
        """Unit vector from the EEF to the TCP: the direction the gripper points (world frame)."""
        d = np.subtract(self.tcp_pos, self.eef_pos)
        n = float(np.linalg.norm(d))
        if not math.isfinite(n) or n < 1e-9:
            return (0.0, 1.0, 0.0)
        return tuple(float(v) for v in d / n)  # type: ignore[return-value]

    @property
    def eef_yaw(self) -> float:
        """Rotation of the EEF about world z, radians (what ``rotate_wrist`` changes)."""
        w, x, y, z = self.eef_quat
        return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


@dataclass(frozen=True)
class State:
    """Both arms and the episode at one recorded step (0 = the initial scene; a step is recorded after every
    motion call and after ``render``).

    task: the benchmark's instruction (authoritative; the VLA acts on exactly this text).
    left / right: ArmState(eef_pos, eef_quat, tcp_pos, tcp_quat, gripper) with ``.approach`` (unit EEF->TCP
        vector) and ``.eef_yaw`` (radians); ``state.arm("left")`` picks one by name.
    eval_success: RoboTwin's own success predicate fired (sticky); the only definition of success.
    take_action_cnt / step_lim: native actions executed so far / the episode's budget. Every ``move_to``
        waypoint, every gripper step and every VLA action is one native action.
    terminated: same as eval_success. truncated: the budget is spent; nothing can move any more.
    """
    step: int
    task: str
    left: ArmState
    right: ArmState
    eval_success: bool
    take_action_cnt: int
    step_lim: int
    terminated: bool
    truncated: bool

    def arm(self, name: str) -> ArmState:
        """``state.arm("left")`` / ``state.arm("right")``."""
        if name not in ("left", "right"):
            raise ValueError(f"arm must be 'left' or 'right', not {name!r}")
        return self.left if name == "left" else self.right

    @property
    def actions_left(self) -> int:
        """Native actions still available before ``truncated`` fires."""
        return max(0, self.step_lim - self.take_action_cnt)

    def brief(self) -> dict:
        return {"step": self.step, "left_eef": [round(v, 4) for v in self.left.eef_pos],
                "right_eef": [round(v, 4) for v in self.right.eef_pos],
                "left_gripper": round(self.left.gripper, 3), "right_gripper": round(self.right.gripper, 3),
                "actions": f"{self.take_action_cnt}/{self.step_lim}", "eval_success": self.eval_success,
                "terminated": self.terminated, "truncated": self.truncated}


@dataclass(frozen=True)
class Move:
    """Outcome of ``move_to`` / ``rotate_wrist``.

    planned: the planner found a collision-free joint path. False means NOTHING moved (unreachable, in
        collision, through the other arm or the table): change the target, do not repeat it.
    final_eef_pos: where the EEF stopped (None when nothing moved); final_dist_m: its distance to the target.
    reached: planned and final_dist_m <= 0.01. waypoints: planner waypoints executed; actions_used: native
        actions consumed. stop_reason: completed | native_success | budget_exhausted | plan_failed |
        runtime_failure.
    """
    arm: str
    target_xyz: Vec3
    final_eef_pos: Optional[Vec3]
    final_dist_m: float
    planned: bool
    reached: bool
    waypoints: int
    actions_used: int
    stop_reason: str
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class Gripper:
    """Outcome of ``set_gripper`` / ``release``: target = the commanded value, final = the value reported
    afterwards (a command, not proof of a hold), actions_used = native actions (one per interpolation step)."""
    arm: str
    target: float
    final: float
    actions_used: int
    stop_reason: str
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class VlaRun:
    """Outcome of ``lingbot_act``: chunks_requested / actions_requested (50 per chunk), actions_used (fewer
    when the task succeeded or the budget ran out), stop_reason (completed | native_success |
    budget_exhausted | runtime_failure), instruction (the text the policy received: always ``robo.task``)."""
    chunks_requested: int
    actions_requested: int
    actions_used: int
    stop_reason: str
    instruction: str
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class WorldSample:
    """One pixel of ``sample_world_xyz``: xyz = median of the finite world points in its window,
    valid_points = how many window pixels had depth."""
    pixel: tuple[int, int]
    xyz: Vec3
    valid_points: int


@dataclass(frozen=True)
class WorldSamples:
    """Outcome of ``sample_world_xyz``: one WorldSample(pixel, xyz, valid_points) per requested pixel, in
    order; ``.xyz`` lists the coordinates alone."""
    samples: tuple[WorldSample, ...]
    view: str
    step: int
    image_shape: tuple[int, int]

    @property
    def xyz(self) -> tuple[Vec3, ...]:
        """The sampled coordinates only, in request order."""
        return tuple(s.xyz for s in self.samples)


@dataclass(frozen=True)
class WorldRegion:
    """Outcome of ``query_world_map``: per-axis min / max / median of the finite world points in the box,
    valid_points, and up to max_points ``(pixel, xyz)`` samples spread over the box in row-major order."""
    xyz_min: Vec3
    xyz_max: Vec3
    xyz_median: Vec3
    valid_points: int
    points: tuple[tuple[tuple[int, int], Vec3], ...]
    view: str
    step: int


# ----- helpers -----------------------------------------------------------------------------------------------
def _arm(name: Any) -> str:
    if name not in ("left", "right"):
        raise ValueError(f"arm must be 'left' or 'right', got {name!r}")
    return str(name)


def _gripper_value(value: Any, name: str = "gripper") -> float:
    return _bounded(value, name, 0.0, 1.0, hint=" (0 closed, 1 open)")


def _is_num(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _int(value: Any, name: str, lo: int, hi: Optional[int] = None) -> int:
    if not _is_num(value) or float(value) != int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"{name} must be {'>= ' + str(lo) if hi is None else f'in {lo}..{hi}'}, got {v}")
    return v


def _pose7(value: Any) -> tuple[Vec3, Quat]:
    a = np.asarray(value, dtype=float).reshape(-1) if value is not None else np.zeros(0)
    if a.shape != (7,):
        return (math.nan, math.nan, math.nan), (math.nan, math.nan, math.nan, math.nan)
    return tuple(float(v) for v in a[:3]), tuple(float(v) for v in a[3:])  # type: ignore[return-value]


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def world_from_depth(depth: np.ndarray, meta: dict) -> np.ndarray:
    """Per-pixel world xyz (H, W, 3) float32 from metric depth and RoboTwin's camera meta (``cam2world_gl``:
    the camera looks down its -z axis, y up), NaN where depth is missing (RPent toolkit ``_world_from_depth``)."""
    d = np.asarray(depth, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"depth must be (H, W), got {d.shape}")
    K = np.asarray(meta.get("intrinsic_K"), dtype=np.float64)
    T = np.asarray(meta.get("cam2world_gl"), dtype=np.float64)
    if K.shape != (3, 3) or T.shape != (4, 4) or not (np.isfinite(K).all() and np.isfinite(T).all()):
        raise ValueError("camera meta needs a finite 3x3 intrinsic_K and 4x4 cam2world_gl")
    h, w = d.shape
    if int(meta.get("height", h)) != h or int(meta.get("width", w)) != w:
        raise ValueError(f"depth {d.shape} does not match the camera meta {meta.get('height')}x{meta.get('width')}")
    rows, cols = np.mgrid[0:h, 0:w]
    cam = np.stack([(cols - K[0, 2]) * d / K[0, 0], -(rows - K[1, 2]) * d / K[1, 1], -d], axis=-1)
    world = cam @ T[:3, :3].T + T[:3, 3]
    world[~np.isfinite(d) | (d <= 0)] = np.nan
    return world.astype(np.float32)


@dataclass
class _Record:
    """One recorded step: what RPent's toolkit dumps after a state-changing tool."""
    index: int
    robot_state: dict
    status: dict
    task_language: str
    command: dict
    views: Optional[dict]  # camera -> {"rgb", "depth", "camera_meta"} for the latest step only; else on disk


class RobotwinRobot(Robot):
    """A RoboTwin 2.0 dual-arm robot (aloha-agilex: two 6-DoF arms with parallel grippers) at a table.

    World frame: x runs across the table (the LEFT arm is at negative x and appears on the LEFT of the head
    image), y points away from the robot, z is up; metres and radians; quaternions [w, x, y, z]. The arms are
    "left" and "right" (``robo.LEFT`` / ``robo.RIGHT``); every motion names one arm and the other holds.

    Two frames per arm: ``move_to`` targets the EEF (wrist link); the TCP (gripper centre, where an object is
    held) lies ``EEF_TO_TCP_M`` = 0.12 m beyond it along the approach axis (``ArmState.approach``), so to put
    the gripper centre on a point p command ``p - 0.12 * approach``. Never send a surface point as an EEF
    target.

    Gripper values are floats in [0, 1]: ``robo.OPEN`` (1.0) open, ``robo.CLOSE`` (0.0) closed; the reported
    value is the command, not a contact measurement.

    Every native action (one ``move_to`` waypoint, one gripper step, one VLA action) advances
    ``take_action_cnt`` towards ``step_lim``. Motion calls block and return a typed result.

    Perception is camera based: ``head`` (fixed, whole table) and one wrist camera per arm (``left_wrist``,
    ``right_wrist``), 320x240 each; every recorded step carries per-pixel world coordinates for each view
    (``sample_world_xyz``, ``query_world_map``, ``world_map``). Object poses are never given.

    The frozen LingBot-VLA (``lingbot_act``), a learned dual-arm policy for this benchmark, always acts on the
    benchmark's own instruction (``robo.task``), never on a prompt of yours.
    """

    NAME: ClassVar[str] = "robotwin"
    ENV_SERVER_HINT: ClassVar[str] = ("RoboTwin 2.0 runs in RPent's env server on an NVIDIA GPU (SAPIEN 3.0.0b1 + "
                                      "mplib + CuRobo, CUDA 12) with RoboTwin's assets (~10 GB from Hugging Face)")
    ARMS: ClassVar[tuple[str, str]] = ("left", "right")
    LEFT: ClassVar[str] = "left"
    RIGHT: ClassVar[str] = "right"
    OPEN: ClassVar[float] = 1.0
    CLOSE: ClassVar[float] = 0.0
    EEF_TO_TCP_M: ClassVar[float] = EEF_TO_TCP_M
    VLA_CHUNK_ACTIONS: ClassVar[int] = VLA_CHUNK_ACTIONS
    CAMERAS: ClassVar[tuple[str, ...]] = CAMERAS
    # RPent attaches all three views after every state-changing tool; so do we.
    ON_MOTION_IMAGES: ClassVar[tuple[str, ...]] = CAMERAS
    CONSTANTS: ClassVar[tuple[str, ...]] = ("ARMS", "LEFT", "RIGHT", "OPEN", "CLOSE", "EEF_TO_TCP_M", "CAMERAS",
                                            "ON_MOTION_IMAGES")
    KNOWLEDGE: ClassVar[str] = load_guide("robotwin", "robotwin.md")
    KNOWLEDGE_NOVLA: ClassVar[str] = load_guide("robotwin", "robotwin-novla.md")
    #: The learned primitives (hidden and refused under primitives="no-vla"; seed RobotwinRobot.VLA_PRIMITIVES).
    VLA_PRIMITIVES: ClassVar[tuple[str, ...]] = ("lingbot_act",)
    #: (full, no-vla) rewrites of the VLA sentences in the other docstrings, applied to the no-vla reference.
    VLA_REFERENCE_EDITS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("(one ``move_to`` waypoint, one gripper step, one VLA action)",
         "(one ``move_to`` waypoint, one gripper step)"),
        ("Object poses are never given. The frozen LingBot-VLA (``lingbot_act``), a learned dual-arm policy for "
         "this benchmark, always acts on the benchmark's own instruction (``robo.task``), never on a prompt of "
         "yours.", "Object poses are never given."),
        ("The task instruction (authoritative): it names the arm when one is required, and the VLA acts on "
         "exactly this text.", "The task instruction (authoritative): it names the arm when one is required."),
        ("task: the benchmark's instruction (authoritative; the VLA acts on exactly this text).",
         "task: the benchmark's instruction (authoritative)."),
        ("Every ``move_to`` waypoint, every gripper step and every VLA action is one native action.",
         "Every ``move_to`` waypoint and every gripper step is one native action."),
    )

    def __init__(self, *, task: Optional[str] = None, seed: int = 100000, workspace: Optional[str] = None,
                 images: str = "on-motion", primitives: str = "full", suite: Optional[str] = None,
                 vla_endpoint: Optional[str] = None, max_env_steps: int = 10000, env_url: Optional[str] = None,
                 assets_path: Optional[str] = None):
        task = task or "beat_block_hammer"
        if task not in TASKS:
            raise ValueError(f"unknown RoboTwin task {task!r}; tasks: {', '.join(TASKS)}")
        suite = suite or DEFAULT_SUITE
        if suite not in SUITES:
            raise ValueError(f"RoboTwin suite (task config) must be one of {SUITES}, not {suite!r}")
        super().__init__(task=task, seed=seed, workspace=workspace, images=images, primitives=primitives,
                         suite=suite, vla_endpoint=vla_endpoint, max_env_steps=max_env_steps)
        self._assets_path = assets_path
        self._vla: Optional[LingBotClient] = None
        self._records: list[_Record] = []
        self._states_dir = os.path.join(self.workspace, "robotwin_states")
        self._client, self._proc = connect_env_server(self.NAME, task=task, seed=self.seed, suite=suite,
                                                      env_url=env_url, launch_argv=self._rpent_env_argv,
                                                      hint=self.ENV_SERVER_HINT)
        try:
            self.expected_meta = env_runtime_contract(task_name=task, task_config=suite, seed=self.seed,
                                                      max_episode_steps=max_env_steps)
            self.env_meta = self._client.call("env.get_env_meta", timeout_s=READ_TIMEOUT_S)
            if _plain(self.env_meta) != self.expected_meta:
                raise EnvMetaMismatch(
                    f"env_meta mismatch: expected={self.expected_meta!r} actual={self.env_meta!r}. The env "
                    f"server at {self._client.url} was launched for a different task/config/seed/step limit "
                    f"(or is not RPent's RoboTwin env server): stop it and relaunch it for this episode.")
            self._reset()
        except BaseException:
            self.close()
            raise

    @classmethod
    def tasks(cls) -> list[TaskInfo]:
        """The 50 RoboTwin 2.0 tasks (run on RPent's env server; suites demo_randomized / demo_clean)."""
        return [TaskInfo(name=t, family="robotwin2", instruction=t.replace("_", " "), solution="") for t in TASKS]

    @property
    def task(self) -> str:
        """The task instruction (authoritative): it names the arm when one is required, and the VLA acts on
        exactly this text."""
        return self._task_language()

    # ----- launching RPent's env server ----------------------------------------------------------------------
    def _rpent_env_argv(self, port: int, root: str) -> list[str]:
        """RPent's own launch of its RoboTwin env server in checkout ``root`` (see :func:`rpent_env_argv`)."""
        return rpent_env_argv(root, port, task=self.task_name, suite=str(self.suite), seed=self.seed,
                              max_episode_steps=self.max_env_steps, assets_path=self._assets_path)

    def close(self) -> None:
        """Close the VLA connection and stop the env server this robot started (if any)."""
        if self._vla is not None:
            self._vla.close()
            self._vla = None
        stop_env_server(getattr(self, "_proc", None))

    # ----- env wire -------------------------------------------------------------------------------------------
    def _call(self, method: str, *args: Any, timeout_s: float = READ_TIMEOUT_S, **kwargs: Any) -> Any:
        return self._client.call(method, *args, timeout_s=timeout_s, **kwargs)

    @staticmethod
    def _tuple(result: Any, n: int, method: str) -> tuple:
        if not isinstance(result, (list, tuple)) or len(result) != n:
            raise ToolError("env_server", f"{method} must return a {n}-item tuple, got {str(result)[:200]}")
        return tuple(result)

    @staticmethod
    def _episode_status(info: Any, method: str) -> dict:
        if not isinstance(info, dict) or not isinstance(info.get("episode_status"), dict):
            raise ToolError("env_server", f"{method}: info has no episode_status mapping: {str(info)[:200]}")
        status = info["episode_status"]
        missing = [k for k in STATUS_KEYS if k not in status]
        if missing:
            raise ToolError("env_server", f"{method}: episode_status is missing {missing}: {status!r}")
        if not isinstance(info.get("robot_state"), dict):
            raise ToolError("env_server", f"{method}: info has no robot_state mapping")
        return status

    def _reset(self) -> None:
        obs, info = self._tuple(self._call("env.reset", timeout_s=RESET_TIMEOUT_S), 2, "env.reset")
        status = self._episode_status(info, "env.reset")
        if _plain(status["actual_seed"]) != self.seed:
            raise EnvMetaMismatch(f"env.reset did not use the requested seed {self.seed}: "
                                  f"actual_seed={status['actual_seed']}")
        if not isinstance(info.get("instruction"), str):
            raise ToolError("env_server", "env.reset: info.instruction must be the task instruction string")
        self._info = info
        self._language = info["instruction"]
        self._absorb(False, False)
        self._record({"action": "reset"})

    def _absorb(self, terminated: Any, truncated: Any) -> None:
        status = self._info["episode_status"]
        if bool(np.asarray(terminated).any()) or status.get("eval_success") is True:
            self._mark_terminated()
        lim = status.get("step_lim")
        if bool(np.asarray(truncated).any()) or (lim is not None and int(status["take_action_cnt"]) >= int(lim)):
            if not self._terminated:
                self._mark_truncated()

    def _status(self) -> dict:
        return self._info["episode_status"]

    def _robot_state(self) -> dict:
        return self._info["robot_state"]

    def _step_qpos(self, action14: np.ndarray) -> int:
        res = self._tuple(self._call("env.step", action14, action_type="qpos", timeout_s=STATE_CHANGE_TIMEOUT_S),
                          5, "env.step")
        _, _, term, trunc, info = res
        self._episode_status(info, "env.step")
        self._info = info
        self._absorb(term, trunc)
        return int(info.get("executed_actions", 0))

    def _active(self) -> bool:
        return not (self._terminated or self._truncated)

    def _apply_qpos_updates(self, arm: str, updates: list[tuple[Optional[np.ndarray], Optional[float]]]) -> int:
        """Each update (6 joint targets or None, gripper or None) becomes one qpos14 action composed from the
        latest ``qpos_target14`` (RPent ``RoboTwinPrimitives.apply_qpos_updates``)."""
        executed = 0
        off = 0 if arm == "left" else 7
        for joints, grip in updates:
            target = np.asarray(self._robot_state().get("qpos_target14"), dtype=np.float64).reshape(-1)
            if target.shape != (14,) or not np.isfinite(target).all():
                raise ToolError("env_server", "robot_state.qpos_target14 must be 14 finite numbers")
            action = target.copy()
            if joints is not None:
                action[off:off + 6] = joints
            if grip is not None:
                action[off + 6] = grip
            executed += self._step_qpos(action)
            if not self._active():
                break
        return executed

    def _completion(self, requested: int, executed: int) -> str:
        status = self._status()
        if status.get("eval_success") is True:
            return "native_success"
        lim = status.get("step_lim")
        if lim is not None and int(status.get("take_action_cnt", 0)) >= int(lim):
            return "budget_exhausted"
        return "completed" if executed == requested else "runtime_failure"

    # ----- recorded steps -------------------------------------------------------------------------------------
    def _record(self, command: dict) -> _Record:
        views: dict[str, dict] = {}
        for cam in CAMERAS:
            pair = self._call("env.render_camera", camera_name=cam, depth=True)
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ToolError("env_server", "env.render_camera(depth=True) must return (rgb, depth)")
            rgb = np.asarray(pair[0])
            depth = np.asarray(pair[1], dtype=np.float32)
            depth = depth.reshape(depth.shape[:2])
            meta = self._call("env.get_camera_meta", camera_name=cam)
            if not isinstance(meta, dict):
                raise ToolError("env_server", f"env.get_camera_meta({cam!r}) must return a mapping")
            if rgb.ndim != 3 or rgb.shape[2] < 3 or rgb.dtype != np.uint8:
                raise ToolError("env_server", f"env.render_camera({cam!r}) rgb must be (H, W, 3) uint8, got "
                                              f"{rgb.shape} {rgb.dtype}")
            views[cam] = {"rgb": rgb[..., :3], "depth": depth, "camera_meta": _plain(meta)}
        rec = _Record(index=len(self._records), robot_state=self._robot_state(), status=dict(self._status()),
                      task_language=self._language, command=command, views=views)
        d = os.path.join(self._states_dir, f"step_{rec.index:03d}")
        os.makedirs(d, exist_ok=True)
        for cam, v in views.items():
            with open(os.path.join(d, f"{cam}_rgb.png"), "wb") as f:
                f.write(png_bytes(v["rgb"]))
            np.save(os.path.join(d, f"{cam}_depth.npy"), v["depth"])
            with open(os.path.join(d, f"{cam}_camera_meta.json"), "w", encoding="utf-8") as f:
                json.dump(v["camera_meta"], f)
        with open(os.path.join(d, "state.json"), "w", encoding="utf-8") as f:
            json.dump({"step_idx": rec.index, "task_name": self.task_name, "task_language": self._language,
                       "robot_state": _plain(rec.robot_state), "episode_status": _plain(rec.status),
                       "command": command}, f)
        if self._records:
            self._records[-1].views = None  # older steps are read back from disk
        self._records.append(rec)
        return rec

    @contextlib.contextmanager
    def _recorded(self, command: dict) -> Any:
        """Record a step after a state-changing call, also when it failed half-way after moving the robot."""
        steps0 = self._env_steps()
        try:
            yield
        except BaseException:
            if self._env_steps() != steps0:
                with contextlib.suppress(Exception):
                    self._record({**command, "failed": True})
            raise
        self._record(command)

    def _rec(self, step: int) -> _Record:
        if isinstance(step, bool) or not isinstance(step, Integral):
            raise ValueError(f"step must be an integer (-1 = latest), got {step!r}")
        n = len(self._records)
        i = n + int(step) if step < 0 else int(step)
        if not 0 <= i < n:
            raise ToolError("state", f"no recorded step {step} (steps 0..{n - 1})")
        return self._records[i]

    def _view(self, camera: str, step: int, field: str) -> Any:
        rec = self._rec(step)
        if rec.views is not None:
            return rec.views[camera][field]
        d = os.path.join(self._states_dir, f"step_{rec.index:03d}")
        if field == "rgb":
            from PIL import Image

            with Image.open(os.path.join(d, f"{camera}_rgb.png")) as im:
                return np.asarray(im.convert("RGB"))
        if field == "depth":
            return np.load(os.path.join(d, f"{camera}_depth.npy"))
        with open(os.path.join(d, f"{camera}_camera_meta.json"), encoding="utf-8") as f:
            return json.load(f)

    def _state_of(self, rec: _Record) -> State:
        rs, st = rec.robot_state, rec.status
        arms = {}
        for a in self.ARMS:
            ep, eq = _pose7(rs.get(f"{a}_eef_pose"))
            tp, tq = _pose7(rs.get(f"{a}_tcp_pose"))
            arms[a] = ArmState(eef_pos=ep, eef_quat=eq, tcp_pos=tp, tcp_quat=tq,
                               gripper=float(np.asarray(rs.get(f"{a}_gripper", math.nan)).reshape(-1)[0]))
        success = st.get("eval_success") is True
        cnt = int(st.get("take_action_cnt", 0) or 0)
        lim = int(st["step_lim"]) if st.get("step_lim") is not None else self.max_env_steps
        return State(step=rec.index, task=rec.task_language, left=arms["left"], right=arms["right"],
                     eval_success=success, take_action_cnt=cnt, step_lim=lim, terminated=success,
                     truncated=(cnt >= lim) and not success)

    # ----- base hooks -----------------------------------------------------------------------------------------
    def _env_steps(self) -> int:
        return int(self._status().get("take_action_cnt", 0) or 0)

    def _solved(self) -> bool:
        return self._status().get("eval_success") is True

    def _task_language(self) -> str:
        return str(self._language)

    def _render_rgb(self, camera: str, size: int) -> np.ndarray:
        return self._view(camera, -1, "rgb")

    def _raw_state(self) -> State:
        return self._state_of(self._records[-1])

    def _episode_facts(self) -> dict:
        """What RPent's agent sees at step 0 (seed hosts/rpent_robotwin.py ``dump_card``): no object poses."""
        rec0 = self._records[0]
        st = self._state_of(rec0)
        fmt = lambda v: "[" + ", ".join(f"{x:.3f}" for x in v) + "]"  # noqa: E731
        facts: dict[str, Any] = {}
        for a in self.ARMS:
            s = st.arm(a)
            facts[f"{a} arm initial EEF position [x, y, z]"] = f"{fmt(s.eef_pos)} m"
            facts[f"{a} arm initial EEF orientation [w, x, y, z]"] = fmt(s.eef_quat)
            facts[f"{a} arm initial TCP (gripper centre) [x, y, z]"] = f"{fmt(s.tcp_pos)} m"
            facts[f"{a} gripper"] = f"{s.gripper:.2f} (1 = open, 0 = closed)"
        try:
            with np.errstate(all="ignore"):
                z = float(np.nanmedian(world_from_depth(self._view("head", 0, "depth"),
                                                        self._view("head", 0, "camera_meta"))[..., 2]))
            if math.isfinite(z):
                facts["table surface height (median z of the head world map at step 0)"] = f"{z:.3f} m"
        except (ValueError, ToolError, OSError):
            pass
        facts["native action budget (step_lim)"] = st.step_lim
        return {**facts, "task_config": self.suite, "env_server": self._client.url}

    # ----- observation ----------------------------------------------------------------------------------------
    @tool(stateful=False)
    def state(self, step: int = -1) -> State:
        """Read the recorded state of both arms and the episode status.

        step: recorded step to read; -1 is the latest, 0 the initial scene (a new step is recorded after every
        motion call and after ``render``). Returns State with left / right poses and gripper values,
        take_action_cnt / step_lim and the episode flags."""
        return self._state_of(self._rec(step))

    def _check_res(self, camera: str, resolution: str) -> None:
        self._check_camera(camera)
        if resolution != "high":
            raise ValueError(f"resolution must be 'high' (one 320x240 image per camera), not {resolution!r}")

    @tool(stateful=False)
    def image(self, camera: str = "head", *, resolution: str = "high", step: int = -1) -> np.ndarray:
        """A recorded camera image as a numpy uint8 array (240, 320, 3), RGB.

        camera: "head" (fixed view of the whole table: objects, destinations, layout), "left_wrist" or
        "right_wrist" (on the gripper: close-range geometry). Pixels are (row, col), row 0 at the top; pass the
        same camera and step to sample_world_xyz / query_world_map. step: -1 = latest (call render() first for
        a fresh picture after time passed without motion). Not shown to you: use show() or display()."""
        self._check_res(camera, resolution)
        return np.array(self._view(camera, step, "rgb"))

    @tool(stateful=False)
    def world_map(self, camera: str = "head", *, resolution: str = "high", step: int = -1) -> np.ndarray:
        """Per-pixel world coordinates of a recorded image: float32 (240, 320, 3); world_map[row, col] is the
        [x, y, z] of the surface seen there, NaN where the camera saw no depth (e.g.
        np.nanmedian(world_map[..., 2]) is the table height)."""
        self._check_res(camera, resolution)
        return world_from_depth(self._view(camera, step, "depth"), self._view(camera, step, "camera_meta"))

    @tool(stateful=False)
    def depth(self, camera: str = "head", *, step: int = -1) -> np.ndarray:
        """Metric depth of a recorded image: float32 (240, 320) metres along the optical axis, NaN if invalid."""
        self._check_camera(camera)
        d = np.array(self._view(camera, step, "depth"), dtype=np.float32)
        d[~np.isfinite(d) | (d <= 0)] = np.nan
        return d

    @tool(stateful=False)
    def camera_meta(self, camera: str = "head", *, step: int = -1) -> dict:
        """Camera calibration of a recorded step: intrinsic_K (3x3), extrinsic_cv (3x4, world -> OpenCV
        camera), cam2world_gl (4x4, OpenGL: the camera looks down its -z axis), width, height. The wrist
        cameras move with their arm."""
        self._check_camera(camera)
        return json.loads(json.dumps(self._view(camera, step, "camera_meta")))

    @tool(stateful=False)
    def show(self, camera: str = "head") -> None:
        """Attach the latest recorded image of ``camera`` to this turn ("head", "left_wrist", "right_wrist").
        Costs tokens: look only when a decision depends on it."""
        self._check_camera(camera)
        self._emit_image(self._view(camera, -1, "rgb"), camera, "show")
        self._shown.append(camera)

    @tool(stateful=False)
    def artifact(self, name: str, *, step: int = -1) -> bytes:
        """Raw bytes of a recorded artifact (advanced): <camera>_rgb.png, <camera>_depth.npy,
        <camera>_world_xyz.npy or <camera>_camera_meta.json for the three cameras."""
        cam = next((c for c in CAMERAS if str(name).startswith(c + "_")), "")
        field = str(name)[len(cam) + 1:] if cam else ""
        allowed = {"rgb.png", "depth.npy", "world_xyz.npy", "camera_meta.json"}
        if cam not in CAMERAS or field not in allowed:
            raise ValueError(f"artifact must be <camera>_<{'|'.join(sorted(allowed))}> with camera in {CAMERAS}, "
                             f"not {name!r}")
        if field == "rgb.png":
            return png_bytes(self._view(cam, step, "rgb"))
        if field == "camera_meta.json":
            return json.dumps(self._view(cam, step, "camera_meta")).encode()
        arr = (self._view(cam, step, "depth") if field == "depth.npy" else
               world_from_depth(self._view(cam, step, "depth"), self._view(cam, step, "camera_meta")))
        buf = io.BytesIO()
        np.save(buf, np.asarray(arr, dtype=np.float32))
        return buf.getvalue()

    @tool(stateful=True)
    def render(self) -> State:
        """Record a fresh observation (a new step with images and world maps) without moving; costs no native
        action. Use it before image / sample_world_xyz when the scene may have changed since the last step."""
        return self._state_of(self._record({"action": "render"}))

    # ----- perception -----------------------------------------------------------------------------------------
    @tool(stateful=False)
    def sample_world_xyz(self, view: str, pixels: Sequence[Sequence[int]], *, step: int = -1,
                         neighborhood: int = 1) -> WorldSamples:
        """World [x, y, z] under image pixels of a recorded view.

        view: "head", "left_wrist" or "right_wrist" (also the pixel space: use the view, and step, whose image
        the pixels came from). pixels: 1 to 256 [row, col] pairs (a single pair is accepted too).
        neighborhood: half-size (0..32) of the square window whose finite points are median-filtered.
        Each xyz is a visible SURFACE point (the top of an object, not its centre): sample several interior
        pixels. ToolError: pixel out of bounds (240 rows x 320 cols) or no finite depth in the window."""
        self._check_camera(view)
        pts = _pixel_pairs(pixels, 256)
        r = _int(neighborhood, "neighborhood", 0, 32)
        rec = self._rec(step)
        world = world_from_depth(self._view(view, step, "depth"), self._view(view, step, "camera_meta"))
        h, w = world.shape[:2]
        out = []
        for row, col in pts:
            if not (0 <= row < h and 0 <= col < w):
                raise ToolError("sample_world_xyz", f"pixel_out_of_bounds: [{row}, {col}] is outside the {view} "
                                                    f"view ({h} rows x {w} cols)")
            region = world[max(0, row - r):row + r + 1, max(0, col - r):col + r + 1].reshape(-1, 3)
            finite = np.isfinite(region).all(axis=1)
            if not finite.any():
                raise ToolError("sample_world_xyz", f"no_valid_world_points: no finite xyz around [{row}, {col}] "
                                                    f"(neighborhood {r})")
            xyz = np.median(region[finite], axis=0)
            out.append(WorldSample(pixel=(row, col), xyz=tuple(float(v) for v in xyz),  # type: ignore[arg-type]
                                   valid_points=int(finite.sum())))
        return WorldSamples(samples=tuple(out), view=view, step=rec.index, image_shape=(h, w))

    @tool(stateful=False)
    def query_world_map(self, view: str, bbox: Sequence[int], *, step: int = -1, max_points: int = 256
                        ) -> WorldRegion:
        """Statistics of the world points inside a pixel box of a recorded view.

        bbox: half-open [row_start, col_start, row_end, col_end] in that view's pixels (same step as the image).
        max_points: how many (pixel, xyz) samples to return (1..4096). xyz_median is the robust position /
        surface height of what fills the box, xyz_min / xyz_max its extent.
        ToolError: box outside the image or no finite depth inside it."""
        self._check_camera(view)
        if not isinstance(bbox, (list, tuple, np.ndarray)) or len(bbox) != 4 or not all(_is_num(v) for v in bbox):
            raise ValueError("bbox must be [row_start, col_start, row_end, col_end] (pixel numbers)")
        limit = _int(max_points, "max_points", 1, 4096)
        r0, c0, r1, c1 = (int(v) for v in bbox)
        rec = self._rec(step)
        world = world_from_depth(self._view(view, step, "depth"), self._view(view, step, "camera_meta"))
        h, w = world.shape[:2]
        if not (0 <= r0 < r1 <= h and 0 <= c0 < c1 <= w):
            raise ToolError("query_world_map", f"bbox_out_of_bounds: {list(bbox)} is empty or outside the {view} "
                                               f"view (valid [0, 0, {h}, {w}])")
        region = world[r0:r1, c0:c1]
        lr, lc = np.nonzero(np.isfinite(region).all(axis=2))
        if not len(lr):
            raise ToolError("query_world_map", f"no_valid_world_points in bbox {list(bbox)}")
        xyz = region[lr, lc].astype(np.float64)
        idx = np.linspace(0, len(xyz) - 1, limit).astype(int) if len(xyz) > limit else np.arange(len(xyz))
        t3 = lambda a: tuple(float(v) for v in a)  # noqa: E731
        return WorldRegion(xyz_min=t3(xyz.min(axis=0)), xyz_max=t3(xyz.max(axis=0)),  # type: ignore[arg-type]
                           xyz_median=t3(np.median(xyz, axis=0)), valid_points=int(len(xyz)),  # type: ignore[arg-type]
                           points=tuple(((int(r0 + lr[i]), int(c0 + lc[i])), t3(xyz[i])) for i in idx),  # type: ignore[misc]
                           view=view, step=rec.index)

    # ----- the VLA --------------------------------------------------------------------------------------------
    @tool(stateful=True, vla=True)
    def lingbot_act(self, chunks: int = 4, *, use_length: int = 50, prompt: Optional[str] = None) -> VlaRun:
        """Let the frozen LingBot-VLA (a learned dual-arm policy for this benchmark) drive both arms for
        ``chunks`` x 50 native actions (each VLA action counts against step_lim).

        The policy runs on the benchmark's own instruction (``robo.task``) and the three current camera
        images; it stops early when the task succeeds or the budget runs out. Use it for grasps and re-grasps,
        bimanual coordination, insertion, hanging, tool use and other contact-rich motion; script free-space
        transport, staging and release yourself after verifying the state.

        chunks: action chunks to execute (>= 1): one near contact or success, two for ordinary progress.
        use_length: actions per chunk; the runtime fixes it at 50.
        prompt: recorded with the call but NOT sent to the policy; leave it None.
        Check ``terminated`` / ``robo.done`` and the images afterwards: a completed run is not a solved task."""
        n = _int(chunks, "chunks", 1)
        if _int(use_length, "use_length", 1) != VLA_CHUNK_ACTIONS:
            raise ValueError(f"use_length must be {VLA_CHUNK_ACTIONS} for this VLA")
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError("prompt must be a string or None")
        if not self.vla_endpoint:
            raise ToolError("lingbot_act", "no LingBot-VLA server: pass make(..., vla_endpoint='[ws://]host:port') "
                                           "or set PYRUALEAN_VLA_ENDPOINT to RPent's LingBot server "
                                           "(robots/robotwin/vla_server.py)")
        if self._vla is None:
            self._vla = LingBotClient(self.vla_endpoint)
        requested = n * VLA_CHUNK_ACTIONS
        executed = 0
        instruction = self._task_language()
        with self._recorded({"action": "lingbot_act", "chunks": n, "use_length": use_length, "prompt": prompt}):
            for _ in range(n):
                if not self._active():
                    break
                payload = self._vla_payload()
                instruction = payload["task"]
                actions = np.asarray(self._vla.infer(payload)["action"], dtype=np.float64)
                if actions.ndim != 2 or actions.shape[1] != 16 or len(actions) < 1:
                    raise ToolError("lingbot_act", f"LingBot returned {actions.shape}; expected [chunk, 16]")
                if not np.isfinite(actions).all():
                    raise ToolError("lingbot_act", "LingBot returned non-finite actions")
                res = self._tuple(self._call("env.chunk_step", actions[:VLA_CHUNK_ACTIONS], action_type="ee",
                                             return_all_frames=False, timeout_s=STATE_CHANGE_TIMEOUT_S),
                                  5, "env.chunk_step")
                _, _, term, trunc, info = res
                self._episode_status(info, "env.chunk_step")
                count = info.get("executed_actions")
                if isinstance(count, bool) or not isinstance(count, Integral) or \
                        not 1 <= int(count) <= min(len(actions), VLA_CHUNK_ACTIONS):
                    raise ToolError("env_server", f"env.chunk_step: invalid executed_actions {count!r}")
                self._info = info
                self._absorb(term, trunc)
                executed += int(count)
        st = self._raw_state()
        return VlaRun(chunks_requested=n, actions_requested=requested, actions_used=executed,
                      stop_reason=self._completion(requested, executed), instruction=instruction,
                      terminated=st.terminated, truncated=st.truncated)

    def _vla_payload(self) -> dict:
        """RPent's LingBot observation (primitives ``_build_lingbot_observation`` + vla_client ``infer``): the
        three RGB views, the eef16 state [left pose7, left grip, right pose7, right grip], the instruction."""
        rgb = {}
        for cam in CAMERAS:
            img = np.asarray(self._call("env.render_camera", camera_name=cam, depth=False))
            if img.ndim != 3 or img.dtype != np.uint8:
                raise ToolError("env_server", f"env.render_camera({cam!r}) must return (H, W, 3) uint8")
            rgb[cam] = img[..., :3]
        rs = self._robot_state()
        left = np.asarray(rs.get("left_eef_pose"), dtype=np.float32).reshape(-1)
        right = np.asarray(rs.get("right_eef_pose"), dtype=np.float32).reshape(-1)
        if left.shape != (7,) or right.shape != (7,):
            raise ToolError("lingbot_act", "RoboTwin end-effector poses must have shape (7,)")
        state = np.concatenate([left, np.float32([float(np.asarray(rs["left_gripper"]).reshape(-1)[0])]),
                                right, np.float32([float(np.asarray(rs["right_gripper"]).reshape(-1)[0])])])
        language = self._call("env.get_task_language")
        if not isinstance(language, str):
            raise ToolError("env_server", "env.get_task_language must return a string")
        return {"observation.images.cam_high": rgb["head"], "observation.images.cam_left_wrist": rgb["left_wrist"],
                "observation.images.cam_right_wrist": rgb["right_wrist"], "observation.state": state,
                "task": language}

    # ----- scripted motion ------------------------------------------------------------------------------------
    def _move(self, arm: str, xyz: Sequence[float], quat: Optional[Sequence[float]], gripper: Optional[float],
              substeps: int, command: dict) -> Move:
        target = np.asarray(xyz, dtype=np.float64)
        if quat is None:
            quat = np.asarray(self._robot_state()[f"{arm}_eef_pose"], dtype=np.float64).reshape(-1)[3:]
        pose = np.concatenate([target, np.asarray(quat, dtype=np.float64)])
        plan = self._call("env.plan_arm_path", arm=arm, target_pose=pose)
        if not isinstance(plan, dict) or "status" not in plan:
            raise ToolError("env_server", f"env.plan_arm_path must return a mapping with 'status', got "
                                          f"{str(plan)[:200]}")
        term, trunc = self._terminated, self._truncated
        if plan["status"] != "Success" or plan.get("position") is None:
            return Move(arm=arm, target_xyz=tuple(float(v) for v in target), final_eef_pos=None,  # type: ignore[arg-type]
                        final_dist_m=math.inf, planned=False, reached=False, waypoints=0, actions_used=0,
                        stop_reason="plan_failed", terminated=term, truncated=trunc)
        path = np.asarray(plan["position"], dtype=np.float64)
        if path.ndim != 2 or path.shape[1] != 6 or len(path) < 1 or not np.isfinite(path).all():
            raise ToolError("env_server", f"env.plan_arm_path: position must be a finite [N, 6] joint path, got "
                                          f"{path.shape}")
        if substeps == 1:
            path = path[-1:]
        elif substeps >= 2 and len(path) > substeps:
            path = path[np.linspace(0, len(path) - 1, substeps).astype(int)]
        with self._recorded(command):
            executed = self._apply_qpos_updates(arm, [(q, gripper) for q in path])
        final = np.asarray(self._robot_state()[f"{arm}_eef_pose"], dtype=np.float64).reshape(-1)[:3]
        dist = float(np.linalg.norm(final - target))
        st = self._raw_state()
        return Move(arm=arm, target_xyz=tuple(float(v) for v in target),  # type: ignore[arg-type]
                    final_eef_pos=tuple(float(v) for v in final), final_dist_m=dist,  # type: ignore[arg-type]
                    planned=True, reached=dist <= REACH_TOL_M, waypoints=len(path), actions_used=executed,
                    stop_reason=self._completion(len(path), executed), terminated=st.terminated,
                    truncated=st.truncated)

    @tool(stateful=True)
    def move_to(self, arm: str, xyz: Sequence[float], *, quat: Optional[Sequence[float]] = None,
                gripper: Optional[float] = None, substeps: int = 25) -> Move:
        """Plan and execute a collision-aware motion of one arm to a world-frame EEF pose.

        The planner computes a joint path from the current pose to the target, executed as ``substeps`` native
        actions; if no path exists (unreachable, in collision, through the other arm or the table) nothing
        moves and ``Move.planned`` is False.

        arm: "left" or "right". xyz: target EEF position in metres (NOT the gripper centre: subtract 0.12 m
        along ArmState.approach). quat: target orientation [w, x, y, z]; None keeps the current one.
        gripper: value in [0, 1] to hold during the motion; None keeps the current command.
        substeps: waypoints executed (1 = jump to the final pose in one action, 0 = every planner waypoint).
        Near the table, a rim or the other arm use small motions (5-10 mm in z) with at most 8 substeps.
        Always check ``planned`` and ``reached``: a returned call is not proof of arrival."""
        arm = _arm(arm)
        target = _floats(xyz, 3, "xyz")
        q = None
        if quat is not None:
            q = np.asarray(_floats(quat, 4, "quat"))
            if np.linalg.norm(q) < 1e-6:
                raise ValueError("quat must be a non-zero quaternion [w, x, y, z]")
            q = q / np.linalg.norm(q)
        g = None if gripper is None else _gripper_value(gripper)
        n = _int(substeps, "substeps", 0)
        cmd = {"action": "move_to", "arm": arm, "xyz": list(target), "quat": None if q is None else q.tolist(),
               "gripper": g, "substeps": n}
        return self._move(arm, target, q, g, n, cmd)

    @tool(stateful=True)
    def rotate_wrist(self, arm: str, delta_yaw_deg: float, *, gripper: Optional[float] = None,
                     substeps: int = 25) -> Move:
        """Rotate one EEF about the world z axis by a relative angle (degrees), keeping its position.

        The TCP (and a held object) sweeps a 0.12 m arc: rotate with clearance, at a safe height, in small
        increments, after a verified hold. ``state().arm(arm).eef_yaw`` reports the current yaw (radians).
        Returns Move (target_xyz is the position it was told to keep)."""
        arm = _arm(arm)
        if isinstance(delta_yaw_deg, bool) or not isinstance(delta_yaw_deg, Real) or \
                not math.isfinite(float(delta_yaw_deg)):
            raise ValueError(f"delta_yaw_deg must be a finite number, got {delta_yaw_deg!r}")
        g = None if gripper is None else _gripper_value(gripper)
        n = _int(substeps, "substeps", 0)
        pose = np.asarray(self._robot_state()[f"{arm}_eef_pose"], dtype=np.float64).reshape(-1)
        yaw = math.radians(float(delta_yaw_deg))
        q = _qmul(np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]), pose[3:])
        cmd = {"action": "rotate_wrist", "arm": arm, "delta_yaw_deg": float(delta_yaw_deg), "gripper": g,
               "substeps": n}
        return self._move(arm, pose[:3], q, g, n, cmd)

    def _gripper_to(self, arm: str, val: float, steps: int, name: str) -> Gripper:
        current = float(np.asarray(self._robot_state()[f"{arm}_gripper"]).reshape(-1)[0])
        values = [current + (val - current) * i / steps for i in range(1, steps + 1)]
        with self._recorded({"action": name, "arm": arm, "val": val, "steps": steps}):
            executed = self._apply_qpos_updates(arm, [(None, v) for v in values])
        st = self._raw_state()
        return Gripper(arm=arm, target=val, final=st.arm(arm).gripper, actions_used=executed,
                       stop_reason=self._completion(steps, executed), terminated=st.terminated,
                       truncated=st.truncated)

    @tool(stateful=True)
    def set_gripper(self, arm: str, val: float, steps: int = 10) -> Gripper:
        """Drive one gripper linearly to ``val`` (0 closed .. 1 open) over ``steps`` native actions.

        ``set_gripper("left", robo.CLOSE)`` closes the left gripper; verify a grasp from the wrist image and
        the object moving with the TCP: the reported value is a command, not a contact measurement."""
        return self._gripper_to(_arm(arm), _gripper_value(val, "val"), _int(steps, "steps", 1), "set_gripper")

    @tool(stateful=True)
    def release(self, arm: str, val: float = 1.0, steps: int = 10) -> Gripper:
        """Open one gripper to ``val`` (default fully open) over ``steps`` native actions. Release only when
        the object is supported at its destination, then retreat upwards and check that it stayed put;
        terminated=True when letting go satisfied the task."""
        return self._gripper_to(_arm(arm), _gripper_value(val, "val"), _int(steps, "steps", 1), "release")


ROBOT = RobotwinRobot
