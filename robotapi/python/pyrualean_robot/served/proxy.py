"""``robo`` inside a sealed kernel: a proxy generated from the robot class, with the class's docstrings,
signatures, constants, properties and result types, whose primitives run in the robot server
(:mod:`.server`). The API reference (:func:`..apiref.api_reference`) of the proxy class is the robot
class's, word for word. The proxy holds no simulator state: only a socket path and what the server says."""

from __future__ import annotations

import functools
import inspect
import os
import re
from typing import Any, Optional

from .. import notebook
from ..apiref import tool_methods
from ..errors import EpisodeFinished, SandboxError, ToolError
from ..robots import robot_class
from ..robots.rpent import EnvServerClient
from .server import public_properties
from .wire import RAISABLE, from_wire, result_types

#: A primitive may run for as long as the cell does; the kernel's cell timeout bounds it, not the RPC.
CALL_TIMEOUT_S = 24 * 3600.0
#: What connect(expect=...) compares with the server's episode.
CHECKED = ("robot", "seed", "images", "primitives", "max_env_steps")
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")
_BUILTIN_ERRORS = {"ValueError": ValueError, "TypeError": TypeError, "KeyError": KeyError,
                   "IndexError": IndexError, "RuntimeError": RuntimeError,
                   "NotImplementedError": NotImplementedError, "AttributeError": AttributeError,
                   "SandboxError": SandboxError}


def rebuild_exception(raised: dict) -> BaseException:
    """The server-side exception, as the same type where it is one the API documents."""
    kind, msg = str(raised.get("type")), str(raised.get("message") or "")
    if kind == "EpisodeFinished":
        return EpisodeFinished(str(raised.get("reason") or "terminated"))
    if kind == "ToolError":
        return ToolError(str(raised.get("tool") or "robot"), str(raised.get("tool_message") or msg))
    if kind in RAISABLE and kind in _BUILTIN_ERRORS:
        return _BUILTIN_ERRORS[kind](msg)
    return RuntimeError(f"{kind}: {msg}")


class RobotProxy:
    """Base of the generated proxy classes: the RPC plumbing the kernel side needs (hooks, reports)."""

    _robot_class: type = object

    def __init__(self, client: EnvServerClient, info: dict, workspace: str):
        self._client = client
        self._types = result_types(self._robot_class)
        self.task_name = info.get("task")
        self.seed = info.get("seed")
        self.images = info.get("images", "on-motion")
        self.primitives = info.get("primitives", "full")
        self.suite = info.get("suite")
        self.max_env_steps = info.get("max_env_steps")
        self.workspace = os.path.abspath(workspace)

    def _rpc(self, method: str, *args: Any) -> Any:
        return self._client.call(method, *args, timeout_s=CALL_TIMEOUT_S)

    def _call(self, name: str, args: tuple, kwargs: dict) -> Any:
        try:
            out = self._rpc("robot.call", name, list(args), kwargs)
        except TypeError as e:
            raise ValueError(f"{name}: an argument cannot be sent to the robot ({e})") from None
        for png, meta in out.get("images") or []:
            notebook.emit_png(from_wire(png, self._types), meta)
        if out.get("raised"):
            raise rebuild_exception(out["raised"])
        return from_wire(out.get("value"), self._types)

    def _get(self, name: str) -> Any:
        return from_wire(self._rpc("robot.get", name), self._types)

    # what notebook.attach and its hooks use
    def _env_steps(self) -> int:
        return int(self._rpc("robot.env_steps"))

    def _on_motion_images(self) -> list[tuple[str, bytes]]:
        return [(cam, from_wire(png, self._types)) for cam, png in self._rpc("robot.on_motion_images")]

    def _emit_image(self, img: Any, name: str, source: str) -> None:
        from ..base import png_bytes

        notebook.emit_png(img if isinstance(img, bytes) else png_bytes(img), {"camera": name, "source": source})

    def _cell_report(self, sandbox_flags: list[str]) -> dict:
        return from_wire(self._rpc("robot.cell_report", list(sandbox_flags)), self._types)

    def _episode_card(self) -> dict:
        return from_wire(self._rpc("robot.card"), self._types)

    def __repr__(self) -> str:
        return str(self._rpc("robot.repr"))


def _forward(name: str, fn: Any) -> Any:
    def method(self: RobotProxy, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)

    functools.update_wrapper(method, fn)  # name, docstring, annotations, _pyrualean_tool, __wrapped__
    return method


def _forward_property(name: str, prop: property) -> property:
    return property(lambda self: self._get(name), doc=prop.__doc__)


def proxy_class(cls: type) -> type:
    """A proxy class for robot class ``cls``: same name, docstring, constants, properties and primitives
    (signatures and docstrings included), each primitive a call to the robot server."""
    ns: dict[str, Any] = {"__doc__": cls.__doc__, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                          "_robot_class": cls}
    for klass in reversed(cls.__mro__):
        for k, v in vars(klass).items():
            if _CONSTANT.match(k) and not callable(v):
                ns[k] = v
    for name in public_properties(cls):
        ns[name] = _forward_property(name, inspect.getattr_static(cls, name))
    tasks = getattr(cls, "tasks", None)
    if tasks is not None:
        ns["tasks"] = classmethod(lambda _c: cls.tasks())
        ns["tasks"].__doc__ = tasks.__doc__
    for name, fn, _ in tool_methods(cls, "full"):
        ns[name] = _forward(name, fn)
    return type(cls.__name__, (RobotProxy,), ns)


def connect(socket_path: str, *, workspace: Optional[str] = None, expect: Optional[dict] = None) -> RobotProxy:
    """Connect to the robot server at ``socket_path`` and make its proxy the kernel's active robot.
    ``expect`` (robot, task, seed, ... as given to make()) must match what the server runs; None = any."""
    client = EnvServerClient("unix://" + os.path.abspath(socket_path), timeout_s=CALL_TIMEOUT_S,
                             tool_name="robot_server")
    info = client.call("robot.describe")
    if isinstance(info.get("max_request_bytes"), int):
        client.max_body = info["max_request_bytes"]
    # the task is left out: robots name it their own way (libero's task 0 is "libero_spatial/0")
    wrong = {k: (v, info.get(k)) for k, v in (expect or {}).items()
             if k in CHECKED and v is not None and info.get(k) != v}
    if wrong:
        raise ValueError("the robot server runs another episode than make() asked for: " + ", ".join(
            f"{k}={want!r} (server: {got!r})" for k, (want, got) in wrong.items()))
    proxy = proxy_class(robot_class(str(info["robot"])))(client, info, workspace or os.getcwd())
    notebook.attach(proxy)
    return proxy
