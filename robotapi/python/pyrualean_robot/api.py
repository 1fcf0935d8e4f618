"""python -m pyrualean_robot.api --robot R --primitives full|no-vla --format text|tools"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from .base import PRIMITIVE_SETS
from .robots import DEFAULT_ROBOT


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.api",
                                description="print the robot API reference the agent sees")
    p.add_argument("--robot", default=DEFAULT_ROBOT)
    p.add_argument("--primitives", default="full", choices=list(PRIMITIVE_SETS))
    p.add_argument("--format", default="text", choices=["text", "tools"])
    a = p.parse_args(argv)
    from .apiref import render
    from .robots import RobotUnavailable

    try:
        sys.stdout.write(render(a.robot, a.primitives, a.format))
    except ValueError as e:  # unknown robot or option: the caller's mistake
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RobotUnavailable as e:  # registered, but its adapter is not installed
        print(f"error: {e}", file=sys.stderr)
        return 3
    except Exception as e:  # an adapter failing to describe itself: one line, not a traceback
        print(f"error: robot {a.robot!r}: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
