"""The robot registry: the one list of robot names (the Go side asks it: ``python -m pyrualean_robot.robots
--json``). Modules are imported lazily, so listing robots boots nothing.

Add a robot: write ``robots/<name>.py`` (a :class:`~pyrualean_robot.base.Robot` subclass) and add one
:class:`RobotEntry` here; ``make``, ``pyrualean tasks/suites/api`` and ``--suite`` lookups then know it.
Code elsewhere asks this module (or, from Go, ``robotapi.Robots``) about a robot's properties rather than
testing its name."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class RobotEntry:
    """Where a robot lives and what installs it. suites: ``"module:ATTR"`` naming its benchmark suite names
    (a tuple, or a dict whose keys are the names), so a suite can imply its robot. rows: ``"module:FUNCTION"``
    returning its ``pyrualean suites`` rows ({suite, tasks, runnable, missing}; booting nothing); a robot
    without suites needs none (one row per task family)."""
    module: str
    cls: str
    needs: str
    suites: str = ""
    rows: str = ""


REGISTRY: dict[str, RobotEntry] = {
    "tabletop": RobotEntry("pyrualean_robot.robots.tabletop", "TabletopRobot",
                           "the base install (MuJoCo + robosuite meshes)"),
    "libero": RobotEntry("pyrualean_robot.robots.libero", "LiberoRobot",
                         "the LIBERO-PRO adapter (issue #7, requirements/libero.txt)",
                         "pyrualean_robot.robots._libero_sim:SUITES", "pyrualean_robot.robots.suites:libero_rows"),
    "robotwin": RobotEntry("pyrualean_robot.robots.robotwin", "RobotwinRobot",
                           "the RoboTwin 2.0 adapter (issue #7; needs a GPU/Vulkan env server)",
                           "pyrualean_robot.robots.robotwin:SUITES", "pyrualean_robot.robots.suites:robotwin_rows"),
    "robocasa": RobotEntry("pyrualean_robot.robots.robocasa", "RobocasaRobot",
                           "the RoboCasa365 adapter (issue #7; ~10 GB of assets)",
                           "pyrualean_robot.robots.robocasa:SUITES", "pyrualean_robot.robots.robocasa:suite_rows"),
    "robodojo_xpl_rgb": RobotEntry("pyrualean_robot.robots.robodojo", "RoboDojoRobot",
                                   "the RoboDojo adapter (issue #7; Isaac Sim)",
                                   "pyrualean_robot.robots.robodojo:SUITES",
                                   "pyrualean_robot.robots.suites:robodojo_rows"),
}
DEFAULT_ROBOT = "tabletop"


class RobotUnavailable(RuntimeError):
    """A registered robot whose adapter or its dependencies are not installed."""


def robot_class(name: str) -> Any:
    if name not in REGISTRY:
        raise ValueError(f"unknown robot {name!r}; robots: {', '.join(REGISTRY)}")
    e = REGISTRY[name]
    try:
        module = importlib.import_module(e.module)
    except ImportError as err:
        raise RobotUnavailable(f"robot {name!r} is registered but not available: {err}. It needs {e.needs}.") from err
    try:
        return getattr(module, e.cls)
    except AttributeError:
        raise RobotUnavailable(f"robot {name!r}: {e.module} has no class {e.cls} yet; it needs {e.needs}.") from None


def create(name: str, *, seed: Any = None, **kwargs: Any) -> Any:
    """An instance of robot `name` built from make()'s arguments (seed None: the robot's own default seed).

    The one place a robot is constructed: make() (in the kernel) and the robot server (sealed episodes) both
    call it, then attach the notebook session."""
    if seed is not None:
        kwargs["seed"] = seed
    return robot_class(name)(**kwargs)


def make_options(cls: type) -> list[str]:
    """The keyword arguments make() passes on to robot class `cls`: its ``__init__``'s named parameters, and
    where that takes ``**kwargs``, those of the next ``__init__`` up the class hierarchy."""
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names += [p.name for p in params if p.name != "self" and p.name not in names
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


def suite_names(name: str) -> tuple[str, ...]:
    """The benchmark suites of a robot (empty: it has none). Imports the module holding them, not a simulator."""
    spec = REGISTRY[name].suites
    if not spec:
        return ()
    mod, attr = spec.split(":")
    return tuple(getattr(importlib.import_module(mod), attr))


def robot_for_suite(suite: str) -> str:
    """The robot a suite belongs to (``libero_spatial_swap`` -> ``libero``); ValueError naming the suites."""
    known: list[str] = []
    for name in REGISTRY:
        try:
            names = suite_names(name)
        except ImportError:
            continue
        if suite in names:
            return name
        known.extend(names)
    raise ValueError(f"unknown suite {suite!r}; suites: {', '.join(known)}")


def describe(name: str) -> dict:
    """One robot for the Go side: name, default, default_seed, remote and options (from its class's
    ``__init__``: the one home of them), suites, needs, and available/error when its module does not import.
    options are make()'s keyword arguments for this robot (:func:`make_options`)."""
    e = REGISTRY[name]
    row: dict[str, Any] = {"name": name, "default": name == DEFAULT_ROBOT, "default_seed": 0, "remote": False,
                           "options": [], "suites": [], "needs": e.needs, "available": True, "error": ""}
    try:
        cls = robot_class(name)
        params = inspect.signature(cls.__init__).parameters
        seed: Optional[inspect.Parameter] = params.get("seed")
        if seed is not None and isinstance(seed.default, int):
            row["default_seed"] = seed.default
        row["remote"] = "env_url" in params  # it drives an RPent env server
        row["options"] = make_options(cls)
        row["suites"] = list(suite_names(name))
    except (ImportError, RobotUnavailable) as err:
        row.update(available=False, error=str(err).replace("\n", " "))
    return row
