"""The kernel side of the contract (docs/architecture.md): images as display_data, the on-motion hook,
``display()``, ``cell_report()`` and ``episode_card()`` evaluated through user_expressions, and the sandbox.

Outside IPython (plain Python, pytest) images are kept in ``Session.emitted`` instead of being displayed."""

from __future__ import annotations

import json
import linecache
from typing import Any, Optional

import numpy as np

from . import hints, sandbox
from .images import display_png, ipython, png_bytes


class JSONReport:
    """A value whose IPython representation is application/json (what user_expressions return)."""

    def __init__(self, data: dict):
        self.data = data

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"application/json": self.data,
                "text/plain": json.dumps(self.data, default=str)[:2000]}

    def __repr__(self) -> str:
        return json.dumps(self.data, default=str)[:2000]


class Session:
    """Per-process glue between the active robot and IPython. One lives on the IPython shell (or, outside
    IPython, on this module's `_fallback`), never as free-floating globals."""

    def __init__(self) -> None:
        self.robot: Any = None
        self.emitted: list[tuple[bytes, dict]] = []  # outside IPython
        self.steps_at_cell_start = 0
        self.display_count = 0
        self.hooks_installed = False
        self.sandbox: Any = None
        self.cell = ""  # the running cell's source (for the NameError note)
        self.cells: list[hints.CellRun] = []  # the cells run before, newest last (hints.MAX_EARLIER kept)


_fallback = Session()


def session() -> Session:
    ip = ipython()
    if ip is None:
        return _fallback
    s = getattr(ip, "_pyrualean_session", None)
    if s is None:
        s = Session()
        ip._pyrualean_session = s
    return s


def emit_png(png: bytes, meta: dict) -> None:
    """Display a PNG now, as display_data with metadata {"pyrualean": meta}; outside IPython keep it in
    ``session().emitted``."""
    if not display_png(png, meta):
        session().emitted.append((png, meta))


def display(obj: Any, name: Optional[str] = None) -> None:
    """Show an image in this cell's output: a numpy array (H,W[,3|4]) or a PIL image becomes a PNG;
    anything else goes to IPython's display()."""
    s = session()
    if isinstance(obj, np.ndarray) or type(obj).__module__.startswith("PIL."):
        arr = np.asarray(obj)
        label = name or f"display_{s.display_count}"
        s.display_count += 1
        emit_png(png_bytes(arr), {"camera": label, "source": "display"})
        return
    ip = ipython()
    if ip is None:
        print(repr(obj))
        return
    from IPython.display import display as ipy_display

    ipy_display(obj)


def attach(robot: Any) -> None:
    """Make `robot` the active robot (make() calls this): its shown images go to this session; inside IPython
    install the hooks (sandbox, on-motion images) once and put `display` in the namespace."""
    s = session()
    s.robot = robot
    robot._image_sink = emit_png
    s.steps_at_cell_start = robot._env_steps()
    ip = ipython()
    if ip is None:
        return
    ip.user_ns.setdefault("display", display)
    if not s.hooks_installed:
        # the sandbox's post_run_cell must run before ours: on-motion images are ours, not the agent's code
        s.sandbox = sandbox.install(ip, robot.workspace,
                                    robot_names=lambda: sandbox.names_bound_to(session().robot, ip.user_ns))
        ip.events.register("pre_run_cell", _pre_run_cell)
        ip.events.register("post_run_cell", _post_run_cell)
        ip.set_custom_exc((NameError, TypeError), _explain_error)
        s.hooks_installed = True
    elif s.sandbox is not None:
        s.sandbox.workspace = robot.workspace


def _pre_run_cell(info: Any = None) -> None:
    s = session()
    s.cell = str(getattr(info, "raw_cell", "") or "")
    if s.robot is not None:
        s.steps_at_cell_start = s.robot._env_steps()


def _cell_line(tb: Any) -> Optional[int]:
    """The line of the running cell a traceback passes through (its module-level frame in the user's
    namespace), or None."""
    ip = ipython()
    ns = ip.user_ns if ip is not None else None
    while tb is not None:
        f = tb.tb_frame
        if f.f_code.co_name == "<module>" and f.f_globals is ns:
            return tb.tb_lineno
        tb = tb.tb_next
    return None


def _raising_line(tb: Any) -> str:
    """The source of the innermost line of the agent's own code (any cell's, in the user's namespace) that a
    traceback passes through; "" when none."""
    ip = ipython()
    ns = ip.user_ns if ip is not None else None
    where = None
    while tb is not None:  # a deep recursion's traceback: one line read, the innermost
        if tb.tb_frame.f_globals is ns:
            where = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return linecache.getline(*where).strip() if where else ""


def _explain_error(shell: Any, etype: Any, value: Any, tb: Any, tb_offset: Any = None) -> None:
    """IPython's handler for NameError and TypeError: the traceback as usual, with a note when hints says
    more than Python does (where a name was meant to come from; a segment that found nothing)."""
    try:
        s = session()
        if isinstance(value, NameError):
            robot = type(s.robot) if s.robot is not None else object  # the class: no property runs
            names = [n for n in dir(robot) if not n.startswith("_")] if robot is not object else []
            note = hints.name_error_note(getattr(value, "name", "") or "", s.cell, _cell_line(tb), s.cells, names)
        else:
            note = hints.type_error_note(str(value), _raising_line(tb))
        if note and note not in getattr(value, "__notes__", ()):
            value.add_note(note)
    except Exception:  # a hint must never hide the error itself
        pass
    try:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
    except Exception:
        # The error could not be shown (agent code: its str() raises). Show that error, as IPython would,
        # instead of raising here: IPython drops a handler that raises, and the notes with it.
        shell.showtraceback(running_compiled_code=True)


def _post_run_cell(result: Any = None) -> None:
    s = session()
    err = getattr(result, "error_in_exec", None)
    run = hints.CellRun(s.cell, _cell_line(err.__traceback__) if err is not None else None,
                        type(err).__name__ if err is not None else "")
    s.cells = (s.cells + [run])[-hints.MAX_EARLIER:]
    r = s.robot
    if r is None or r.images != "on-motion":
        return
    if r._env_steps() == s.steps_at_cell_start:
        return
    try:
        for cam, img in r._on_motion_images():
            r._emit_image(img, cam, "on-motion")
    except Exception as e:  # an image failure must not break the cell's result
        print(f"[pyrualean] on-motion images failed: {type(e).__name__}: {e}")


def cell_report() -> JSONReport:
    """The per-cell report (application/json); each call starts a new window."""
    s = session()
    flags = s.sandbox.take_flags() if s.sandbox is not None else []
    if s.robot is None:
        return JSONReport({"moved": False, "env_steps": 0, "env_steps_total": 0, "calls": [], "state": None,
                           "done": False, "success": False, "episode_finished": None, "sandbox_flags": flags,
                           "error": "no robot: run make(...) first"})
    return JSONReport(s.robot._cell_report(flags))


def episode_card() -> JSONReport:
    """The task card (application/json) with step-0 camera images as base64 PNG."""
    s = session()
    if s.robot is None:
        return JSONReport({"error": "no robot: run make(...) first"})
    return JSONReport(s.robot._episode_card())
