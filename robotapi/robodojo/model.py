"""XPolicyLab policy ``PyRUA_Lean``: each RoboDojo episode runs one pyrualean episode.

RoboDojo (Isaac Sim) drives the policy: ``update_obs(obs)`` then ``get_action()`` -> a chunk of actions. The
pyrualean agent drives the robot: ``robo.move_to(...)`` in its kernel. This model joins the two through a
*bridge* on 127.0.0.1 that speaks RPent's env-server contract (pyrualean_robot.robots.rpent), which the
kernel's ``make("robodojo_xpl_rgb")`` robot connects to (env ``PYRUALEAN_ENV_SERVER``):

    RoboDojo obs --update_obs--> bridge.latest obs --env.reset/env.render_camera--> robo (images BGR->RGB)
    robo motion --env.step(actions)--> bridge.pending --get_action--> RoboDojo take_action(...)

A motion call in the kernel blocks until RoboDojo has executed its actions and sent the next observation.
While the agent is thinking, get_action waits (up to ``think_timeout_s``) and then holds the arm still.
The agent process is started on the episode's first get_action with ``agent_cmd`` from deploy.yml.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from typing import Any, Optional

import numpy as np

try:  # inside XPolicyLab
    from XPolicyLab.model_template import ModelTemplate  # type: ignore
except ImportError:  # standalone (serve.py, tests)
    ModelTemplate = object  # type: ignore[misc,assignment]

from pyrualean_robot.robots.rpent import RpcServer

ARMS = ("left", "right")
ACTION_TYPES = ("joint", "ee")


def _arm_keys(action_type: str, arm: str) -> tuple[str, str]:
    return (f"{arm}_arm_joint_state" if action_type == "joint" else f"{arm}_ee_pose"), f"{arm}_ee_joint_state"


class Bridge:
    """The env server the kernel's robot talks to; thread-safe hand-over between RoboDojo and the agent."""

    def __init__(self, task: str, action_type: str):
        if action_type not in ACTION_TYPES:
            raise ValueError(f"action_type must be one of {ACTION_TYPES}, not {action_type!r}")
        self.task, self.action_type = task, action_type
        self.cond = threading.Condition()
        self.obs: Optional[dict] = None
        self.obs_seq = 0
        self.pending: Optional[list] = None
        self.episode_over = False
        self.steps = 0
        self.result: dict = {}

    # ---- RoboDojo side ----
    def new_episode(self) -> None:
        with self.cond:
            self.obs, self.obs_seq, self.pending, self.episode_over, self.steps = None, 0, None, False, 0
            self.result = {}
            self.cond.notify_all()

    def put_obs(self, obs: dict) -> None:
        if not isinstance(obs, dict):
            raise ValueError("observation must be a dict")
        with self.cond:
            self.obs = obs
            self.obs_seq += 1
            self.cond.notify_all()

    def end(self, result: Optional[dict] = None) -> None:
        with self.cond:
            self.episode_over = True
            self.result = dict(result or {})
            self.cond.notify_all()

    def take_actions(self, timeout_s: float, agent_alive) -> Optional[list]:
        """The agent's next action chunk, or None when it sent none in time (or has exited)."""
        deadline = time.time() + timeout_s
        with self.cond:
            while self.pending is None and time.time() < deadline and agent_alive():
                self.cond.wait(0.1)
            actions, self.pending = self.pending, None
            if actions is not None:
                self.steps += len(actions)
            return actions

    def hold_action(self) -> dict:
        """An action that keeps both arms where they are (used while the agent thinks or after it is done)."""
        state = (self.obs or {}).get("state") or {}
        out = {}
        for arm in ARMS:
            pose_key, grip_key = _arm_keys(self.action_type, arm)
            if pose_key not in state or grip_key not in state:
                raise RuntimeError(f"observation state lacks {pose_key}/{grip_key}: cannot hold the arm")
            out[pose_key] = np.asarray(state[pose_key], dtype=np.float64)
            out[grip_key] = np.asarray(state[grip_key], dtype=np.float64).reshape(-1)
        return out

    def _wait_obs(self, after: int, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        while self.obs_seq <= after and not self.episode_over:
            if time.time() > deadline:
                raise TimeoutError(f"no RoboDojo observation within {timeout_s:.0f} s")
            self.cond.wait(0.1)

    def _wire_obs(self) -> dict:
        o = self.obs or {}
        state = {k: np.asarray(v) for k, v in (o.get("state") or {}).items()}
        return {"instruction": o.get("instruction", ""), "state": state, "step": self.steps,
                "cameras": sorted((o.get("vision") or {}).keys()), "episode_over": self.episode_over}

    # ---- env RPC (the agent's robo) ----
    def get_env_meta(self) -> dict:
        return {"robot": "robodojo_xpl_rgb", "task": self.task, "action_type": self.action_type}

    def reset(self) -> dict:
        with self.cond:
            self._wait_obs(0, 600)
            return self._wire_obs()

    def get_task_language(self) -> str:
        with self.cond:
            self._wait_obs(0, 600)
            return str((self.obs or {}).get("instruction") or self.task)

    def raw_obs(self) -> dict:
        with self.cond:
            return self._wire_obs()

    def step(self, action: dict) -> list:
        if not isinstance(action, dict) or action.get("type") != self.action_type:
            raise ValueError(f"this RoboDojo run takes {self.action_type!r} actions: "
                             f"{{'type': {self.action_type!r}, 'actions': [...]}}")
        actions = action.get("actions")
        if not isinstance(actions, list) or not actions or len(actions) > 500:
            raise ValueError("actions must be a list of 1..500 RoboDojo action dicts")
        for a in actions:
            for arm in ARMS:
                pose_key, grip_key = _arm_keys(self.action_type, arm)
                if pose_key not in a or grip_key not in a:
                    raise ValueError(f"each action needs {pose_key} and {grip_key}")
        with self.cond:
            if self.episode_over:
                return [self._wire_obs(), 0.0, False, True, {"steps": 0, "episode_over": True}]
            seq = self.obs_seq
            self.pending = actions
            self.cond.notify_all()
            self._wait_obs(seq, 600)
            over = self.episode_over
            return [self._wire_obs(), 0.0, False, over, {"steps": len(actions), "episode_over": over}]

    def _camera(self, camera_name: str) -> dict:
        vision = (self.obs or {}).get("vision") or {}
        if camera_name not in vision:
            raise ValueError(f"no camera {camera_name!r}; cameras: {sorted(vision)}")
        return vision[camera_name]

    def render_camera(self, camera_name: str = "head", height: int = 240, width: int = 320, depth: bool = False) -> Any:
        with self.cond:
            cam = self._camera(camera_name)
            if depth:
                if cam.get("depth") is None:
                    raise ValueError(f"camera {camera_name!r} has no depth")
                return np.asarray(cam["depth"], dtype=np.float32).reshape(np.asarray(cam["depth"]).shape[:2])
            bgr = np.asarray(cam["color"])
            return np.ascontiguousarray(bgr[..., ::-1])  # RoboDojo sends BGR; robo images are RGB

    def get_camera_meta(self, camera_name: str = "head", height: int = 240, width: int = 320) -> dict:
        with self.cond:
            cam = self._camera(camera_name)
            if cam.get("intrinsic_matrix") is None or cam.get("extrinsics_matrix") is None:
                raise ValueError(f"camera {camera_name!r} has no intrinsic/extrinsics matrices")
            h, w = np.asarray(cam["color"]).shape[:2]
            E = np.asarray(cam["extrinsics_matrix"], float)
            if E.shape == (3, 4):
                E = np.vstack([E, [0, 0, 0, 1]])
            return {"camera": camera_name, "intrinsic_K": np.asarray(cam["intrinsic_matrix"], float).tolist(),
                    "extrinsic_cv": E.tolist(), "cam2world_gl": None, "width": w, "height": h}


class Model(ModelTemplate):
    """XPolicyLab Model: update_obs / get_action / reset, plus set_language and on_trial_end."""

    def __init__(self, model_cfg: dict):
        self.cfg = dict(model_cfg or {})
        self.action_type = self.cfg.get("action_type", "joint")
        self.task = str(self.cfg.get("task_name") or "robodojo_task")
        self.think_timeout_s = float(self.cfg.get("think_timeout_s", 120))
        self.bridge = Bridge(self.task, self.action_type)
        self.server = RpcServer(self.bridge, host="127.0.0.1", port=int(self.cfg.get("bridge_port", 0)))
        self.agent: Optional[subprocess.Popen] = None
        self.episode = 0
        self.out_root = os.path.abspath(str(self.cfg.get("out_dir", "pyrualean_runs")))

    # ---- XPolicyLab API ----
    def set_language(self, instruction: str) -> None:
        pass  # the instruction arrives inside every observation as well

    def update_obs(self, obs: dict) -> None:
        self.bridge.put_obs(obs)

    def get_action(self) -> list:
        if self.agent is None:
            self._start_agent()
        actions = self.bridge.take_actions(self.think_timeout_s, self._agent_alive)
        if actions is None:
            return [self.bridge.hold_action()]
        return actions

    def reset(self) -> dict:
        self._stop_agent()
        self.bridge.new_episode()
        self.episode += 1
        return {"episode": self.episode, "bridge": self.server.url}

    def on_trial_end(self, payload: dict) -> dict:
        self.bridge.end(payload)
        code = self._stop_agent(grace_s=float(self.cfg.get("finish_grace_s", 30)))
        return {"agent_exit": code, "steps": self.bridge.steps}

    def close(self) -> None:
        self._stop_agent()
        self.server.close()

    # ---- the pyrualean episode ----
    def _agent_alive(self) -> bool:
        return self.agent is not None and self.agent.poll() is None

    def _start_agent(self) -> None:
        out = os.path.join(self.out_root, f"{self.task}_ep{self.episode:03d}")
        os.makedirs(out, exist_ok=True)
        default = ("pyrualean play --arm cells --robot robodojo_xpl_rgb --task {task} --seed {seed} "
                   "--out {out}")
        cmd = str(self.cfg.get("agent_cmd") or default).format(task=self.task, seed=self.cfg.get("seed", 0), out=out,
                                                              python=sys.executable)
        env = dict(os.environ, PYRUALEAN_ENV_SERVER=self.server.url,
                   PYRUALEAN_ROBODOJO_ACTION_TYPE=self.action_type)
        log = open(os.path.join(out, "agent.log"), "ab")
        self.agent = subprocess.Popen(shlex.split(cmd), env=env, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def _stop_agent(self, grace_s: float = 0.0) -> Optional[int]:
        p, self.agent = self.agent, None
        if p is None:
            return None
        try:
            return p.wait(grace_s) if grace_s > 0 else p.wait(0.01)
        except subprocess.TimeoutExpired:
            p.terminate()
            try:
                return p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                return p.wait()
