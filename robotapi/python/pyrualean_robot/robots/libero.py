"""``make("libero", suite=..., task=..., seed=...)``: a real LIBERO / LIBERO-PRO task (robosuite 1.4 Panda,
OSC_POSE) on CPU, with the original's LiberoRobot API (observation, perception, motion) plus a scripted grasp.
The original's learned VLA calls (``pi0_pick``, ``pi0_doubled``) ask RPent's Pi0.5 server for action chunks
(``vla_endpoint``; see pi05.py) and run them in this simulator; the no-vla primitive set hides them."""

from __future__ import annotations

import math
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence, Union

import numpy as np

from ..base import Robot, TaskInfo, load_guide, tool
from ..errors import ToolError
from ..images import png_bytes
from ..results import Gripper, Move, MovePose, Release, Rotation, State
from . import _libero_sim as sim_mod
from . import pi05
from ._args import _bounded, _positive_int, _vec
from ._libero_sim import LiberoUnavailable  # noqa: F401  (a RobotUnavailable; re-exported for callers)
from .sam3 import Sam3Client

Vec3 = tuple[float, float, float]
XYZ = Union[Sequence[float], np.ndarray]

HIGH_RES = 1024
LIBERO_TYPES = ("standard", "pro")
LOW_RES = 256
ROT_SCALE = 0.5  # OSC_POSE rotation output limit (rad per unit action)
VIEW_CACHE_SIZE = 6  # renders kept between simulator steps (a 1024 px world map is 12 MB)

KNOWLEDGE = load_guide("libero", "libero.md")
KNOWLEDGE_NOVLA = load_guide("libero", "libero-novla.md")


# ----- result types ------------------------------------------------------------------------------------
# Names and fields follow the original's src/pyrualean/libero.py (State, Move, MovePose, Rotation, Gripper and
# Release come from ..results with the same fields plus a few extras); the ones below are LIBERO's own.

@dataclass(frozen=True)
class Pick:
    """Outcome of ``pi0_pick`` (the frozen VLA's grasp) and of the scripted ``pick``.

    success: the grasp heuristic fired. For pi0_pick: the gripper descended by descent_thresh, then rose by
        lift_thresh with gripper_open_thresh <= opening < gripper_closed_thresh (or the task predicate
        fired). For pick: the object rose at least 3 cm with the fingers not fully closed. A hint, not proof:
        confirm with state().gripper_opening and the wrist image.
    chunks_used / max_chunks: VLA action chunks run / allowed (0 / 0 for the scripted pick).
    peak_lift_m: how far the gripper (pi0_pick) or the object (pick) rose after its lowest point.
    min_gripper_opening / final_gripper_opening: finger separation while closing / at the end.
    terminated: the task predicate fired during the pick.
    diagnostics: the heuristic's bookkeeping (thresholds, z extremes; for pick: which phase fell short).
    prompt, object, steps_used, final_eef_pos: the VLA prompt, the object grasped by pick, the control steps
        taken and where the gripper ended."""
    success: bool
    chunks_used: int
    max_chunks: int
    peak_lift_m: float
    min_gripper_opening: float
    final_gripper_opening: float
    terminated: bool
    truncated: bool
    diagnostics: dict
    prompt: str = ""
    object: str = ""
    steps_used: int = 0
    final_eef_pos: Optional[Vec3] = None


@dataclass(frozen=True)
class Contact:
    """Outcome of ``pi0_doubled``. success mirrors LIBERO's task predicate only: for an intermediate contact
    (a knob, a drawer, a door) False does not mean the contact failed; look at the state or an image."""
    success: bool
    chunks_used: int
    max_chunks: int
    terminated: bool
    truncated: bool
    prompt: str = ""
    steps_used: int = 0
    final_eef_pos: Optional[Vec3] = None


@dataclass(frozen=True)
class Segment:
    """Outcome of ``segment``.

    found: a mask was produced (check it before using world_xyz).
    world_xyz: per-axis median world point of the mask's pixels (the visible surface), or None.
    score: mask confidence in [0, 1] (SAM 3's; 1.0 from the simulator's own segmentation), None when not found.
    box: mask bounding box (x0, y0, x1, y1) = (col_min, row_min, col_max, row_max) in image pixels, or None.
    camera / step: the image the mask was taken from (step = recorded step).
    overlay_artifact: name of the saved mask overlay PNG (``artifact(name)`` returns its bytes), or None.
    error: why nothing was found, or None.
    name: the scene object the mask belongs to (one of state().object_names or a fixture).
    top_xyz: centre of the mask's highest visible points (a block's top face, a bowl's rim), or None.
    n_pixels: mask size; also_matches: other scene names the words matched (the nearest one is returned)."""
    found: bool
    world_xyz: Optional[Vec3]
    score: Optional[float]
    box: Optional[tuple[int, int, int, int]]
    camera: str
    step: int
    overlay_artifact: Optional[str] = None
    error: Optional[str] = None
    name: str = ""
    top_xyz: Optional[Vec3] = None
    n_pixels: int = 0
    also_matches: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackProjection:
    """Outcome of ``back_project``: the world point under one pixel. resolution is "high" or "low" (or the
    pixel size asked for); image_size is (height, width); depth_m is the metric depth along the optical axis."""
    world_xyz: Vec3
    pixel: tuple[int, int]
    camera: str
    resolution: str
    step: int
    image_size: tuple[int, int]
    depth_m: float = math.nan


@dataclass(frozen=True)
class RegionCenter:
    """Outcome of ``region_center``.

    center_xyz: midpoint of the window's world x/y extent, with the median z (a container's interior centre).
    median_xyz: per-axis median of the same points (biased towards a rim or an edge).
    n_valid: pixels that survived the depth and z-band filters."""
    center_xyz: Vec3
    median_xyz: Vec3
    n_valid: int
    camera: str
    step: int


RESULT_TYPES: tuple[type, ...] = (State, Move, MovePose, Rotation, Gripper, Release, Pick, Contact, Segment,
                                  BackProjection, RegionCenter)
#: The primitives that advance the simulator (each one records a new step).
STATEFUL_TOOLS = frozenset({"move_to", "move_pose", "rotate_wrist", "rotate_pitch", "set_gripper", "release",
                            "pick", "pi0_pick", "pi0_doubled"})
MAX_PLANAR_MOVE_M = 0.30  # seed: one servo call may travel at most this far in x/y (OSC IK flips beyond)


def _t3(a: np.ndarray) -> Vec3:
    return (float(a[0]), float(a[1]), float(a[2]))


def _yaw(R: np.ndarray) -> float:
    return math.atan2(R[1, 0], R[0, 0])


def _pitch(R: np.ndarray) -> float:
    return math.atan2(R[1, 2], -R[2, 2])


def _rotz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _rotx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def _rotvec(R: np.ndarray) -> np.ndarray:
    """Axis-angle vector of a rotation matrix."""
    from scipy.spatial.transform import Rotation as _R

    return _R.from_matrix(R).as_rotvec()


def _gripper_value(g: float) -> float:
    return _bounded(g, "gripper", -1.0, 1.0, hint=" (OPEN=-1, CLOSE=+1)")


