"""RoboTwin adapter against a fake RPent RoboTwin env server and a fake LingBot-VLA server (fixtures/fake_robotwin.py):
the contract identity, every primitive, the VLA protocol, both RPC transports, and RPent-checkout launch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pyrualean_robot import EpisodeFinished, ToolError, make
from pyrualean_robot.apiref import api_reference
from pyrualean_robot.robots.robotwin import (SUITES, TASKS, EnvMetaMismatch, RobotwinRobot,
                                             env_runtime_contract, launch_missing, rpent_env_argv,
                                             vla_runtime_contract)
from pyrualean_robot.robots.rpent import EnvServerUnavailable

from fixtures import IMPORT_ROOT
from fixtures.fake_robotwin import FakeLingBot, FakeRobotwinEnv, serve_env

TASK, SUITE, SEED = "lift_pot", "demo_clean", 3


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for k in ("PYRUALEAN_ENV_SERVER", "RPENT_ROOT", "PYRUALEAN_RPENT_ENV_CMD", "ROBOTWIN_ASSETS_PATH",
              "PYRUALEAN_VLA_ENDPOINT", "RPENT_PYTHON"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def fake(request):
    transport = getattr(request, "param", "http")
    env = FakeRobotwinEnv(task_name=TASK, task_config=SUITE, seed=SEED)
    server = serve_env(env, transport=transport)
    yield env, server
    server.close()


def _robot(server, tmp_path, **kw):
    kw.setdefault("images", "none")
    return make("robotwin", task=TASK, suite=SUITE, seed=SEED, workspace=str(tmp_path / "ws"), env_url=server.url,
                **kw)


def _block_pixel(robo):
    img = robo.image("head")
    red = np.argwhere((img[..., 0] > 200) & (img[..., 1] < 50))
    assert len(red) > 20
    return [int(v) for v in red.mean(axis=0)]


def test_contract_identity_and_mismatch(tmp_path):
    good = FakeRobotwinEnv(task_name=TASK, task_config=SUITE, seed=SEED)
    assert good.get_env_meta() == env_runtime_contract(task_name=TASK, task_config=SUITE, seed=SEED)
    assert good.meta["runtime"] == "rlinf_robotwin_env" and good.meta["execution"]["step_limit"] == 10000
    for label, env in [("seed", FakeRobotwinEnv(task_name=TASK, task_config=SUITE, seed=SEED + 1)),
                       ("task_name", FakeRobotwinEnv(task_name="click_bell", task_config=SUITE, seed=SEED)),
                       ("runtime", FakeRobotwinEnv(task_name=TASK, task_config=SUITE, seed=SEED,
                                                   meta_override={"runtime": "something_else"}))]:
        server = serve_env(env)
        try:
            with pytest.raises(EnvMetaMismatch, match="env_meta mismatch") as e:
                _robot(server, tmp_path)
            assert label in str(e.value) and "relaunch" in str(e.value)
            assert env.calls == ["get_env_meta"], "nothing may touch a mismatched episode"
        finally:
            server.close()
    with pytest.raises(ValueError, match="unknown RoboTwin task"):
        make("robotwin", task="lift_block", workspace=str(tmp_path))
    with pytest.raises(ValueError, match="suite"):
        make("robotwin", task=TASK, suite="easy", workspace=str(tmp_path))


def test_primitives_against_the_fake(fake, tmp_path):
    env, server = fake
    robo = _robot(server, tmp_path)
    assert env.calls[:2] == ["get_env_meta", "reset"] and robo.task == "Lift the red block 10 cm above the table."
    st = robo.state()
    assert st.step == 0 and st.left.gripper == robo.OPEN and st.take_action_cnt == 0 and st.step_lim == 10000
    assert np.allclose(st.left.approach, (0, 1, 0), atol=1e-6) and st.left.tcp_pos[1] - st.left.eef_pos[1] == \
        pytest.approx(robo.EEF_TO_TCP_M)
    # Bad arguments: ValueError before any RPC.
    n = len(env.calls)
    for bad in [lambda: robo.move_to("middle", [0, 0, 1]), lambda: robo.move_to("left", [0, 0]),
                lambda: robo.move_to("left", [0, 0, float("nan")]), lambda: robo.move_to("left", [0, 0, 1], quat=[0] * 4),
                lambda: robo.move_to("left", [0, 0, 1], gripper=2), lambda: robo.move_to("left", [0, 0, 1], substeps=-1),
                lambda: robo.set_gripper("left", 1.5), lambda: robo.set_gripper("left", 0, steps=0),
                lambda: robo.release("up"), lambda: robo.rotate_wrist("left", float("inf")),
                lambda: robo.lingbot_act(0), lambda: robo.lingbot_act(1, use_length=10),
                lambda: robo.image("top"), lambda: robo.image("head", resolution="low"),
                lambda: robo.sample_world_xyz("head", []), lambda: robo.sample_world_xyz("head", [["a", 2]]), lambda: robo.move_to("left", [0, 0, 1], substeps=2.5),
                lambda: robo.sample_world_xyz("head", [[1, 2]], neighborhood=40),
                lambda: robo.query_world_map("head", [0, 0, 10]), lambda: robo.artifact("head_rgb.jpg")]:
        with pytest.raises(ValueError):
            bad()
    assert len(env.calls) == n and robo.env_steps == 0
    # Perception on recorded step 0: the red block's top, the table height, the camera model.
    px = _block_pixel(robo)
    ws = robo.sample_world_xyz("head", px)
    assert robo.sample_world_xyz("head", [[px[0] + 0.7, np.float64(px[1])]]).samples[0].pixel == tuple(px)
    top = np.array(ws.xyz[0])
    assert ws.step == 0 and ws.image_shape == (240, 320) and ws.samples[0].valid_points == 9
    assert np.linalg.norm(top[:2] - env.block[:2]) < 0.01 and top[2] == pytest.approx(env.block[2] + 0.025, abs=1e-4)
    reg = robo.query_world_map("head", [0, 0, 240, 320], max_points=100)
    assert len(reg.points) == 100 and reg.valid_points == 240 * 320 and reg.xyz_median[2] == pytest.approx(0.74, abs=1e-4)
    meta = robo.camera_meta("head")
    assert set(meta) >= {"intrinsic_K", "extrinsic_cv", "cam2world_gl", "width", "height"}
    assert np.asarray(meta["extrinsic_cv"]).shape == (3, 4) and robo.depth("head").shape == (240, 320)
    assert robo.world_map("left_wrist").shape == (240, 320, 3) and robo.artifact("head_rgb.png")[:4] == b"\x89PNG"
    with pytest.raises(ToolError, match="pixel_out_of_bounds"):
        robo.sample_world_xyz("head", [[240, 0]])
    # Unreachable target: the planner refuses, nothing moves, no native action.
    before = robo.state().right.eef_pos
    mv = robo.move_to("right", [2.0, 0.0, 1.0])
    assert (mv.planned, mv.reached, mv.stop_reason, mv.final_eef_pos, mv.actions_used) == \
        (False, False, "plan_failed", None, 0)
    assert robo.state().right.eef_pos == before and robo.env_steps == 0
    # Grasp from above with qpos waypoints (RPent: plan_arm_path + one qpos14 env.step per waypoint).
    side = "left" if top[0] < 0 else "right"
    approach = np.array(robo.state().arm(side).approach)
    grasp = top - [0, 0, 0.025] - robo.EEF_TO_TCP_M * approach
    mv = robo.move_to(side, grasp + [0, 0, 0.06])
    assert mv.planned and mv.reached and mv.waypoints == mv.actions_used <= 25 and robo.env_steps == mv.actions_used
    assert env.calls.count("step:qpos") == mv.actions_used and "chunk_step:ee" not in env.calls
    mv = robo.move_to(side, grasp, substeps=1)
    assert mv.waypoints == 1 and mv.final_dist_m < 1e-6 and mv.stop_reason == "completed"
    g = robo.set_gripper(side, robo.CLOSE, steps=4)
    assert (g.target, g.final, g.actions_used) == (0.0, 0.0, 4) and env.held == side
    yaw0 = robo.state().arm(side).eef_yaw
    mv = robo.rotate_wrist(side, 10.0, substeps=3)
    assert mv.reached and robo.state().arm(side).eef_yaw - yaw0 == pytest.approx(np.radians(10), abs=1e-6)
    n_before, step_before = robo.env_steps, robo.state().step
    assert robo.render().step == step_before + 1 == robo.state().step and robo.env_steps == n_before
    steps_before = robo.env_steps
    mv = robo.move_to(side, grasp + [0, 0, 0.2])
    assert mv.terminated and mv.stop_reason == "native_success" and robo.done and robo.state().eval_success
    assert robo.env_steps < steps_before + mv.waypoints  # stopped on success
    with pytest.raises(EpisodeFinished):
        robo.release(side)
    moves = [r for r in robo.ledger if r["stateful"]]
    assert [(r["tool"], r["ok"]) for r in moves][-3:] == [("render", True), ("move_to", True), ("release", False)]
    assert moves[-2]["summary"]["terminated"] is True and moves[-2]["env_steps"] > 0
    assert "EpisodeFinished" in moves[-1]["error"] and moves[-1]["env_steps"] == 0
    assert robo.state(step=0).take_action_cnt == 0 and robo.image("head", step=0).shape == (240, 320, 3)
    assert os.path.isfile(tmp_path / "ws" / "robotwin_states" / "step_000" / "head_depth.npy")
    card = robo._episode_card()
    assert card["facts"]["native action budget (step_lim)"] == 10000 and "head" in card["images"]
    # what the original's host dump_card gives: both arms' initial EEF / TCP poses and grippers, the table height
    st0, facts = robo.state(step=0), card["facts"]
    for arm in ("left", "right"):
        assert facts[f"{arm} arm initial EEF position [x, y, z]"].endswith(" m")
        assert facts[f"{arm} arm initial EEF orientation [w, x, y, z]"].startswith("[")
        assert facts[f"{arm} arm initial TCP (gripper centre) [x, y, z]"].endswith(" m")
        assert facts[f"{arm} gripper"].startswith(f"{st0.arm(arm).gripper:.2f}")
    assert facts["left arm initial EEF position [x, y, z]"].startswith(f"[{st0.left.eef_pos[0]:.3f}, ")
    table_z = float(facts["table surface height (median z of the head world map at step 0)"][:-2])
    assert table_z == pytest.approx(float(np.nanmedian(robo.world_map("head", step=0)[..., 2])), abs=1e-3)
    robo.close()


@pytest.mark.parametrize("fake", ["socket"], indirect=True)
def test_lingbot_act_over_the_vla_protocol(fake, tmp_path):
    env, server = fake
    assert server.url.startswith("socket://")
    vla = FakeLingBot(env)
    try:
        robo = _robot(server, tmp_path, vla_endpoint=vla.endpoint)
        run = robo.lingbot_act(chunks=4)
        assert run.stop_reason == "native_success" and run.terminated and robo.done
        assert run.chunks_requested == 4 and run.actions_requested == 200 and 50 < run.actions_used < 100
        assert run.instruction == robo.task and robo.env_steps == run.actions_used
        assert env.calls.count("chunk_step:ee") == 2 and "step:qpos" not in env.calls
        p = vla.payloads[0]
        assert set(p) == {"observation.images.cam_high", "observation.images.cam_left_wrist",
                          "observation.images.cam_right_wrist", "observation.state", "task"}
        assert p["observation.images.cam_high"].shape == (240, 320, 3) and p["observation.state"].dtype == np.float32
        assert p["observation.state"].shape == (16,) and p["task"] == robo.task
        with pytest.raises(EpisodeFinished):
            robo.lingbot_act(1)
        robo.close()
    finally:
        vla.close()
    # no-vla: hidden from the reference and refused; no endpoint / wrong server: a clear ToolError.
    assert "lingbot_act" in api_reference(RobotwinRobot)
    assert "lingbot" not in api_reference(RobotwinRobot, primitives="no-vla").lower()
    env2 = FakeRobotwinEnv(task_name=TASK, task_config=SUITE, seed=SEED)
    server2 = serve_env(env2)
    wrong = FakeLingBot(env2, metadata={**vla_runtime_contract(), "action_layout": "qpos14"})
    try:
        robo = _robot(server2, tmp_path, primitives="no-vla", vla_endpoint=wrong.endpoint)
        with pytest.raises(RuntimeError, match="not available in this run"):
            robo.lingbot_act(1)
        assert "lingbot" not in robo._episode_card()["knowledge"].lower() and "lingbot" in RobotwinRobot.KNOWLEDGE
        robo.close()
        robo = _robot(server2, tmp_path)
        with pytest.raises(ToolError, match="PYRUALEAN_VLA_ENDPOINT"):
            robo.lingbot_act(1)
        robo.close()
        robo = _robot(server2, tmp_path, vla_endpoint=wrong.endpoint.replace("ws://", ""))
        with pytest.raises(ToolError, match="metadata mismatch"):
            robo.lingbot_act(1)
        assert robo.env_steps == 0 and not robo.done
        robo.close()
        # The VLA fails after one chunk: a ToolError carrying its traceback, the executed chunk is recorded,
        # and the next call reconnects.
        flaky = FakeLingBot(env2)
        flaky.fail_after = 1
        robo = _robot(server2, tmp_path, vla_endpoint=flaky.endpoint)
        step0 = robo.state().step
        with pytest.raises(ToolError, match="injected policy failure"):
            robo.lingbot_act(3)
        assert robo.env_steps == 50 and robo.state().step == step0 + 1 and robo.state().take_action_cnt == 50
        flaky.fail_after = None
        assert robo.lingbot_act(1).actions_used > 0 and robo.done
        robo.close()
        flaky.close()
    finally:
        wrong.close()
        server2.close()


def test_step_budget_and_malformed_replies(tmp_path):
    env = FakeRobotwinEnv(task_name=TASK, task_config=SUITE, seed=SEED, max_episode_steps=30)
    server = serve_env(env)
    try:
        robo = _robot(server, tmp_path, max_env_steps=30)
        assert robo.state().step_lim == 30
        pos = np.add(robo.state().left.eef_pos, [0.0, 0.0, 0.05])
        assert robo.move_to("left", pos, substeps=0).actions_used == 5
        mv = robo.move_to("left", np.add(pos, [0.3, 0.0, 0.0]), substeps=0)
        assert (mv.stop_reason, mv.truncated, mv.terminated, mv.actions_used) == ("budget_exhausted", True, False, 25)
        assert robo.state().actions_left == 0 and robo.done and not robo.state().eval_success
        with pytest.raises(EpisodeFinished, match="truncated"):
            robo.set_gripper("left", 0.0)
        robo.close()
        # A server whose replies break the contract: a ToolError that says what is missing.
        env2 = FakeRobotwinEnv(task_name=TASK, task_config=SUITE, seed=SEED)
        server2 = serve_env(env2)
        robo = _robot(server2, tmp_path)
        env2._status = lambda: {"eval_success": False, "take_action_cnt": 0, "step_lim": 10000}
        with pytest.raises(ToolError, match=r"episode_status is missing \['actual_seed'\]"):
            robo.set_gripper("right", 0.5, steps=1)
        robo.close()
        server2.close()
    finally:
        server.close()


def test_rpent_root_launches_rpents_env_server(tmp_path, monkeypatch):
    """RPENT_ROOT: the adapter runs robots/robotwin/env_server.py of the checkout with RPent's arguments."""
    root = tmp_path / "RPent"
    (root / "robots" / "robotwin").mkdir(parents=True)
    (root / "robots" / "robotwin" / "env_server.py").write_text(textwrap.dedent(f"""\
        # RPent's CLI: --task-name --task-config --seed --max-episode-steps --assets-path --transport --host
        # --port --parent-watch; served here by the fake.
        import os, sys
        sys.path.insert(0, {IMPORT_ROOT!r})
        from fixtures.fake_robotwin import main
        assert os.environ["ROBOTWIN_ASSETS_PATH"] == sys.argv[sys.argv.index("--assets-path") + 1]
        sys.exit(main(["env", *sys.argv[1:]]))
        """))
    assets = tmp_path / "assets"
    assets.mkdir()
    monkeypatch.setenv("RPENT_ROOT", str(root))
    monkeypatch.setenv("RPENT_PYTHON", sys.executable)
    with pytest.raises(EnvServerUnavailable, match="ROBOTWIN_ASSETS_PATH"):
        make("robotwin", task=TASK, suite=SUITE, seed=SEED, workspace=str(tmp_path / "ws"), images="none")
    monkeypatch.setenv("ROBOTWIN_ASSETS_PATH", str(assets))
    robo = make("robotwin", task=TASK, suite=SUITE, seed=SEED, workspace=str(tmp_path / "ws"), images="none")
    proc = robo._proc
    try:
        argv = proc.args
        assert argv[argv.index("--transport") + 1] == "http" and "--parent-watch" in argv
        assert argv[argv.index("--task-config") + 1] == SUITE and argv[argv.index("--seed") + 1] == str(SEED)
        assert argv[argv.index("--max-episode-steps") + 1] == "10000" and argv[argv.index("--assets-path") + 1] == \
            str(assets) and argv[3].endswith("robots/robotwin/env_server.py")
        assert robo._client.url.startswith("http://127.0.0.1:") and robo.state().step == 0
        assert robo.move_to("left", np.add(robo.state().left.eef_pos, [0, 0, 0.02])).reached
    finally:
        robo.close()
    assert proc.poll() is not None, "close() must stop the env server it started"
    monkeypatch.setenv("RPENT_ROOT", str(tmp_path))
    with pytest.raises(EnvServerUnavailable, match="robots/robotwin/env_server.py"):
        make("robotwin", task=TASK, workspace=str(tmp_path / "ws"), images="none")
    # An older RPent env server without --max-episode-steps (fixed 10000 budget) gets none.
    (root / "robots" / "robotwin" / "env_server.py").write_text("print('old server')\n")
    argv = rpent_env_argv(str(root), 1234, task=TASK, suite=SUITE, seed=SEED)
    assert "--max-episode-steps" not in argv and argv[:2] == ["env", f"ROBOTWIN_ASSETS_PATH={assets}"]
    with pytest.raises(EnvServerUnavailable, match="max-episode-steps"):
        rpent_env_argv(str(root), 1234, task=TASK, suite=SUITE, seed=SEED, max_episode_steps=500)


