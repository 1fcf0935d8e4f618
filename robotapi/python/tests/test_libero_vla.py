"""LIBERO's VLA primitives (pi0_pick, pi0_doubled) against a fake of RPent's Pi0.5 server that speaks the real
``vla.predict`` RPC: the request has the upstream shape, the returned chunks run in the real LIBERO
simulator, and every failure is a ToolError that leaves the episode going. One LIBERO boot for the file."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pyrualean_robot import ToolError, make
from pyrualean_robot.apiref import api_reference
from pyrualean_robot.robots import pi05
from pyrualean_robot.robots.libero import Contact, LiberoRobot, Pick
from pyrualean_robot.robots.rpent import _free_port

from fixtures.fake_pi05 import FakePi05, Waypoint, serve

SUITE = "libero_spatial"
OBS_KEYS = {"main_images", "wrist_images", "extra_view_images", "states", "task_descriptions"}


@pytest.fixture(scope="module")
def robo(tmp_path_factory):
    r = make("libero", suite=SUITE, task=0, seed=0, workspace=str(tmp_path_factory.mktemp("libero-vla")),
             images="none")
    yield r
    r.close()


@pytest.fixture
def fake_at(robo):
    """fake_at(waypoints, **kw) -> the fake, served and set as robo's VLA endpoint for this test."""
    servers = []

    def start(waypoints, *, transport="http", **kw):
        fake = FakePi05(waypoints, **kw)
        srv = serve(fake, transport=transport)
        servers.append(srv)
        robo.vla_endpoint = srv.url
        return fake

    yield start
    robo.vla_endpoint = None
    for s in servers:
        s.close()


def _eef(robo) -> np.ndarray:
    return np.array(robo.state().eef_pos)


def test_quat2axisangle_and_frame_turn():
    for q in Rotation.random(5, random_state=0).as_quat():  # xyzw
        if q[3] < 0:
            q = -q
        assert np.allclose(pi05.quat2axisangle(q), Rotation.from_quat(q).as_rotvec(), atol=1e-6)
    assert np.allclose(pi05.quat2axisangle([0, 0, 0, 1.0]), 0)
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    # robosuite's frame is the upright image bottom row first; RLinf turns it by 180 degrees
    assert np.array_equal(pi05.libero_frame(img), img[::-1][::-1, ::-1])


@pytest.mark.heavy
def test_request_shape_and_chunks_move_the_arm(robo, fake_at):
    start = _eef(robo)
    st0 = robo.state()
    target = start + np.array([0.05, -0.04, -0.06])
    fake = fake_at([Waypoint(tuple(target), -1.0)])
    steps0 = robo.env_steps
    res = robo.pi0_doubled(max_chunks=6)
    assert isinstance(res, Contact) and res.chunks_used == 6 and res.steps_used == 30
    assert robo.env_steps - steps0 == 30 and not res.success and not robo.done
    assert np.linalg.norm(_eef(robo) - target) < 0.015, (_eef(robo), target)  # the eef went where commanded
    assert len(fake.requests) == 6
    obs, options = fake.requests[0]
    assert set(obs) == OBS_KEYS and options == {"mode": "eval"}
    for key in ("main_images", "wrist_images"):
        assert obs[key].shape == (1, 256, 256, 3) and obs[key].dtype == np.uint8 and obs[key].std() > 5
    assert obs["extra_view_images"] is None
    assert obs["states"].shape == (1, 8) and obs["states"].dtype == np.float32
    s = obs["states"][0]
    assert np.allclose(s[:3], st0.eef_pos, atol=1e-5)
    assert np.allclose(s[3:6], pi05.quat2axisangle(st0.eef_quat), atol=1e-5)
    assert np.allclose(s[6:8], st0.gripper_qpos, atol=1e-5)
    assert obs["task_descriptions"] == [robo.task]  # the prompt defaults to the task instruction
    # later requests see the arm where the previous chunk left it
    assert np.linalg.norm(fake.requests[-1][0]["states"][0, :3] - start) > 0.03
    rec = [r for r in robo.ledger if r["tool"] == "pi0_doubled"][-1]
    assert rec["tool"] == "pi0_doubled" and rec["ok"] and rec["env_steps"] == 30 and rec["stateful"]
    assert rec["summary"]["chunks_used"] == 6


