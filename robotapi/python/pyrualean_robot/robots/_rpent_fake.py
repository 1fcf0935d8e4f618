"""A fake RPent env server for contract tests: it speaks the same HTTP/JSON binding (rpent.py) as a real
RoboTwin 2.0 / RoboCasa365 env server, over a tiny kinematic world (a table, one block, the robot's eef
points, a top-down camera with depth). It is a test fixture, not a simulator of those benchmarks.

    python -m pyrualean_robot.robots._rpent_fake --robot robotwin --port 0   # prints the URL, serves
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Optional

import numpy as np

from .rpent import RpcServer

TABLE_Z = {"robotwin": 0.75, "robocasa": 0.90}
CAM_Z = 2.0


class FakeWorld:
    """Kinematics only: eefs move where commanded, a closed gripper near the block carries it.
    Task: lift the block 10 cm above the table (success)."""

    def __init__(self, robot: str, task: str = "lift_block", seed: int = 0, step_lim: int = 400):
        if robot not in TABLE_Z:
            raise ValueError(f"fake env server robots: {sorted(TABLE_Z)}, not {robot!r}")
        self.robot, self.task, self.seed, self.step_lim = robot, task, seed, step_lim
        self.calls: list[str] = []  # RPC calls received (the constructor's reset is not one)
        self.reset()
        self.calls.clear()

    # ---- env RPC methods -------------------------------------------------------------------------
    def get_env_meta(self) -> dict:
        self.calls.append("get_env_meta")
        return {"robot": self.robot, "task": self.task, "seed": self.seed, "fake": True}

    def reset(self) -> dict:
        rng = np.random.default_rng(self.seed)
        tz = TABLE_Z[self.robot]
        self.block = np.array([rng.uniform(-0.1, 0.1), rng.uniform(-0.05, 0.1), tz + 0.025])
        self.held_by: Optional[str] = None
        self.steps = 0
        self.success = False
        if self.robot == "robotwin":
            self.eef = {"left": np.array([-0.25, -0.1, tz + 0.25]), "right": np.array([0.25, -0.1, tz + 0.25])}
            self.quat = {s: np.array([0.0, 1.0, 0.0, 0.0]) for s in self.eef}
            self.grip = {"left": 1.0, "right": 1.0}
        else:
            self.base = np.array([0.0, -0.7, 0.0])
            self.eef = {"arm": np.array([0.0, -0.25, tz + 0.3])}
            self.grip = {"arm": -1.0}
            self.gq = 0.04
        self.calls.append("reset")
        return self.obs()

    def get_task_language(self) -> str:
        return "lift the red block"

    def success_criteria(self) -> str:
        return "def _check_success(self):\n    return block_z > table_z + 0.10\n"

    def raw_obs(self) -> dict:
        return self.obs()

    def step(self, action: Any) -> list:
        if not isinstance(action, dict) or "type" not in action:
            raise ValueError("action must be {'type': 'ee'|'delta', 'action': [...]} ")
        self.calls.append(f"step:{action['type']}")
        n = 1
        if self.robot == "robotwin":
            if action["type"] != "ee":
                raise ValueError("robotwin fake accepts only type 'ee' (16-D)")
            a = np.asarray(action["action"], float)
            if a.shape != (16,):
                raise ValueError(f"ee action must have 16 numbers, got {a.shape}")
            n = int(action.get("substeps", 25))
            planned = True
            for side, off in (("left", 0), ("right", 8)):
                target = a[off:off + 3]
                if np.linalg.norm(target[:2]) > 0.9 or target[2] < TABLE_Z["robotwin"] - 0.02:
                    planned = False  # out of reach or into the table: the planner refuses
            if planned:
                for side, off in (("left", 0), ("right", 8)):
                    self.eef[side] = a[off:off + 3].copy()
                    self.quat[side] = a[off + 3:off + 7].copy()
                    self._set_grip(side, float(a[off + 7]), closed=a[off + 7] < 0.5)
        else:
            if action["type"] != "delta":
                raise ValueError("robocasa fake accepts only type 'delta' (12-D)")
            a = np.asarray(action["action"], float)
            if a.shape != (12,):
                raise ValueError(f"delta action must have 12 numbers, got {a.shape}")
            if a[11] > 0:  # base mode: ~2.3 mm per step at full command
                self.base[:2] += np.clip(a[7:9], -1, 1) * 0.0023
                self.eef["arm"][:2] += np.clip(a[7:9], -1, 1) * 0.0023
            else:
                self.eef["arm"] = self.eef["arm"] + np.clip(a[:3], -1, 1) * 0.05 * 0.8
                self.eef["arm"][2] = max(self.eef["arm"][2], TABLE_Z["robocasa"] + 0.005)
            self._set_grip("arm", float(a[6]), closed=a[6] > 0)
            planned = True
        self.steps += n
        if self.held_by:
            self.block = self.eef[self.held_by] - np.array([0, 0, 0.005])
        self.success = bool(self.block[2] > TABLE_Z[self.robot] + 0.10)
        trunc = self.steps >= self.step_lim and not self.success
        return [self.obs(), float(self.success), self.success, trunc,
                {"planned": planned, "steps": n, "stop_reason": "completed" if planned else "plan_failed"}]

    def get_camera_meta(self, camera_name: str = "head", height: int = 240, width: int = 320) -> dict:
        f = 0.8 * width
        K = [[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]]
        # Top-down camera at (0, 0, CAM_Z): OpenCV axes x=world x, y=-world y, z=-world z.
        R = np.diag([1.0, -1.0, -1.0])
        C = np.array([0.0, 0.0, CAM_Z])
        E = np.eye(4)
        E[:3, :3] = R
        E[:3, 3] = -R @ C
        G = np.eye(4)
        G[:3, :3] = R.T @ np.diag([1.0, -1.0, -1.0])
        G[:3, 3] = C
        return {"camera": camera_name, "intrinsic_K": K, "extrinsic_cv": E.tolist(), "cam2world_gl": G.tolist(),
                "width": width, "height": height}

    def render_camera(self, camera_name: str = "head", height: int = 240, width: int = 320,
                      depth: bool = False) -> np.ndarray:
        meta = self.get_camera_meta(camera_name, height, width)
        K = np.array(meta["intrinsic_K"])
        tz = TABLE_Z[self.robot]
        d = np.full((height, width), CAM_Z - tz, np.float32)
        rgb = np.full((height, width, 3), 180, np.uint8)
        top = self.block[2] + 0.025
        r, c = self._px(self.block, K)
        half = int(round(0.025 / (CAM_Z - top) * K[0, 0]))
        r0, r1, c0, c1 = max(0, r - half), min(height, r + half + 1), max(0, c - half), min(width, c + half + 1)
        if r0 < r1 and c0 < c1:
            d[r0:r1, c0:c1] = CAM_Z - top
            rgb[r0:r1, c0:c1] = (200, 30, 30)
        for p in self.eef.values():
            rr, cc = self._px(p, K)
            rgb[max(0, rr - 2):rr + 3, max(0, cc - 2):cc + 3] = (30, 30, 200)
        return d if depth else rgb

    # ---- internals -------------------------------------------------------------------------------
    @staticmethod
    def _px(p: np.ndarray, K: np.ndarray) -> tuple[int, int]:
        z = CAM_Z - p[2]
        return int(round(-p[1] / z * K[1, 1] + K[1, 2])), int(round(p[0] / z * K[0, 0] + K[0, 2]))

    def _set_grip(self, side: str, value: float, closed: bool) -> None:
        self.grip[side] = value
        near = np.linalg.norm(self.eef[side][:2] - self.block[:2]) < 0.03 and abs(self.eef[side][2] - self.block[2]) < 0.03
        if closed and self.held_by is None and near:
            self.held_by = side
        if not closed and self.held_by == side:
            self.held_by = None
            self.block[2] = TABLE_Z[self.robot] + 0.025  # dropped onto the table
        if self.robot == "robocasa":
            self.gq = 0.04 if not closed else (0.012 if self.held_by == side else 0.0)

    def obs(self) -> dict:
        if self.robot == "robotwin":
            o: dict = {s: {"eef": list(self.eef[s]) + list(self.quat[s]), "gripper": self.grip[s]} for s in self.eef}
            o.update(take_action_cnt=self.steps, step_lim=self.step_lim)
        else:
            o = {"eef_pos": self.eef["arm"].tolist(), "eef_quat": [1.0, 0.0, 0.0, 0.0],
                 "gripper_qpos": [self.gq, -self.gq], "base_pos": self.base.tolist(),
                 "base_quat": [0.0, 0.0, 0.0, 1.0], "task_progress": float(self.success)}
        o["success"] = self.success
        o["step"] = self.steps
        return o


def serve(robot: str, task: str = "lift_block", seed: int = 0, host: str = "127.0.0.1", port: int = 0) -> tuple[RpcServer, FakeWorld]:
    world = FakeWorld(robot, task, seed)
    return RpcServer(world, host, port), world


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.robots._rpent_fake")
    p.add_argument("--robot", required=True, choices=sorted(TABLE_Z))
    p.add_argument("--task", default="lift_block")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args(argv)
    server, _ = serve(a.robot, a.task, a.seed, port=a.port)
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
