"""The RoboDojo XPolicyLab policy dir (robotapi/robodojo) end to end, without Isaac Sim.

RoboDojo's side is reproduced from upstream, not from our own protocol module: ``XplClient`` speaks XPolicyLab's
WebSocket client protocol (client_server/ws/protocol/{client,codec,schemas}.py and ws/model_client.py: msgpack
maps in Frame.to_wire_dict key order, msgpack_numpy arrays, WsModelClient.call routing) and ``FakeEvalEnv``
behaves like RoboDojo's EvalEnv (src/eval_client/eval_env.py: reset -> model reset, validate_action_dict,
gripper clipping, step_lim, end_flag/success). The policy side is the real thing: serve.py's server, model.py,
deploy.py, and per episode a real agent process driving make("robodojo_xpl_rgb") -- one test through
``bin/pyrualean play --runtime replay`` with a real kernel.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Optional

import msgpack
import msgpack_numpy
import numpy as np
import pytest
import yaml
from websockets.sync.client import connect

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
POLICY_DIR = os.path.join(ROOT, "robotapi", "robodojo")
PYRUALEAN = os.path.join(ROOT, "bin", "pyrualean")
sys.path.insert(0, POLICY_DIR)

import deploy as policy_deploy  # noqa: E402
import model as policy_model  # noqa: E402
import serve as policy_serve  # noqa: E402

CAMS = ("cam_head", "cam_left_wrist", "cam_right_wrist")
H, W = 120, 160  # smaller than robo's 240x320: the bridge must resize and rescale the intrinsics


# ----- XPolicyLab's eval client, reimplemented from upstream ---------------------------------------------
class XplError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def wire(message_type: str, payload: dict, *, evaluation_id: str = "run-1", trial_id: Optional[str] = None,
         action_case_id: Optional[str] = "stack_blocks_case", step: int = 0, message_id: Optional[str] = None) -> bytes:
    """schemas.py Frame.to_wire_dict (pydantic field order, request_id renamed message_id, payload last),
    packed like codec.py encode_frame."""
    frame = {"message_type": message_type, "evaluation_id": evaluation_id, "action_case_id": action_case_id,
             "trial_id": trial_id, "repeat_index": None, "step": step,
             "sent_at": datetime.now(timezone.utc).isoformat(), "message_id": message_id or str(uuid.uuid4()),
             "payload": payload}
    return msgpack.packb(frame, default=msgpack_numpy.encode, use_bin_type=True)


def unwire(data: bytes) -> dict:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, object_hook=msgpack_numpy.decode)


class XplClient:
    """WsModelClient over PolicyEvalClient: hello on connect; reset/trial_end/infer/call frames; an error frame
    raises. get_action with obs -> one INFER frame (actions in payload.actions); other calls -> CALL."""

    def __init__(self, url: str, trial_id: str = "stack_blocks-run-1"):
        self._conn = connect(url, max_size=None, compression=None)
        self.ws = self._conn.__enter__()
        self.trial_id, self.step = trial_id, 0
        ack = self.request("hello", {})
        assert ack["payload"]["ok"] and ack["payload"]["server_instance_id"]

    def request(self, message_type: str, payload: dict, *, timeout: float = 60, **kw: Any) -> dict:
        mid = str(uuid.uuid4())
        self.ws.send(wire(message_type, payload, message_id=mid, **kw))
        while True:
            f = unwire(self.ws.recv(timeout=timeout))
            if f["message_id"] != mid:
                continue
            if f["message_type"] == "error":
                raise XplError(f["payload"]["code"], f["payload"]["message"])
            expected = {"hello": "hello_ack", "reset": "reset_result", "infer": "infer_result",
                        "call": "call_result", "trial_end": "trial_end_ack", "heartbeat": "heartbeat_ack"}
            assert f["message_type"] == expected[message_type], f
            assert list(f) == ["message_type", "evaluation_id", "action_case_id", "trial_id", "repeat_index", "step",
                               "sent_at", "message_id", "payload"]
            return f

    def call(self, func_name: str, obs: Any = None) -> Any:
        if func_name == "reset":
            self.step = 0
            return self.request("reset", {"trial_id": self.trial_id}, trial_id=self.trial_id)["payload"].get("result")
        if func_name == "trial_end":
            body = {**(obs or {}), "trial_id": self.trial_id}
            return self.request("trial_end", body, trial_id=self.trial_id)["payload"].get("result")
        if func_name == "get_action" and obs is not None:
            r = self.request("infer", {"observation": obs}, trial_id=self.trial_id, step=self.step)
            self.step += 1
            return r["payload"]["actions"]
        payload = {"func_name": func_name, **({"obs": obs} if obs is not None else {})}
        return self.request("call", payload, trial_id=self.trial_id, step=self.step)["payload"].get("result")

    def close(self) -> None:
        self._conn.__exit__(None, None, None)


# ----- RoboDojo's EvalEnv, reduced to what the policy sees ------------------------------------------------
class FakeEvalEnv:
    """Dual ARX X5 whose state jumps to each action; obs laid out like obs_manager.get_obs; actions checked
    like validate_action_dict; RoboDojo's end rules: success predicate or step_lim."""

    def __init__(self, client: XplClient, *, step_lim: int = 400,
                 success_if: Optional[Callable[[dict], bool]] = None):
        self.model_client, self.step_lim, self.success_if = client, step_lim, success_if
        self.actions: list[dict] = []

    def reset(self) -> Any:
        self.state = {"left_arm_joint_state": np.zeros(6, np.float32), "right_arm_joint_state": np.zeros(6, np.float32),
                      "left_ee_pose": np.array([0.3, 0.2, 0.9, 1, 0, 0, 0], np.float32),
                      "right_ee_pose": np.array([0.3, -0.2, 0.9, 1, 0, 0, 0], np.float32),
                      "left_ee_joint_state": [1.0], "right_ee_joint_state": [1.0]}
        self.success, self.end_flag, self.take_action_cnt = [True], [False], [0]
        self.actions = []
        return self.model_client.call(func_name="reset")

    def get_obs(self) -> dict:
        rgb = np.zeros((H, W, 3), np.uint8)
        rgb[..., 0] = 200  # red in RGB: a channel swap anywhere shows up as blue
        K = np.array([[300.0, 0, W / 2], [0, 300.0, H / 2], [0, 0, 1]])
        vision = {c: {"color": rgb, "shape": rgb.shape, "approximate_depth": np.full((H, W), 1500, np.uint16),
                      "intrinsic_matrix": K, "extrinsic_matrix": np.eye(4)} for c in CAMS}
        state = {k: np.asarray(v, np.float32) for k, v in self.state.items()}
        return {"vision": vision, "state": state, "action": dict(state), "data_format_version": "v1.0",
                "additional_info": {"frequency": 25}, "instruction": "stack the blocks", "env_idx": 0}

    def take_action(self, action: dict) -> None:
        expected = {f"{a}_{k}": n for a in ("left", "right") for k, n in
                    (("arm_joint_state", 6), ("ee_joint_state", 1), ("ee_pose", 7), ("tcp_pose", 7),
                     ("delta_ee_pose", 7))}
        bad = [k for k in action if k not in expected]
        assert not bad, f"Unexpected state keys: {bad}"
        for k, v in action.items():
            assert isinstance(v, (np.ndarray, list, tuple)), (k, type(v))
            assert np.asarray(v).shape == (expected[k],), (k, np.asarray(v).shape)
        kinds = {"joint" if "left_arm_joint_state" in action else None, "ee" if "left_ee_pose" in action else None}
        kinds.discard(None)
        assert len(kinds) == 1, f"cannot infer one action type from {sorted(action)}"
        if self.take_action_cnt[0] == self.step_lim or self.end_flag[0]:
            return
        self.take_action_cnt[0] += 1
        self.actions.append(action)
        for k, v in action.items():
            v = np.asarray(v, np.float32)
            self.state[k] = np.clip(v, 0, 1) if k.endswith("ee_joint_state") else v
        self.is_episode_end()

    def is_episode_end(self) -> bool:
        if not self.end_flag[0]:
            if self.success_if is not None and self.success_if(self.state):
                self.end_flag[0], self.success[0] = True, True
            elif self.take_action_cnt[0] >= self.step_lim:
                self.end_flag[0], self.success[0] = True, False
        return all(self.end_flag)


