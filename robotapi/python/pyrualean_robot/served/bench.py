"""In-process versus served robot, side by side in one process: the same primitives on a tabletop built
here (``make``) and on the robot server at ``--socket`` (the proxy), interleaved, medians in ms as JSON.

    python -m pyrualean_robot.served.bench --socket /tmp/.../agent/robot.sock --reps 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any, Callable


def _ms(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _cell10(robo: Any) -> None:
    """A cell of 10 primitives: reads, perception, two short motions, the gripper."""
    robo.state()
    seg = robo.segment("red_block")
    robo.move_to([0.45, 0.0, 0.30])
    robo.state()
    robo.camera_meta("agentview")
    robo.move_to([0.45, 0.05, 0.30])
    robo.state()
    robo.segment("blue block")
    robo.set_gripper(robo.OPEN, steps=2)
    robo.state()
    assert seg.found


def _on_motion_png(robo: Any) -> None:
    """What a moving cell costs in images: the on-motion cameras rendered and PNG-encoded."""
    from ..base import png_bytes

    for _, img in robo._on_motion_images():
        if not isinstance(img, bytes):
            png_bytes(img)


def measure(socket_path: str, reps: int) -> dict:
    from .. import make
    from ..robots import DEFAULT_ROBOT
    from .proxy import connect

    local = make(DEFAULT_ROBOT, task="stack_blocks", seed=0, workspace=tempfile.mkdtemp(prefix="bench-served-"),
                 images="on-demand")
    served = connect(socket_path, workspace=tempfile.mkdtemp(prefix="bench-served-"))
    robots = {"in_process": local, "served": served}
    samples: dict[str, dict[str, list[float]]] = {k: {} for k in robots}

    def add(arm: str, metric: str, v: float) -> None:
        samples[arm].setdefault(metric, []).append(v)

    for robo in robots.values():  # warm both: GL context, first render, first RPC
        robo.image("agentview")
        robo.move_to([0.45, -0.1, 0.30])
    for i in range(reps):
        for arm, robo in robots.items():
            add(arm, "state_ms", _ms(robo.state))
            add(arm, "image256_ms", _ms(lambda: robo.image("agentview")))
            n = len(robo.ON_MOTION_IMAGES)
            add(arm, "on_motion_png_per_image_ms", _ms(lambda: _on_motion_png(robo)) / n)
            robo.move_to([0.45, -0.1, 0.30])
            add(arm, "move_to_20cm_ms", _ms(lambda: robo.move_to([0.45, 0.1, 0.30])))  # 20 cm along y
            add(arm, "cell_10_primitives_ms", _ms(lambda: _cell10(robo)))
    out = {arm: {m: round(statistics.median(v), 3) for m, v in ms.items()} for arm, ms in samples.items()}
    out["reps"] = reps
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    print(json.dumps(measure(a.socket, a.reps)))


if __name__ == "__main__":
    main()
