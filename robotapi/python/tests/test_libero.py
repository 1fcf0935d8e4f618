"""LIBERO / LIBERO-PRO on CPU: boot, render, perception, primitive motion, scripted solutions, and one
episode in a real IPython kernel. These boot the real simulator (about 5-10 s per scene)."""

from __future__ import annotations

import base64
import os
import struct

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest

from pyrualean_robot import EpisodeFinished, ToolError, make
from pyrualean_robot.results import Move, State
from pyrualean_robot.robots.libero import BackProjection, Segment
from pyrualean_robot.solutions import solution_path, split_cells

SUITE = "libero_spatial_swap"


@pytest.fixture(scope="module")
def robo(tmp_path_factory):
    r = make("libero", suite=SUITE, task=0, seed=0, workspace=str(tmp_path_factory.mktemp("libero")),
             images="none")
    yield r
    r.close()


@pytest.mark.heavy
def test_boot_card_and_state(robo):
    assert robo.NAME == "libero" and robo.suite == SUITE and robo.task_name == f"{SUITE}/0"
    assert "black bowl" in robo.task and "plate" in robo.task
    st = robo.state()
    assert isinstance(st, State) and st.step == 0 and not st.terminated and not st.truncated
    assert "plate_1" in st.object_names and any("bowl" in n for n in st.object_names)
    assert 0.06 < st.gripper_opening < 0.09  # settled open
    assert abs(st.eef_yaw) < 0.05 and abs(st.eef_pitch) < 0.05  # seed convention: 0 at home
    card = robo._episode_card()
    assert card["robot"] == "libero" and card["task_language"] == robo.task
    assert card["object_names"] == list(st.object_names)
    assert len(card["eef_pos"]) == 3 and card["facts"]["task_index"] == 0
    for name in ("agentview_high", "wrist_high"):  # the original's card images: step 0 at 1024 px
        png = base64.b64decode(card["images"][name])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[16:24] == (1024).to_bytes(4, "big") * 2


@pytest.mark.heavy
def test_render_and_perception(robo):
    img = robo.image("agentview", resolution="low")
    assert img.shape == (256, 256, 3) and img.dtype == np.uint8 and img.std() > 10
    wrist = robo.image("wrist", resolution=128)
    assert wrist.shape == (128, 128, 3)
    with pytest.raises(ValueError):
        robo.image("nowhere")
    with pytest.raises(ValueError):
        robo.image(resolution="huge")
    # segment agrees with the simulator's own object pose; back_project agrees with segment.
    seg = robo.segment("plate")
    assert isinstance(seg, Segment) and seg.found and seg.name == "plate_1"
    true_pos, _ = robo._sim.object_pose("plate_1")
    assert np.linalg.norm(np.array(seg.world_xyz[:2]) - true_pos[:2]) < 0.02
    assert seg.score == 1.0 and seg.error is None and seg.overlay_artifact
    assert robo.artifact(seg.overlay_artifact)[:8] == b"\x89PNG\r\n\x1a\n"
    c0, r0, c1, r1 = seg.box  # SAM3's (x0, y0, x1, y1)
    bp = robo.back_project((r0 + r1) // 2, (c0 + c1) // 2)
    assert bp.resolution == "high" and bp.image_size == (1024, 1024)
    assert isinstance(bp, BackProjection) and np.linalg.norm(np.array(bp.world_xyz[:2]) - true_pos[:2]) < 0.05
    with pytest.raises(ToolError):
        robo.back_project(5000, 3)
    two = robo.segment("black bowl")
    assert two.found and two.error is None and len(two.also_matches) == 1 and "bowl" in two.also_matches[0]
    miss = robo.segment("giraffe")
    assert not miss.found and miss.world_xyz is None and miss.score is None and "giraffe" in miss.error
    meta = robo.camera_meta("agentview", resolution="low")
    assert meta["width"] == 256 and len(meta["intrinsic_K"]) == 3
    wm = robo.world_map("agentview", resolution="low")
    assert wm.shape == (256, 256, 3) and np.isfinite(wm).mean() > 0.5
    rc = robo.region_center((r0, r1), (c0, c1))
    assert rc.n_valid > 0 and abs(rc.center_xyz[0] - true_pos[0]) < 0.05
    with pytest.raises(ToolError):
        robo.region_center((r0, r1), (c0, c1), z_min=5.0)  # nothing that high: too few points
    meta = robo.camera_meta("agentview", resolution="high")
    c2w, K = np.array(meta["extrinsic_cam2world"]), np.array(meta["intrinsic_K"])
    d = bp.depth_m  # a pixel through K and cam2world at its depth lands on back_project's point
    cam = np.linalg.inv(K) @ np.array([bp.pixel[1], bp.pixel[0], 1.0]) * d
    assert np.linalg.norm((c2w @ np.append(cam, 1.0))[:3] - np.array(bp.world_xyz)) < 0.01
    assert np.load(__import__("io").BytesIO(robo.artifact("agentview_world.npz")))["array"].shape == (256, 256, 3)
    with pytest.raises(ToolError):
        robo.artifact("nothing.png")


@pytest.mark.heavy
def test_motion_primitives(robo):
    steps0 = robo.env_steps
    st = robo.state()
    with pytest.raises(ValueError, match="exceeds 0.3 m"):
        robo.move_to([st.eef_pos[0] + 0.35, st.eef_pos[1], st.eef_pos[2]])
    with pytest.raises(ValueError):
        robo.move_to([0, 0])
    with pytest.raises(ValueError):
        robo.set_gripper(2.0)
    assert robo.env_steps == steps0  # invalid calls never touch the simulator
    target = (st.eef_pos[0] + 0.08, st.eef_pos[1] - 0.06, st.eef_pos[2] - 0.05)
    mv = robo.move_to(target)
    assert isinstance(mv, Move) and mv.reached and mv.final_dist_m < 0.012 and mv.steps_used > 3
    assert robo.env_steps == steps0 + mv.steps_used
    # Each motion call records a step; an earlier step re-renders exactly as it looked then, and looking at
    # it leaves the live simulation untouched.
    k = robo.state().step
    assert k >= 1 and robo.state(step=k).eef_pos == robo.state().eef_pos
    then = robo.image("wrist", resolution="low")
    rot = robo.rotate_wrist(delta_yaw=0.4)
    assert rot.reached and abs(robo.state().eef_yaw - 0.4) < 0.05
    rot = robo.rotate_wrist(target_yaw=0.0)
    assert abs(rot.final_err) < 0.05 and robo.state().step == k + 2
    live = robo._sim.physics_state()
    def diff(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a.astype(int) - b.astype(int)).mean())

    # (The live frame lags MuJoCo's last substep of kinematics; the re-render does not: a few grey levels.)
    assert diff(robo.image("wrist", resolution="low", step=k), then) < 0.5
    assert diff(robo.image("wrist", resolution="low"), then) > 5 * diff(robo.image("wrist", resolution="low", step=k), then)
    assert np.array_equal(robo._sim.physics_state(), live)
    with pytest.raises(ValueError, match="out of range"):
        robo.image(step=k + 3)
    g = robo.set_gripper(robo.CLOSE, steps=8)
    assert g.steps == 8 and g.gripper_opening < 0.01
    rel = robo.release()
    assert rel.final_gripper_opening > 0.06
    assert robo.ledger[-1]["tool"] == "release" and robo.ledger[-1]["ok"]
    assert robo.state(step=0).step == 0 and robo.state(step=-1).step == k + 4 and robo.env_steps > k + 4
    # back_project against the task card's image (step 0) still works after the scene changed.
    assert robo.back_project(600, 500, step=0).step == 0