# ----- fixtures --------------------------------------------------------------------------------------------
def agent_script(body: str, tmp_path) -> str:
    """A python agent (the stand-in for `pyrualean play`): runs ``body`` against make("robodojo_xpl_rgb") and
    dumps the dict ``out`` to <run_dir>/report.json."""
    path = tmp_path / f"agent_{uuid.uuid4().hex[:6]}.py"
    path.write_text("import json, os, sys\nfrom pyrualean_robot import make\n"
                    "robo = make('robodojo_xpl_rgb', images='none', workspace=os.path.join(sys.argv[1], 'ws'))\n"
                    "out = {}\n" + textwrap.dedent(body) +
                    "\njson.dump(out, open(os.path.join(sys.argv[1], 'report.json'), 'w'))\n")
    return f"{sys.executable} {path} {{run_dir}}"


class Policy:
    """serve.py's PolicyServer + model.Model on a background event loop."""

    def __init__(self, tmp_path, **overrides: Any):
        with open(os.path.join(POLICY_DIR, "deploy.yml"), encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        cfg.update(task_name="stack_blocks", out_dir=str(tmp_path / "runs"), think_timeout_s=30, finish_grace_s=20,
                   hold_chunk=10, step_timeout_s=60)
        cfg.update(overrides)
        self.model = policy_model.Model(cfg)
        self.server = policy_serve.PolicyServer(self.model, "127.0.0.1", 0)
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        urls: list[str] = []

        def run() -> None:
            urls.append(self.loop.run_until_complete(self.server.start()))
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(10)
        self.url = urls[0]

    def close(self) -> None:
        self.model.close()
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def policy(tmp_path):
    made: list[Policy] = []

    def start(**overrides: Any) -> Policy:
        p = Policy(tmp_path, **overrides)
        made.append(p)
        return p

    yield start
    for p in made:
        p.close()


def episode_record(run_dir: str, timeout: float = 40) -> dict:
    path = os.path.join(run_dir, "episode.json")
    deadline = time.time() + timeout
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.1)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ----- tests -------------------------------------------------------------------------------------------------
JOINT_AGENT = """
img = robo.image('cam_head')
meta = robo.camera_meta('cam_head')
d = robo.depth('cam_head')
try:
    robo.move_to('left', [0, 0, 1])
    out['ee'] = 'accepted'
except ValueError as e:
    out['ee'] = str(e)
m1 = robo.move_joints(left=[0.1] * 6, right=[-0.2] * 6, steps=5)
m2 = robo.set_gripper('left', robo.CLOSE, steps=3)
st = robo.state()
out.update(task=robo.task, pixel=img[0, 0].tolist(), shape=list(img.shape), fx=meta['intrinsic_K'][0][0],
           cx=meta['intrinsic_K'][0][2], depth=float(d[5, 5]), depth_shape=list(d.shape), left=list(st.left.joints),
           right=list(st.right.joints), grip=st.left.gripper, sent=[m1.actions_sent, m2.actions_sent],
           over=st.episode_over, action_type=st.action_type)
"""


