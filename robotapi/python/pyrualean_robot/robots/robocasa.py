"""``make("robocasa", task="PickPlaceCounterToCabinet", seed=1)``: RoboCasa365 (mobile PandaOmron in a kitchen)
through RPent's env server (see rpent.py for the contract). The seed's RobocasaRobot API without the learned
VLA calls (rldx_*): delta-EEF servo motions, a scripted grasp and base navigation, all run here as 12-D
PandaOmron actions sent one control step at a time."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence, Union

import numpy as np

from ..base import TaskInfo, tool
from ..errors import ToolError
from .rpent import RemoteRobot, _num, _tasks_from, _vec

Vec3 = tuple[float, float, float]

# RoboCasa365 target tasks the seed evaluates (atomic ones; composite tasks follow the same API).
TASKS = ("PickPlaceCounterToCabinet", "PickPlaceCabinetToCounter", "PickPlaceCounterToSink", "PickPlaceSinkToCounter",
         "PickPlaceCounterToMicrowave", "PickPlaceMicrowaveToCounter", "PickPlaceCounterToStove",
         "PickPlaceStoveToCounter", "OpenSingleDoor", "CloseSingleDoor", "OpenDoubleDoor", "CloseDoubleDoor",
         "OpenDrawer", "CloseDrawer", "TurnOnSinkFaucet", "TurnOffSinkFaucet", "TurnOnStove", "TurnOffStove",
         "TurnOnMicrowave", "TurnOffMicrowave", "CoffeeSetupMug", "CoffeeServeMug", "CoffeePressButton")
SUITES = ("target", "pretrain", "all")
ACTION_SCALE = 0.05  # OSC position output limit per unit action (m)


@dataclass(frozen=True)
class CasaState:
    """PandaOmron state: eef pose (quat x,y,z,w), gripper, mobile base pose, RoboCasa's success/progress."""
    step: int
    task: str
    eef_pos: Vec3
    eef_quat: tuple[float, float, float, float]
    gripper_opening: float
    base_pos: Vec3
    base_yaw: float
    success: bool
    task_progress: float
    terminated: bool
    truncated: bool

    def brief(self) -> dict:
        return {"step": self.step, "eef_pos": [round(v, 4) for v in self.eef_pos],
                "gripper_opening": round(self.gripper_opening, 4), "base_pos": [round(v, 3) for v in self.base_pos],
                "base_yaw": round(self.base_yaw, 3), "success": self.success, "terminated": self.terminated,
                "truncated": self.truncated}


@dataclass(frozen=True)
class CasaMove:
    """Outcome of an arm or base motion. reached=False with steps_used < max_steps means it stalled."""
    target: tuple[float, ...]
    final: tuple[float, ...]
    final_dist_m: float
    reached: bool
    steps_used: int
    max_steps: int
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class CasaGrasp:
    """Outcome of scripted_grasp: success = the fingers stopped on something (not fully closed) after lifting."""
    success: bool
    final_gripper_opening: float
    steps_used: int
    terminated: bool
    truncated: bool


