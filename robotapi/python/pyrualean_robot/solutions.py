"""Run a percent-format reference solution (`# %%` cells) against a fresh robot, as a notebook would.

    python -m pyrualean_robot.solutions --robot tabletop --task stack_blocks --seeds 0-9
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

from .errors import EpisodeFinished
from .robots import DEFAULT_ROBOT


def repo_root() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    d = here
    while d != os.path.dirname(d):
        if os.path.isfile(os.path.join(d, "go.mod")):
            return d
        d = os.path.dirname(d)
    return os.environ.get("PYRUALEAN_ROOT", os.getcwd())


def solution_path(robot: str, task: str) -> str:
    return os.path.join(repo_root(), "robotapi", "solutions", robot, f"{task}.py")


def split_cells(source: str) -> list[str]:
    """Code cells of a percent-format file; markdown cells (`# %% [markdown]`) are skipped."""
    cells: list[tuple[str, list[str]]] = []
    kind, lines = "code", []
    for line in source.splitlines():
        if line.startswith("# %%"):
            if any(x.strip() for x in lines):
                cells.append((kind, lines))
            kind = "markdown" if "[markdown]" in line else "code"
            lines = []
        else:
            lines.append(line)
    if any(x.strip() for x in lines):
        cells.append((kind, lines))
    return ["\n".join(ls).strip() + "\n" for k, ls in cells if k == "code"]


@dataclass(frozen=True)
class SolutionRun:
    task: str
    seed: int
    success: bool
    env_steps: int
    wall_s: float
    error: str = ""


def run_solution(robot: str, task: str, seed: int, workspace: Optional[str] = None) -> SolutionRun:
    from . import make

    t0 = time.time()
    ws = workspace or tempfile.mkdtemp(prefix="pyrualean-sol-")
    robo = make(robot, task=task, seed=seed, workspace=ws, images="none")
    ns = {"robo": robo, "__name__": "__solution__"}
    error = ""
    with open(solution_path(robot, task), encoding="utf-8") as f:
        cells = split_cells(f.read())
    for i, cell in enumerate(cells):
        try:
            exec(compile(cell, f"<{task} cell {i}>", "exec"), ns)
        except EpisodeFinished:
            break
        except Exception as e:  # a failing cell ends the run; the predicate decides success
            error = f"cell {i}: {type(e).__name__}: {e}"
            break
    return SolutionRun(task, seed, bool(robo.done and robo._terminated), robo.env_steps, round(time.time() - t0, 2),
                       error)


def _seeds(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyrualean_robot.solutions")
    p.add_argument("--robot", default=DEFAULT_ROBOT)
    p.add_argument("--task", action="append", help="task name (repeatable; default: all)")
    p.add_argument("--seeds", default="0-9")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from .robots import robot_class

    names = a.task or [t.name for t in robot_class(a.robot).tasks()]
    worst = 1.0
    for name in names:
        runs = [run_solution(a.robot, name, s) for s in _seeds(a.seeds)]
        ok = sum(r.success for r in runs)
        worst = min(worst, ok / len(runs))
        if a.json:
            print(json.dumps({"task": name, "ok": ok, "n": len(runs), "runs": [r.__dict__ for r in runs]}))
        else:
            fails = ", ".join(f"seed {r.seed}: {r.error or 'predicate not met'}" for r in runs if not r.success)
            print(f"{name:26s} {ok}/{len(runs)}  {fails}")
        sys.stdout.flush()
    return 0 if worst >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
