"""The base every robot (`robo`) derives from: options, the call ledger, the episode guard, images for the
notebook, and the per-cell report. Concrete robots (tabletop, libero, ...) implement the primitives.

Import direction: this module uses only errors, images and results; it never imports the notebook (make()
attaches a robot to the kernel session, see notebook.attach) or the sandbox.

Writing a robot (for adapter authors):

* add one :class:`~pyrualean_robot.robots.RobotEntry` to ``robots/__init__.py`` (the one list of robot names;
  the Go side asks it) and write ``robots/<name>.py``;
* subclass :class:`Robot`, set ``NAME``, ``CAMERAS``, ``ON_MOTION_IMAGES``, ``KNOWLEDGE`` (``KNOWLEDGE_NOVLA`` for
  no-vla runs) and the constants you document; implement ``_env_steps()``, ``_solved()``,
  ``_render_rgb(camera, size)``, ``state()`` and ``tasks()`` (a classmethod returning :class:`TaskInfo` rows, so
  ``pyrualean tasks`` works without a simulator);
* decorate every public primitive with ``@tool(stateful=...)`` (``vla=True`` for learned-policy calls, which the
  ``no-vla`` primitive set hides and refuses); validate arguments and raise ``ValueError`` before touching the
  simulator; return a frozen dataclass from :mod:`pyrualean_robot.results` (or your own) with ``terminated`` /
  ``truncated`` fields;
* call ``self._mark_terminated()`` / ``self._mark_truncated()`` when the task predicate fires or the step budget
  runs out; the next stateful call then raises :class:`EpisodeFinished` (``done`` is sticky);
* the docstrings ARE the agent's API reference (``pyrualean api``), so write them for the agent.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import inspect
import json
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Sequence

import numpy as np

from .errors import EpisodeFinished, ToolError
from .images import display_png, png_bytes

IMAGE_POLICIES = ("on-motion", "on-demand", "none")
#: full: every primitive; no-vla: without the learned-policy (VLA) calls; paper: without the privileged ones
#: (primitives that read the simulator's ground truth, which the paper's agent never had).
PRIMITIVE_SETS = ("full", "no-vla", "paper")
# One ledger record (calls.jsonl), in the original's field order; stateful = the call may step the simulator.
LEDGER_KEYS = ("index", "tool", "kwargs", "started_at", "elapsed_s", "ok", "stateful", "privileged", "env_steps", "error",
               "summary")
MAX_REPORT_CALLS = 1000
SUMMARY_KEYS = ("terminated", "truncated", "success", "reached", "final_dist_m", "final_eef_pos", "steps_used",
                "chunks_used", "found", "score", "world_xyz", "top_xyz", "center_xyz", "step", "gripper_opening")


@dataclass(frozen=True)
class TaskInfo:
    """One task of a robot: name, family, language instruction, reference-solution path (repo-relative)."""
    name: str
    family: str
    instruction: str
    solution: str


def tool(*, stateful: bool, vla: bool = False, privileged: bool = False) -> Callable:
    """Mark a public method as a primitive: ledgered, guarded when stateful, refused under no-vla when vla,
    refused under the paper's primitive set when privileged (it reads the simulator's ground truth)."""

    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(self: "Robot", *args: Any, **kwargs: Any) -> Any:
            return self._run_tool(fn, sig, stateful, vla, args, kwargs, privileged)

        wrapper._pyrualean_tool = {"stateful": stateful, "vla": vla, "privileged": privileged}  # type: ignore[attr-defined]
        return wrapper

    return deco


def _parameters(sig: inspect.Signature) -> str:
    """A primitive's parameters as a call would name them: "xyz, gripper, *, tol, step_clip"."""
    out, star = [], False
    for p in list(sig.parameters.values())[1:]:  # not self
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        out.append(p.name)
    return ", ".join(out)


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist() if v.size <= 64 else f"<array {v.shape} {v.dtype}>"
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        return v.item()
    if isinstance(v, float):
        return round(v, 5) if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return repr(v)[:200]