class RobocasaRobot(RemoteRobot):
    """A mobile PandaOmron in a RoboCasa365 kitchen, through RPent's env server.

    Frame: world metres, z up; counters at z~0.9, arm reach ~0.8 m from the base; quaternions [x, y, z, w].
    Gripper: OPEN=-1, CLOSE=+1, or HOLD="hold" (keep the current command, the default for motions).
    move_to travels at most MAX_MOVE_M (0.30 m, 3-D) per call. Success is RoboCasa's own _check_success
    (see success_criteria())."""

    NAME: ClassVar[str] = "robocasa"
    OPEN: ClassVar[float] = -1.0
    CLOSE: ClassVar[float] = 1.0
    HOLD: ClassVar[str] = "hold"
    MAX_MOVE_M: ClassVar[float] = 0.30
    CAMERAS: ClassVar[tuple[str, ...]] = ("agentview", "navview", "wrist")
    ON_MOTION_IMAGES: ClassVar[tuple[str, ...]] = ("agentview", "wrist")
    CAMERA_SIZE: ClassVar[tuple[int, int]] = (256, 256)
    CONSTANTS: ClassVar[tuple[str, ...]] = ("OPEN", "CLOSE", "HOLD", "MAX_MOVE_M", "CAMERAS", "ON_MOTION_IMAGES")
    KNOWLEDGE: ClassVar[str] = ("# RoboCasa notes\n- Counters are at z~0.9; the arm reaches ~0.8 m from the base: "
                                "navigate_to() first.\n- Motions keep the gripper command (HOLD) unless told.\n")

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self._grip_cmd = -1.0

    @classmethod
    def default_task(cls) -> str:
        return "PickPlaceCounterToCabinet"

    @classmethod
    def tasks(cls) -> list[TaskInfo]:
        """RoboCasa365 target tasks (run on an RPent env server; not on this machine)."""
        return _tasks_from([(t, "robocasa365", t) for t in TASKS])

    # ----- state -----
    def _raw_state(self) -> CasaState:
        o = self._obs
        gq = np.asarray(o.get("gripper_qpos", [0.0, 0.0]), float)
        bq = np.asarray(o.get("base_quat", [0, 0, 0, 1]), float)
        yaw = math.atan2(2 * (bq[3] * bq[2] + bq[0] * bq[1]), 1 - 2 * (bq[1] ** 2 + bq[2] ** 2))
        term, trunc = self._ended()
        return CasaState(step=self._steps, task=self._task_language(),
                         eef_pos=tuple(float(v) for v in o.get("eef_pos", [math.nan] * 3)),
                         eef_quat=tuple(float(v) for v in o.get("eef_quat", [0, 0, 0, 1])),
                         gripper_opening=float(np.abs(gq).sum()),
                         base_pos=tuple(float(v) for v in o.get("base_pos", [0, 0, 0])), base_yaw=yaw,
                         success=bool(o.get("success", False)), task_progress=float(o.get("task_progress", 0.0)),
                         terminated=term, truncated=trunc)

    @tool(stateful=False)
    def state(self) -> CasaState:
        """Arm, gripper and base state plus RoboCasa's success flag and task progress."""
        return self._raw_state()

    @tool(stateful=False)
    def success_criteria(self) -> str:
        """The source of the task's _check_success, as the env server reports it."""
        return str(self._client.call("env.success_criteria"))

    @tool(stateful=False)
    def back_project(self, row: int, col: int, *, camera: str = "agentview") -> Vec3:
        """World xyz seen at pixel (row, col) of a camera (ToolError outside the image or on invalid depth)."""
        (p,) = self._pixels_xyz(camera, [(row, col)], 0)
        if p is None:
            raise ToolError("back_project", f"pixel ({row}, {col}) has no valid depth")
        return p

    # ----- stepping -----
    def _grip(self, gripper: Union[str, float]) -> float:
        if gripper == self.HOLD:
            return self._grip_cmd
        g = _num(gripper, "gripper")
        if not -1.0 <= g <= 1.0:
            raise ValueError(f"gripper must be in [-1, 1] (OPEN=-1, CLOSE=+1) or 'hold', not {g}")
        return g

    def _act(self, arm: np.ndarray, grip: float, base: np.ndarray, mode: float) -> bool:
        a = np.zeros(12)
        a[:6] = np.clip(arm, -1, 1)
        a[6] = grip
        a[7:11] = np.clip(base, -1, 1)
        a[11] = mode
        self._grip_cmd = grip
        _, info = self._env_step({"type": "delta", "action": a.tolist()})
        return not info.get("stopped") and not self.done

    def _servo(self, target: np.ndarray, grip: float, step_clip: float, tol: float, max_steps: int) -> CasaMove:
        best, since, used = math.inf, 0, 0
        for used in range(1, max_steps + 1):
            pos = np.array(self._raw_state().eef_pos)
            d = target - pos
            dist = float(np.linalg.norm(d))
            if dist <= tol:
                used -= 1
                break
            if dist < best - 0.002:
                best, since = dist, 0
            else:
                since += 1
                if since >= 15:
                    used -= 1
                    break
            arm = np.zeros(6)
            arm[:3] = np.clip(d, -step_clip, step_clip) / ACTION_SCALE
            if not self._act(arm, grip, np.zeros(4), -1.0):
                break
        pos = np.array(self._raw_state().eef_pos)
        term, trunc = self._ended()
        dist = float(np.linalg.norm(target - pos))
        return CasaMove(target=tuple(float(v) for v in target), final=tuple(float(v) for v in pos), final_dist_m=dist,
                        reached=dist <= tol, steps_used=used, max_steps=max_steps, terminated=term, truncated=trunc)

    # ----- motion -----
    @tool(stateful=True)
    def move_to(self, xyz: Sequence[float], gripper: Union[str, float] = "hold", *, step_clip: float = 0.02,
                max_steps: int = 200, tol: float = 0.012) -> CasaMove:
        """Move the eef in a straight line to world xyz (at most MAX_MOVE_M = 0.30 m, 3-D, per call),
        holding the gripper command ('hold' keeps the current one)."""
        target = _vec(xyz, 3, "xyz")
        g = self._grip(gripper)
        dist = float(np.linalg.norm(target - np.array(self._raw_state().eef_pos)))
        if dist > self.MAX_MOVE_M + 1e-9:
            raise ValueError(f"move of {dist:.3f} m exceeds {self.MAX_MOVE_M} m; split it into waypoints")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 1 <= max_steps <= 2000:
            raise ValueError(f"max_steps must be an int in 1..2000, not {max_steps!r}")
        return self._servo(target, g, _num(step_clip, "step_clip"), _num(tol, "tol"), max_steps)

    @tool(stateful=True)
    def move_delta(self, dxyz: Sequence[float], gripper: Union[str, float] = "hold", *, max_steps: int = 200) -> CasaMove:
        """Move the eef by dxyz metres from where it is (same limits as move_to)."""
        d = _vec(dxyz, 3, "dxyz")
        if float(np.linalg.norm(d)) > self.MAX_MOVE_M + 1e-9:
            raise ValueError(f"move of {np.linalg.norm(d):.3f} m exceeds {self.MAX_MOVE_M} m; split it")
        return self.move_to.__wrapped__(self, np.array(self._raw_state().eef_pos) + d, gripper,  # type: ignore[attr-defined]
                                        max_steps=max_steps)

    @tool(stateful=True)
    def set_gripper(self, gripper: float, steps: int = 5) -> CasaMove:
        """Command the gripper (-1 open .. +1 closed) for `steps` control steps without moving."""
        g = self._grip(gripper)
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 100:
            raise ValueError(f"steps must be an int in 1..100, not {steps!r}")
        used = 0
        for used in range(1, steps + 1):
            if not self._act(np.zeros(6), g, np.zeros(4), -1.0):
                break
        pos = self._raw_state().eef_pos
        term, trunc = self._ended()
        return CasaMove(target=pos, final=pos, final_dist_m=0.0, reached=True, steps_used=used, max_steps=steps,
                        terminated=term, truncated=trunc)

    @tool(stateful=True)
    def release(self) -> CasaMove:
        """Open the gripper (drops what is held)."""
        return self.set_gripper.__wrapped__(self, self.OPEN, 8)  # type: ignore[attr-defined]

    @tool(stateful=True)
    def scripted_grasp(self, xyz: Sequence[float], *, approach_z: float = 0.10) -> CasaGrasp:
        """Open, go approach_z above xyz, descend, close, lift back to the approach height."""
        p = _vec(xyz, 3, "xyz")
        az = _num(approach_z, "approach_z")
        if not 0.02 <= az <= 0.30:
            raise ValueError("approach_z must be in [0.02, 0.30] m")
        s0 = self._steps
        above = p + np.array([0, 0, az])
        if float(np.linalg.norm(above - np.array(self._raw_state().eef_pos))) > 0.8:
            raise ValueError("grasp point is out of reach (> 0.8 m): navigate_to() closer first")
        for target, g in ((above, self.OPEN), (p, self.OPEN)):
            self._servo(target, g, 0.02, 0.012, 200)
            if self.done:
                break
        if not self.done:
            for _ in range(10):
                if not self._act(np.zeros(6), self.CLOSE, np.zeros(4), -1.0):
                    break
        if not self.done:
            self._servo(above, self.CLOSE, 0.02, 0.012, 200)
        opening = self._raw_state().gripper_opening
        term, trunc = self._ended()
        return CasaGrasp(success=bool(opening > 0.004), final_gripper_opening=opening, steps_used=self._steps - s0,
                         terminated=term, truncated=trunc)

    @tool(stateful=True)
    def navigate_to(self, xy: Sequence[float], *, tol: float = 0.20, max_steps: int = 300) -> CasaMove:
        """Drive the mobile base toward world (x, y) in a straight line (no path planning) until within tol."""
        goal = _vec(xy, 2, "xy")
        tol = _num(tol, "tol")
        used = 0
        for used in range(1, max_steps + 1):
            st = self._raw_state()
            d = goal - np.array(st.base_pos[:2])
            if float(np.linalg.norm(d)) <= tol:
                used -= 1
                break
            c, s = math.cos(st.base_yaw), math.sin(st.base_yaw)
            local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])  # world -> base frame
            base = np.zeros(4)
            base[:2] = local / max(np.linalg.norm(local), 1e-9)
            if not self._act(np.zeros(6), self._grip_cmd, base, 1.0):
                break
        st = self._raw_state()
        dist = float(np.linalg.norm(goal - np.array(st.base_pos[:2])))
        term, trunc = self._ended()
        return CasaMove(target=tuple(float(v) for v in goal), final=tuple(st.base_pos[:2]), final_dist_m=dist,
                        reached=dist <= tol, steps_used=used, max_steps=max_steps, terminated=term, truncated=trunc)

    @tool(stateful=True)
    def move_base(self, forward: float, lateral: float, turn: float, *, steps: int = 10) -> CasaMove:
        """Drive the base with normalized commands in [-1, 1] (forward, lateral, turn) for `steps` steps."""
        cmd = np.array([_num(forward, "forward"), _num(lateral, "lateral"), _num(turn, "turn"), 0.0])
        if np.any(np.abs(cmd) > 1):
            raise ValueError("forward, lateral and turn must be in [-1, 1]")
        start = self._raw_state().base_pos
        used = 0
        for used in range(1, steps + 1):
            if not self._act(np.zeros(6), self._grip_cmd, cmd, 1.0):
                break
        st = self._raw_state()
        term, trunc = self._ended()
        return CasaMove(target=tuple(float(v) for v in cmd[:3]), final=st.base_pos,
                        final_dist_m=float(np.linalg.norm(np.array(st.base_pos) - np.array(start))), reached=True,
                        steps_used=used, max_steps=steps, terminated=term, truncated=trunc)


ROBOT = RobocasaRobot