def test_joint_episodes_each_run_their_own_agent_and_hold_until_robodojo_ends(policy, tmp_path):
    p = policy(action_type="joint", agent_cmd=agent_script(JOINT_AGENT, tmp_path))
    client = XplClient(p.url)
    for episode in (1, 2):
        env = FakeEvalEnv(client, step_lim=40, success_if=lambda s: float(s["left_ee_joint_state"][0]) < 0.05 and
                          episode == 1)
        r = env.reset()
        run_dir = r["run_dir"]
        assert r["episode"] == episode and run_dir.endswith(f"stack_blocks/seed0_ep{episode:03d}")
        policy_deploy.eval_one_episode(TASK_ENV=env, model_client=client)
        rec = episode_record(run_dir)
        got = json.load(open(os.path.join(run_dir, "report.json")))
        assert got["task"] == "stack the blocks" and got["action_type"] == "joint"
        assert got["pixel"] == [200, 0, 0] and got["shape"] == [240, 320, 3]  # RGB kept, resized
        assert got["fx"] == pytest.approx(600.0) and got["cx"] == pytest.approx(160.0)  # K scaled x2
        assert got["depth"] == pytest.approx(1.5) and got["depth_shape"] == [240, 320]
        assert np.allclose(got["left"], 0.1, atol=1e-6) and np.allclose(got["right"], -0.2, atol=1e-6)
        assert got["grip"] == pytest.approx(0.0) and got["sent"] == [5, 3]
        assert "move_joints" in got["ee"]  # a joint run refuses ee motions, saying what to use
        # the agent's 8 actions reached RoboDojo in order, interpolated, with RoboDojo's key set
        a = env.actions
        assert set(a[0]) == {"left_arm_joint_state", "right_arm_joint_state", "left_ee_joint_state",
                             "right_ee_joint_state"}
        agent = [x for x in a if np.asarray(x["left_arm_joint_state"]).any()]
        assert np.allclose(agent[0]["left_arm_joint_state"], 0.02) and np.allclose(agent[4]["left_arm_joint_state"], 0.1)
        if episode == 1:  # closing the gripper is this fake task's success: RoboDojo ends the episode
            assert env.success == [True] and rec["success"] is True
            assert env.take_action_cnt[0] < 40
        else:  # the agent finished early: the policy holds still until RoboDojo's step limit
            assert env.success == [False] and env.take_action_cnt[0] == 40 and rec["success"] is False
            assert rec["hold_steps"] >= 40 - 8
            assert all(np.allclose(x["left_arm_joint_state"], 0.1) for x in a[8:])
        assert rec["agent_exit"] == 0 and rec["agent_steps"] == 8 and rec["robodojo"]["steps"] == env.take_action_cnt[0]
    runs = sorted(os.listdir(os.path.join(str(tmp_path / "runs"), "stack_blocks")))
    assert runs == ["seed0_ep001", "seed0_ep002"]
    client.close()


