"""python -m pyrualean_robot.tasks --robot R [--json]: name, family, instruction, solution (no simulator)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Optional

from .robots import DEFAULT_ROBOT


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.tasks", description="list a robot's tasks")
    p.add_argument("--robot", default=DEFAULT_ROBOT)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from .robots import RobotUnavailable, robot_class

    try:
        rows = robot_class(a.robot).tasks()
    except ValueError as e:  # unknown robot or option: the caller's mistake
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RobotUnavailable as e:  # registered, but its adapter (e.g. LIBERO) is not installed: one line
        msg = str(e).replace("\n", " ")
        print(f"error: {msg}" if msg.startswith("robot ") else f"error: robot {a.robot!r}: {msg}", file=sys.stderr)
        return 3
    except Exception as e:  # an adapter failing to describe itself: one line, not a traceback
        print(f"error: robot {a.robot!r}: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 3
    if a.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    else:
        for r in rows:
            print(f"{r.name:26s} {r.family:11s} {r.instruction}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