@pytest.mark.heavy
def test_images_are_libero_frames_turned_180(robo):
    """main_images / wrist_images are robosuite's own camera observations (drawn by robosuite's renderer,
    256 px as RPent's LIBERO env server asks) turned by 180 degrees, as RLinf's get_libero_image does."""
    from robosuite.utils.binding_utils import MjRenderContextOffscreen

    sim = robo._sim.env.sim
    ctx = MjRenderContextOffscreen(sim, device_id=-1)
    try:
        obs = robo._vla_observation("x")
        for cam, key in (("agentview", "main_images"), ("robot0_eye_in_hand", "wrist_images")):
            raw = sim.render(camera_name=cam, width=256, height=256)  # robosuite's observation frame
            diff = np.abs(obs[key][0].astype(int) - raw[::-1, ::-1].astype(int))
            assert diff.mean() < 0.5, (cam, diff.mean())
    finally:
        ctx.gl_ctx.free()
        sim._render_context_offscreen = None


@pytest.mark.heavy
def test_pi0_pick_stops_on_the_lift_heuristic(robo, fake_at):
    p = _eef(robo)
    low = p + np.array([0.0, 0.0, -0.14])
    fake = fake_at([Waypoint(tuple(low), -1.0), Waypoint(tuple(low), 1.0, hold_steps=10),
                    Waypoint(tuple(low + np.array([0, 0, 0.09])), 1.0)])
    res = robo.pi0_pick("pick up the black bowl", max_chunks=24)
    assert isinstance(res, Pick) and res.success, res
    assert res.chunks_used < 24 and res.diagnostics["descent_done"]
    assert res.peak_lift_m >= 0.05 and res.final_gripper_opening < 0.06
    assert res.min_gripper_opening <= res.final_gripper_opening + 1e-9
    assert all(o["task_descriptions"] == ["pick up the black bowl"] for o, _ in fake.requests)
    assert len(fake.requests) == res.chunks_used and res.steps_used == 5 * res.chunks_used
    robo.set_gripper(robo.OPEN, steps=8)


@pytest.mark.heavy
def test_socket_transport(robo, fake_at):
    fake_at([Waypoint(tuple(_eef(robo)), -1.0)], transport="socket")
    steps0 = robo.env_steps
    res = robo.pi0_doubled(max_chunks=1)
    assert res.chunks_used == 1 and robo.env_steps - steps0 == 5


@pytest.mark.heavy
def test_older_predict_wire(robo, fake_at):
    """An RPent checkout from before the vla.predict facade serves "predict" with PNG images: the client
    falls back to it and the server decodes the very same observation."""
    fake = fake_at([Waypoint(tuple(_eef(robo) + np.array([0, 0.03, 0])), -1.0)], protocol="predict")
    expected = robo._vla_observation(robo.task)
    res = robo.pi0_doubled(max_chunks=2)
    assert res.chunks_used == 2 and res.steps_used == 10
    obs, options = fake.requests[0]
    assert options == {"mode": "eval"} and obs["task_descriptions"] == [robo.task]
    for key in ("main_images", "wrist_images", "states"):
        assert obs[key].shape == expected[key].shape and np.array_equal(obs[key], expected[key])


def test_server_facts_are_checked():
    client = pi05.Pi05Client("127.0.0.1:1", tool="pi0_pick")
    client.check_health({"status": "ok"})  # older servers say nothing more
    client.check_health({"status": "ok", "embodiment": "libero", "action_dim": 7, "action_horizon": 5})
    with pytest.raises(ToolError, match="embodiment 'behavior'.*--embodiment libero"):
        client.check_health({"embodiment": "behavior", "action_dim": 23})
    with pytest.raises(ToolError, match="14-D actions"):
        client.check_health({"action_dim": 14})


@pytest.mark.heavy
def test_no_vla_hides_and_refuses(robo, fake_at):
    full = api_reference(LiberoRobot)
    novla = api_reference(LiberoRobot, primitives="no-vla")
    assert "robo.pi0_pick(" in full and "robo.pi0_doubled(" in full
    assert "pi0_pick(" not in novla and "pi0_doubled(" not in novla
    # The no-vla reference and knowledge never mention the hidden calls (the original's libero-novla.md).
    assert "pi0" not in novla.lower() and "Pick(" in novla  # the scripted pick keeps its result type
    from pyrualean_robot.robots.libero import KNOWLEDGE, KNOWLEDGE_NOVLA

    assert "pi0_pick" in KNOWLEDGE and "pi0" not in KNOWLEDGE_NOVLA.lower() and "vla" not in KNOWLEDGE_NOVLA.lower()
    fake = fake_at([Waypoint(tuple(_eef(robo)), -1.0)])
    steps0 = robo.env_steps
    robo.primitives = "no-vla"
    try:
        for call in (lambda: robo.pi0_pick(), lambda: robo.pi0_doubled()):
            with pytest.raises(RuntimeError, match="not available in this run"):
                call()
    finally:
        robo.primitives = "full"
    assert robo.env_steps == steps0 and not fake.requests


