"""Result types: frozen dataclasses that report what happened instead of raising."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Optional

Vec3 = tuple[float, float, float]


class _Result:
    """A result whose missing attributes are answered with the ones it has (a small model guesses
    ``move.success`` or ``pick.top_xyz`` and otherwise cannot tell what to write instead)."""

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup failed; dunders (pickle, copy) get the plain error.
        if name.startswith("__"):
            raise AttributeError(name)
        have = ", ".join(f.name for f in fields(type(self)))  # type: ignore[arg-type]
        hint = ""
        if "xyz" in name or "pos" in name:
            # The model wrote `x, y, top = grasp.top_xyz` four times after the bare pointer (bowl_then_plate_swap,
            # seed 0): it reads the pick's result as the place; the note says which is which.
            hint = (f"; a {type(self).__name__} does not say where objects are: where an object is: "
                    "robo.segment(name).top_xyz, and where a block goes, the place's top: "
                    "x, y, top = robo.segment(place).top_xyz")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}: a {type(self).__name__} has "
                             f"{have}{hint}", name=name, obj=self)


@dataclass(frozen=True)
class State(_Result):
    """Robot and episode state. ``gripper_opening`` is the finger gap in metres (~0.08 open, ~0 closed on
    nothing, 0.01-0.05 holding something). ``eef_quat`` is x, y, z, w."""
    step: int
    task: str
    eef_pos: Vec3
    eef_quat: tuple[float, float, float, float]
    gripper_qpos: tuple[float, float]
    gripper_opening: float
    object_names: tuple[str, ...]
    terminated: bool
    truncated: bool
    eef_yaw: float = 0.0
    eef_pitch: float = 0.0

    def brief(self) -> dict:
        """The compact form reported after each cell."""
        return {"step": self.step, "eef_pos": [round(v, 4) for v in self.eef_pos],
                "eef_yaw": round(self.eef_yaw, 3), "eef_pitch": round(self.eef_pitch, 3),
                "gripper_opening": round(self.gripper_opening, 4),
                "terminated": self.terminated, "truncated": self.truncated}


@dataclass(frozen=True)
class Move(_Result):
    """Outcome of move_to. ``reached`` False with steps_used < max_steps means the arm stalled (contact)."""
    target_xyz: Vec3
    final_eef_pos: Vec3
    final_dist_m: float
    reached: bool
    steps_used: int
    max_steps: int
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class MovePose(_Result):
    """Outcome of move_pose (position plus gripper pitch/yaw)."""
    target_xyz: Vec3
    final_eef_pos: Vec3
    final_dist_m: float
    final_pitch: float
    final_yaw: float
    final_ori_err: float
    reached: bool
    steps_used: int
    max_steps: int
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class Rotation(_Result):
    """Outcome of rotate_wrist (angles in radians)."""
    start: float
    target: float
    final: float
    final_err: float
    reached: bool
    steps_used: int
    max_steps: int
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class Gripper(_Result):
    """Outcome of set_gripper: the command held for ``steps`` control steps."""
    gripper: float
    steps: int
    gripper_opening: float
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class Release(_Result):
    """Outcome of release: the gripper opened; openings are finger gaps in metres."""
    steps_used: int
    start_gripper_opening: float
    peak_gripper_opening: float
    final_gripper_opening: float
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class Pick(_Result):
    """Outcome of the scripted grasp. ``success`` means the object rose at least 5 cm and is held between the
    fingers; ``peak_lift_m`` is how far it rose; ``diagnostics`` says which phase fell short."""
    success: bool
    object: str
    steps_used: int
    peak_lift_m: float
    min_gripper_opening: float
    final_gripper_opening: float
    final_eef_pos: Vec3
    terminated: bool
    truncated: bool
    diagnostics: str = ""


@dataclass(frozen=True)
class PolicyRun(_Result):
    """Outcome of a VLA policy call: how many action chunks ran and whether the episode ended."""
    instruction: str
    chunks_used: int
    max_chunks: int
    steps_used: int
    final_eef_pos: Vec3
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class Segment(_Result):
    """Where a named object is, from the simulator's segmentation render plus depth.
    ``world_xyz`` is the centroid of its visible surface points; ``top_xyz`` the centroid of the points within
    1 cm of its highest visible point (for a block: its top face centre; for a bowl: its rim centre).
    ``box`` is (row_min, col_min, row_max, col_max) in the rendered image."""
    found: bool
    name: str
    world_xyz: Optional[Vec3]
    top_xyz: Optional[Vec3]
    n_pixels: int
    box: Optional[tuple[int, int, int, int]]
    camera: str
    step: int
    error: str = ""


@dataclass(frozen=True)
class BackProjection(_Result):
    """World point seen at one pixel of a camera image (NaN-free; the sky/background is an error)."""
    world_xyz: Vec3
    pixel: tuple[int, int]
    camera: str
    resolution: int
    step: int
    image_size: tuple[int, int]
    depth_m: float = field(default=math.nan)


RESULT_TYPES = (State, Move, MovePose, Rotation, Gripper, Release, Pick, PolicyRun, Segment, BackProjection)