@pytest.mark.heavy
def test_views_are_reused_until_the_simulator_steps(robo, monkeypatch):
    renders = []
    real = robo._sim.render
    monkeypatch.setattr(robo._sim, "render", lambda *a, **k: renders.append(a) or real(*a, **k))
    pts = [robo.back_project(128, col, resolution="low").world_xyz for col in (100, 120, 140)]
    assert len(renders) == 1 and len(set(pts)) == 3  # one depth render serves every pixel of that image
    wm = robo.world_map("agentview", resolution="low")
    wm[:] = 0  # the caller's copy: the robot's own render is untouched
    assert robo.back_project(128, 120, resolution="low").world_xyz == pts[1] and len(renders) == 1
    before = robo.image("wrist", resolution="low")
    st = robo.state()
    assert robo.move_to((st.eef_pos[0], st.eef_pos[1], st.eef_pos[2] + 0.04)).steps_used > 0
    assert float(np.abs(robo.image("wrist", resolution="low").astype(int) - before.astype(int)).mean()) > 1
    n = len(renders)
    robo.back_project(128, 120, resolution="low")
    assert len(renders) == n + 1  # the scene moved: rendered afresh


@pytest.mark.heavy
def test_step_budget_truncates(tmp_path):
    r = make("libero", task="libero_object_swap/0", seed=1, workspace=str(tmp_path), images="none",
             max_env_steps=5)
    try:
        st = r.state()
        mv = r.move_to([st.eef_pos[0], st.eef_pos[1], st.eef_pos[2] - 0.05])
        assert mv.truncated and mv.steps_used == 5 and r.env_steps == 5
        with pytest.raises(EpisodeFinished) as e:
            r.set_gripper(1.0)
        assert e.value.reason == "truncated"
        assert r.state().step == 1 and r.state().truncated  # read-only calls keep working
    finally:
        r.close()


@pytest.mark.heavy
@pytest.mark.parametrize("task", ["libero_spatial_swap/0", "libero_object_swap/0", "libero_goal_swap/8",
                                  "libero_object_task/0"])