EE_AGENT = """
st0 = robo.state()
m = robo.move_to('right', [0.35, -0.1, 0.95], quat=[0, 1, 0, 0], gripper=0.5, steps=4)
try:
    robo.move_joints(left=[0] * 6)
    out['joint'] = 'accepted'
except ValueError as e:
    out['joint'] = str(e)
out.update(pose=list(robo.state().right.ee_pose), sent=m.actions_sent, grip=robo.state().right.gripper)
"""


def test_ee_episode_sends_ee_poses(policy, tmp_path):
    p = policy(action_type="ee", agent_cmd=agent_script(EE_AGENT, tmp_path))
    client = XplClient(p.url)
    env = FakeEvalEnv(client, step_lim=30)
    run_dir = env.reset()["run_dir"]
    policy_deploy.eval_one_episode(TASK_ENV=env, model_client=client)
    got = json.load(open(os.path.join(run_dir, "report.json")))
    assert got["sent"] == 4 and "move_to" in got["joint"]
    assert np.allclose(got["pose"], [0.35, -0.1, 0.95, 0, 1, 0, 0], atol=1e-5) and got["grip"] == pytest.approx(0.5)
    first = env.actions[0]
    assert set(first) == {"left_ee_pose", "right_ee_pose", "left_ee_joint_state", "right_ee_joint_state"}
    assert np.allclose(first["left_ee_pose"], [0.3, 0.2, 0.9, 1, 0, 0, 0], atol=1e-6)  # the other arm holds
    q = np.asarray(env.actions[1]["right_ee_pose"][3:])
    assert np.linalg.norm(q) == pytest.approx(1.0)  # interpolated orientations stay unit quaternions
    assert env.take_action_cnt[0] == 30 and episode_record(run_dir)["agent_steps"] == 4
    client.close()


ENDED_AGENT = """
from pyrualean_robot.errors import EpisodeFinished
m = robo.move_joints(left=[0.5] * 6, steps=30)
try:
    robo.move_joints(left=[0.0] * 6, steps=5)
    out['after'] = 'moved'
except EpisodeFinished as e:
    out['after'] = 'EpisodeFinished'
st = robo.state()
out.update(sent=m.actions_sent, over=m.episode_over, truncated=m.truncated, success=st.success,
           state_over=st.episode_over, steps=robo.env_steps)
"""