def summarize(result: Any) -> dict:
    """The ledger's summary of a result: the original's summary keys that the result carries."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        d = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    elif isinstance(result, dict):
        d = result
    else:
        return {}
    return {k: _jsonable(d[k]) for k in SUMMARY_KEYS if k in d}


_HOST_PORT = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d+$")

GUIDES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guides")


def load_guide(robot: str, name: str) -> str:
    """A robot's operating guide ``guides/<robot>/<name>`` (its KNOWLEDGE text; a ``-novla`` file drops the
    VLA skills). A missing file raises: a robot without its guide is a packaging error, not an empty prompt."""
    with open(os.path.join(GUIDES_DIR, robot, name), encoding="utf-8") as f:
        return f.read()


@dataclasses.dataclass
class ReportWindow:
    """Where a reader of the robot's reports (:meth:`Robot._report`) left off: ledger records and env steps."""
    calls: int = 0
    steps: int = 0


class Robot:
    """Base robot. Subclasses document their own conventions in their class docstring."""

    NAME: ClassVar[str] = "robot"
    OPEN: ClassVar[float] = -1.0
    CLOSE: ClassVar[float] = 1.0
    CAMERAS: ClassVar[tuple[str, ...]] = ("agentview", "wrist")
    ON_MOTION_IMAGES: ClassVar[tuple[str, ...]] = ("agentview", "wrist")
    KNOWLEDGE: ClassVar[str] = ""
    #: The guide of a no-vla run (KNOWLEDGE without the VLA skills); empty = KNOWLEDGE serves both.
    KNOWLEDGE_NOVLA: ClassVar[str] = ""
    # Names listed in the API reference's "Constants:" section.
    CONSTANTS: ClassVar[tuple[str, ...]] = ("OPEN", "CLOSE", "CAMERAS", "ON_MOTION_IMAGES")

    def __init__(self, *, task: str, seed: int = 0, workspace: Optional[str] = None, images: str = "on-motion",
                 primitives: str = "full", suite: Optional[str] = None, vla_endpoint: Optional[str] = None,
                 max_env_steps: int = 10000):
        if images not in IMAGE_POLICIES:
            raise ValueError(f"images must be one of {IMAGE_POLICIES}, not {images!r}")
        if primitives not in PRIMITIVE_SETS:
            raise ValueError(f"primitives must be one of {PRIMITIVE_SETS}, not {primitives!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise ValueError(f"seed must be an int, not {seed!r}")
        if not isinstance(max_env_steps, int) or max_env_steps <= 0:
            raise ValueError(f"max_env_steps must be a positive int, not {max_env_steps!r}")
        self.task_name = task
        self.seed = int(seed)
        self.workspace = os.path.abspath(workspace or os.getcwd())
        os.makedirs(self.workspace, exist_ok=True)
        self.images = images
        self.primitives = primitives
        self.suite = suite
        self.vla_endpoint = vla_endpoint or os.environ.get("PYRUALEAN_VLA_ENDPOINT") or None
        self.max_env_steps = max_env_steps
        self._ledger: list[dict] = []
        self._ledger_path = os.path.join(self.workspace, "calls.jsonl")
        self._depth = 0  # nesting: only the outermost primitive call is ledgered
        self._done_reason: Optional[str] = None
        self._terminated = False
        self._truncated = False
        self._kernel_window = ReportWindow()  # cell_report()'s window (the host's own is the robot server's)
        self._shown: list[str] = []
        # Where shown images go: make() points it at the notebook session (see notebook.attach).
        self._image_sink: Optional[Callable[[bytes, dict], None]] = None

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Refuse (ValueError naming the option) make() options of this robot whose values cannot work, before
        anything boots; `options` holds only the robot's own options, already of their kinds. A robot with an
        option of its own extends this (calling super)."""
        for key in ("env_url", "vla_endpoint", "sam3_endpoint"):
            v = options.get(key)
            if isinstance(v, str) and "://" not in v and not _HOST_PORT.match(v):
                raise ValueError(f"{key}={v!r}: want scheme://host:port (http, https, socket, ws) or host:port")
        v = options.get("env_url")
        if isinstance(v, str) and "://" not in v:
            raise ValueError(f"env_url={v!r}: want http://host:port or socket://host:port")

    # ----- hooks for subclasses -------------------------------------------------------------------------
    def _env_steps(self) -> int:
        raise NotImplementedError

    def _solved(self) -> bool:
        raise NotImplementedError

    def _render_rgb(self, camera: str, size: int) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def tasks(cls) -> list[TaskInfo]:
        """The robot's tasks (no simulator needed)."""
        return []

    def _task_language(self) -> str:
        return self.task_name

    def _object_names(self) -> tuple[str, ...]:
        return ()

    def _episode_facts(self) -> dict:
        return {}

    # ----- episode ------------------------------------------------------------------------------------------
    @property
    def task(self) -> str:
        """The task instruction in natural language (authoritative)."""
        return self._task_language()

    @property
    def done(self) -> bool:
        """True once the episode is over (task solved, step budget spent, or stopped by the host). Sticky."""
        if self._done_reason is None and self._solved():
            self._done_reason = "terminated"
            self._terminated = True
        return self._done_reason is not None

    @property
    def env_steps(self) -> int:
        """Control steps the simulator has taken in this episode."""
        return self._env_steps()

    def _mark_terminated(self) -> None:
        self._terminated = True
        if self._done_reason is None:
            self._done_reason = "terminated"

    def _mark_truncated(self) -> None:
        self._truncated = True
        if self._done_reason is None:
            self._done_reason = "truncated"

    def _stop_episode(self, reason: str) -> None:
        """Host side: end the episode (timeout, cancelled, call_budget); later stateful calls raise."""
        if self._done_reason is None:
            self._done_reason = reason

    def _budget_left(self) -> int:
        return self.max_env_steps - self._env_steps()

    def _guard(self) -> None:
        if self.done:
            raise EpisodeFinished(self._done_reason or "terminated")
        if self._budget_left() <= 0:
            self._mark_truncated()
            raise EpisodeFinished("truncated")

    # ----- ledger -------------------------------------------------------------------------------------------
    def _run_tool(self, fn: Callable, sig: inspect.Signature, stateful: bool, vla: bool, args: tuple,
                  kwargs: dict, privileged: bool = False) -> Any:
        name = fn.__name__
        if self._depth > 0:  # a primitive used by another primitive: the outer call is the ledger entry
            return fn(self, *args, **kwargs)
        unbound = ""
        try:
            bound = sig.bind(self, *args, **kwargs)
            call_kwargs = {k: _jsonable(v) for k, v in list(bound.arguments.items())[1:]}
        except TypeError as e:
            # the agent's own keywords, which no parameter bounds: a long one is cut in the record (calls.jsonl,
            # the cell's feedback), as in the message
            call_kwargs = {"args": _jsonable(list(args)),
                           **{(k if len(k) <= 100 else k[:100] + "..."): _jsonable(v) for k, v in kwargs.items()}}
            # Python's message names only the wrong argument; a small model then drops every keyword (or
            # guesses another: `move_to(..., above=0.03)`, after the worked example's put(block, place, above)).
            unbound = f"{str(e)[:300]}; {name} takes {_parameters(sig)}"
        started = time.time()
        steps0 = self._env_steps()
        rec: dict[str, Any] = {"index": len(self._ledger), "tool": name, "kwargs": call_kwargs,
                               "started_at": round(started, 3), "stateful": stateful, "privileged": privileged}
        self._depth += 1
        try:
            if vla and self.primitives == "no-vla":
                raise RuntimeError(f"{name} is not available in this run (no-VLA primitive set)")
            if privileged and self.primitives == "paper":
                raise RuntimeError(f"{name} is not available in this run (the paper's primitive set: no "
                                   "primitive that reads the simulator's ground truth)")
            if unbound:
                raise TypeError(unbound)
            if stateful:
                self._guard()
            result = fn(self, *args, **kwargs)
        except BaseException as e:
            rec.update(ok=False, error=f"{type(e).__name__}: {e}", summary={})
            raise
        else:
            rec.update(ok=True, error=None, summary=summarize(result))
            return result
        finally:
            self._depth -= 1
            rec["elapsed_s"] = round(time.time() - started, 4)
            rec["env_steps"] = self._env_steps() - steps0
            rec = {k: rec.get(k) for k in LEDGER_KEYS}
            self._ledger.append(rec)
            try:
                with open(self._ledger_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(rec, default=str) + "\n")
            except OSError:
                pass  # the ledger in memory still feeds cell_report

    @property
    def ledger(self) -> list[dict]:
        """Every primitive call so far (the records written to calls.jsonl)."""
        return list(self._ledger)

    # ----- images -------------------------------------------------------------------------------------------
    def _check_camera(self, camera: str) -> None:
        if camera not in self.CAMERAS:
            raise ValueError(f"camera must be one of {self.CAMERAS}, not {camera!r}")

    def _emit_image(self, img: np.ndarray, name: str, source: str) -> None:
        png, meta = png_bytes(img), {"camera": name, "source": source}
        if self._image_sink is not None:
            self._image_sink(png, meta)
        else:
            display_png(png, meta)

    def _on_motion_images(self) -> list[tuple[str, np.ndarray]]:
        return [(c, self._render_rgb(c, 256)) for c in self.ON_MOTION_IMAGES]

    # ----- per-cell report and episode card -----------------------------------------------------------------
    def _report(self, window: "ReportWindow", sandbox_flags: Sequence[str] = (), max_calls: Optional[int] = None) -> dict:
        """What the robot did since `window` last reported (then the window moves on): the judge's one source.
        The kernel's cell_report() and the robot server's host.judge each keep a window of their own and read
        this; a rule the judge applies to every cell is added here. max_calls keeps only the newest records
        (a message-size bound); calls_omitted counts the rest, which the ledger (calls.jsonl) still has."""
        records = self._ledger[window.calls:]
        kept = records if max_calls is None else records[-max_calls:]
        steps = self._env_steps()
        report = {
            "moved": steps != window.steps,
            "env_steps": steps - window.steps,
            "env_steps_total": steps,
            "calls": [dict(r) for r in kept],
            "calls_omitted": len(records) - len(kept),
            "ledger_total": len(self._ledger),
            "state": self._brief_state(),
            "done": self.done,
            "success": bool(self._solved()),
            "episode_finished": self._done_reason,
            "sandbox_flags": list(sandbox_flags),
        }
        window.calls, window.steps = len(self._ledger), steps
        return report

    def _cell_report(self, sandbox_flags: list[str]) -> dict:
        # Whole records: the host writes them to the run folder's calls.jsonl as they are (it trims what the
        # model reads). The cap only bounds a runaway loop; the workspace's calls.jsonl always has every call.
        return self._report(self._kernel_window, sandbox_flags, max_calls=MAX_REPORT_CALLS)

    def _brief_state(self) -> dict:
        st = self._raw_state()
        return st.brief() if hasattr(st, "brief") else _jsonable(st)

    def _raw_state(self) -> Any:
        """State without going through the ledger (for reports)."""
        fn = type(self).state
        return getattr(fn, "__wrapped__", fn)(self)

    def _card_images(self) -> dict[str, bytes]:
        return {c: png_bytes(self._render_rgb(c, 256)) for c in self.CAMERAS}

    def _episode_card(self) -> dict:
        st = self._raw_state()
        return {
            "robot": self.NAME,
            "primitives": self.primitives,
            "suite": self.suite,
            "task": self.task_name,
            "seed": self.seed,
            "task_language": self.task,
            "object_names": list(self._object_names()),
            "eef_pos": _jsonable(getattr(st, "eef_pos", None)),
            "eef_quat": _jsonable(getattr(st, "eef_quat", None)),
            "gripper_opening": _jsonable(getattr(st, "gripper_opening", None)),
            "max_env_steps": self.max_env_steps,
            "cameras": list(self.CAMERAS),
            "on_motion_images": list(self.ON_MOTION_IMAGES),
            "facts": self._episode_facts(),
            "knowledge": (self.KNOWLEDGE_NOVLA if self.primitives == "no-vla" and self.KNOWLEDGE_NOVLA
                          else self.KNOWLEDGE),
            "images": {k: base64.b64encode(v).decode() for k, v in self._card_images().items()},
        }

    # state() is declared here so reports work for every robot; subclasses override it (keep @tool).
    @tool(stateful=False)
    def state(self) -> Any:
        """Current robot state (see State)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} task={self.task_name!r} seed={self.seed} steps={self._env_steps()}>"
