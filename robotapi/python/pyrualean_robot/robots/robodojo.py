"""RoboDojo's dual ARX X5 (Isaac Sim), reached through the PyRUA_Lean XPolicyLab policy directory
(robotapi/robodojo): its model serves each RoboDojo episode to this kernel over RPent's env RPC (rpent.py).

Upstream facts this adapter follows (RoboDojo ``src/eval_client/eval_env.py``, ``env/observation_manager/
obs_manager.py``, ``env_cfg/arx_x5.yml``, ``env_cfg/robot/_robot_info.json``):

* state keys ``left/right_arm_joint_state`` (6 rad), ``left/right_ee_joint_state`` (1 value, the gripper
  normalised to [0, 1]), ``left/right_ee_pose`` ([x, y, z, qw, qx, qy, qz]);
* an action dict carries all four keys of its type: joint -> ``*_arm_joint_state`` + ``*_ee_joint_state``,
  ee -> ``*_ee_pose`` + ``*_ee_joint_state`` (RoboDojo solves IK per action); each action is one 25 Hz control
  step that RoboDojo interpolates itself;
* cameras ``cam_head``, ``cam_left_wrist``, ``cam_right_wrist``;
* RoboDojo alone ends an episode (its success check or step limit); its verdict reaches the robot at the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

import numpy as np

from ..base import TaskInfo, load_guide, tool
from ..errors import ToolError
from ._args import _bounded, _vec
from .rpent import RemoteRobot

#: RoboDojo's one benchmark suite (42 simulated tasks).
SUITES = ("robodojo_sim",)


@dataclass(frozen=True)
class DojoArm:
    """One ARX X5 arm as RoboDojo reports it: 6 joint angles (rad), gripper in [0, 1] (1 = open),
    end-effector pose [x, y, z, qw, qx, qy, qz]."""
    joints: tuple[float, ...]
    gripper: float
    ee_pose: tuple[float, ...]


@dataclass(frozen=True)
class DojoState:
    """RoboDojo robot state. ``action_type`` says which motions this run accepts (joint: move_joints,
    ee: move_to). ``episode_over``: RoboDojo ended the episode; ``success``: RoboDojo's verdict (None until
    the episode is over). ``robodojo_steps`` counts every control step RoboDojo executed, including the steps
    it held the arms still while you were thinking."""
    step: int
    task: str
    action_type: str
    left: DojoArm
    right: DojoArm
    episode_over: bool
    success: Optional[bool]
    robodojo_steps: int
    terminated: bool
    truncated: bool

    def brief(self) -> dict:
        return {"step": self.step, "left_joints": [round(v, 3) for v in self.left.joints],
                "right_joints": [round(v, 3) for v in self.right.joints],
                "grippers": [round(self.left.gripper, 3), round(self.right.gripper, 3)],
                "episode_over": self.episode_over, "success": self.success}


@dataclass(frozen=True)
class DojoMotion:
    """Outcome of a motion: how many of its actions RoboDojo executed and where the arms ended up.
    ``episode_over`` with ``actions_sent`` < the requested steps: RoboDojo ended the episode mid-motion."""
    actions_sent: int
    left: DojoArm
    right: DojoArm
    episode_over: bool
    success: Optional[bool]
    terminated: bool
    truncated: bool


class RoboDojoRobot(RemoteRobot):
    """A dual ARX X5 in a RoboDojo task (Isaac Sim), reached through the PyRUA_Lean XPolicyLab policy.

    Each motion becomes a chunk of absolute RoboDojo actions (interpolated over `steps` control steps at
    25 Hz) and returns once RoboDojo has executed them. The run's action type is fixed by deploy.yml:
    "joint" runs take move_joints(), "ee" runs take move_to(); set_gripper() works in both. Images are RGB.
    RoboDojo scores the episode itself and ends it on success or at its step limit; state().episode_over
    tells you it ended (then state().success is its verdict). While you think, RoboDojo keeps stepping with
    the arms held still, and that time counts against its step limit."""

    NAME: ClassVar[str] = "robodojo_xpl_rgb"
    ENV_SERVER_HINT: ClassVar[str] = ("RoboDojo runs on Isaac Sim 5.1 / Isaac Lab 2.3 with an NVIDIA GPU; its episodes "
                                      "reach pyrualean through the XPolicyLab policy dir robotapi/robodojo (see its "
                                      "README), which sets PYRUALEAN_ENV_SERVER for the kernel")
    ARMS: ClassVar[tuple[str, ...]] = ("left", "right")
    CAMERAS: ClassVar[tuple[str, ...]] = ("cam_head", "cam_left_wrist", "cam_right_wrist")
    ON_MOTION_IMAGES: ClassVar[tuple[str, ...]] = ("cam_head",)
    CAMERA_SIZE: ClassVar[tuple[int, int]] = (240, 320)
    OPEN: ClassVar[float] = 1.0
    CLOSE: ClassVar[float] = 0.0
    CONTROL_HZ: ClassVar[int] = 25
    CONSTANTS: ClassVar[tuple[str, ...]] = ("ARMS", "OPEN", "CLOSE", "CAMERAS", "ON_MOTION_IMAGES", "CONTROL_HZ")
    KNOWLEDGE: ClassVar[str] = load_guide("robodojo", "robodojo.md")

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

    def _verdict(self) -> Optional[bool]:
        s = self._obs.get("success")
        return None if s is None or not self._obs.get("episode_over") else bool(s)

    def _raw_state(self) -> DojoState:
        term, trunc = self._ended()
        return DojoState(step=self._steps, task=self._task_language(), action_type=self.action_type,
                         left=self._dojo_arm("left"), right=self._dojo_arm("right"),
                         episode_over=bool(self._obs.get("episode_over")), success=self._verdict(),
                         robodojo_steps=int(self._obs.get("robodojo_steps", self._steps)), terminated=term,
                         truncated=trunc)

    @tool(stateful=False)
    def state(self) -> DojoState:
        """Both arms' joints, grippers and end-effector poses; whether RoboDojo ended the episode and its verdict."""
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
                    q0, q1 = cur[3:7], tgt["pose"][3:7]
                    if float(np.dot(q0, q1)) < 0:  # the short way round
                        q1 = -q1
                    q = q0 + (q1 - q0) * f
                    pose = np.concatenate([pose[:3], q / max(np.linalg.norm(q), 1e-9)])
                g = g0 + (tgt["gripper"] - g0) * f if "gripper" in tgt else g0
                act[f"{side}_{pose_key}"] = np.asarray(pose, float)
                act[f"{side}_ee_joint_state"] = np.array([g], float)
            actions.append(act)
        s0 = self._steps
        self._env_step({"type": self.action_type, "actions": actions})
        if self._obs.get("episode_over") and not self._success:
            self._mark_truncated()
        term, trunc = self._ended()
        return DojoMotion(actions_sent=self._steps - s0, left=self._dojo_arm("left"), right=self._dojo_arm("right"),
                          episode_over=bool(self._obs.get("episode_over")), success=self._verdict(),
                          terminated=term, truncated=trunc)

    def _gripper(self, v: Any, name: str) -> float:
        return _bounded(v, name, 0.0, 1.0, hint=" (CLOSE=0.0 .. OPEN=1.0)")

    @tool(stateful=True)
    def move_joints(self, *, left: Optional[Sequence[float]] = None, right: Optional[Sequence[float]] = None,
                    left_gripper: Optional[float] = None, right_gripper: Optional[float] = None,
                    steps: int = 20) -> DojoMotion:
        """Move arms to absolute joint targets (6 angles each, radians) and/or grippers (0 = CLOSE .. 1 = OPEN),
        interpolated over `steps` control steps (25 per second). Only in runs with action_type "joint"."""
        if self.action_type != "joint":
            raise ValueError("this run takes end-effector actions (deploy.yml action_type: ee): use move_to()")
        targets: dict[str, dict[str, np.ndarray]] = {}
        for side, q, g in (("left", left, left_gripper), ("right", right, right_gripper)):
            t: dict[str, Any] = {}
            if q is not None:
                t["pose"] = _vec(q, len(self._dojo_arm(side).joints) or 6, f"{side}")
            if g is not None:
                t["gripper"] = self._gripper(g, f"{side}_gripper")
            if t:
                targets[side] = t
        if not targets:
            raise ValueError("give at least one of left, right, left_gripper, right_gripper")
        return self._send(targets, steps)

    @tool(stateful=True)
    def move_to(self, arm: str, xyz: Sequence[float], *, quat: Optional[Sequence[float]] = None,
                gripper: Optional[float] = None, steps: int = 20) -> DojoMotion:
        """Move one arm's end effector to xyz (and quat [w,x,y,z] if given; else keep the current orientation)
        in a straight line over `steps` control steps; RoboDojo solves IK for every step. Only in runs with
        action_type "ee"."""
        if self.action_type != "ee":
            raise ValueError("this run takes joint actions (deploy.yml action_type: joint): use move_joints()")
        if arm not in self.ARMS:
            raise ValueError(f"arm must be one of {self.ARMS}, not {arm!r}")
        cur = np.array(self._dojo_arm(arm).ee_pose)
        if cur.size != 7:
            raise ToolError("robodojo", f"RoboDojo's observation has no {arm}_ee_pose")
        q = _vec(quat, 4, "quat") if quat is not None else cur[3:7]
        if np.linalg.norm(q) < 1e-6:
            raise ValueError("quat must not be all zeros")
        pose = np.concatenate([_vec(xyz, 3, "xyz"), q / np.linalg.norm(q)])
        t: dict[str, Any] = {"pose": pose}
        if gripper is not None:
            t["gripper"] = self._gripper(gripper, "gripper")
        return self._send({arm: t}, steps)

    @tool(stateful=True)
    def set_gripper(self, arm: str, val: float, steps: int = 10) -> DojoMotion:
        """Move one gripper to `val` (0 = CLOSE .. 1 = OPEN) over `steps` control steps; the arm holds still."""
        if arm not in self.ARMS:
            raise ValueError(f"arm must be one of {self.ARMS}, not {arm!r}")
        return self._send({arm: {"gripper": self._gripper(val, "val")}}, steps)

    @tool(stateful=True)
    def wait(self, steps: int = 25) -> DojoMotion:
        """Hold both arms still for `steps` control steps (e.g. to let objects settle)."""
        return self._send({}, steps)
