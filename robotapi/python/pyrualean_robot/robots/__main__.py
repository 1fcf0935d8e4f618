"""``python -m pyrualean_robot.robots [--json] [--suite S] [--check-options ROBOT KEY=VALUE...]``: the registered
robots (name, default seed, remote, suites, options), or with --suite the robot that suite belongs to, or with
--check-options the options coerced to their kinds as JSON (exit 2 with the reason when one is refused)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from . import REGISTRY, coerce_options, describe, robot_for_suite


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.robots", description="list the registered robots")
    p.add_argument("--json", action="store_true")
    p.add_argument("--suite", help="print the robot this suite belongs to")
    p.add_argument("--check-options", nargs="+", metavar=("ROBOT", "KEY=VALUE"),
                   help="check a robot's own make() options and print them coerced (JSON)")
    a = p.parse_args(argv)
    if a.check_options is not None:
        robot, raw = a.check_options[0], {}
        for kv in a.check_options[1:]:
            k, sep, v = kv.partition("=")
            if not sep or not k.isidentifier():
                print(f"error: option {kv!r}: want KEY=VALUE", file=sys.stderr)
                return 2
            raw[k] = v
        try:
            print(json.dumps(coerce_options(robot, raw)))
        except (ValueError, ImportError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
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
