"""python -m pyrualean_robot.bench [--json]: in-process robot timings (medians, milliseconds).

step_ms: one mj_step (2 ms of simulated time); control_step_ms: one 50 ms control step (25 physics steps +
predicate); render256_ms / render128_ms: one agentview RGB frame (update_scene + render + read-back);
move_to_20cm_ms: a 20 cm move_to, back and forth; make_ms: make("tabletop") in a warm process."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from typing import Optional


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 4)


def measure(reps: int = 7) -> dict:
    from . import make
    from .robots import DEFAULT_ROBOT  # the embedded MuJoCo tabletop

    ws = tempfile.mkdtemp(prefix="pyrualean-bench-")
    make(DEFAULT_ROBOT, task="put_block_in_bowl", seed=0, workspace=ws, images="none")  # warm imports and GL
    t = time.perf_counter()
    robo = make(DEFAULT_ROBOT, task="put_block_in_bowl", seed=0, workspace=ws, images="none")
    make_s = time.perf_counter() - t
    mj, m, d = robo._mj, robo._model, robo._data
    steps = []
    for _ in range(200):
        t = time.perf_counter()
        for _ in range(10):
            mj.mj_step(m, d)
        steps.append((time.perf_counter() - t) / 10)
    ctrl = []
    for _ in range(50):
        t = time.perf_counter()
        robo._control_step()
        ctrl.append(time.perf_counter() - t)
    renders = {}
    for size in (256, 128):
        robo._render_rgb("agentview", size)
        ts = []
        for _ in range(max(reps * 3, 15)):
            t = time.perf_counter()
            robo._render_rgb("agentview", size)
            ts.append(time.perf_counter() - t)
        renders[size] = ts
    moves, used = [], []
    a, b = [0.45, -0.10, 0.25], [0.45, 0.10, 0.25]
    robo.move_to(a)
    for i in range(reps):
        t = time.perf_counter()
        res = robo.move_to(b if i % 2 == 0 else a)
        moves.append(time.perf_counter() - t)
        used.append(res.steps_used)
    return {"step_ms": _median_ms(steps), "control_step_ms": _median_ms(ctrl),
            "render256_ms": _median_ms(renders[256]), "render128_ms": _median_ms(renders[128]),
            "move_to_20cm_ms": _median_ms(moves), "move_to_20cm_steps": statistics.median(used),
            "make_ms": round(make_s * 1000, 1)}


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.bench")
    p.add_argument("--json", action="store_true")
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args(argv)
    r = measure(a.reps)
    if a.json:
        print(json.dumps(r))
    else:
        for k, v in r.items():
            print(f"{k:20s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