def _positive(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not (
            math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive number, not {v!r}")
    return float(v)


class LiberoRobot(Robot):
    """A Franka Panda in a LIBERO / LIBERO-PRO scene (robosuite, OSC_POSE delta control at 20 Hz).

    Conventions: x/y is the table plane, z up; metres and radians. +y is the robot's left (the right side of
    the agentview image). The arm starts at a home pose above the table, gripper open and pointing down.
    Motions block until reached, stalled or out of steps and return a typed result saying what happened;
    nothing is queued. The gripper command is held for a whole motion: OPEN=-1 (the default, so a carried
    object drops), CLOSE=+1. Every motion call records a new step (0 = the initial scene): state(step),
    image(..., step=...), back_project(..., step=...) read any recorded step. Object poses are never given:
    find things with segment() or back_project() on the agentview (global layout) or wrist (close range)
    camera. The episode succeeds when LIBERO's own goal predicate holds at any step; after that every motion
    raises EpisodeFinished (read-only calls keep working).
    """

    NAME: ClassVar[str] = "libero"
    OPEN: ClassVar[float] = -1.0
    CLOSE: ClassVar[float] = 1.0
    CAMERAS: ClassVar[tuple[str, ...]] = ("agentview", "wrist")
    #: What a moving cell gets back, as the original sends it: both cameras' current high-resolution views
    #: (HIGH_RES square), named like their artifacts, so token counts compare with the paper's.
    ON_MOTION_IMAGES: ClassVar[tuple[str, ...]] = ("agentview_high.png", "wrist_high.png")
    MAX_PLANAR_MOVE_M: ClassVar[float] = MAX_PLANAR_MOVE_M
    #: (camera, resolution) -> artifact name of a recorded image / world map (``artifact(name, step=...)``).
    IMAGE_ARTIFACTS: ClassVar[dict[tuple[str, str], str]] = {
        (c, r): f"{c}_high.png" if r == "high" else f"{c}.png" for c in ("agentview", "wrist") for r in ("high", "low")}
    WORLD_MAP_ARTIFACTS: ClassVar[dict[tuple[str, str], str]] = {
        (c, r): f"{c}_world_high.npz" if r == "high" else f"{c}_world.npz"
        for c in ("agentview", "wrist") for r in ("high", "low")}
    STATEFUL_TOOLS: ClassVar[frozenset[str]] = STATEFUL_TOOLS
    #: The frozen Pi0.5 skills (hidden and refused under the no-VLA primitive set).
    VLA_PRIMITIVES: ClassVar[tuple[str, ...]] = ("pi0_pick", "pi0_doubled")
    #: Sentences about the VLA in the remaining docstrings, trimmed under no-vla (see apiref).
    VLA_REFERENCE_EDITS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("Outcome of ``pi0_pick`` (the frozen VLA's grasp) and of the scripted ``pick``.",
         "Outcome of the scripted ``pick``."),
        ("For pi0_pick: the gripper descended by descent_thresh, then rose by lift_thresh with "
         "gripper_open_thresh <= opening < gripper_closed_thresh (or the task predicate fired). For pick: the",
         "The"),
        ("VLA action chunks run / allowed (0 / 0 for the scripted pick).", "always 0 here."),
        ("how far the gripper (pi0_pick) or the object (pick) rose", "how far the object rose"),
        ("the VLA prompt, the object grasped by pick,", "unused (''), the object grasped,"),
    )
    RESOLUTIONS: ClassVar[dict[str, int]] = {"high": HIGH_RES, "low": LOW_RES}
    KNOWLEDGE: ClassVar[str] = KNOWLEDGE
    KNOWLEDGE_NOVLA: ClassVar[str] = KNOWLEDGE_NOVLA
    CONSTANTS: ClassVar[tuple[str, ...]] = ("OPEN", "CLOSE", "CAMERAS", "ON_MOTION_IMAGES", "MAX_PLANAR_MOVE_M",
                                            "RESOLUTIONS")

    def __init__(self, *, suite: Optional[str] = None, task: Union[int, str, None] = 0, seed: int = 0,
                 workspace: Optional[str] = None, images: str = "on-motion", primitives: str = "full",
                 vla_endpoint: Optional[str] = None, max_env_steps: int = 10000,
                 sam3_endpoint: Optional[str] = None, libero_type: Optional[str] = None):
        suite, index = self._parse_task(suite, task)
        self.libero_type = self._check_libero_type(libero_type, suite)
        # segment()'s masks: RPent's SAM 3 server as in the original, else (privileged) the simulator's own.
        sam3_endpoint = sam3_endpoint or os.environ.get("PYRUALEAN_SAM3_ENDPOINT") or None
        self._sam3 = Sam3Client(sam3_endpoint) if sam3_endpoint else None
        super().__init__(task=f"{suite}/{index}", seed=seed, workspace=workspace, images=images,
                         primitives=primitives, suite=suite, vla_endpoint=vla_endpoint, max_env_steps=max_env_steps)
        self.task_index = index
        self.task_name = f"{suite}/{index}"
        t0 = time.time()
        self._sim = sim_mod.LiberoSim(suite, index, self.seed, max_env_steps=max_env_steps, render_max=HIGH_RES)
        self.boot_s = time.time() - t0
        # Recorded steps (RPent's LIBERO toolkit records one after every primitive call; step 0 = the initial
        # scene): their states, and the MuJoCo state to re-render any of them on demand.
        self._cur: State = self._make_state()
        self._records: list[tuple[State, np.ndarray, int]] = []
        self._record()
        self._artifacts: dict[str, Any] = {}  # segment overlays by name: name -> () -> PNG bytes
        self._views: OrderedDict[tuple, Any] = OrderedDict()  # recent renders (see _view), valid at _views_at
        self._views_at = -1
        # Step 0's high-resolution views are kept: the card shows them and agents map their pixels.
        self._step0 = {c: self._snapshot(c, HIGH_RES) for c in self.CAMERAS}

    #: The paper's operating guides in an RPent checkout (``--guides`` copies them from $RPENT_ROOT).
    RPENT_GUIDES: ClassVar[tuple[str, tuple[str, ...]]] = (
        "robots/libero/guides", ("strict_hybrid_guide.md", "pro_hybrid_guide.md", "env_calibration.md"))

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        super().check_options(options)  # libero_type depends on the suite: __init__ checks it
        v = options.get("sam3_endpoint")
        if isinstance(v, str) and not v.startswith(("http://", "https://")):
            raise ValueError(f"sam3_endpoint={v!r}: want http://host:port")

    @staticmethod
    def _check_libero_type(libero_type: Optional[str], suite: str) -> str:
        """The original's --libero-type (RPent's LIBERO_TYPE): "standard" runs the four LIBERO suites and libero_90,
        "pro" adds LIBERO-PRO's perturbed ones; both come from the one bundled LIBERO-PRO package. Default:
        what the suite needs."""
        pro = suite not in sim_mod.BASE_SUITES + ("libero_90",)
        if libero_type is None:
            return "pro" if pro else "standard"
        if libero_type not in LIBERO_TYPES:
            raise ValueError(f"libero_type must be one of {LIBERO_TYPES}, not {libero_type!r} (LIBERO-Plus is not "
                             "bundled)")
        if pro and libero_type == "standard":
            raise ValueError(f"suite {suite!r} is a LIBERO-PRO suite: pass libero_type='pro' (--libero-type pro)")
        return libero_type

    @staticmethod
    def _parse_task(suite: Optional[str], task: Union[int, str, None]) -> tuple[str, int]:
        """(suite, index) from task = index | "index" | "<suite>/<index>" | a LIBERO task name."""
        if suite is not None and (not isinstance(suite, str) or not suite):
            raise ValueError(f"suite must be a LIBERO suite name, not {suite!r}")
        if task is None:
            task = 0
        if isinstance(task, bool):
            raise ValueError(f"task must be an int index or a task name, not {task!r}")
        if isinstance(task, str) and "/" in task:
            s2, _, rest = task.partition("/")
            if suite is not None and suite != s2:
                raise ValueError(f"task {task!r} names suite {s2!r} but suite={suite!r}")
            suite, task = s2, rest
        suite = suite or "libero_spatial_swap"
        if isinstance(task, (int, np.integer)):
            return suite, int(task)
        if isinstance(task, str) and task.strip().isdigit():
            return suite, int(task)
        names = [t.name for t in sim_mod.suite_tasks(suite)]
        if task in names:
            return suite, names.index(task)
        raise ValueError(f"task {task!r} is neither an index nor a task name of {suite}")

    # ----- base hooks ---------------------------------------------------------------------------------
    def _env_steps(self) -> int:
        return self._sim.steps

    def _solved(self) -> bool:
        return self._sim.success

    def _render_rgb(self, camera: str, size: int) -> np.ndarray:
        return self._sim.render(camera, size, size)

    def _task_language(self) -> str:
        return self._sim.language

    def _object_names(self) -> tuple[str, ...]:
        return self._sim.object_names

    def _episode_facts(self) -> dict:
        pos, _, _, _ = self._sim.eef()
        return {"suite": self.suite, "libero_type": self.libero_type, "task_index": self.task_index,
                "task_name": self._sim.task_name,
                # Where segment()'s masks come from: "sam3" (the original's) or "simulator-masks" (privileged).
                "perception": "sam3" if self._sam3 is not None else "simulator-masks",
                "init_state_index": self._sim.init_index, "fixtures": list(self._sim.fixture_names),
                "cameras": list(self.CAMERAS), "image_resolutions": dict(self.RESOLUTIONS),
                "suite_step_cap": sim_mod.SUITE_STEP_CAPS.get(self._base_suite()),
                "eef_home_z": round(float(pos[2]), 3), "boot_s": round(self.boot_s, 2),
                "gripper_at_start": "open, pointing straight down (eef_yaw ~0, eef_pitch ~0)",
                "card_images": f"agentview_high and wrist_high ({HIGH_RES}x{HIGH_RES}) are step 0 of the run, what "
                               "robo.image('agentview') / robo.image('wrist') return before any motion; "
                               "robo.back_project(row, col, step=0) maps their pixels to world xyz"}

    def _base_suite(self) -> str:
        for b in sim_mod.BASE_SUITES + ("libero_90",):
            if self.suite == b or (self.suite or "").startswith(b + "_"):
                return b
        return self.suite or ""

    def _on_motion_images(self) -> list[tuple[str, np.ndarray]]:
        by_name = {self.IMAGE_ARTIFACTS[(c, "high")]: c for c in self.CAMERAS}
        return [(n, self._view(by_name[n], HIGH_RES, -1, "rgb")) for n in self.ON_MOTION_IMAGES]

    def _card_images(self) -> dict[str, bytes]:
        # The original's card images (hosts/rpent_libero.py CARD_IMAGES): both cameras at step 0, 1024 px.
        return {f"{c}_high": png_bytes(self._step0[c]["rgb"]) for c in self.CAMERAS}

    @classmethod
    def tasks(cls, suites: Sequence[str] = sim_mod.SUITES) -> list[TaskInfo]:
        """Every task of the bundled suites: name '<suite>/<index>', family = suite (no simulator boot).
        solution is the repo-relative reference solution (robotapi/solutions/libero/<suite>/<index>.py) or ''."""
        from ..solutions import solution_path

        rows = []
        for s in suites:
            for i, language in enumerate(sim_mod.suite_languages(s)):
                name = f"{s}/{i}"
                sol = f"robotapi/solutions/libero/{name}.py" if os.path.isfile(solution_path("libero", name)) else ""
                rows.append(TaskInfo(name=name, family=s, instruction=language, solution=sol))
        return rows

    def close(self) -> None:
        """Free the simulator and its renderers."""
        self._sim.close()

    # ----- state ---------------------------------------------------------------------------------------
    def _make_state(self) -> State:
        pos, quat, rot, gq = self._sim.eef()
        return State(step=len(getattr(self, "_records", ())), task=self._sim.language, eef_pos=_t3(pos),
                     eef_quat=(float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
                     gripper_qpos=(float(gq[0]), float(gq[1])), gripper_opening=float(abs(gq[0]) + abs(gq[1])),
                     object_names=self._sim.object_names, terminated=self._sim.success,
                     truncated=self._sim.truncated, eef_yaw=_yaw(rot), eef_pitch=_pitch(rot))

    def _record(self) -> None:
        """Close a recorded step: the state now, with its step index, and the physics to re-render it."""
        self._cur = self._make_state()
        self._records.append((self._cur, self._sim.physics_state(), self._sim.steps))

    def _run_tool(self, fn: Any, sig: Any, stateful: bool, vla: bool, args: tuple, kwargs: dict,
                  privileged: bool = False) -> Any:
        # Every outermost primitive that moved the simulator records one step, as RPent's toolkit does after
        # each primitive (tools that failed before moving anything record nothing).
        outer = self._depth == 0
        steps0 = self._sim.steps
        try:
            return super()._run_tool(fn, sig, stateful, vla, args, kwargs, privileged)
        finally:
            if outer and stateful and self._sim.steps != steps0:
                self._record()

    def _raw_state(self) -> State:
        return self._cur

    @tool(stateful=False)
    def state(self, step: int = -1) -> State:
        """The robot state of recorded step `step` (-1 = now, 0 = the initial scene; each motion call
        records one step). eef_pos is the gripper position [x, y, z] in metres; eef_quat is x, y, z, w;
        eef_yaw = atan2(R10, R00) (as rotate_wrist uses it); eef_pitch = atan2(R12, -R22) (0 = pointing
        down); gripper_opening = |q0| + |q1| (~0.08 open, ~0 closed on nothing, 0.01-0.05 holding something);
        object_names are the movable objects (no poses); terminated = LIBERO's predicate fired, truncated =
        the step budget is spent. env_steps counts the simulator's control steps."""
        idx = self._step_index(step)
        return self._cur if idx == len(self._records) - 1 else self._records[idx][0]

    def _step_index(self, step: int) -> int:
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise ValueError(f"step must be an int, not {step!r}")
        n = len(self._records)
        if step == -1:
            return n - 1
        if not 0 <= step < n:
            raise ValueError(f"step {step} out of range: recorded steps are 0..{n - 1} (or -1 for the latest)")
        return int(step)

    # ----- images and perception -----------------------------------------------------------------------------
    def _res(self, resolution: Union[str, int]) -> int:
        if isinstance(resolution, str) and resolution in self.RESOLUTIONS:
            return self.RESOLUTIONS[resolution]
        if isinstance(resolution, (int, np.integer)) and not isinstance(resolution, bool) and 32 <= resolution <= HIGH_RES:
            return int(resolution)
        raise ValueError(f"resolution must be 'high' ({HIGH_RES}), 'low' ({LOW_RES}) or an int 32..{HIGH_RES}, "
                         f"not {resolution!r}")

    def _snapshot(self, camera: str, res: int) -> dict:
        return {"rgb": self._sim.render(camera, res, res), "world": self._sim.world_map(camera, res, res),
                "seg": self._sim.render(camera, res, res, "seg"), "cam": self._sim.camera(camera, res, res)}

    def _view(self, camera: str, res: int, step: int, need: str) -> Any:
        """rgb / world / seg / depth / cam of a camera at a recorded step. The latest step is the live scene;
        an earlier one is re-rendered from its saved physics state (step 0 at 1024 px is kept as rendered).
        Callers must not modify what they get: the last few renders are reused until the simulator steps
        (an agent probing many pixels of one image would otherwise re-render it for every call)."""
        self._check_camera(camera)
        idx = self._step_index(step)
        if idx == 0 and res == HIGH_RES and need in self._step0[camera]:
            return self._step0[camera][need]
        if self._views_at != self._sim.steps:
            self._views.clear()
            self._views_at = self._sim.steps
        key = (idx, camera, res, need)
        if key in self._views:
            self._views.move_to_end(key)
            return self._views[key]
        past = None if idx == len(self._records) - 1 else self._records[idx][1]
        with self._sim.showing(past):
            if need == "rgb":
                out = self._sim.render(camera, res, res)
            elif need == "world":
                out = self._sim.world_map(camera, res, res)
            elif need == "seg":
                out = self._sim.render(camera, res, res, "seg")
            elif need == "depth":
                out = self._sim.render(camera, res, res, "depth")
            else:
                out = self._sim.camera(camera, res, res)
        self._views[key] = out
        while len(self._views) > VIEW_CACHE_SIZE:
            self._views.popitem(last=False)
        return out

    @staticmethod
    def _res_name(res: int) -> str:
        return {HIGH_RES: "high", LOW_RES: "low"}.get(res, str(res))

    @tool(stateful=False)
    def image(self, camera: str = "agentview", *, resolution: Union[str, int] = "high", step: int = -1) -> np.ndarray:
        """A camera image as an (H, W, 3) uint8 RGB array: "agentview" (fixed global view: which object is
        where) or "wrist" (on the gripper: close-range geometry); resolution "high" (1024 px) or "low"
        (256 px); step = recorded step (-1 latest, 0 = the task card's images). Pixels are (row, col), row 0 at
        the top: pass the same camera and resolution to back_project. Not shown to you: use show(camera)."""
        return self._view(camera, self._res(resolution), step, "rgb").copy()

    @tool(stateful=False)
    def world_map(self, camera: str = "agentview", *, resolution: Union[str, int] = "high",
                  step: int = -1) -> np.ndarray:
        """Per-pixel world coordinates (H, W, 3) float32 of image(camera, resolution=..., step=...):
        world_map[row, col] is the [x, y, z] of the surface seen there (NaN where nothing is hit). This is what
        back_project reads; load it to reason about many pixels at once."""
        return self._view(camera, self._res(resolution), step, "world").copy()

    @tool(stateful=False)
    def artifact(self, name: str, *, step: int = -1) -> bytes:
        """Raw bytes of a recorded artifact (advanced): "agentview_high.png", "agentview.png" (256 px),
        "wrist_high.png", "wrist.png", "<camera>_world[_high].npz" (world map, array "array"),
        "<camera>_depth[_high].npz" (metric depth), or the overlay_artifact of a segment. ToolError if unknown."""
        if not isinstance(name, str):
            raise ValueError(f"name must be an artifact name, not {name!r}")
        if name in self._artifacts:
            return self._artifacts[name]()
        stem, dot, ext = name.rpartition(".")
        high = stem.endswith("_high")
        stem = stem[: -len("_high")] if high else stem
        camera, _, kind = stem.partition("_")
        res = HIGH_RES if high else LOW_RES
        if camera in self.CAMERAS and (kind, ext) in (("", "png"), ("world", "npz"), ("depth", "npz")):
            if ext == "png":
                return png_bytes(self._view(camera, res, step, "rgb"))
            import io

            buf = io.BytesIO()
            np.savez_compressed(buf, array=self._view(camera, res, step, kind))
            return buf.getvalue()
        raise ToolError("artifact", f"no artifact {name!r}; names: {', '.join(sorted(self.IMAGE_ARTIFACTS.values()))}, "
                                    f"<camera>_world[_high].npz, <camera>_depth[_high].npz, segment overlays")

    @tool(stateful=False)
    def camera_meta(self, camera: str = "agentview", *, resolution: Union[str, int] = "low",
                    step: int = -1) -> dict:
        """Camera calibration of image(camera, resolution=..., step=...), by default of the 256 px image as
        RPent's camera_meta.json (pass resolution="high" for 1024 px pixels): intrinsic_K (3x3 pixels),
        extrinsic_cam2world (4x4, OpenCV camera axes: x right, y down, z forward, so a pixel (row, col) at depth
        d is inv(K) @ [col, row, 1] * d in the camera frame), extrinsic_cv (its inverse, world->camera),
        cam2world_gl (OpenGL axes), width, height, fovy_deg. The wrist camera moves: its meta is per step."""
        cm = self._view(camera, self._res(resolution), step, "cam")
        w2c = cm.extrinsic_cv()
        return {"camera": camera, "step": self._step_index(step), "width": cm.width, "height": cm.height,
                "fovy_deg": cm.fovy_deg, "intrinsic_K": cm.intrinsic().tolist(),
                "extrinsic_cam2world": np.linalg.inv(w2c).tolist(), "extrinsic_cv": w2c.tolist(),
                "cam2world_gl": cm.cam2world_gl().tolist()}

    @tool(stateful=False)
    def show(self, camera: str = "agentview") -> None:
        """Attach the camera's current image to the feedback of this turn, at its high resolution (1024 px, as
        the motion images: "<camera>_high.png"). Images are not returned automatically: call show("agentview")
        or show("wrist") when you need to look before writing the next turn. Costs tokens: look only when a
        decision depends on it."""
        self._check_camera(camera)
        self._emit_image(self._render_rgb(camera, HIGH_RES), f"{camera}_high.png", "show")
        self._shown.append(camera)

    @tool(stateful=False)
    def back_project(self, row: int, col: int, *, camera: str = "agentview", resolution: Union[str, int] = "high",
                     step: int = -1) -> BackProjection:
        """The world [x, y, z] of the surface seen at pixel (row, col) of image(camera, resolution=...,
        step=...) (row 0 = top). step=0 maps the task card's images. Sample several pixels firmly on an
        object's top surface and take the median; pixels on thin rims, edges or the gap to the table hit
        what lies behind. ToolError if the pixel is outside the image or sees nothing."""
        res = self._res(resolution)
        for v, n in ((row, "row"), (col, "col")):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer, float, np.floating)):
                raise ValueError(f"{n} must be a pixel index, not {v!r}")
        r, c = int(round(row)), int(round(col))
        if not (0 <= r < res and 0 <= c < res):
            raise ToolError("back_project", f"pixel ({r}, {c}) out of bounds; {camera} image is {res}x{res}")
        wm = self._view(camera, res, step, "world")
        p = wm[r, c]
        if not np.all(np.isfinite(p)):
            raise ToolError("back_project", f"no valid depth at {camera} pixel ({r}, {c}); pick a different pixel")
        cm = self._view(camera, res, step, "cam")
        depth = float(np.dot(cm.xmat[:, 2] * -1, p - cm.pos))
        return BackProjection(world_xyz=_t3(p), pixel=(r, c), camera=camera, resolution=self._res_name(res),
                              step=self._step_index(step), image_size=(res, res), depth_m=depth)

    @tool(stateful=False)
    def region_center(self, row_range: Sequence[int], col_range: Sequence[int], *, camera: str = "agentview",
                      resolution: Union[str, int] = "high", z_min: Optional[float] = None,
                      z_max: Optional[float] = None, step: int = -1) -> RegionCenter:
        """World centre of the pixel window rows [r0, r1) x cols [c0, c1) (e.g. a container's cavity): the
        midpoint of the points' world x/y extent with their median z, which a mask median (rim-biased) is
        not. z_min / z_max keep only points inside a world-z band (e.g. a basket's floor). ToolError when the
        window has too few valid points."""
        res = self._res(resolution)
        try:
            r0, r1 = (int(v) for v in row_range)
            c0, c1 = (int(v) for v in col_range)
        except (TypeError, ValueError):
            raise ValueError("row_range and col_range must be (start, stop) pairs of ints") from None
        if not (0 <= r0 < r1 <= res and 0 <= c0 < c1 <= res):
            raise ToolError("region_center", f"window rows {r0}:{r1} cols {c0}:{c1} is empty or outside the "
                                             f"{res}x{res} image")
        pts = self._view(camera, res, step, "world")[r0:r1, c0:c1].reshape(-1, 3)
        pts = pts[np.isfinite(pts).all(axis=1)]
        if z_min is not None:
            pts = pts[pts[:, 2] >= float(z_min)]
        if z_max is not None:
            pts = pts[pts[:, 2] <= float(z_max)]
        if len(pts) < 10:
            raise ToolError("region_center", f"too few valid points in the window ({len(pts)}); widen it or "
                                             "relax z_min / z_max")
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        med = np.median(pts, axis=0)
        centre = np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, med[2]])
        return RegionCenter(_t3(centre), _t3(med), int(len(pts)), camera, self._step_index(step))

    @tool(stateful=False)
    def segment(self, prompt: Optional[str] = None, *, camera: str = "agentview", point: Optional[Sequence[int]] = None,
                min_score: float = 0.2, resolution: Union[str, int] = "high", step: int = -1) -> Segment:
        """Locate an object in image(camera, resolution=..., step=...) and return its world position. Give
        `prompt` (words: "black bowl", "plate", or an exact name from state().object_names) and/or `point`, a
        pixel (row, col) on it. Masks come from a SAM 3 server when the run has one (the words win over the
        point; score is SAM 3's, min_score its threshold), else from the simulator's segmentation (exact;
        score 1.0); the task card's facts say which ("perception"). world_xyz is
        the median of the visible surface (use its x/y; take z from the resting height or top_xyz); top_xyz
        is the centre of its highest visible points. When the words match several objects the one nearest
        `point` (else the first) is returned and also_matches names the others. Check found first; camera
        "wrist" refines once the gripper is 15-20 cm above the target."""
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise ValueError(f"prompt must be non-empty words, not {prompt!r}")
        if prompt is None and point is None:
            raise ValueError("give a prompt, a point (row, col), or both")
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1:
            raise ValueError(f"min_score must be in [0, 1], not {min_score!r}")
        if self._sam3 is not None:
            return self._segment_sam3(prompt, camera, point, self._res(resolution), step, float(min_score))
        return self._segment_impl(prompt, camera, point, self._res(resolution), step)

    def _segment_impl(self, prompt: Optional[str], camera: str, point: Optional[Sequence[int]], res: int,
                      step: int) -> Segment:
        seg = self._view(camera, res, step, "seg")
        idx = self._step_index(step)
        pt = self._point(point, res)
        if prompt is not None:
            cands = self._sim.match_names(prompt)
        else:
            cands = [n for n in self._sim.scene_names() if self._sim.mask(n, seg)[pt]]  # type: ignore[index]
        if not cands:
            what = f"nothing matches {prompt!r}" if prompt is not None else f"no object at pixel {pt}"
            return Segment(found=False, world_xyz=None, score=None, box=None, camera=camera, step=idx,
                           error=f"{what}; objects: {', '.join(self._sim.object_names)}")
        scored = []
        for n in cands:
            m = self._sim.mask(n, seg)
            if not m.any():
                continue
            rows, cols = np.nonzero(m)
            d = 0.0 if pt is None else float(np.min((rows - pt[0]) ** 2 + (cols - pt[1]) ** 2))
            scored.append((d, n, m))
        if not scored:
            return Segment(found=False, world_xyz=None, score=None, box=None, camera=camera, step=idx,
                           error=f"{', '.join(cands)} not visible from {camera}", name=cands[0])
        scored.sort(key=lambda x: x[0])
        _, name, m = scored[0]
        return self._mask_segment(m, camera, res, step, 1.0, name=name, also=tuple(n for _, n, _ in scored[1:]))

    def _segment_sam3(self, prompt: Optional[str], camera: str, point: Optional[Sequence[int]], res: int,
                      step: int, min_score: float) -> Segment:
        """The original's perception: the image goes to the SAM 3 server, its top mask is back-projected here.
        SAM 3 takes one prompt: the words when given, else the point."""
        assert self._sam3 is not None
        idx = self._step_index(step)
        pt = self._point(point, res)
        rgb = self._view(camera, res, step, "rgb")
        text = prompt.strip() if prompt is not None else None
        ans = self._sam3.segment(png_bytes(rgb), rgb.shape[:2], text_prompt=text,
                                 point=None if text else pt, min_score=min_score)
        if not ans.found or ans.mask is None:
            return Segment(found=False, world_xyz=None, score=ans.score, box=None, camera=camera, step=idx,
                           error=f"SAM 3: {ans.reason}")
        return self._mask_segment(ans.mask, camera, res, step, float(ans.score if ans.score is not None else 0.0))

    @staticmethod
    def _point(point: Optional[Sequence[int]], res: int) -> Optional[tuple[int, int]]:
        if point is None:
            return None
        try:
            pr, pc = (int(v) for v in point)
        except (TypeError, ValueError):
            raise ValueError(f"point must be (row, col), not {point!r}") from None
        if not (0 <= pr < res and 0 <= pc < res):
            raise ValueError(f"point ({pr}, {pc}) is outside the {res}x{res} image")
        return pr, pc

    def _mask_segment(self, m: np.ndarray, camera: str, res: int, step: int, score: float, *, name: str = "",
                      also: tuple[str, ...] = ()) -> Segment:
        """A found mask as a Segment: back-projected through the world map, its overlay kept as an artifact."""
        idx = self._step_index(step)
        wm = self._view(camera, res, step, "world")
        pts = wm[m]
        pts = pts[np.isfinite(pts).all(axis=1)]
        rows, cols = np.nonzero(m)
        box = (int(cols.min()), int(rows.min()), int(cols.max()), int(rows.max()))
        overlay = self._overlay(camera, res, step, idx, m)
        if len(pts) < 10:  # RPent's _mask_to_world needs 10 valid depth pixels
            return Segment(found=True, world_xyz=None, score=score, box=box, camera=camera, step=idx,
                           overlay_artifact=overlay, error=f"too few valid depth pixels ({len(pts)})", name=name,
                           n_pixels=int(m.sum()), also_matches=also)
        top = pts[pts[:, 2] >= pts[:, 2].max() - 0.01]
        return Segment(found=True, world_xyz=_t3(np.median(pts, axis=0)), score=score, box=box, camera=camera,
                       step=idx, overlay_artifact=overlay, error=None, name=name, top_xyz=_t3(top.mean(axis=0)),
                       n_pixels=int(m.sum()), also_matches=also)

    def _overlay(self, camera: str, res: int, step: int, idx: int, mask: np.ndarray) -> str:
        """Keep the image with the mask tinted red as an artifact (RPent's segment_overlay_NN_II.png)."""
        def build() -> bytes:  # made when asked for: most overlays are never looked at
            img = self._view(camera, res, idx, "rgb").astype(np.float32)
            img[mask] = 0.55 * img[mask] + 0.45 * np.array([255.0, 0.0, 0.0])
            return png_bytes(img.astype(np.uint8))

        k = sum(1 for n in self._artifacts if n.startswith(f"segment_overlay_{idx:02d}_"))
        name = f"segment_overlay_{idx:02d}_{k:02d}.png"
        self._artifacts[name] = build
        return name

    # ----- simulator stepping ----------------------------------------------------------------------------
    def _step(self, action: np.ndarray) -> bool:
        """One control step; False when the episode ended (success or step budget) and motion must stop."""
        if self._sim.success:
            self._mark_terminated()
            return False
        if self._sim.steps >= self.max_env_steps:
            self._mark_truncated()
            return False
        self._sim.step(action)
        self._cur = self._make_state()
        if self._sim.success:
            self._mark_terminated()
            return False
        if self._sim.steps >= self.max_env_steps:
            self._mark_truncated()
            return False
        return True

    def _ended(self) -> tuple[bool, bool]:
        return self._sim.success, (self._sim.steps >= self.max_env_steps and not self._sim.success)

    def _servo(self, target: np.ndarray, R_target: np.ndarray, gripper: float, *, step_clip: float,
               rot_clip: float, tol: float, ori_tol: float, max_steps: int, action_scale: float,
               stall_steps: int = 12) -> tuple[int, bool]:
        """Delta-EEF servo (RPent's move_to): returns (steps_used, reached)."""
        used = 0
        best, since_best = math.inf, 0
        for used in range(1, max_steps + 1):
            pos, _, R, _ = self._sim.eef()
            d = target - pos
            err = _rotvec(R_target @ R.T)
            dist = float(np.linalg.norm(d))
            if dist <= tol and float(np.linalg.norm(err)) <= ori_tol:
                return used - 1, True
            # Stall: no 2 mm of progress in stall_steps steps means contact or a joint limit.
            if dist < best - 0.002:
                best, since_best = dist, 0
            else:
                since_best += 1
                if since_best >= stall_steps and dist > tol:
                    return used - 1, False
            a = np.zeros(7)
            a[:3] = np.clip(d, -step_clip, step_clip) / action_scale
            a[3:6] = np.clip(err, -rot_clip, rot_clip) / ROT_SCALE
            a[6] = gripper
            if not self._step(a):
                pos, _, R, _ = self._sim.eef()
                ok = float(np.linalg.norm(target - pos)) <= tol
                return used, ok
        pos, _, R, _ = self._sim.eef()
        return max_steps, bool(np.linalg.norm(target - pos) <= tol
                               and np.linalg.norm(_rotvec(R_target @ R.T)) <= ori_tol)

    # ----- motion ------------------------------------------------------------------------------------------
    @tool(stateful=True)
    def move_to(self, xyz: XYZ, gripper: float = -1.0, *, tol: float = 0.012, step_clip: float = 0.025,
                max_steps: int = 80, target_yaw: Optional[float] = None, yaw_step_clip: float = 0.10,
                action_scale: float = 0.05) -> Move:
        """Servo the gripper to world point xyz [x, y, z] (metres) in a straight line, holding `gripper`
        (-1 open, +1 closed) the whole way and keeping the current orientation (or turning to `target_yaw`,
        world yaw in radians, at most yaw_step_clip per step). At most MAX_PLANAR_MOVE_M (0.30 m) in x/y per
        call (ValueError: split it into 2-3 waypoints at carrying height). tol: stop within this distance;
        step_clip: per-step travel cap (0.025 empty or a box, 0.015 cans, 0.012 tall bottles or fine
        approaches); max_steps: control-step budget; action_scale: OSC scale, leave it. reached is
        final_dist_m <= tol: False means the servo stalled (IK limit, contact, budget; it also stops early
        when it makes no progress for 12 steps) - re-plan instead of assuming you arrived."""
        target = _vec(xyz, 3, "xyz")
        g = _gripper_value(gripper)
        tol, step_clip, action_scale = (_positive(tol, "tol"), _positive(step_clip, "step_clip"),
                                        _positive(action_scale, "action_scale"))
        max_steps = _positive_int(max_steps, "max_steps", 2000)
        pos, _, R, _ = self._sim.eef()
        planar = float(np.linalg.norm(target[:2] - pos[:2]))
        if planar > self.MAX_PLANAR_MOVE_M + 1e-9:
            raise ValueError(f"planar move of {planar:.3f} m exceeds {self.MAX_PLANAR_MOVE_M} m; split it into "
                             "waypoints at carrying height")
        R_t = R if target_yaw is None else _rotz(_wrap(float(target_yaw) - _yaw(R))) @ R
        used, reached = self._servo(target, R_t, g, step_clip=step_clip, rot_clip=_positive(yaw_step_clip,
                                    "yaw_step_clip"), tol=tol, ori_tol=math.inf if target_yaw is None else 0.05,
                                    max_steps=max_steps, action_scale=action_scale)
        pos, _, _, _ = self._sim.eef()
        term, trunc = self._ended()
        dist = float(np.linalg.norm(target - pos))
        return Move(target_xyz=_t3(target), final_eef_pos=_t3(pos), final_dist_m=dist, reached=dist <= tol,
                    steps_used=used, max_steps=max_steps, terminated=term, truncated=trunc)

    @tool(stateful=True)
    def move_pose(self, xyz: XYZ, *, target_pitch: Optional[float] = None, target_yaw: Optional[float] = None,
                  gripper: float = -1.0, step_clip: float = 0.02, pitch_step: float = 0.08,
                  yaw_step: float = 0.08, tol: float = 0.012, ori_tol: float = 0.05, max_steps: int = 150,
                  action_scale: float = 0.05) -> MovePose:
        """Servo position and wrist orientation together: move to xyz while turning the gripper to
        target_pitch / target_yaw (radians; pitch 0 = pointing down, yaw as state().eef_yaw; an unset angle
        keeps its current value). Use it where move_to stalls short of a low or recessed target (cabinet
        fronts, microwave cavities): co-varying tilt and position threads the IK singularity a fixed
        gripper-down servo hits. gripper defaults to open: pass +1 while holding. Same 0.30 m planar limit.
        reached = position within tol (orientation error is reported apart, in final_ori_err)."""
        target = _vec(xyz, 3, "xyz")
        g = _gripper_value(gripper)
        max_steps = _positive_int(max_steps, "max_steps", 2000)
        pos, _, R, _ = self._sim.eef()
        planar = float(np.linalg.norm(target[:2] - pos[:2]))
        if planar > self.MAX_PLANAR_MOVE_M + 1e-9:
            raise ValueError(f"planar move of {planar:.3f} m exceeds {self.MAX_PLANAR_MOVE_M} m; split it into "
                             "waypoints at carrying height")
        yaw = _yaw(R) if target_yaw is None else float(target_yaw)
        pitch = _pitch(R) if target_pitch is None else float(target_pitch)
        if not (math.isfinite(yaw) and math.isfinite(pitch)):
            raise ValueError("target_pitch/target_yaw must be finite numbers")
        R_t = self._pose_matrix(yaw, pitch)
        used, reached = self._servo(target, R_t, g, step_clip=_positive(step_clip, "step_clip"),
                                    rot_clip=max(_positive(pitch_step, "pitch_step"), _positive(yaw_step, "yaw_step")),
                                    tol=_positive(tol, "tol"), ori_tol=_positive(ori_tol, "ori_tol"),
                                    max_steps=max_steps, action_scale=_positive(action_scale, "action_scale"))
        pos, _, R, _ = self._sim.eef()
        term, trunc = self._ended()
        dist = float(np.linalg.norm(target - pos))
        return MovePose(target_xyz=_t3(target), final_eef_pos=_t3(pos), final_dist_m=dist, final_pitch=_pitch(R),
                        final_yaw=_yaw(R), final_ori_err=float(np.linalg.norm(_rotvec(R_t @ R.T))),
                        reached=dist <= float(tol),
                        steps_used=used, max_steps=max_steps, terminated=term, truncated=trunc)

    def _pose_matrix(self, yaw: float, pitch: float) -> np.ndarray:
        """Gripper-down home orientation turned by yaw about world z and tilted by pitch about its x axis."""
        R_home = np.diag([1.0, -1.0, -1.0])
        return _rotz(yaw) @ R_home @ _rotx(pitch)

    def _rotate(self, which: str, target: Optional[float], delta: Optional[float], gripper: float,
                max_steps: int, tol: float, step_clip: float) -> Rotation:
        if (target is None) == (delta is None):
            raise ValueError(f"give exactly one of target_{which} or delta_{which}")
        val = target if target is not None else delta
        if isinstance(val, bool) or not isinstance(val, (int, float, np.floating, np.integer)) or not math.isfinite(val):
            raise ValueError(f"{which} angle must be a finite number of radians, not {val!r}")
        g = _gripper_value(gripper)
        max_steps = _positive_int(max_steps, "max_steps", 2000)
        pos, _, R, _ = self._sim.eef()
        get = _yaw if which == "yaw" else _pitch
        start = get(R)
        goal = float(target) if target is not None else start + float(delta)
        goal = _wrap(goal)
        if which == "yaw":
            R_t = _rotz(_wrap(goal - start)) @ R
        else:
            R_t = self._pose_matrix(_yaw(R), goal)
        used, reached = self._servo(pos, R_t, g, step_clip=0.02, rot_clip=_positive(step_clip, "step_clip"),
                                    tol=0.02, ori_tol=_positive(tol, "tol"), max_steps=max_steps,
                                    action_scale=0.05)
        _, _, R, _ = self._sim.eef()
        final = get(R)
        term, trunc = self._ended()
        err = _wrap(goal - final)  # signed, target minus final (RPent's final_err)
        return Rotation(start=start, target=goal, final=final, final_err=err,
                        reached=abs(err) <= float(tol), steps_used=used, max_steps=max_steps, terminated=term, truncated=trunc)

    @tool(stateful=True)
    def rotate_wrist(self, *, target_yaw: Optional[float] = None, delta_yaw: Optional[float] = None,
                     gripper: float = 1.0, max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.10) -> Rotation:
        """Rotate the gripper about the world z axis in place: exactly one of target_yaw (absolute) or
        delta_yaw (relative), radians; state().eef_yaw reads the current yaw. The gripper is held at `gripper`
        (default +1 closed, so a held object stays held). reached = |final_err| <= tol."""
        return self._rotate("yaw", target_yaw, delta_yaw, gripper, max_steps, tol, step_clip)

    @tool(stateful=True)
    def rotate_pitch(self, *, target_pitch: Optional[float] = None, delta_pitch: Optional[float] = None,
                     gripper: float = 1.0, max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.10) -> Rotation:
        """Tilt the gripper about the world x axis in place, keeping position and yaw: exactly one of
        target_pitch or delta_pitch, radians. Pitch 0 points straight down, +pi/2 along world +y, -pi/2 along
        -y: use it before threading into an opening whose front faces along y. Gripper held as in
        rotate_wrist (default +1)."""
        return self._rotate("pitch", target_pitch, delta_pitch, gripper, max_steps, tol, step_clip)

    def _hold(self, gripper: float, steps: int) -> int:
        pos, _, R, _ = self._sim.eef()
        used = 0
        for used in range(1, steps + 1):
            p, _, Rc, _ = self._sim.eef()
            a = np.zeros(7)
            a[:3] = np.clip(pos - p, -0.02, 0.02) / 0.05
            a[3:6] = np.clip(_rotvec(R @ Rc.T), -0.1, 0.1) / ROT_SCALE
            a[6] = gripper
            if not self._step(a):
                break
        return used

    @tool(stateful=True)
    def set_gripper(self, gripper: float, steps: int = 5) -> Gripper:
        """Hold the current pose and drive the gripper (-1 open .. +1 closed) for `steps` control steps.
        set_gripper(+1, steps=8) right after a grasp firms the grip before carrying (steps <= 5 for a
        laterally weak can)."""
        g = _gripper_value(gripper)
        steps = _positive_int(steps, "steps", 500)
        used = self._hold(g, steps)
        term, trunc = self._ended()
        return Gripper(gripper=g, steps=used, gripper_opening=self._cur.gripper_opening,
                       terminated=term, truncated=trunc)

    @tool(stateful=True)
    def release(self, max_steps: int = 20) -> Release:
        """Open the gripper in place for max_steps control steps and let go (RPent's release); returns as soon
        as the task predicate fires (terminated), so a successful placement usually ends the episode here."""
        max_steps = _positive_int(max_steps, "max_steps", 500)
        start = self._cur.gripper_opening
        peak, used = start, 0
        for used in range(1, max_steps + 1):
            if self._hold(-1.0, 1) < 1:
                break
            peak = max(peak, self._cur.gripper_opening)
            if self.done:
                break
        term, trunc = self._ended()
        return Release(steps_used=used, start_gripper_opening=start, peak_gripper_opening=peak,
                       final_gripper_opening=self._cur.gripper_opening, terminated=term, truncated=trunc)

    @tool(stateful=True, privileged=True)
    def pick(self, target: Union[str, XYZ], *, approach_z: float = 0.10, lift_m: float = 0.10,
              target_yaw: Optional[float] = None, max_steps: int = 300) -> Pick:
        """Scripted top-down grasp (no learned policy; privileged: it reads the objects' true poses, so the
        paper's primitive set has no pick): `target` is an object name/words
        (located with segment() on the agentview camera) or a world point to grasp at. Opens, moves
        approach_z above, descends, closes, and lifts by lift_m with the gripper closed. Bowls are taken by
        the rim. Returns a Pick (chunks_used 0): success = the object rose at least 3 cm and the fingers are
        not fully closed; diagnostics["why"] says what fell short. ToolError when the object is not visible."""
        if isinstance(target, str):
            seg = self._segment_impl(target, "agentview", None, HIGH_RES, -1)
            if not seg.found or seg.top_xyz is None or seg.world_xyz is None:
                raise ToolError("pick", f"cannot see {target!r}: {seg.error or 'not found'}")
            name = seg.name
            point = self._grasp_point(name, np.array(seg.top_xyz), np.array(seg.world_xyz))
        else:
            point, name = _vec(target, 3, "target"), ""
        approach_z = _positive(approach_z, "approach_z")
        lift_m = _positive(lift_m, "lift_m")
        max_steps = _positive_int(max_steps, "max_steps", 2000)
        steps0 = self._sim.steps
        pos, _, R, _ = self._sim.eef()
        if float(np.linalg.norm(point[:2] - pos[:2])) > self.MAX_PLANAR_MOVE_M + 0.1:
            raise ValueError(f"grasp point {np.round(point, 3).tolist()} is too far from the gripper "
                             f"({np.linalg.norm(point[:2] - pos[:2]):.2f} m in x/y); move closer first")
        obj_z0 = self._object_z(name)
        if target_yaw is not None:
            turn = _wrap(float(target_yaw) - _yaw(R))
        elif name and "bowl" not in name:
            turn = self._narrow_turn(name, R)  # close the fingers across the object's narrow side
        else:
            turn = 0.0
        R_t = _rotz(turn) @ R

        def budget() -> int:
            return max(1, max_steps - (self._sim.steps - steps0))

        above = point + np.array([0, 0, approach_z])
        above[2] = max(above[2], pos[2] - 0.05) if pos[2] > point[2] + approach_z else above[2]
        # Travel high, then descend: at most 0.30 m per leg, like the agent's own moves.
        legs = max(1, int(math.ceil(np.linalg.norm(above[:2] - pos[:2]) / 0.28)))
        for k in range(1, legs + 1):
            wp = pos + (above - pos) * (k / legs)
            self._servo(wp, R_t, -1.0, step_clip=0.025, rot_clip=0.1, tol=0.012, ori_tol=0.08,
                        max_steps=min(120, budget()), action_scale=0.05)
            if self.done:
                break
        if not self.done:
            self._servo(point, R_t, -1.0, step_clip=0.015, rot_clip=0.1, tol=0.008, ori_tol=math.inf,
                        max_steps=min(80, budget()), action_scale=0.05)
        if not self.done:
            self._hold(1.0, 10)
        min_open = self._cur.gripper_opening
        peak = 0.0
        if not self.done:
            p, _, _, _ = self._sim.eef()
            self._servo(p + np.array([0, 0, lift_m]), R_t, 1.0, step_clip=0.02, rot_clip=0.1, tol=0.01,
                        ori_tol=math.inf, max_steps=min(80, budget()), action_scale=0.05)
        final_open = self._cur.gripper_opening
        if name:
            peak = self._object_z(name) - obj_z0
        lifted = peak >= 0.03 if name else final_open > 0.005
        success = bool(lifted and final_open > 0.003)
        pos, _, _, _ = self._sim.eef()
        term, trunc = self._ended()
        why = "" if success else ("fingers closed on nothing" if final_open <= 0.003 else
                                  f"object rose only {peak:.3f} m")
        diag = {"why": why, "grasp_point": [round(float(v), 4) for v in point], "yaw_turn": round(turn, 4),
                "lift_thresh": 0.03}
        return Pick(success=success, chunks_used=0, max_chunks=0, object=name,
                    steps_used=self._sim.steps - steps0, peak_lift_m=float(peak),
                    min_gripper_opening=float(min_open), final_gripper_opening=float(final_open),
                    final_eef_pos=_t3(pos), terminated=term, truncated=trunc, diagnostics=diag)

    # ----- frozen Pi0.5 skills (RPent's robots/libero/tools.py LiberoPrimitives.pi0_pick / pi0_doubled) ------
    def _vla_prompt(self, prompt: Optional[str], max_chunks: Any) -> tuple[str, int]:
        text = self.task if prompt is None else prompt
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"prompt must be a non-empty instruction, not {prompt!r}")
        return text, _positive_int(max_chunks, "max_chunks", 200)

    def _vla_client(self, tool_name: str) -> pi05.Pi05Client:
        if not self.vla_endpoint:
            raise ToolError(tool_name, f"no VLA endpoint configured: {pi05.START_HINT}")
        return pi05.Pi05Client(self.vla_endpoint, tool=tool_name)

    def _vla_render(self, camera: str) -> np.ndarray:
        """A 256 px frame as LIBERO's own renderer draws it (robosuite keeps MuJoCo's shadows and reflections,
        which the perception renders here turn off for speed)."""
        mj = self._sim._mujoco
        r = self._sim._renderer(pi05.IMAGE_SIZE, pi05.IMAGE_SIZE)
        flags = (mj.mjtRndFlag.mjRND_SHADOW, mj.mjtRndFlag.mjRND_REFLECTION)
        old = [r.scene.flags[f] for f in flags]
        try:
            for f in flags:
                r.scene.flags[f] = True
            r.update_scene(self._sim.data, camera=self._sim.camera_name(camera))
            return np.array(r.render())
        finally:
            for f, v in zip(flags, old):
                r.scene.flags[f] = v

    def _vla_observation(self, prompt: str) -> dict:
        """The Pi0.5 observation of the current step, from robosuite's own observables and camera frames."""
        obs = self._sim.env.env._get_observations(force_update=True)
        return pi05.libero_observation(agentview=self._vla_render("agentview"), wrist=self._vla_render("wrist"),
                                       eef_pos=obs["robot0_eef_pos"], eef_quat_xyzw=obs["robot0_eef_quat"],
                                       gripper_qpos=obs["robot0_gripper_qpos"], prompt=prompt)

    def _vla_chunk(self, client: pi05.Pi05Client, prompt: str) -> int:
        """One model call and its whole action chunk (RPent's _vlm_chunk + env.chunk_step), stepped like every
        other motion here; stops early when the episode ends. Returns the steps taken."""
        actions = client.predict(self._vla_observation(prompt))
        used = 0
        for a in actions:
            used += 1
            if not self._step(a):
                break
        return used

    @tool(stateful=True, vla=True)
    def pi0_pick(self, prompt: Optional[str] = None, *, max_chunks: int = 24, lift_thresh: float = 0.05,
                 gripper_closed_thresh: float = 0.06, gripper_open_thresh: float = 0.0,
                 descent_thresh: float = 0.10) -> Pick:
        """Let the frozen Pi0.5 VLA grasp, closed loop: `prompt` (default: the task instruction) runs for up
        to `max_chunks` action chunks (5 control steps each) and stops early once the gripper has descended
        by descent_thresh, closed on something (gripper_open_thresh <= opening < gripper_closed_thresh) and
        risen by lift_thresh, or when the task predicate fires. Pre-position the gripper 15-20 cm above the
        target, keep the prompt short ("pick up the black bowl"), use about 20 chunks, verify the grasp
        from the result, state() and the wrist image, then script the carry and release yourself.
        Needs RPent's Pi0.5 server (make(..., vla_endpoint='host:port') or PYRUALEAN_VLA_ENDPOINT);
        ToolError if it is not configured, unreachable or replies nonsense (the episode goes on)."""
        text, max_chunks = self._vla_prompt(prompt, max_chunks)
        lift_thresh = _positive(lift_thresh, "lift_thresh")
        gripper_closed_thresh = _positive(gripper_closed_thresh, "gripper_closed_thresh")
        descent_thresh = _positive(descent_thresh, "descent_thresh")
        if isinstance(gripper_open_thresh, bool) or not isinstance(gripper_open_thresh, (int, float)) or not (
                0.0 <= gripper_open_thresh < gripper_closed_thresh):
            raise ValueError(f"gripper_open_thresh must be a number in [0, gripper_closed_thresh), "
                             f"not {gripper_open_thresh!r}")
        client = self._vla_client("pi0_pick")
        st = self._cur
        start_z = min_z = peak_z = post_min_peak_z = st.eef_pos[2]
        min_grip = last_grip = st.gripper_opening
        descent_done = success = False
        chunks = steps = 0
        for chunks in range(1, max_chunks + 1):
            steps += self._vla_chunk(client, text)
            st = self._cur
            z, grip = st.eef_pos[2], st.gripper_opening
            peak_z = max(peak_z, z)
            if z < min_z:
                min_z = post_min_peak_z = z  # a deeper low point restarts the lift measurement
            else:
                post_min_peak_z = max(post_min_peak_z, z)
            descent_done = descent_done or (start_z - min_z) >= descent_thresh
            min_grip, last_grip = min(min_grip, grip), grip
            ascended = (post_min_peak_z - min_z) >= lift_thresh
            closed = gripper_open_thresh <= grip < gripper_closed_thresh
            if descent_done and ascended and closed:
                success = True
                break
            if self.done:
                # RPent counts any episode end as success; only LIBERO's predicate does here (not the budget).
                success = self._sim.success
                break
        term, trunc = self._ended()
        diag = {"start_eef_z": round(start_z, 4), "peak_eef_z": round(peak_z, 4), "min_eef_z": round(min_z, 4),
                "post_min_peak_z": round(post_min_peak_z, 4), "descent_m": round(start_z - min_z, 4),
                "post_min_ascent_m": round(post_min_peak_z - min_z, 4), "descent_done": descent_done,
                "lift_thresh": lift_thresh, "gripper_closed_thresh": gripper_closed_thresh,
                "gripper_open_thresh": float(gripper_open_thresh), "descent_thresh": descent_thresh}
        return Pick(success=bool(success), prompt=text, chunks_used=chunks, max_chunks=max_chunks,
                       steps_used=steps, peak_lift_m=float(post_min_peak_z - min_z),
                       min_gripper_opening=float(min_grip), final_gripper_opening=float(last_grip),
                       final_eef_pos=st.eef_pos, terminated=term, truncated=trunc, diagnostics=diag)

    @tool(stateful=True, vla=True)
    def pi0_doubled(self, prompt: Optional[str] = None, *, max_chunks: int = 20) -> Contact:
        """Let the frozen Pi0.5 VLA do a contact skill that is not a pick: knobs, buttons, drawers, doors,
        short pushes ("turn on the stove", "open the top drawer"). Runs `prompt` (default: the task
        instruction) for up to `max_chunks` action chunks or until the task predicate fires; success only
        mirrors that predicate. Same endpoint and errors as pi0_pick."""
        text, max_chunks = self._vla_prompt(prompt, max_chunks)
        client = self._vla_client("pi0_doubled")
        chunks = steps = 0
        for chunks in range(1, max_chunks + 1):
            steps += self._vla_chunk(client, text)
            if self.done:
                break
        term, trunc = self._ended()
        return Contact(success=bool(term), prompt=text, chunks_used=chunks, max_chunks=max_chunks,
                       steps_used=steps, final_eef_pos=self._cur.eef_pos, terminated=term,
                       truncated=trunc)

    def _narrow_turn(self, name: str, R: np.ndarray) -> float:
        """Yaw turn (|turn| <= pi/2) that lines the fingers' closing axis (the hand's y) up with the narrow
        horizontal axis of the object's visible points (PCA of their x/y)."""
        seg = self._view("agentview", LOW_RES, -1, "seg")
        pts = self._view("agentview", LOW_RES, -1, "world")[self._sim.mask(name, seg)]
        pts = pts[np.isfinite(pts).all(axis=1)]
        if len(pts) < 10:
            return 0.0
        top = pts[pts[:, 2] >= pts[:, 2].max() - 0.01][:, :2]  # the top face outlines the footprint best
        xy = top if len(top) >= 10 else pts[:, :2]
        w, v = np.linalg.eigh(np.cov((xy - xy.mean(axis=0)).T))
        if w[1] < 1.3 * w[0]:
            return 0.0  # round-ish: any direction works
        narrow = v[:, 0]
        turn = _wrap(math.atan2(narrow[1], narrow[0]) - math.atan2(R[1, 1], R[0, 1]))
        if turn > math.pi / 2:
            turn -= math.pi
        elif turn < -math.pi / 2:
            turn += math.pi
        return turn

    def _object_z(self, name: str) -> float:
        if not name or name not in self._sim.object_names:
            return 0.0
        return float(self._sim.object_pose(name)[0][2])

    def _grasp_point(self, name: str, top: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """Where the fingertips go for a named object: the rim for bowls, else just below the top."""
        if "bowl" in name:
            seg = self._view("agentview", LOW_RES, -1, "seg")
            wm = self._view("agentview", LOW_RES, -1, "world")
            pts = wm[self._sim.mask(name, seg)]
            pts = pts[np.isfinite(pts).all(axis=1)]
            c = np.median(pts, axis=0) if len(pts) else centre
            radial = np.max(np.linalg.norm(pts[:, :2] - c[:2], axis=1)) if len(pts) else 0.05
            # The fingers close along the hand's y axis: grip the rim wall that crosses that axis.
            _, _, R, _ = self._sim.eef()
            across = R[:, 1].copy()
            across[2] = 0.0
            across /= max(np.linalg.norm(across), 1e-9)
            r = max(0.02, min(radial, 0.08) - 0.012)
            p = c[:2] - r * across[:2] * np.sign(across[1] or 1.0)
            return np.array([p[0], p[1], top[2] - 0.025])
        # Fingertips 3.5 cm below the top, but not into the support: flat things (cream cheese, butter) are
        # taken just above the surface they rest on (the lowest visible points of the object).
        seg = self._view("agentview", LOW_RES, -1, "seg")
        pts = self._view("agentview", LOW_RES, -1, "world")[self._sim.mask(name, seg)]
        pts = pts[np.isfinite(pts).all(axis=1)]
        bottom = float(np.percentile(pts[:, 2], 2)) if len(pts) else centre[2] - 0.02
        return np.array([top[0], top[1], max(top[2] - 0.035, bottom + 0.008)])


ROBOT = LiberoRobot