def test_reference_solution_succeeds(task, tmp_path):
    """The percent-format reference solution solves the task by LIBERO's own predicate; afterwards motions
    raise EpisodeFinished("terminated") and read-only calls still work."""
    r = make("libero", task=task, seed=0, workspace=str(tmp_path), images="none")
    try:
        ns = {"robo": r}
        with open(solution_path("libero", task), encoding="utf-8") as f:
            cells = split_cells(f.read())
        for i, cell in enumerate(cells):
            try:
                exec(compile(cell, f"<{task} cell {i}>", "exec"), ns)
            except EpisodeFinished:
                break
        assert r._sim.env.check_success(), f"{task}: LIBERO predicate not met after {r.env_steps} steps"
        assert r.done and r.state().terminated and r.env_steps < 400
        with pytest.raises(EpisodeFinished) as e:
            r.move_to(r.state().eef_pos)
        assert e.value.reason == "terminated"
        assert r.image("agentview", resolution="low").shape == (256, 256, 3)
    finally:
        r.close()


@pytest.mark.heavy
def test_libero_in_a_real_ipython_kernel(tmp_path):
    """make("libero") in the pyrualean kernel: a motion cell gets the on-motion images as display_data and
    cell_report (through user_expressions) reports the ledger and state."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="pyrualean")
    try:
        setup = (f"from pyrualean_robot import make\nrobo = make('libero', suite='{SUITE}', task=0, seed=0, "
                 f"workspace={str(tmp_path)!r})\nrobo.task")
        reply = kc.execute_interactive(setup, timeout=240)
        assert reply["content"]["status"] == "ok", reply["content"]
        outputs: list[dict] = []
        reply = kc.execute_interactive(
            "s = robo.state()\nm = robo.move_to([s.eef_pos[0] + 0.05, s.eef_pos[1], s.eef_pos[2] - 0.05])\nm.reached",
            timeout=120, output_hook=outputs.append,
            user_expressions={"pyrualean": "__import__('pyrualean_robot').cell_report()"})
        assert reply["content"]["status"] == "ok", reply["content"]
        images = [o["content"] for o in outputs if o["msg_type"] == "display_data"]
        cams = [d["metadata"].get("pyrualean", {}).get("camera") for d in images]
        # the original's on-motion images (issue 14 item 12): both cameras at 1024 px, named as its artifacts
        assert cams == ["agentview_high.png", "wrist_high.png"] and all("image/png" in d["data"] for d in images)
        for d in images:
            png = base64.b64decode(d["data"]["image/png"])
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1024, 1024)
        results = [o["content"]["data"]["text/plain"] for o in outputs if o["msg_type"] == "execute_result"]
        assert results == ["True"]
        report = reply["content"]["user_expressions"]["pyrualean"]
        assert report["status"] == "ok"
        data = report["data"]["application/json"]
        assert data["moved"] and data["calls"][-1]["tool"] == "move_to" and data["env_steps"] > 0
        assert not data["done"] and data["state"]["step"] == 1  # one motion call: one recorded step
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_libero_import_never_prompts_or_writes_config(tmp_path):
    """LIBERO's upstream first import asks for a dataset path on stdin; the vetted package must not."""
    import subprocess
    import sys

    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    env.pop("LIBERO_CONFIG_PATH", None)
    code = ("from libero.libero import benchmark, get_libero_path\n"
            "import os; print(os.path.isdir(get_libero_path('assets')), len(benchmark.get_benchmark_dict()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "True" and int(out.stdout.split()[1]) >= 20
    assert list(tmp_path.iterdir()) == []  # nothing written under HOME (no ~/.libero, no config.yaml)


@pytest.mark.heavy
def test_task_list_carries_the_perturbed_instructions(robo):
    """LIBERO-PRO's _lan/_task suites perturb the instruction in the BDDL; the task list must say what the
    environment (and the robot's task card) says, not the file-name language of the original task."""
    from pyrualean_robot.robots.libero import LiberoRobot

    rows = {t.name: t for t in LiberoRobot.tasks(["libero_spatial", "libero_spatial_lan", SUITE])}
    assert rows["libero_spatial_lan/0"].instruction != rows["libero_spatial/0"].instruction
    assert "lift" in rows["libero_spatial_lan/0"].instruction
    assert rows[f"{SUITE}/0"].instruction == robo.task
    assert rows[f"{SUITE}/0"].solution == f"robotapi/solutions/libero/{SUITE}/0.py"


@pytest.mark.parametrize("kwargs, match", [
    ({"suite": "libero_nowhere", "task": 0}, "unknown LIBERO suite"),
    ({"suite": SUITE, "task": 10}, "out of range"),
    ({"task": "libero_goal_swap/8", "suite": "libero_object"}, "names suite"),
    ({"suite": SUITE, "task": "fly to the moon"}, "neither an index nor a task name"),
])
def test_bad_suite_or_task_is_a_clear_error(kwargs, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        make("libero", workspace=str(tmp_path), **kwargs)
