"""The RoboDojo XPolicyLab policy dir (robotapi/robodojo) against a fake RoboDojo eval client that speaks
XPolicyLab's WebSocket protocol (msgpack frames: hello, reset, infer, trial_end). A scripted pyrualean
agent process drives `make("robodojo_xpl_rgb")` through the policy's bridge."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import yaml
from websockets.sync.client import connect

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
POLICY_DIR = os.path.join(ROOT, "robotapi", "robodojo")
sys.path.insert(0, POLICY_DIR)

import model as policy_model  # noqa: E402
import serve as policy_serve  # noqa: E402
import xpl_protocol as xp  # noqa: E402

AGENT = textwrap.dedent("""
    import json, sys
    from pyrualean_robot import make
    robo = make("robodojo_xpl_rgb", images="none", workspace=sys.argv[2])
    img = robo.image("head")
    meta = robo.camera_meta("head")
    m1 = robo.move_joints(left=[0.1] * 6, steps=5)
    m2 = robo.set_gripper("left", 0.0, steps=3)
    try:
        robo.move_to("left", [0, 0, 1])
        ee = "accepted"
    except ValueError as e:
        ee = str(e)
    st = robo.state()
    json.dump({"task": robo.task, "pixel": img[0, 0].tolist(), "shape": list(img.shape), "fx": meta["intrinsic_K"][0][0],
               "left": list(st.left.joints), "grip": st.left.gripper, "sent": [m1.actions_sent, m2.actions_sent],
               "ee": ee, "steps": robo.env_steps}, open(sys.argv[1], "w"))