def test_without_a_server_the_error_names_what_to_install_and_tasks_need_none(tmp_path):
    with pytest.raises(EnvServerUnavailable) as e:
        make("robotwin", workspace=str(tmp_path))
    msg = str(e.value)
    assert "RPENT_ROOT" in msg and "PYRUALEAN_ENV_SERVER" in msg and "RLinf/RPent" in msg and "GPU" in msg
    assert len(TASKS) == len(set(TASKS)) == 50 and SUITES == ("demo_randomized", "demo_clean")
    assert [t.name for t in RobotwinRobot.tasks()] == list(TASKS)
    missing = launch_missing()
    assert any("RPENT_ROOT" in m for m in missing) and any("ROBOTWIN_ASSETS_PATH" in m for m in missing)


@pytest.mark.heavy
def test_in_a_sandboxed_kernel_cell(tmp_path):
    """The robot's own links (env RPC, LingBot websocket, recorded steps) work from sandboxed agent cells."""
    from jupyter_client.manager import start_new_kernel

    from test_kernel import REPORT, images, report, run

    km, kc = start_new_kernel(kernel_name="pyrualean", cwd=str(tmp_path))
    try:
        outs, rep = run(kc, textwrap.dedent(f"""\
            from pyrualean_robot import make
            import sys
            sys.path.insert(0, {IMPORT_ROOT!r})
            from fixtures.fake_robotwin import FakeLingBot, FakeRobotwinEnv, serve_env
            env = FakeRobotwinEnv(task_name={TASK!r}, task_config={SUITE!r}, seed={SEED})
            server, vla = serve_env(env, transport="socket"), FakeLingBot(env)
            robo = make("robotwin", task={TASK!r}, suite={SUITE!r}, seed={SEED}, workspace={str(tmp_path)!r},
                        env_url=server.url, vla_endpoint=vla.endpoint)
            """))
        assert rep["status"] == "ok", outs
        outs, rep = run(kc, "m = robo.move_to('left', robo.state().left.eef_pos, substeps=2)\n"
                            "print(m.planned, robo.sample_world_xyz('head', [120, 160]).xyz)", sandbox=True,
                        user_expressions=REPORT)
        assert rep["status"] == "ok", outs
        assert [m["camera"] for m, _ in images(outs)] == ["head", "left_wrist", "right_wrist"]
        assert [c["tool"] for c in report(rep)["calls"]] == ["state", "move_to", "sample_world_xyz"]
        outs, rep = run(kc, "run = robo.lingbot_act(chunks=2); print(run.stop_reason, robo.done)", sandbox=True)
        assert rep["status"] == "ok", outs
        assert "native_success True" in "".join(o["content"].get("text", "") for o in outs)
        outs, rep = run(kc, "import socket; socket.socket()", sandbox=True)
        assert rep["status"] == "error" and rep["ename"] == "SandboxError"  # the agent's own sockets still refused
        # The env server goes away under a live robot: the cell fails with a ToolError naming the server, and the
        # kernel and the robot object keep answering.
        outs, rep = run(kc, textwrap.dedent(f"""\
            server2 = serve_env(FakeRobotwinEnv(task_name={TASK!r}, task_config={SUITE!r}, seed={SEED}))
            robo2 = make("robotwin", task={TASK!r}, suite={SUITE!r}, seed={SEED}, workspace={str(tmp_path / "w2")!r},
                         env_url=server2.url, images="none")
            server2.close()
            """))
        assert rep["status"] == "ok", outs
        outs, rep = run(kc, "robo2.move_to('left', robo2.state().left.eef_pos, substeps=2)", sandbox=True)
        assert rep["status"] == "error" and rep["ename"] == "ToolError" and "unreachable" in rep["evalue"], rep
        outs, rep = run(kc, "print(robo2.state().step, [r['ok'] for r in robo2.ledger if r['tool'] == 'move_to'])",
                        sandbox=True)
        assert rep["status"] == "ok" and "0 [False]" in "".join(o["content"].get("text", "") for o in outs)
        run(kc, "robo.close(); vla.close(); server.close(); robo2.close()")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _spawn_fake_env(tmp_path, *extra):
    """RPent's env-server command line, served by the fake in its own process (so a test can kill it)."""
    pkg_root = str(Path(__import__("pyrualean_robot").__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-m", "fixtures.fake_robotwin", "env", "--task-name", TASK,
                             "--task-config", SUITE, "--seed", str(SEED), "--assets-path", str(tmp_path), *extra],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": IMPORT_ROOT + os.pathsep + pkg_root + os.pathsep + os.environ.get("PYTHONPATH", "")})
    line = proc.stdout.readline()
    assert "listening on" in line, line
    return proc, line.split()[-1]


@pytest.mark.parametrize("transport", ["http", "socket"])
def test_env_server_killed_mid_motion_is_a_clear_tool_error(transport, tmp_path):
    proc, url = _spawn_fake_env(tmp_path, "--step-delay", "0.15", "--transport", transport)
    try:
        robo = make("robotwin", task=TASK, suite=SUITE, seed=SEED, workspace=str(tmp_path / "ws"), env_url=url,
                    images="none")
        left = robo.state().left.eef_pos
        killer = threading.Timer(0.5, proc.kill)  # the simulator dies while move_to's waypoints are in flight
        killer.start()
        t0 = time.monotonic()
        with pytest.raises(ToolError, match=rf"unreachable.*{url.split('//')[1]}|{url.split('//')[1]}.*unreachable"):
            robo.move_to("left", [left[0], left[1], left[2] + 0.05], substeps=40)
        assert time.monotonic() - t0 < 15  # an error, not a hang
        killer.join()
        assert 0 < robo.env_steps < 40  # some waypoints ran before the server died
        rec = robo.ledger[-1]
        assert rec["tool"] == "move_to" and rec["ok"] is False and rec["error"].startswith("ToolError")
        assert robo.state().step == 0 and robo.image("head").shape == (240, 320, 3)  # what was recorded stays
        with pytest.raises(ToolError, match="unreachable"):  # later calls fail the same clear way, at once
            robo.set_gripper("left", robo.CLOSE, steps=2)
        robo.close()
    finally:
        proc.kill()
        proc.wait(10)


def test_slow_env_server_past_the_timeout_is_a_tool_error(fake, tmp_path, monkeypatch):
    env, server = fake
    robo = _robot(server, tmp_path)
    monkeypatch.setattr("pyrualean_robot.robots.robotwin.STATE_CHANGE_TIMEOUT_S", 0.3)
    env.step_delay_s = 1.0
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="timed out"):
        robo.set_gripper("right", robo.CLOSE, steps=3)
    assert time.monotonic() - t0 < 5
    env.step_delay_s = 0.0
    assert robo.render().step >= 0  # the server answers again: the robot keeps working
    robo.close()


def test_vla_server_down_is_a_tool_error_and_nothing_moves(fake, tmp_path):
    env, server = fake
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    robo = _robot(server, tmp_path, vla_endpoint=f"ws://127.0.0.1:{port}")
    t0 = time.monotonic()
    with pytest.raises(ToolError, match=rf"LingBot-VLA server ws://127.0.0.1:{port} unreachable"):
        robo.lingbot_act(1)
    assert time.monotonic() - t0 < 15 and robo.env_steps == 0 and not robo.done
    assert robo.set_gripper("left", robo.CLOSE, steps=2).actions_used == 2  # scripted motion still works
    # the VLA comes up later at that address: the next call connects
    vla = FakeLingBot(env, port=port)
    try:
        assert robo.lingbot_act(1).actions_used > 0
    finally:
        vla.close()
        robo.close()