def test_robodojo_ends_the_episode_mid_motion(policy, tmp_path):
    p = policy(action_type="joint", agent_cmd=agent_script(ENDED_AGENT, tmp_path))
    client = XplClient(p.url)
    env = FakeEvalEnv(client, step_lim=12)
    run_dir = env.reset()["run_dir"]
    policy_deploy.eval_one_episode(TASK_ENV=env, model_client=client)
    assert env.take_action_cnt[0] == 12 and env.success == [False]
    rec = episode_record(run_dir)
    got = json.load(open(os.path.join(run_dir, "report.json")))
    # the motion returned when RoboDojo ended the episode (not after step_timeout_s), marked over and failed
    assert got["over"] and got["state_over"] and got["truncated"] and got["success"] is False
    assert got["after"] == "EpisodeFinished"  # the episode is over for the agent too
    assert got["sent"] == 12 == got["steps"]  # RoboDojo executed 12 of the 30 actions
    assert rec["agent_exit"] == 0 and rec["success"] is False and rec["robodojo"]["step_lim"] == 12
    client.close()


def test_agent_dying_mid_episode_is_a_clear_error_to_robodojo(policy, tmp_path):
    body = "robo.move_joints(left=[0.1] * 6, steps=2)\nos.kill(os.getpid(), 9)\n"
    p = policy(action_type="joint", agent_cmd=agent_script(body, tmp_path))
    client = XplClient(p.url)
    env = FakeEvalEnv(client, step_lim=200)
    run_dir = env.reset()["run_dir"]
    with pytest.raises(XplError) as e:
        policy_deploy.eval_one_episode(TASK_ENV=env, model_client=client)
    assert e.value.code == "infer_failed"
    assert "exited with status -9" in e.value.message and run_dir in e.value.message
    rec = episode_record(run_dir)
    assert rec["robodojo"]["error"].startswith("XplError") and rec["agent_exit"] == -9
    # the server keeps serving
    assert client.request("heartbeat", {})["payload"]["ok"]
    client.close()


def test_a_stock_xpolicylab_loop_over_call_frames_without_trial_end(policy, tmp_path):
    """XPolicyLab's usual deploy.py (policy/DP/deploy.py) with the newer WsModelClient: update_obs after every
    action and get_action as CALL frames, and no trial_end; the next reset ends the episode."""
    body = "m = robo.move_joints(left=[0.2] * 6, steps=4)\nout.update(sent=m.actions_sent, left=list(robo.state().left.joints))\n"
    p = policy(action_type="joint", agent_cmd=agent_script(body, tmp_path))
    client = XplClient(p.url)
    env = FakeEvalEnv(client, step_lim=20)
    first = env.reset()["run_dir"]
    while not env.is_episode_end():
        client.call("update_obs", env.get_obs())
        actions = client.call("get_action")
        for i, action in enumerate(actions):
            env.take_action(action)
            if env.is_episode_end() or i + 1 == len(actions):
                break
            client.call("update_obs", env.get_obs())
    assert env.take_action_cnt[0] == 20
    second = env.reset()["run_dir"]
    assert second != first
    rec = episode_record(first)
    got = json.load(open(os.path.join(first, "report.json")))
    assert got["sent"] == 4 and np.allclose(got["left"], 0.2, atol=1e-6)  # returned after the whole chunk ran
    assert rec["robodojo"] == {"ended_by": "reset"} and rec["success"] is None and rec["agent_steps"] == 4
    client.close()