""")


class FakeRoboDojo:
    """The env side: an ARX X5 pair whose joints jump to each absolute action, BGR cameras, XPolicyLab frames."""

    def __init__(self, url: str):
        self.ws = connect(url, max_size=None)
        self.state = {"left_arm_joint_state": np.zeros(6), "left_ee_joint_state": np.array([0.04]),
                      "right_arm_joint_state": np.zeros(6), "right_ee_joint_state": np.array([0.04]),
                      "left_ee_pose": np.array([0.3, 0.2, 0.9, 1, 0, 0, 0.0]),
                      "right_ee_pose": np.array([0.3, -0.2, 0.9, 1, 0, 0, 0.0])}
        self.executed = 0

    def request(self, message_type: str, payload: dict | None = None, step: int = 0) -> dict:
        self.ws.send(xp.encode(xp.frame(message_type, evaluation_id="eval-1", trial_id="trial-0", payload=payload,
                                        step=step)))
        return xp.decode(self.ws.recv(timeout=60))

    def obs(self) -> dict:
        bgr = np.zeros((240, 320, 3), np.uint8)
        bgr[..., 0] = 255  # pure blue in BGR
        K = np.array([[250.0, 0, 160], [0, 250.0, 120], [0, 0, 1]])
        cams = {c: {"color": bgr, "depth": np.ones((240, 320), np.float32), "intrinsic_matrix": K,
                    "extrinsics_matrix": np.eye(4)} for c in ("head", "left_wrist", "right_wrist")}
        return {"instruction": "stack the blocks", "vision": cams, "state": {k: v.copy() for k, v in self.state.items()}}

    def take_action(self, a: dict) -> None:
        for k in self.state:
            if k in a:
                self.state[k] = np.asarray(a[k], float).reshape(self.state[k].shape)
        self.executed += 1


@pytest.fixture
def policy(tmp_path):
    report = tmp_path / "agent.json"
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    with open(os.path.join(POLICY_DIR, "deploy.yml"), encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    cfg.update(task_name="stack_blocks", agent_cmd=f"{sys.executable} {agent} {report} {tmp_path}",
               out_dir=str(tmp_path / "runs"), think_timeout_s=30, finish_grace_s=10)
    model = policy_model.Model(cfg)
    server = policy_serve.PolicyServer(model, "127.0.0.1", 0)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    urls: list[str] = []

    def run() -> None:
        urls.append(loop.run_until_complete(server.start()))
        ready.set()
        loop.run_forever()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ready.wait(10)
    yield urls[0], report, model
    model.close()
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)  # closes client connections too
    loop.call_soon_threadsafe(loop.stop)
    t.join(5)
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def test_robodojo_episode_runs_a_pyrualean_episode(policy):
    url, report, model = policy
    env = FakeRoboDojo(url)
    assert env.request("hello")["message_type"] == "hello_ack"
    r = env.request("reset", {"trial_id": "trial-0"})
    assert r["message_type"] == "reset_result" and r["payload"]["ok"]
    for step in range(60):
        resp = env.request("infer", {"observation": env.obs()}, step=step)
        assert resp["message_type"] == "infer_result", resp["payload"]
        for a in resp["payload"]["actions"]:
            env.take_action(a)
        if report.exists() and not model._agent_alive():
            break
    end = env.request("trial_end", {"trial_id": "trial-0", "success": False})
    assert end["message_type"] == "trial_end_ack" and end["payload"]["result"]["agent_exit"] == 0
    got = json.loads(report.read_text())
    assert got["task"] == "stack the blocks"
    assert got["pixel"] == [0, 0, 255] and got["shape"] == [240, 320, 3]  # BGR frames became RGB
    assert got["fx"] == 250.0
    assert np.allclose(got["left"], 0.1) and abs(got["grip"]) < 1e-9
    assert got["sent"] == [5, 3] and got["steps"] == 8
    assert "move_joints" in got["ee"]  # a joint run refuses ee motions with a clear error
    assert np.allclose(env.state["left_arm_joint_state"], 0.1) and np.allclose(env.state["right_arm_joint_state"], 0)
    assert env.executed >= 8  # the agent's 8 actions, then hold actions after it finished
    env.ws.close()


def test_protocol_errors_get_error_frames_and_the_server_keeps_serving(policy):
    url, _, _ = policy
    env = FakeRoboDojo(url)
    bad = env.request("infer", {})
    assert bad["message_type"] == "error" and bad["payload"]["code"] == "invalid_frame"
    env.ws.send(b"\xc1not msgpack")
    err = xp.decode(env.ws.recv(timeout=10))
    assert err["message_type"] == "error" and "msgpack" in err["payload"]["message"]
    env.ws.send(xp.encode({"message_type": "dance", "message_id": "1", "evaluation_id": "e"}))
    assert xp.decode(env.ws.recv(timeout=10))["payload"]["code"] == "invalid_frame"
    assert env.request("heartbeat")["message_type"] == "heartbeat_ack"
    env.ws.close()


def test_bridge_refuses_malformed_actions():
    bridge = policy_model.Bridge("t", "joint")
    with pytest.raises(ValueError, match="'joint' actions"):
        bridge.step({"type": "ee", "actions": [{}]})
    with pytest.raises(ValueError, match="left_arm_joint_state"):
        bridge.step({"type": "joint", "actions": [{"right_arm_joint_state": [0] * 6}]})
    with pytest.raises(ValueError):
        policy_model.Bridge("t", "torque")


def test_policy_dir_has_the_xpolicylab_files():
    for name in ("deploy.py", "deploy.yml", "eval.sh", "model.py", "setup_eval_policy_server.sh",
                 "setup_eval_env_client.sh", "install.sh", "process_data.sh", "train.sh", "README.md"):
        assert os.path.isfile(os.path.join(POLICY_DIR, name)), name
    with open(os.path.join(POLICY_DIR, "deploy.yml"), encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    for key in ("policy_name", "policy_server_port", "policy_server_host", "dataset_name", "task_name", "ckpt_name",
                "env_cfg_type", "seed", "expert_data_num", "action_type", "gpu_id", "eval_batch", "eval_env"):
        assert key in cfg, key
    out = subprocess.run(["bash", "-n", os.path.join(POLICY_DIR, "eval.sh")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
