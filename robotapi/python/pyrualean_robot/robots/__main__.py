"""``python -m pyrualean_robot.robots [--json] [--suite S]``: the registered robots (name, default seed, remote,
suites), or with --suite the robot that suite belongs to (exit 2 naming the suites when it is unknown)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from . import REGISTRY, describe, robot_for_suite


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.robots", description="list the registered robots")
    p.add_argument("--json", action="store_true")
    p.add_argument("--suite", help="print the robot this suite belongs to")
    a = p.parse_args(argv)
    if a.suite is not None:
        try:
            print(robot_for_suite(a.suite))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    rows = [describe(n) for n in REGISTRY]
    if a.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            extra = "" if r["available"] else f"  (unavailable: {r['error']})"
            print(f"{r['name']:17s} seed {r['default_seed']:<6d} {'remote' if r['remote'] else 'local ':6s} "
                  f"{', '.join(r['suites'])}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
