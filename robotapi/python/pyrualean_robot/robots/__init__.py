"""The robot registry: the one list of robot names (the Go side asks it: ``python -m pyrualean_robot.robots
--json``). Modules are imported lazily, so listing robots boots nothing.

Add a robot: write ``robots/<name>.py`` (a :class:`~pyrualean_robot.base.Robot` subclass) and add one
:class:`RobotEntry` here; ``make``, ``pyrualean tasks/suites/api`` and ``--suite`` lookups then know it.
Code elsewhere asks this module (or, from Go, ``robotapi.Robots``) about a robot's properties rather than
testing its name."""

from __future__ import annotations

import importlib
import inspect
import re
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


#: make()'s arguments every robot takes (the episode's own settings); the rest of a robot's ``__init__``
#: parameters are its options (``--robot-opt KEY=VALUE``), listed by :func:`options`.
COMMON_ARGS = ("task", "seed", "workspace", "images", "primitives", "suite", "max_env_steps")


@dataclass(frozen=True)
class RobotOption:
    """One of a robot's own make() options: its name, value kind (int, float, bool or str) and default."""
    name: str
    kind: str
    default: Any


def _kind(annotation: Any, default: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    for kind in ("bool", "int", "float"):  # bool before int: bool is an int
        if re.search(rf"\b{kind}\b", str(text)) or (default is not None and type(default).__name__ == kind):
            return kind
    return "str"


def _init_params(cls: type) -> dict[str, inspect.Parameter]:
    """A robot class's ``__init__`` keyword parameters, following ``**kwargs`` up to the base classes."""
    out: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        forwards = False
        for p in list(params.values())[1:]:
            if p.kind is p.VAR_KEYWORD:
                forwards = True
            elif p.kind is not p.VAR_POSITIONAL:
                out.setdefault(p.name, p)
        if not forwards:
            break
    return out


def options(name: str) -> tuple[RobotOption, ...]:
    """Robot `name`'s own make() options: every keyword of its class's ``__init__`` (and of the bases it
    forwards ``**kwargs`` to) except :data:`COMMON_ARGS`. The one home of what a robot accepts."""
    return tuple(RobotOption(p.name, _kind(p.annotation, p.default),
                             None if p.default is inspect.Parameter.empty else p.default)
                 for p in _init_params(robot_class(name)).values() if p.name not in COMMON_ARGS)


def robots_with_option(key: str) -> list[str]:
    """The registered robots whose make() takes option `key` (robots that do not import are skipped)."""
    out = []
    for name in REGISTRY:
        try:
            if any(o.name == key for o in options(name)):
                out.append(name)
        except (ImportError, RobotUnavailable):
            continue
    return out


def coerce_options(name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Robot `name`'s options with string values turned into their kind (``"3"`` -> 3 for an int option,
    ``"true"``/``"false"`` for a bool); values already of another type pass unchanged. ValueError names an
    unknown option (and the known ones) or a value that is not of its kind."""
    known = {o.name: o for o in options(name)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        opt = known.get(key)
        if opt is None:
            names = ", ".join(sorted(known)) or "none"
            others = ", ".join(robots_with_option(key)) or "none"
            raise ValueError(f"robot {name!r} has no option {key!r} (its options: {names}; "
                             f"robots that take it: {others})")
        if not isinstance(value, str) or opt.kind == "str":
            out[key] = value
            continue
        try:
            if opt.kind == "bool":
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                out[key] = value.lower() in ("true", "1", "yes")
            else:
                out[key] = int(value) if opt.kind == "int" else float(value)
        except ValueError:
            raise ValueError(f"robot {name!r} option {key}={value!r}: want a {opt.kind}") from None
    check = getattr(robot_class(name), "check_options", None)
    if check is not None:
        check(out)
    return out


def create(name: str, *, seed: Any = None, **kwargs: Any) -> Any:
    """An instance of robot `name` built from make()'s arguments (seed None: the robot's own default seed).
    The robot's own options may come as strings (``--robot-opt``): they are coerced to their kind.

    The one place a robot is constructed: make() (in the kernel) and the robot server (sealed episodes) both
    call it, then attach the notebook session."""
    if seed is not None:
        kwargs["seed"] = seed
    own = {k: v for k, v in kwargs.items() if k not in COMMON_ARGS}
    kwargs.update(coerce_options(name, own))
    return robot_class(name)(**kwargs)


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
    """One robot for the Go side: name, default, default_seed and remote (from its class's ``__init__``: the
    one home of both), suites, its own make() options (:func:`options`), needs, and available/error when its
    module does not import."""
    e = REGISTRY[name]
    row: dict[str, Any] = {"name": name, "default": name == DEFAULT_ROBOT, "default_seed": 0, "remote": False,
                           "suites": [], "options": [], "rpent_guides": None, "needs": e.needs, "available": True, "error": ""}
    try:
        cls = robot_class(name)
        params = inspect.signature(cls.__init__).parameters
        seed: Optional[inspect.Parameter] = params.get("seed")
        if seed is not None and isinstance(seed.default, int):
            row["default_seed"] = seed.default
        row["remote"] = "env_url" in params  # it drives an RPent env server
        row["suites"] = list(suite_names(name))
        row["options"] = [{"name": o.name, "kind": o.kind, "default": o.default} for o in options(name)]
        guides = getattr(robot_class(name), "RPENT_GUIDES", None)
        row["rpent_guides"] = {"dir": guides[0], "files": list(guides[1])} if guides else None
    except (ImportError, RobotUnavailable) as err:
        row.update(available=False, error=str(err).replace("\n", " "))
    return row
