"""The tabletop arm's control, apart from its primitives: orientation maths, damped least-squares IK on the
commanded configuration, and the servo loop every motion primitive is built on. The primitives
(tabletop.py) decide *where* to go and check the arguments; this module decides *how* the joints get there."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

SUBSTEPS = 25            # 25 x 2 ms physics = one 50 ms control step
R0 = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # gripper down, fingers closing along y


def _rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def target_rotation(yaw: float, pitch: float = 0.0) -> np.ndarray:
    """Gripper orientation: pointing down, rotated by `yaw` about z, tilted forward by `pitch`."""
    return _rot_z(yaw) @ _rot_y(-pitch) @ R0


def yaw_pitch(R: np.ndarray) -> tuple[float, float]:
    yaw = math.atan2(-R[0, 0], R[1, 0])
    pitch = math.atan2(R[0, 2] * math.cos(yaw) + R[1, 2] * math.sin(yaw), -R[2, 2])
    return yaw, pitch


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def _ori_error(R: np.ndarray, Rt: np.ndarray) -> np.ndarray:
    return 0.5 * (np.cross(R[:, 0], Rt[:, 0]) + np.cross(R[:, 1], Rt[:, 1]) + np.cross(R[:, 2], Rt[:, 2]))


class ArmControl:
    """Mixin of :class:`~pyrualean_robot.robots.tabletop.TabletopRobot`: control steps, IK and servoing.

    It works on the robot's MuJoCo state, set up by the robot: ``_mj`` (the mujoco module), ``_model``,
    ``_data``, ``_ik`` (a scratch MjData for IK), ``_site`` (the eef site), ``_arm_q`` / ``_arm_v`` (joint
    qpos/dof addresses), ``_lo`` / ``_hi`` / ``_home`` (joint limits, home posture), ``_q_cmd`` / ``_grip`` /
    ``_yaw_cmd`` / ``_pitch_cmd`` (the commands), ``_steps``, ``_spec``, ``_sim``, ``_monitor`` and the base
    robot's episode marks."""

    _mj: Any
    _model: Any
    _data: Any
    _ik: Any

    def _apply_ctrl(self) -> None:
        w = 0.04 * (1.0 - self._grip) / 2.0
        self._data.ctrl[:7] = self._q_cmd
        self._data.ctrl[7] = w
        self._data.ctrl[8] = -w

    def _control_step(self) -> bool:
        """One 50 ms control step; returns True when the episode ended during it."""
        self._apply_ctrl()
        for _ in range(SUBSTEPS):
            self._mj.mj_step(self._model, self._data)
        self._steps += 1
        if not self._terminated and self._spec.success(self._sim, self._monitor, self._steps):
            self._mark_terminated()
        if self._steps >= self.max_env_steps and not self._terminated:
            self._mark_truncated()
        return self._terminated or self._truncated

    def _eef(self) -> tuple[np.ndarray, np.ndarray]:
        return self._data.site_xpos[self._site].copy(), self._data.site_xmat[self._site].reshape(3, 3).copy()

    def _fk_cmd(self) -> tuple[np.ndarray, np.ndarray]:
        d = self._ik
        d.qpos[self._arm_q] = self._q_cmd
        self._mj.mj_kinematics(self._model, d)
        self._mj.mj_comPos(self._model, d)
        return d.site_xpos[self._site].copy(), d.site_xmat[self._site].reshape(3, 3).copy()

    def _ik_toward(self, p: np.ndarray, Rt: np.ndarray, iters: int = 3) -> None:
        """Damped least-squares IK on the commanded configuration (a scratch MjData), with a null-space pull
        toward the home posture so the redundant joint does not drift."""
        mj, m, d = self._mj, self._model, self._ik
        jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        lam2 = 0.03 ** 2
        for _ in range(iters):
            d.qpos[self._arm_q] = self._q_cmd
            mj.mj_kinematics(m, d)
            mj.mj_comPos(m, d)
            cur = d.site_xpos[self._site]
            R = d.site_xmat[self._site].reshape(3, 3)
            e = np.concatenate([p - cur, _ori_error(R, Rt)])
            mj.mj_jacSite(m, d, jp, jr, self._site)
            J = np.vstack([jp[:, self._arm_v], jr[:, self._arm_v]])
            JJt = J @ J.T + lam2 * np.eye(6)
            Jpinv = J.T @ np.linalg.solve(JJt, np.eye(6))
            dq = Jpinv @ e
            dq += (np.eye(7) - Jpinv @ J) @ (0.2 * (self._home - self._q_cmd))
            n = np.linalg.norm(dq)
            if n > 0.25:
                dq *= 0.25 / n
            self._q_cmd = np.clip(self._q_cmd + dq, self._lo + 0.01, self._hi - 0.01)
            if np.linalg.norm(e) < 1e-4:
                break

    def _servo(self, target: np.ndarray, yaw: float, pitch: float, gripper: Optional[float], tol: float,
               ori_tol: float, step_clip: float, max_steps: int, ang_clip: float = 0.15) -> tuple[int, bool]:
        """Move the eef to `target` with the given orientation; returns (steps used, reached)."""
        if gripper is not None:
            self._grip = gripper
        Rt = target_rotation(yaw, pitch)
        self._yaw_cmd, self._pitch_cmd = yaw, pitch
        best, since_best, used = math.inf, 0, 0
        for used in range(1, max_steps + 1):
            cp, cR = self._fk_cmd()
            delta = target - cp
            n = np.linalg.norm(delta)
            way = cp + (delta * (step_clip / n) if n > step_clip else delta)
            # orientation: move at most ang_clip per step toward Rt
            err = _ori_error(cR, Rt)
            en = np.linalg.norm(err)
            if en > ang_clip:
                k = ang_clip / en
                Rw = self._rotate(cR, err * k / max(1e-9, 1.0))
            else:
                Rw = Rt
            self._ik_toward(way, Rw)
            ended = self._control_step()
            pos, R = self._eef()
            dist = float(np.linalg.norm(target - pos))
            oerr = float(np.linalg.norm(_ori_error(R, Rt)))
            if dist <= tol and oerr <= ori_tol:
                return used, True
            if ended:
                return used, False
            if dist < best - 5e-4:
                best, since_best = dist, 0
            else:
                since_best += 1
                cmd_dist = float(np.linalg.norm(target - self._fk_cmd()[0]))
                if since_best >= 10 and cmd_dist < 2e-3:
                    return used, False  # stalled: the command arrived but the arm is blocked
        return used, False

    @staticmethod
    def _rotate(R: np.ndarray, w: np.ndarray) -> np.ndarray:
        th = np.linalg.norm(w)
        if th < 1e-9:
            return R
        k = w / th
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        Rk = np.eye(3) + math.sin(th) * K + (1 - math.cos(th)) * K @ K
        return Rk @ R

    def _hold(self, steps: int) -> int:
        used = 0
        for used in range(1, steps + 1):
            if self._control_step():
                break
        return used
