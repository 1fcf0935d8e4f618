"""Tabletop tasks: language instruction, seeded layout, and a success predicate evaluated by the simulator.

`_swap` variants (LIBERO-PRO style) exchange the regions of the manipulated objects and the fixtures, so a
policy that memorised where things usually are fails while one that looks succeeds. No simulator import here:
`pyrualean tasks` lists them without booting MuJoCo."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..base import TaskInfo

# Workspace regions (x range, y range) for sampling; +y is the robot's left.
LEFT = ((0.40, 0.62), (0.12, 0.27))
RIGHT = ((0.40, 0.62), (-0.27, -0.12))
CENTER = ((0.36, 0.56), (-0.06, 0.06))
PARK = {  # out of view, behind the robot on the floor level table edge: unused objects
    "red_block": (-0.9, 0.5), "green_block": (-0.9, 0.6), "blue_block": (-0.9, 0.7),
    "bowl": (-0.9, -0.4), "plate": (-0.9, -0.7), "cabinet": (-1.3, 0.0),
}
BLOCKS = ("red_block", "green_block", "blue_block")
FIXTURES = ("bowl", "plate", "cabinet")


@dataclass(frozen=True)
class Layout:
    """Where everything starts: object -> (x, y, yaw); drawer opening in metres."""
    poses: dict
    drawer_q: float = 0.0


@dataclass
class Monitor:
    """Per-episode predicate state (ordered tasks remember when each sub-goal started holding)."""
    since: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Goal:
    """One condition the simulator checks, and how the task card says it (object names as the API spells
    them: the card's words and the check are one definition)."""
    text: str
    holds: Callable[["object"], bool]  # sim view -> holds now


@dataclass(frozen=True)
class TaskSpec:
    name: str
    family: str
    instruction: str
    objects: tuple[str, ...]                    # object names the task shows (object_names)
    layout: Callable[[np.random.Generator, bool], Layout]
    goals: tuple[Goal, ...]                     # all must hold at once, or (ordered) one after the other
    swap: bool = False
    ordered: bool = False

    def info(self) -> TaskInfo:
        return TaskInfo(self.name, self.family, self.instruction, f"robotapi/solutions/tabletop/{self.name}.py")

    def success(self, sim, mon: Monitor, step: int) -> bool:
        """Solved now: every goal holds; ordered, each began to hold after the one before it and all still
        hold (the monitor remembers since when each has held)."""
        if not self.ordered:
            return all(g.holds(sim) for g in self.goals)
        for i, g in enumerate(self.goals):
            if g.holds(sim):
                mon.since.setdefault(i, step)
            else:
                mon.since.pop(i, None)
        starts = [mon.since.get(i) for i in range(len(self.goals))]
        return None not in starts and all(a < b for a, b in zip(starts, starts[1:]))

    def success_check(self) -> str:
        """The goals in the card's words, e.g. "green_block on blue_block and red_block on green_block, both
        at once"."""
        texts = [g.text for g in self.goals]
        if self.ordered:
            return "first " + ", then ".join(texts) + " (the first still holding)"
        return " and ".join(texts) + (", both at once" if len(texts) == 2 else ", all at once" if len(texts) > 2 else "")


RADIUS = {"bowl": 0.095, "plate": 0.095}  # footprint + finger clearance; blocks use BLOCK_RADIUS
BLOCK_RADIUS = 0.045


def _yaw(rng: np.random.Generator) -> float:
    return float(rng.uniform(-0.5, 0.5))


def _place(rng, spec: list[tuple[str, tuple]], drawer_q: float = 0.0) -> Layout:
    """Sample each object uniformly in its region, keeping footprints (plus gripper clearance) apart.
    Whole-layout rejection keeps it deterministic for a seed."""
    for _ in range(500):
        placed: list[tuple[float, float, float]] = []
        poses = {}
        for name, region in spec:
            (x0, x1), (y0, y1) = region
            x, y = float(rng.uniform(x0, x1)), float(rng.uniform(y0, y1))
            rad = RADIUS.get(name, BLOCK_RADIUS)
            if any(math.hypot(x - px, y - py) < rad + pr for px, py, pr in placed):
                break
            placed.append((x, y, rad))
            poses[name] = (x, y, _yaw(rng) if name in BLOCKS else 0.0)
        else:
            return Layout(poses, drawer_q)
    raise RuntimeError("layout sampling failed")  # regions are generous; this means a bug


# ----- predicates (sim is the robot's _SimView) ---------------------------------------------------------------
def in_bowl(sim, obj: str) -> bool:
    p, b = sim.pos(obj), sim.pos("bowl")
    return (math.hypot(p[0] - b[0], p[1] - b[1]) < 0.06 and p[2] - b[2] < 0.07 and not sim.held(obj)
            and sim.speed(obj) < 0.05)


def on_plate(sim, obj: str) -> bool:
    p, b = sim.pos(obj), sim.pos("plate")
    return (math.hypot(p[0] - b[0], p[1] - b[1]) < 0.07 and 0.015 < p[2] - b[2] < 0.045 and not sim.held(obj)
            and sim.speed(obj) < 0.05)


def on_block(sim, top: str, bottom: str) -> bool:
    p, b = sim.pos(top), sim.pos(bottom)
    return (math.hypot(p[0] - b[0], p[1] - b[1]) < 0.025 and 0.034 < p[2] - b[2] < 0.046
            and not sim.held(top) and sim.speed(top) < 0.05)


def bowl(obj: str) -> Goal:
    return Goal(f"{obj} in the bowl", lambda s: in_bowl(s, obj))


def plate(obj: str) -> Goal:
    return Goal(f"{obj} on the plate", lambda s: on_plate(s, obj))


def block(top: str, bottom: str) -> Goal:
    return Goal(f"{top} on {bottom}", lambda s: on_block(s, top, bottom))


def drawer_open(more_than: float) -> Goal:
    return Goal(f"the drawer pulled out more than {more_than} m", lambda s: s.drawer_q() > more_than)


def drawer_closed(less_than: float) -> Goal:
    return Goal(f"the drawer pushed in to less than {less_than} m", lambda s: s.drawer_q() < less_than)


def _tasks() -> list[TaskSpec]:
    T: list[TaskSpec] = []

    def regions(swap: bool, a, b):
        return (b, a) if swap else (a, b)

    for swap in (False, True):
        sfx = "_swap" if swap else ""

        def bowl_layout(rng, swap=swap):
            ra, rb = regions(swap, LEFT, RIGHT)
            return _place(rng, [("bowl", rb), ("red_block", ra), ("green_block", CENTER)])
        T.append(TaskSpec(f"put_block_in_bowl{sfx}", "pick_place", "put the red block in the bowl",
                          ("red_block", "green_block", "bowl"), bowl_layout,
                          (bowl("red_block"),), swap))

        def plate_layout(rng, swap=swap):
            ra, rb = regions(swap, RIGHT, LEFT)
            return _place(rng, [("plate", rb), ("green_block", ra), ("blue_block", CENTER)])
        T.append(TaskSpec(f"put_block_on_plate{sfx}", "pick_place", "put the green block on the plate",
                          ("green_block", "blue_block", "plate"), plate_layout,
                          (plate("green_block"),), swap))

        def stack2_layout(rng, swap=swap):
            ra, rb = regions(swap, LEFT, RIGHT)
            return _place(rng, [("red_block", ra), ("blue_block", rb), ("green_block", CENTER)])
        T.append(TaskSpec(f"stack_blocks{sfx}", "stack", "stack the red block on the blue block",
                          ("red_block", "green_block", "blue_block"), stack2_layout,
                          (block("red_block", "blue_block"),), swap))

        def stack3_layout(rng, swap=swap):
            ra, rb = regions(swap, LEFT, RIGHT)
            return _place(rng, [("blue_block", CENTER), ("green_block", ra), ("red_block", rb)])
        T.append(TaskSpec(f"stack_three{sfx}", "stack",
                          "build a tower: the blue block at the bottom, the green block on it, the red block on top",
                          BLOCKS, stack3_layout,
                          (block("green_block", "blue_block"), block("red_block", "green_block")), swap))

        def drawer_layout(rng, q, swap=swap):
            cy = float(rng.uniform(0.06, 0.16)) * (-1 if swap else 1)
            cx = float(rng.uniform(0.68, 0.74))
            lay = _place(rng, [("red_block", RIGHT if not swap else LEFT)], q)
            poses = dict(lay.poses)
            poses["cabinet"] = (cx, cy, 0.0)
            return Layout(poses, q)
        T.append(TaskSpec(f"open_drawer{sfx}", "drawer", "open the drawer",
                          ("cabinet", "drawer", "drawer_handle", "red_block"),
                          lambda rng, swap, f=drawer_layout: f(rng, 0.0),
                          (drawer_open(0.12),), swap))
        T.append(TaskSpec(f"close_drawer{sfx}", "drawer", "close the drawer",
                          ("cabinet", "drawer", "drawer_handle", "red_block"),
                          lambda rng, swap, f=drawer_layout: f(rng, float(rng.uniform(0.14, 0.17))),
                          (drawer_closed(0.015),), swap))

        def ordered_layout(rng, swap=swap):
            ra, rb = regions(swap, LEFT, RIGHT)
            return _place(rng, [("bowl", rb), ("plate", ra), ("red_block", CENTER), ("green_block", CENTER)])
        T.append(TaskSpec(f"bowl_then_plate{sfx}", "multi_step",
                          "first put the red block in the bowl, then put the green block on the plate "
                          "(in that order)",
                          ("red_block", "green_block", "bowl", "plate"), ordered_layout,
                          (bowl("red_block"), plate("green_block")), swap, ordered=True))
    return T


TASKS: dict[str, TaskSpec] = {t.name: t for t in _tasks()}
DEFAULT_TASK = "put_block_in_bowl"


def get(name: Optional[str]) -> TaskSpec:
    name = name or DEFAULT_TASK
    if name not in TASKS:
        raise ValueError(f"unknown tabletop task {name!r}; tasks: {', '.join(TASKS)}")
    return TASKS[name]