def test_malformed_frames_get_error_frames_and_the_server_keeps_serving(policy, tmp_path):
    p = policy(agent_cmd=agent_script("pass", tmp_path))
    client = XplClient(p.url)
    ws = client.ws

    def raw(data: bytes, text: bool = False) -> Optional[dict]:
        ws.send(data.decode() if text else data)
        try:
            return unwire(ws.recv(timeout=1))
        except TimeoutError:
            return None

    bad = raw(wire("infer", {}, message_id="m1"))
    assert bad["message_type"] == "error" and bad["message_id"] == "m1" and bad["payload"]["code"] == "invalid_frame"
    assert "missing observation" in bad["payload"]["message"]
    unknown = raw(wire("dance", {}, message_id="m2"))  # unknown type, but the message_id is readable
    assert unknown["payload"]["code"] == "invalid_frame" and unknown["message_id"] == "m2"
    no_eval = msgpack.packb({"message_type": "hello", "message_id": "m3"}, use_bin_type=True)
    assert raw(no_eval)["payload"]["message"] == "missing evaluation_id"
    assert raw(b"\xc1 not msgpack") is None  # nothing to answer (upstream drops it too)
    assert raw(b"text frames are ignored", text=True) is None
    call = raw(wire("call", {"func_name": "_secret"}, message_id="m4"))
    assert call["payload"]["code"] == "invalid_frame" and "func_name" in call["payload"]["message"]
    nomethod = raw(wire("call", {"func_name": "update_obs"}, message_id="m5"))
    assert "missing obs" in nomethod["payload"]["message"]
    badobs = raw(wire("call", {"func_name": "update_obs", "obs": {"vision": {}}}, message_id="m6"))
    assert badobs["payload"]["code"] == "call_failed" and "'state'" in badobs["payload"]["message"]
    jpeg = raw(wire("call", {"func_name": "update_obs",
                             "obs": {"state": {}, "vision": {"cam_head": {"color": b"\xff\xd8 broken"}}}},
                    message_id="m7"))
    assert jpeg["payload"]["code"] == "invalid_frame" and "cam_head" in jpeg["payload"]["message"]
    assert client.request("heartbeat", {})["payload"] == {"ok": True}
    client.close()


def test_heartbeat_is_answered_while_get_action_waits(policy, tmp_path):
    p = policy(agent_cmd=agent_script("import time\ntime.sleep(30)", tmp_path), think_timeout_s=3)
    client = XplClient(p.url)
    env = FakeEvalEnv(client)
    env.reset()
    mid = "infer-1"
    client.ws.send(wire("infer", {"observation": env.get_obs()}, message_id=mid))
    t0 = time.monotonic()
    client.ws.send(wire("heartbeat", {}, message_id="hb"))
    first = unwire(client.ws.recv(timeout=10))
    assert first["message_id"] == "hb" and time.monotonic() - t0 < 2.5  # not queued behind the infer
    held = unwire(client.ws.recv(timeout=10))
    assert held["message_id"] == mid and len(held["payload"]["actions"]) == 1  # thinking: hold one step
    assert np.allclose(held["payload"]["actions"][0]["left_arm_joint_state"], 0)
    client.close()


def test_a_retried_request_is_answered_once(policy, tmp_path):
    p = policy(agent_cmd=agent_script("import time\ntime.sleep(30)", tmp_path), think_timeout_s=1)
    client = XplClient(p.url)
    env = FakeEvalEnv(client)
    env.reset()
    frame = wire("infer", {"observation": env.get_obs()}, message_id="retry-me")
    client.ws.send(frame)
    first = unwire(client.ws.recv(timeout=10))
    client.close()
    again = XplClient(p.url)  # XPolicyLab's client reconnects and resends with the same message_id
    again.ws.send(frame)
    second = unwire(again.ws.recv(timeout=10))
    assert second["payload"]["actions"][0]["left_arm_joint_state"].tolist() == \
        first["payload"]["actions"][0]["left_arm_joint_state"].tolist()
    assert p.model.current.bridge.hold_steps == 1  # get_action ran once
    again.ws.send(wire("heartbeat", {}, message_id="retry-me"))
    reused = unwire(again.ws.recv(timeout=10))
    assert reused["message_type"] == "error" and "already used" in reused["payload"]["message"]
    again.close()


