"""RoboCasa365 adapter against fakes of RPent's RoboCasa env server and RLDX-1 VLA server (same RPC surface)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pyrualean_robot import EpisodeFinished, ToolError, make
from pyrualean_robot.apiref import api_reference
from pyrualean_robot.robots.robocasa import SUITES, EnvMetaMismatch, RobocasaRobot
from pyrualean_robot.robots.rpent import EnvServerUnavailable

from fixtures import IMPORT_ROOT
from fixtures.fake_robocasa import serve_env, serve_vla

TASK = "PickPlaceCounterToCabinet"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for k in ("PYRUALEAN_ENV_SERVER", "RPENT_ROOT", "PYRUALEAN_RPENT_ENV_CMD", "PYRUALEAN_VLA_ENDPOINT", "RPENT_PYTHON",
              "RLDX_MAX_CHUNKS", "RLDX_SETTLE_PATIENCE", "RLDX_ACTION_STEPS_PER_CHUNK", "PYRUALEAN_CUDA_DEVICE"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def env():
    server, world = serve_env(TASK, "target", 3)
    yield server, world
    server.close()


def _robot(server, tmp_path, **kw):
    return make("robocasa", task=TASK, seed=3, workspace=str(tmp_path), images="none", env_url=server.url, **kw)


def _red_pixels(img):
    red = np.argwhere((img[..., 0] > 150) & (img[..., 1] < 80))
    assert len(red), "the object is not in view"
    c = red.mean(axis=0).astype(int)
    return [[int(c[0]) + dr, int(c[1]) + dc] for dr in (-2, 0, 2) for dc in (-2, 0, 2)]


HANDSHAKE = {  # RPC calls before the first state record, per env-server generation
    "v1": ["env.get_env_meta", "env.get_runtime_info", "env.reset", "env.get_runtime_info", "env.get_task_language"],
    "legacy": ["env.get_env_meta", "env.reset", "env.get_ep_meta"],  # its get_runtime_info is unknown
}


@pytest.mark.parametrize("transport,protocol", [("http", "v1"), ("socket", "legacy")])
def test_env_meta_identity_is_checked_on_both_transports(transport, protocol, tmp_path):
    server, world = serve_env(TASK, "target", 3, transport=transport, protocol=protocol)
    try:
        robo = make("robocasa", task=TASK, seed=3, workspace=str(tmp_path), images="none", env_url=server.url)
        assert robo.env_meta == {"task_name": TASK, "split": "target", "seed": 3, "camera_h": 256, "camera_w": 256}
        assert world.calls[:len(HANDSHAKE[protocol])] == HANDSHAKE[protocol]
        assert ("env.render_camera" if protocol == "v1" else "env.render_raw") in world.calls
        assert (robo.runtime_info is not None) == (protocol == "v1")
        assert robo.task == "pick the mug from the counter and lift it"
        assert robo.set_gripper(robo.CLOSE, steps=2).steps == 2
        n = len(world.calls)
        with pytest.raises(EnvMetaMismatch) as e:  # a server started for seed 3 cannot serve seed 4
            make("robocasa", task=TASK, seed=4, workspace=str(tmp_path), images="none", env_url=server.url)
        msg = str(e.value)
        assert "'seed': 3" in msg and "'seed': 4" in msg and "stale env server" in msg
        assert world.calls[n:] == ["env.get_env_meta"]  # nothing reset or stepped
    finally:
        server.close()


def test_incompatible_v1_server_is_refused(tmp_path):
    from fixtures.fake_robocasa import FakeKitchen
    from pyrualean_robot.robots.rpent import RpcServer

    world = FakeKitchen(TASK, "target", 3)
    methods = world.rpc_methods()
    info = world.get_runtime_info()
    info["action_schema"] = {**info["action_schema"], "flat_dim": 13}
    methods["env.get_runtime_info"] = lambda: info
    server = RpcServer(methods)
    try:
        with pytest.raises(ToolError, match="incompatible RoboCasa env server"):
            make("robocasa", task=TASK, seed=3, workspace=str(tmp_path), images="none", env_url=server.url)
        assert "env.reset" not in world.calls
        # a step reply from another episode / out of sequence is refused too
        methods["env.get_runtime_info"] = world.get_runtime_info
        real_step = methods["env.step"]

        def skewed(a):
            out = real_step(a)
            out[3] = {**out[3], "rpent_sim_step": out[3]["rpent_sim_step"] + 1}
            return out
        methods["env.step"] = skewed
        robo = make("robocasa", task=TASK, seed=3, workspace=str(tmp_path), images="none", env_url=server.url)
        with pytest.raises(ToolError, match="out of sequence"):
            robo.set_gripper(1.0, steps=1)
        assert robo.state().step == 1  # what moved before the failure is recorded
    finally:
        server.close()


def test_perception_and_recorded_steps(env, tmp_path):
    server, world = env
    robo = _robot(server, tmp_path)
    st = robo.state()
    assert st.step == 0 and st.gripper_opening == pytest.approx(0.04) and not st.success and st.vla_desync
    assert st.eef_tilt == pytest.approx(0.0, abs=1e-6) and st.base_yaw == pytest.approx(0.0)
    img = robo.image("agentview")
    assert img.shape == (256, 256, 3) and img.dtype == np.uint8
    bp = robo.back_project_batch(_red_pixels(img))
    assert bp.valid_count == 9 and np.allclose(bp.median_xyz[:2], world.obj[:2], atol=0.01)
    assert bp.median_xyz[2] == pytest.approx(world.obj[2] + 0.04, abs=1e-3)  # the top surface, not the centre
    bad = robo.back_project_batch([[0, 0], [300, 5]])
    assert bad.points[1].error.startswith("pixel (300,5) out of bounds") and bad.valid_count == 1
    r0, c0 = _red_pixels(img)[0]  # fractional pixels (a centroid) are truncated, as in the original
    assert robo.back_project_batch([r0 + 0.6, np.float64(c0 + 0.2)]).points[0].pixel == (r0, c0)
    # the card carries what the original's host dumps from step 0 (base, gripper pose and opening, task_progress)
    facts = robo._episode_card()["facts"]
    assert {"initial base position [x, y, z]", "initial base heading (yaw about world z)",
            "initial gripper (EEF) position [x, y, z]", "initial gripper orientation [x, y, z, w]",
            "initial gripper opening (|q0| + |q1|)",
            "task_progress at step 0 (the success predicate's live values)"} <= set(facts)
    q = robo.query_world_map(0.95, 1.0)
    assert q.clusters and np.allclose(q.clusters[0].center_xyz[:2], world.obj[:2], atol=0.03)
    floor = robo.query_world_map(-0.05, 0.12, camera="navview")
    assert floor.total_pixels > 0
    assert (robo.floor_overlay() == (0, 255, 0)).all(axis=-1).any()
    meta = robo.camera_meta("wrist")
    assert {"camera_name", "height", "width", "intrinsic", "extrinsic_cam2world", "depth_near",
            "depth_far"} <= set(meta) and meta["camera_name"] == "robot0_eye_in_hand"
    assert meta["runtime_id"] == robo.runtime_info["runtime_id"]  # v1 metadata carries the runtime identity
    assert robo.depth("agentview").shape == (256, 256) and robo.world_map("navview").shape == (256, 256, 3)
    assert "_check_success" in robo.success_criteria()
    assert json.loads(robo.artifact("agentview_metadata.json"))["height"] == 256
    with np.load(__import__("io").BytesIO(robo.artifact("wrist_world.npz"))) as z:
        assert z["array"].shape == (256, 256, 3)
    # a motion records step 1; step 0 stays readable
    robo.move_delta([0.0, 0.0, 0.05])
    assert robo.state().step == 1 and robo.state(0).eef_pos == st.eef_pos
    assert np.array_equal(robo.image(step=0), img)
    assert world.calls.count("env.render_camera") == 6  # 3 cameras per recorded step, depth included


def test_bad_arguments_raise_before_any_rpc(env, tmp_path):
    server, world = env
    robo = _robot(server, tmp_path)
    eef = robo.state().eef_pos
    bad = [
        lambda: robo.move_to([eef[0] + 0.4, eef[1], eef[2]]),  # > MAX_MOVE_M
        lambda: robo.move_to([0, 0]),
        lambda: robo.move_to(eef, gripper="squeeze"),
        lambda: robo.move_to(eef, max_steps=0),
        lambda: robo.move_delta([0, 0, 0.31]),
        lambda: robo.rotate_pitch(float("nan")),
        lambda: robo.rotate_pitch(1.6),
        lambda: robo.move_to(eef, step_clip=0.5),
        lambda: robo.scripted_grasp(eef, approach_z=-0.1),
        lambda: robo.rldx_skill(n_action_steps=513),
        lambda: robo.rotate_pitch(0.3, gripper="hold"),
        lambda: robo.set_gripper(2.0),
        lambda: robo.release(steps=0),
        lambda: robo.scripted_grasp(eef, step_clip=0),
        lambda: robo.navigate_to([1.0, 1.0], tol=0),
        lambda: robo.navigate_to("ab"),
        lambda: robo.move_base(float("inf")),
        lambda: robo.move_base(0.2, steps=True),
        lambda: robo.rldx_skill(max_chunks=0),
        lambda: robo.rldx_arm(base_clip=-1),
        lambda: robo.back_project_batch([[1, 2]] * 51),
        lambda: robo.back_project_batch([[float("nan"), 2]]),
        lambda: robo.query_world_map(1.0, 0.5),
        lambda: robo.image("top"),
        lambda: robo.image(resolution="high"),
        lambda: robo.depth("navview"),
        lambda: robo.state(step=9),
        lambda: robo.artifact("secrets.txt"),
    ]
    n = len(world.calls)
    for i, call in enumerate(bad):
        with pytest.raises(ValueError):
            call()
        assert len(world.calls) == n, f"bad call {i} reached the env server: {world.calls[n:]}"
    assert robo.env_steps == 0
    rec = [r for r in robo.ledger if r["tool"] == "move_to"][0]
    assert rec["ok"] is False and rec["stateful"] and rec["error"].startswith("ValueError: a move of 0.400 m")


@pytest.mark.parametrize("protocol", ["v1", "legacy"])
def test_primitives_use_rpent_action_layout_and_episode_end(protocol, tmp_path):
    server, world = serve_env(TASK, "target", 3, protocol=protocol)
    robo = _robot(server, tmp_path, max_env_steps=2000)
    g = robo.set_gripper(robo.OPEN, steps=5)
    assert g.gripper == -1.0 and g.steps == 5 and g.gripper_opening > 0.05
    assert all(a.shape == (12,) and a[6] == -1.0 and a[11] == -1.0 for a in world.actions)
    mb = robo.move_base(0.4, 0.0, 0.0, steps=10)
    a = world.actions[-1]
    assert a[7] == pytest.approx(0.4) and a[11] == 1.0 and mb.steps == 10
    assert mb.base_moved[0] == pytest.approx(10 * 0.4 * 0.0023, abs=1e-6)
    p = robo.rotate_pitch(0.3, n=6)
    assert p.steps_used == 6 and robo.state().eef_tilt == pytest.approx(0.15, abs=1e-3)  # fake gain 0.5
    assert world.actions[-1][3] == pytest.approx(0.05 / 0.5)  # per-step drot / OSC_ROT_SCALE
    rel = robo.release(steps=3)
    assert rel.gripper == -1.0 and rel.steps == 3
    nav = robo.navigate_to([0.25, -0.1, 0.9], tol=0.05)  # a third value is ignored
    assert nav.reached and not nav.stuck and nav.final_dist_m < 0.05 and nav.steps_used > 50
    assert robo.state().base_yaw == pytest.approx(math.atan2(-0.1 - nav.start_xy[1], 0.25 - nav.start_xy[0]), abs=0.35)
    # the servo calibrates its Jacobian online (3 axes x 3 steps) after the base moved, then converges
    steps0 = robo.env_steps
    top = robo.back_project_batch(_red_pixels(robo.image())).median_xyz
    hover = [top[0], top[1], top[2] + 0.10]
    assert math.dist(hover, robo.state().eef_pos) <= 0.3
    mv = robo.move_to(hover)
    assert mv.reached and mv.final_dist_m < 0.012 and robo.env_steps - steps0 >= 9
    grasp = robo.scripted_grasp([top[0], top[1], top[2]], grasp_z_offset=-0.03)
    assert grasp.ok and grasp.stage is None
    if protocol == "v1":  # the server latched success during the lift: the primitive stopped at that step
        assert world.latched and world.obj[2] - 0.94 == pytest.approx(0.10, abs=0.01)
    else:  # an older server reports success only when asked: the whole sequence ran
        assert world.obj[2] - 0.94 == pytest.approx(0.18, abs=0.02)  # lifted to approach_z + 0.05 above the top
    assert grasp.gripper_opening == pytest.approx(0.024)
    assert grasp.terminated and robo.done and robo.state().success  # lifted > 10 cm: _check_success fired
    assert robo.state().task_progress["obj_lift"] > 0.10
    n = len(world.calls)
    with pytest.raises(EpisodeFinished) as e:
        robo.move_delta([0, 0, 0.02])
    assert e.value.reason == "terminated" and world.calls[n:] == []
    assert robo.ledger[-1]["tool"] == "move_delta" and robo.ledger[-1]["error"].startswith("EpisodeFinished")
    assert robo.state().success and robo.image("wrist").shape == (256, 256, 3)  # read-only calls still work
    card = robo._episode_card()
    assert card["task_language"] == robo.task and "initial base position [x, y, z]" in card["facts"]
    assert set(card["images"]) == {"agentview", "navview", "wrist"} and "RLDX-1" in card["knowledge"]
    server.close()


def test_step_budget_ends_the_episode_mid_motion(env, tmp_path):
    server, world = env
    robo = _robot(server, tmp_path, max_env_steps=40)
    with pytest.raises(EpisodeFinished) as e:
        robo.navigate_to([2.0, 2.0], max_steps=300)
    assert e.value.reason == "truncated" and robo.env_steps == 40 and len(world.actions) == 40
    assert robo.state().truncated and robo.done
    with pytest.raises(EpisodeFinished):
        robo.set_gripper(1.0)


def test_rldx_primitives_speak_rpents_vla_protocol(env, tmp_path):
    server, world = env
    vserver, vla = serve_vla(world, transport="socket")
    try:
        robo = _robot(server, tmp_path, vla_endpoint=vserver.url)
        o = world.obj
        robo.move_to([o[0], o[1], o[2] + 0.08])
        n_pred = len(vla.predicts)
        sk = robo.rldx_arm(max_chunks=2)
        assert sk.status == "cap" and sk.chunks_used == 2 and sk.steps_applied == 16 and sk.base_clip == 0.1
        assert sk.instruction == robo.task and not sk.terminated
        assert [p["reset_memory"] for p in vla.predicts[n_pred:]] == [True, False]  # a manual move ran before
        sid = vla.predicts[0]["session_id"]
        assert sid.startswith("pyrualean-rldx-") and all(p["session_id"] == sid and p["prompt"] == robo.task
                                                          for p in vla.predicts)
        assert not robo.state().vla_desync
        sk = robo.rldx_skill(max_chunks=8)  # same instruction, no manual step: the history continues
        assert vla.predicts[n_pred + 2]["reset_memory"] is False
        assert sk.status == "success" and sk.grasp_contact and sk.grasp_obj == "obj" and sk.terminated and robo.done
        # the server latched success inside a chunk: the run stopped at that step
        assert sk.max_chunks == 8 and 8 * (sk.chunks_used - 1) < sk.steps_applied < 8 * sk.chunks_used
        assert "env.reassemble_env_action" in world.calls and "env.chunk_step" not in world.calls
        last = world.actions[-1]
        assert last[6] == 1.0 and last[11] == -1.0  # gripper_close >= 0.5 -> +1; control_mode 0 -> arm (-1)
        with pytest.raises(EpisodeFinished):
            robo.rldx_arm()
    finally:
        vserver.close()


def test_vla_protocol_pin_and_missing_endpoint_and_no_vla(env, tmp_path, monkeypatch):
    server, world = env
    robo = _robot(server, tmp_path)
    n = len(world.calls)
    with pytest.raises(ToolError, match="PYRUALEAN_VLA_ENDPOINT"):
        robo.rldx_skill()
    assert world.calls[n:] == []
    cold, _ = serve_vla(None, warmed_up=False)
    try:
        robo.vla_endpoint = cold.url
        with pytest.raises(ToolError, match="warmup"):
            robo.rldx_skill()
    finally:
        cold.close()
    vserver, vla = serve_vla(None)
    try:
        robo._vla = None
        monkeypatch.setenv("RLDX_MAX_CHUNKS", "1")
        monkeypatch.setenv("RLDX_ACTION_STEPS_PER_CHUNK", "2")
        robo.vla_endpoint = vserver.url
        sk = robo.rldx_skill(max_chunks=50)
        assert sk.max_chunks == 1 and sk.chunks_used == 1 and sk.steps_applied == 2 and sk.status == "cap"
        assert sk.base_clip is None
    finally:
        vserver.close()
    novla = make("robocasa", task=TASK, seed=3, workspace=str(tmp_path), images="none", env_url=server.url,
                 primitives="no-vla", vla_endpoint="http://127.0.0.1:9")
    with pytest.raises(RuntimeError, match="not available in this run"):
        novla.rldx_arm()
    assert "RLDX" not in novla._episode_card()["knowledge"]
    # a VLA server whose chunk lacks a key: a clear ToolError, nothing stepped
    from pyrualean_robot.robots.rpent import RpcServer

    broken = RpcServer({"vla.get_modality_config": lambda: {"video_delta_indices": [0], "hist_maxlen": 2},
                        "vla.predict": lambda obs, opts: {"action.gripper_close": np.zeros((1, 4, 1))}})
    try:
        robo._vla, robo.vla_endpoint = None, broken.url
        steps = robo.env_steps
        with pytest.raises(ToolError, match="malformed action chunk"):
            robo.rldx_arm()
        assert robo.env_steps == steps
    finally:
        broken.close()
    ref = api_reference(RobocasaRobot, primitives="no-vla")
    assert "rldx" not in ref and "robo.navigate_to(" in ref
    assert "robo.rldx_skill(*, base_clip" in api_reference(RobocasaRobot)


def test_tasks_and_suites_need_no_server(tmp_path, monkeypatch):
    rows = RobocasaRobot.tasks()
    fam = [r.family for r in rows]
    assert len(rows) == 50 and fam.count("atomic") == 18 and fam.count("composite_seen") == 16
    assert RobocasaRobot._resolve_task(6, "atomic") == ("OpenDrawer", "target")
    assert RobocasaRobot._resolve_task("OpenFridge", "pretrain") == ("OpenFridge", "pretrain")
    assert RobocasaRobot._resolve_task(None, None) == (TASK, "target")
    for task, suite in ((99, "atomic"), ("OpenDrawer", "composite_seen"), ("rm -rf", None), ("OpenDrawer", "x")):
        with pytest.raises(ValueError):
            make("robocasa", task=task, suite=suite, workspace=str(tmp_path))
    assert SUITES["target50"][:18] == SUITES["atomic"]
    from pyrualean_robot.robots.robocasa import suite_rows

    rows = suite_rows()
    assert [(r["suite"], r["tasks"]) for r in rows] == [("atomic", 18), ("composite_seen", 16),
                                                        ("composite_unseen", 16)]
    assert not rows[0]["runnable"] and "RPENT_ROOT" in rows[0]["missing"][0]
    script = tmp_path / "robots" / "robocasa" / "env_server.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    monkeypatch.setenv("RPENT_ROOT", str(tmp_path))
    assert all(r["runnable"] and not r["missing"] for r in suite_rows())


def test_without_env_server_the_error_names_what_to_install(tmp_path):
    with pytest.raises(EnvServerUnavailable) as e:
        make("robocasa", workspace=str(tmp_path))
    msg = str(e.value)
    assert "robocasa-download-assets" in msg and "RPENT_ROOT" in msg and "PYRUALEAN_ENV_SERVER" in msg


def test_rpent_root_launches_rpents_env_server_script(tmp_path, monkeypatch):
    """RPENT_ROOT: the adapter runs <root>/robots/robocasa/env_server.py with RPent's flags (here a checkout whose
    script starts the fake), talks to it, and stops it on close()."""
    root = tmp_path / "RPent"
    monkeypatch.setenv("RPENT_ROOT", str(root))
    root.mkdir()
    with pytest.raises(EnvServerUnavailable, match="no robots/robocasa/env_server.py"):
        make("robocasa", workspace=str(tmp_path))
    script = root / "robots" / "robocasa" / "env_server.py"
    script.parent.mkdir(parents=True)
    script.write_text("import os, sys\n"
                      "assert os.environ['ROBOT_PLATFORM'] == 'ROBOCASA' and os.environ['MUJOCO_GL'] == 'egl'\n"
                      f"sys.path.insert(0, {IMPORT_ROOT!r})\n"
                      "from fixtures.fake_robocasa import main\n"
                      "sys.exit(main(['env'] + sys.argv[1:]))\n")
    monkeypatch.setenv("RPENT_PYTHON", str(tmp_path / "no-python"))
    with pytest.raises(EnvServerUnavailable, match="RPENT_PYTHON"):
        make("robocasa", workspace=str(tmp_path))
    monkeypatch.delenv("RPENT_PYTHON")
    robo = make("robocasa", task="OpenDrawer", suite="atomic", seed=2, workspace=str(tmp_path), images="none")
    try:
        argv = robo._proc.args
        assert argv[argv.index(sys.executable) + 1] == str(script)
        for flag, value in (("--task-name", "OpenDrawer"), ("--split", "target"), ("--seed", "2"),
                            ("--transport", "http")):
            assert argv[argv.index(flag) + 1] == value
        assert "--parent-watch" in argv
        assert robo.env_meta["task_name"] == "OpenDrawer" and robo.env_meta["seed"] == 2
        assert robo.set_gripper(robo.CLOSE, steps=3).steps == 3
    finally:
        robo.close()
    assert robo._proc.wait(10) is not None


@pytest.mark.heavy
def test_robot_rpc_works_in_a_sandboxed_kernel_cell(tmp_path):
    """Agent cells run under the kernel sandbox (no sockets from policy code); the robot's own env-server link
    must still work, and policy code itself must still be refused a socket."""
    from jupyter_client.manager import start_new_kernel

    server, world = serve_env(TASK, "target", 1)
    km, kc = start_new_kernel(kernel_name="pyrualean")

    def run(code: str, sandbox: bool) -> list:
        content = dict(code=code, silent=False, store_history=True, user_expressions={}, allow_stdin=False,
                       stop_on_error=True)
        msg = kc.session.msg("execute_request", content, metadata={"pyrualean": {"sandbox": sandbox}})
        kc.shell_channel.send(msg)
        outs = []
        while True:
            m = kc.get_iopub_msg(timeout=120)
            if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                continue
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return outs
            if m["msg_type"] in ("error", "execute_result"):
                outs.append((m["msg_type"], m["content"].get("ename") or m["content"]["data"]["text/plain"]))

    try:
        assert run(f"from pyrualean_robot import make\nrobo = make('robocasa', task={TASK!r}, seed=1, "
                   f"workspace={str(tmp_path)!r}, images='none', env_url={server.url!r})", False) == []
        out = run("robo.move_delta([0, 0, 0.03]).reached", True)
        assert out == [("execute_result", "True")], out
        assert world.calls.count("env.step") >= 10  # 9 calibration steps + the servo
        out = run("import urllib.request\nurllib.request.urlopen('" + server.url + "/call', b'{}', timeout=5)", True)
        assert out and out[0][0] == "error" and out[0][1] == "SandboxError", out
        server.close()  # the env server dies under the live robot: a ToolError, and the kernel keeps working
        out = run("robo.move_delta([0, 0, 0.01])", True)
        assert out == [("error", "ToolError")], out
        out = run("robo.state().step", True)
        assert out == [("execute_result", "1")], out
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("transport", ["http", "socket"])
def test_env_server_killed_mid_motion_is_a_clear_tool_error(transport, tmp_path):
    """The simulator process dies while a servo's steps are in flight: a ToolError naming the server (no hang),
    what was recorded stays readable, and later calls fail the same clear way at once."""
    pkg_root = str(Path(__import__("pyrualean_robot").__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-m", "fixtures.fake_robocasa", "env", "--task-name", TASK,
                             "--split", "target", "--seed", "3", "--transport", transport, "--step-delay", "0.1"],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": IMPORT_ROOT + os.pathsep + pkg_root + os.pathsep + os.environ.get("PYTHONPATH", "")})
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, line
        url = line.split()[-1]
        robo = make("robocasa", task=TASK, seed=3, workspace=str(tmp_path), images="none", env_url=url)
        killer = threading.Timer(0.5, proc.kill)
        killer.start()
        t0 = time.monotonic()
        with pytest.raises(ToolError, match="unreachable"):
            robo.move_delta([0.0, 0.0, 0.1])  # 9 calibration steps + the servo: ~2 s of steps
        assert time.monotonic() - t0 < 15
        killer.join()
        assert 0 < robo.env_steps < 40
        rec = robo.ledger[-1]
        assert rec["tool"] == "move_delta" and rec["ok"] is False and url.split("//")[1] in rec["error"]
        assert robo.state().step == 0 and robo.image().shape == (256, 256, 3)
        with pytest.raises(ToolError, match="unreachable"):
            robo.set_gripper(robo.CLOSE, steps=2)
        robo.close()
    finally:
        proc.kill()
        proc.wait(10)


def test_slow_env_server_past_the_timeout_is_a_tool_error(env, tmp_path, monkeypatch):
    server, world = env
    robo = _robot(server, tmp_path)
    monkeypatch.setitem(__import__("pyrualean_robot.robots.robocasa", fromlist=["TIMEOUTS"]).TIMEOUTS, "env.step", 0.3)
    world.step_delay_s = 1.0
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="timed out"):
        robo.set_gripper(robo.CLOSE, steps=3)
    assert time.monotonic() - t0 < 8
    world.step_delay_s = 0.0
    time.sleep(1.0)  # the late step lands on the server: the next reply is out of sequence, and says so
    with pytest.raises(ToolError, match="out of sequence"):
        robo.set_gripper(robo.CLOSE, steps=1)
    assert robo.state().step >= 0
    robo.close()


def test_vla_server_down_is_a_tool_error_and_nothing_moves(env, tmp_path):
    server, world = env
    port = _free_port()
    robo = _robot(server, tmp_path, vla_endpoint=f"http://127.0.0.1:{port}")
    t0 = time.monotonic()
    with pytest.raises(ToolError, match=f"127.0.0.1:{port} unreachable"):
        robo.rldx_skill(max_chunks=2)
    assert time.monotonic() - t0 < 15 and robo.env_steps == 0 and not robo.done
    assert robo.set_gripper(robo.CLOSE, steps=2).steps == 2  # scripted motion still works
    vserver, _ = serve_vla(world, port=port)  # the VLA comes up at that address: the next call connects
    try:
        assert robo.rldx_skill(max_chunks=2).chunks_used >= 1
    finally:
        vserver.close()
        robo.close()