@pytest.mark.heavy
@pytest.mark.parametrize("endpoint, expect", [
    (None, "no VLA endpoint configured.*pi05_vla_server"),
    ("unreachable", "unreachable"),
    ("ftp://x", "bad VLA endpoint"),
])
def test_missing_or_unreachable_endpoint(robo, endpoint, expect):
    robo.vla_endpoint = f"http://127.0.0.1:{_free_port()}" if endpoint == "unreachable" else endpoint
    steps0 = robo.env_steps
    try:
        with pytest.raises(ToolError, match=expect):
            robo.pi0_pick(max_chunks=2)
    finally:
        robo.vla_endpoint = None
    assert robo.env_steps == steps0 and not robo.done
    assert robo.move_to(_eef(robo) + np.array([0, 0, 0.03]), max_steps=10).steps_used > 0  # episode goes on


@pytest.mark.heavy
@pytest.mark.parametrize("reply, expect", [
    ("bad_shape", "malformed reply.*shape \\[1, 5, 3\\]"),
    ("nan", "malformed reply.*NaN"),
    ("text", "malformed reply"),
    ("error", "fake Pi0.5 failure"),
])
def test_malformed_reply(robo, fake_at, reply, expect):
    fake = fake_at([Waypoint(tuple(_eef(robo)), -1.0)], reply=reply)
    steps0 = robo.env_steps
    with pytest.raises(ToolError, match=expect) as ei:
        robo.pi0_doubled(max_chunks=3)
    assert ei.value.tool == "pi0_doubled"
    assert len(fake.requests) == 1 and robo.env_steps == steps0 and not robo.done
    rec = robo.ledger[-1]
    assert rec["tool"] == "pi0_doubled" and rec["ok"] is False and "ToolError" in rec["error"]


@pytest.mark.heavy
@pytest.mark.parametrize("kwargs", [dict(prompt=""), dict(max_chunks=0), dict(gripper_open_thresh=0.07),
                                    dict(lift_thresh=-1.0), dict(max_chunks=2.5)])
def test_bad_arguments_move_nothing(robo, fake_at, kwargs):
    fake = fake_at([Waypoint(tuple(_eef(robo)), -1.0)])
    steps0 = robo.env_steps
    with pytest.raises(ValueError):
        robo.pi0_pick(**kwargs)
    assert robo.env_steps == steps0 and not fake.requests


@pytest.mark.heavy
def test_vla_call_from_a_sandboxed_kernel_cell(tmp_path):
    """An agent cell (sandboxed: no sockets from policy code) calls pi0_doubled in the pyrualean kernel; the
    robot's own link to the Pi0.5 server works, the chunk runs, and the cell gets its on-motion images."""
    from jupyter_client.manager import start_new_kernel

    fake = FakePi05([Waypoint((0.0, 0.0, 0.0), -1.0)], step_clip=0.0)  # holds still: zero motion commands
    server = serve(fake)
    km, kc = start_new_kernel(kernel_name="pyrualean")

    def run(code: str, sandbox: bool) -> tuple[list, list]:
        content = dict(code=code, silent=False, store_history=True, user_expressions={}, allow_stdin=False,
                       stop_on_error=True)
        msg = kc.session.msg("execute_request", content, metadata={"pyrualean": {"sandbox": sandbox}})
        kc.shell_channel.send(msg)
        outs, images = [], []
        while True:
            m = kc.get_iopub_msg(timeout=240)
            if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                continue
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return outs, images
            if m["msg_type"] == "display_data":
                images.append(m["content"]["metadata"].get("pyrualean", {}).get("camera"))
            if m["msg_type"] in ("error", "execute_result"):
                outs.append((m["msg_type"], m["content"].get("ename") or m["content"]["data"]["text/plain"]))

    try:
        out, _ = run(f"from pyrualean_robot import make\nrobo = make('libero', suite={SUITE!r}, task=0, seed=0, "
                     f"workspace={str(tmp_path)!r}, vla_endpoint={server.url!r})", False)
        assert out == [], out
        out, images = run("r = robo.pi0_doubled('push the plate', max_chunks=2)\n(r.chunks_used, r.steps_used)", True)
        assert out == [("execute_result", "(2, 10)")], out
        assert images == ["agentview_high.png", "wrist_high.png"]  # the original's on-motion images (issue 14 #12)
        assert len(fake.requests) == 2 and fake.requests[0][0]["task_descriptions"] == ["push the plate"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        server.close()