def test_color_order_bgr_and_encoded_jpeg_colors(policy, tmp_path):
    import io

    from PIL import Image

    import xpl_protocol as xp

    rgb = np.zeros((8, 8, 3), np.uint8)
    rgb[..., 0] = 220
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=95)
    standard = buf.getvalue()
    marked = standard[:2] + b"\xff\xfe\x00\x0a" + xp.RGB_MARKER + standard[2:]
    assert xp.decode_color(marked)[0, 0, 0] > 200  # marked: a standard RGB JPEG
    assert xp.decode_color(standard)[0, 0, 2] > 200  # unmarked: XPolicyLab's legacy channel-reversed bytes
    b = policy_model.Bridge("t", "joint", color_order="bgr")
    b.put_obs({"state": {}, "vision": {"cam_head": {"color": rgb}}})
    assert b.render_camera("cam_head", 8, 8)[0, 0].tolist() == [0, 0, 220]


def test_bridge_refuses_malformed_actions():
    bridge = policy_model.Bridge("t", "joint")
    with pytest.raises(ValueError, match="'joint' actions"):
        bridge.step({"type": "ee", "actions": [{}]})
    with pytest.raises(ValueError, match="exactly the keys"):
        bridge.step({"type": "joint", "actions": [{"right_arm_joint_state": [0] * 6}]})
    full = {"left_arm_joint_state": [0] * 5, "right_arm_joint_state": [0] * 6, "left_ee_joint_state": [1],
            "right_ee_joint_state": [1]}
    with pytest.raises(ValueError, match="6 numbers"):
        bridge.step({"type": "joint", "actions": [full]})
    with pytest.raises(ValueError):
        policy_model.Bridge("t", "torque")
    with pytest.raises(ValueError, match="eval_batch"):
        policy_model.Model({"action_type": "joint", "eval_batch": True})


@pytest.mark.heavy
def test_pyrualean_play_agent_that_finishes_with_success_in_a_real_kernel(policy, tmp_path):
    if not os.access(PYRUALEAN, os.X_OK):
        pytest.fail(f"{PYRUALEAN} is missing: build it (go build -o bin/pyrualean ./cmd/pyrualean)")
    import nbformat

    nb = nbformat.v4.new_notebook()  # a recorded agent: two cells, then finish(success)
    for src in ("st = robo.state()\nprint(st.action_type, st.left.gripper)",
                "m = robo.move_joints(left=[0.3] * 6, left_gripper=robo.CLOSE, steps=6)\nprint('sent', m.actions_sent)"):
        nb.cells.append(nbformat.v4.new_code_cell(src, metadata={"pyrualean": {"author": "agent"}}))
    nb.cells.append(nbformat.v4.new_markdown_cell("**finish**\n\nthe arm is in place",
                                                  metadata={"pyrualean": {"tool": "finish", "status": "success"}}))
    cells = tmp_path / "agent.ipynb"
    nbformat.write(nb, str(cells))
    cmd = f"{PYRUALEAN} play --runtime replay --from {cells} --robot robodojo_xpl_rgb --task {{task}} --out {{out}}"
    p = policy(action_type="joint", agent_cmd=cmd)
    client = XplClient(p.url)
    env = FakeEvalEnv(client, step_lim=25)
    run_dir = env.reset()["run_dir"]
    policy_deploy.eval_one_episode(TASK_ENV=env, model_client=client)
    rec = episode_record(run_dir, timeout=60)
    assert rec["agent_exit"] == 0 and rec["agent_steps"] == 6, open(os.path.join(run_dir, "agent.log")).read()
    assert np.allclose(env.actions[5]["left_arm_joint_state"], 0.3) and env.actions[5]["left_ee_joint_state"][0] == 0
    trace = json.load(open(os.path.join(run_dir, "run", "trace.ipynb")))
    text = json.dumps(trace)
    assert "joint 1.0" in text and "sent 6" in text
    # the agent thinks it succeeded; RoboDojo, the judge, ran out its step limit: both verdicts are kept
    result = json.load(open(os.path.join(run_dir, "run", "result.json")))
    assert result["finish"]["status"] == "success" and result["task_language"] == "stack the blocks"
    assert rec["success"] is False and env.take_action_cnt[0] == 25
    client.close()


def test_policy_dir_matches_the_xpolicylab_contract():
    for name in ("deploy.py", "deploy.yml", "eval.sh", "model.py", "setup_eval_policy_server.sh",
                 "setup_eval_env_client.sh", "install.sh", "process_data.sh", "train.sh", "README.md"):
        assert os.path.isfile(os.path.join(POLICY_DIR, name)), name
    with open(os.path.join(POLICY_DIR, "deploy.yml"), encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    # setup_policy_server.py reads these; RoboDojo's client reads protocol and eval_batch
    for key in ("policy_name", "protocol", "host", "port", "task_name", "env_cfg_type", "action_type", "seed",
                "eval_batch", "eval_env"):
        assert key in cfg, key
    assert cfg["policy_name"] == "PyRUA_Lean" and cfg["protocol"] == "ws" and cfg["eval_batch"] is False
    # robodojo.sh eval passes 11 arguments to policies whose eval.sh mentions the expert count, else 10
    eval_sh = open(os.path.join(POLICY_DIR, "eval.sh"), encoding="utf-8").read()
    assert "expert_num" not in eval_sh and "expert_data_num" not in eval_sh
    import subprocess

    for script in ("eval.sh", "setup_eval_policy_server.sh", "setup_eval_env_client.sh", "install.sh"):
        out = subprocess.run(["bash", "-n", os.path.join(POLICY_DIR, script)], capture_output=True, text=True)
        assert out.returncode == 0, (script, out.stderr)
    cfg2 = policy_serve.parse_config(["--config_path", os.path.join(POLICY_DIR, "deploy.yml"), "--overrides",
                                      "port=4242", "task_name=stack_bowls", "seed=3", "action_type=ee"])
    assert cfg2["port"] == 4242 and cfg2["task_name"] == "stack_bowls" and cfg2["seed"] == 3
    cfg3 = policy_serve.parse_config(["--config_path", os.path.join(POLICY_DIR, "deploy.yml"), "--overrides",
                                      "--port", "4243", "--host", "0.0.0.0"])
    assert cfg3["port"] == 4243 and cfg3["host"] == "0.0.0.0"


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="utf-8") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


@pytest.mark.heavy
def test_kernel_dying_under_pyrualean_play_reaches_robodojo_as_an_error(policy, tmp_path):
    cells = tmp_path / "cells.py"
    cells.write_text("# %%\nm = robo.move_joints(left=[0.3] * 6, steps=3)\n"
                     "# %%\nfor _ in range(200):\n    robo.wait(steps=2)\n"
                     "# %%\nprint('after')\n")
    cmd = f"{PYRUALEAN} play --runtime replay --from {cells} --robot robodojo_xpl_rgb --task {{task}} --out {{out}}"
    p = policy(action_type="joint", agent_cmd=cmd, think_timeout_s=20)
    client = XplClient(p.url)
    env = FakeEvalEnv(client, step_lim=2000)
    run_dir = env.reset()["run_dir"]
    ep = p.model.current
    killed: list[int] = []

    def kill_kernel_mid_motion() -> None:  # the kernel (play's child) dies while its robo waits on RoboDojo
        deadline = time.time() + 30
        while time.time() < deadline and ep.bridge.agent_steps < 9:
            time.sleep(0.02)
        for pid in _children(ep.agent.pid):
            if "ipykernel" in open(f"/proc/{pid}/cmdline", encoding="utf-8").read():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    t = threading.Thread(target=kill_kernel_mid_motion)
    t.start()
    with pytest.raises(XplError) as e:
        policy_deploy.eval_one_episode(TASK_ENV=env, model_client=client)
    t.join()
    assert killed
    # play ends the episode with status error; RoboDojo's next request fails naming the agent, its run folder
    # and what play said
    assert e.value.code == "infer_failed" and "exited with status 2" in e.value.message, e.value.message
    assert run_dir in e.value.message and "kernel died" in e.value.message
    rec = episode_record(run_dir, timeout=60)
    assert rec["agent_exit"] == 2 and rec["robodojo"]["error"].startswith("XplError")
    result = json.load(open(os.path.join(run_dir, "run", "result.json")))
    assert result["status"] == "error"
    trace = json.dumps(json.load(open(os.path.join(run_dir, "run", "trace.ipynb"))))
    assert "move_joints" in trace  # the cell finished before the kernel died is on disk
    assert client.request("heartbeat", {})["payload"]["ok"]  # and the policy server keeps serving
    client.close()
