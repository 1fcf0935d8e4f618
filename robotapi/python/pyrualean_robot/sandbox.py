"""Sandbox for agent-written cells (contract: active only when the execute_request metadata carries
{"pyrualean": {"sandbox": true}}; person-typed cells are unrestricted).

Two layers, like the original's (an in-process Python sandbox cannot be sealed; this raises the bar and records
what was tried):

1. a static check of the cell's AST: blocked dunder names (as names, attributes or strings), frame and
   traceback attributes (the way from an exception back to the robot's ``self``), private attributes of the
   robot (``robo._x``, ``robo.__dict__``, ``type(robo)._x``, ``getattr(robo, "_x")``, also through names bound
   to the robot such as ``r = robo``), dynamic-code builtins, and imports outside the allow-list. A refused
   cell is replaced by ``raise SandboxError(...)`` naming what was refused, and does not run;
2. an audit hook (sys.addaudithook) that, while a sandboxed cell runs on the kernel's main thread, refuses
   subprocesses, sockets, native-library loading and opening files outside the workspace (reads of the
   Python installation stay allowed so imports work).
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tempfile
import threading
from typing import Any, Callable, Iterable, Optional

from .errors import SandboxError

ALLOWED_MODULES = frozenset("""__future__ abc array bisect cmath collections contextlib copy cv2 dataclasses datetime
decimal enum fractions functools heapq io itertools json math numbers numpy operator PIL pprint random re scipy
skimage statistics string struct textwrap time traceback types typing warnings""".split())
BLOCKED_NAMES = frozenset("""__builtins__ __closure__ __code__ __func__ __globals__ __import__ __loader__ __self__
__spec__ __subclasses__ __wrapped__""".split())
# Frame and traceback attributes: e.__traceback__.tb_frame.f_back.f_locals["self"] is the robot itself.
BLOCKED_ATTRS = frozenset("""__traceback__ tb_frame tb_next f_back f_locals f_globals f_builtins f_code gi_frame
gi_code cr_frame cr_code ag_frame ag_code""".split())
# Calls that take an attribute name: on the robot, only a literal public name is allowed.
ATTR_CALLS = frozenset("getattr hasattr setattr delattr".split())
BLOCKED_CALLS = frozenset("exec eval compile breakpoint input help exit quit globals vars".split())
REFUSED_EVENTS = ("subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
                  "os.kill", "os.killpg", "socket.", "ctypes.dlopen", "pty.", "shutil.", "os.remove",
                  "os.rename", "os.rmdir", "os.unlink", "os.chmod", "os.chown", "os.truncate", "os.symlink",
                  "os.link", "webbrowser.", "urllib.Request", "http.client.connect", "ftplib.", "smtplib.")
MAX_FLAGS = 40
# Builtins that reach attributes or code by name: an alias (`f = getattr`) dodges the call checks above,
# so taking one as a value is flagged. get_ipython() reaches the shell (ev, run_cell) and is flagged too.
ESCAPE_VALUES = ATTR_CALLS | BLOCKED_CALLS | {"get_ipython", "__import__"}
# Dunder attributes policy code has no business with (object.__getattribute__(robo, ...), x.__dict__).
FLAGGED_DUNDERS = frozenset("""__getattribute__ __getattr__ __setattr__ __delattr__ __dict__ __class__ __bases__
__mro__ __reduce__ __reduce_ex__ __getstate__ __setstate__""".split())
_PRIVATE_NAME = re.compile(r"_[A-Za-z][A-Za-z0-9_]*")
_PRIVATE_IN_CODE = re.compile(r"\._([A-Za-z][A-Za-z0-9_]*)")


def _robot_root(node: ast.AST, names: frozenset[str]) -> Optional[str]:
    """The robot name an expression is reached from (robo, robo.state().x, type(robo), r[0] with r = [robo]),
    or None. Anything derived from the robot counts: its results carry no private API either."""
    while True:
        if isinstance(node, ast.Name):
            return node.id if node.id in names else None
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "type" and node.args:
                node = node.args[0]
            else:
                node = node.func
        elif isinstance(node, ast.NamedExpr):
            node = node.value
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            elts = node.values if isinstance(node, ast.Dict) else node.elts
            return next((r for r in (_robot_root(e, names) for e in elts) if r is not None), None)
        else:
            return None


def _cell_aliases(tree: ast.AST, names: frozenset[str]) -> frozenset[str]:
    """Names this cell binds to the robot (`r = robo`, `r = robot_alias`, `(r := robo)`), to a fixpoint."""
    while True:
        more = set(names)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                if _robot_root(node.value, names) is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            more.add(n.id)
            elif isinstance(node, (ast.For, ast.comprehension)) and _robot_root(node.iter, names) is not None:
                more.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        if more == names:
            return names
        names = frozenset(more)


def check_source(code: str, workspace: str, robot_names: Iterable[str] = ("robo",)) -> tuple[list[str], list[str]]:
    """Return (refusals, flags) for a cell's source. Refusals stop the cell; flags are only recorded.

    robot_names: names that refer to the robot (the kernel passes every namespace name bound to it; `robo`
    is always included). Private attributes reached from them are refused; elsewhere they are only flagged
    (policy code may define its own classes with private attributes)."""
    refusals: list[str] = []
    flags: list[str] = []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [], []  # IPython reports the SyntaxError itself (and IPython magics never reach here parsed)
    robots = _cell_aliases(tree, frozenset(robot_names) | {"robo"})

    def allowed_import(mod: str) -> bool:
        top = mod.split(".")[0]
        if top in ALLOWED_MODULES:
            return True
        return os.path.isfile(os.path.join(workspace, top + ".py"))

    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in BLOCKED_NAMES:
            refusals.append(node.id)
        elif isinstance(node, ast.Name) and node.id in ESCAPE_VALUES:
            if node.id == "get_ipython":
                flags.append("probe:get_ipython")
            elif id(node) not in called:
                flags.append(f"escape:alias-of-{node.id}")
        elif isinstance(node, ast.Attribute):
            root = _robot_root(node.value, robots) if node.attr.startswith("_") else None
            if node.attr in BLOCKED_NAMES or node.attr in BLOCKED_ATTRS:
                refusals.append(node.attr)
            elif root is not None:
                refusals.append(f"{root}.{node.attr} (private)")
                flags.append(f"private-attr:{node.attr}")
            elif node.attr.startswith("_") and not node.attr.startswith("__"):
                flags.append(f"private-attr:{node.attr}")
            elif node.attr in FLAGGED_DUNDERS:
                flags.append(f"dunder-attr:{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for b in BLOCKED_NAMES:
                if b in node.value:
                    refusals.append(b)
            if node.value in BLOCKED_ATTRS:
                refusals.append(node.value)
            if node.value.startswith("/") and len(node.value) > 1:
                flags.append(f"path:{node.value[:80]}")
            # a private name handed over as data (getattr alias, attrgetter, object.__getattribute__) or
            # inside code run later (get_ipython().ev("robo._client..."))
            if _PRIVATE_NAME.fullmatch(node.value):
                flags.append(f"private-attr:{node.value}")
            else:
                flags.extend(f"private-attr:_{m}" for m in dict.fromkeys(_PRIVATE_IN_CODE.findall(node.value)))
            if os.path.basename(node.value) == "calls.jsonl":
                flags.append(f"ledger:{node.value[:80]}")
            elif node.value.endswith(".py") and "\n" not in node.value:
                flags.append(f"pyfile:{node.value[:80]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BLOCKED_CALLS:
            refusals.append(node.func.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTR_CALLS:
            root = _robot_root(node.args[0], robots) if node.args else None
            if root is None:
                continue
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                refusals.append(f"{node.func.id}({root}, <computed name>)")
            elif name.value.startswith("_"):
                refusals.append(f"{root}.{name.value} (private)")
                flags.append(f"private-attr:{name.value}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                flags.append(f"import:{a.name}")
                if not allowed_import(a.name):
                    refusals.append(f"import {a.name}")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            flags.append(f"import:{mod}")
            if node.level or not allowed_import(mod):
                refusals.append(f"import {'.' * node.level}{mod}")
    seen: set[str] = set()
    refusals = [r for r in refusals if not (r in seen or seen.add(r))]
    return refusals, flags[:MAX_FLAGS]


def refusal_message(refusals: list[str]) -> str:
    return (f"{', '.join(refusals)} may not be used by policy code; the cell was not run. "
            f"Stay within the documented public `robo` API (allowed imports: {', '.join(sorted(ALLOWED_MODULES))}).")


class Sandbox:
    """Installed once per kernel; switches on for sandboxed cells only."""

    def __init__(self, shell: Any, workspace: str, robot_names: Callable[[], Iterable[str]] = tuple):
        self.shell = shell
        self.workspace = workspace
        self._robot_names = robot_names
        self.active = False
        self.thread: Optional[int] = None
        self.flags: list[str] = []
        self._read_roots = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                               os.path.dirname(os.__file__), "/usr", "/lib",
                                                               "/etc/ld.so.cache", "/dev/null", "/proc/self",
                                                               "/sys/devices/system/cpu",
                                                               os.path.join(tempfile.gettempdir(), "ipykernel_"))})

    def take_flags(self) -> list[str]:
        out, self.flags = self.flags, []
        return out

    def requested(self) -> bool:
        kernel = getattr(self.shell, "kernel", None)
        if kernel is None:
            return False
        try:
            parent = kernel.get_parent("shell") or {}
        except Exception:
            return False
        meta = parent.get("metadata") or {}
        p = meta.get("pyrualean") if isinstance(meta, dict) else None
        return bool(isinstance(p, dict) and p.get("sandbox"))

    def robot_names(self) -> set[str]:
        """The names bound to the active robot now (always including `robo`)."""
        return {"robo", *self._robot_names()}

    # IPython ast transformer: refuse before anything runs.
    def visit(self, tree: ast.Module) -> ast.Module:
        if not self.requested():
            return tree
        code = ast.unparse(tree)
        refusals, flags = check_source(code, self.workspace, self.robot_names())
        self.flags = (self.flags + flags)[:MAX_FLAGS]
        if not refusals:
            return tree
        msg = refusal_message(refusals)
        new = ast.parse(f"raise __import__('pyrualean_robot.errors', fromlist=['SandboxError']).SandboxError({msg!r})")
        return new

    def pre_run(self, info: Any = None) -> None:
        self.active = self.requested()
        self.thread = threading.get_ident() if self.active else None

    def post_run(self, result: Any = None) -> None:
        self.active = False
        self.thread = None

    def _inside(self, path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") or (r.endswith("_") and path.startswith(r))
                   for r in roots)

    def audit(self, event: str, args: tuple) -> None:
        if not self.active or threading.get_ident() != self.thread:
            return
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if isinstance(path, int) or path is None:
                return
            if isinstance(path, bytes):
                path = path.decode(errors="replace")
            real = os.path.realpath(str(path))
            writing = False
            if isinstance(mode, str):
                writing = any(c in mode for c in "wax+")
            elif isinstance(flags, int):
                writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
            ws = (os.path.realpath(self.workspace),)
            if self._inside(real, ws):
                return
            if not writing and self._inside(real, self._read_roots):
                return
            self.flags = (self.flags + [f"escape:open {str(path)[:80]}"])[:MAX_FLAGS]
            raise SandboxError(f"opening {path!r} outside the workspace is not allowed in policy code")
        if event.startswith(REFUSED_EVENTS):
            self.flags = (self.flags + [f"escape:{event}"])[:MAX_FLAGS]
            raise SandboxError(f"{event} is not allowed in policy code")


def names_bound_to(robot: Any, namespace: dict) -> set[str]:
    """Namespace names bound to `robot`, directly or inside a list/tuple/dict (Out, _3, r = robo)."""
    names: set[str] = set()
    if robot is None:
        return names
    for k, v in list(namespace.items()):
        try:
            if v is robot:
                names.add(k)
            elif isinstance(v, (list, tuple)) and any(x is robot for x in v[:1000]):
                names.add(k)
            elif isinstance(v, dict) and any(x is robot for x in list(v.values())[:1000]):
                names.add(k)
        except Exception:  # an exotic object in the namespace must not break the check
            continue
    return names


def install(shell: Any, workspace: str, robot_names: Callable[[], Iterable[str]] = tuple) -> Sandbox:
    """Switch the sandbox on for this shell. robot_names: called before each sandboxed cell, the names that
    refer to the robot (the caller knows the robot; the sandbox only checks code)."""
    sb = Sandbox(shell, workspace, robot_names)
    transformer = _Transformer(sb)
    shell.ast_transformers.append(transformer)
    shell.events.register("pre_run_cell", sb.pre_run)
    shell.events.register("post_run_cell", sb.post_run)
    sys.addaudithook(sb.audit)  # permanent by design; inert unless a sandboxed cell is running
    # The cell is over once IPython formats its traceback; that formatting reads source files outside the
    # workspace, so switch the hook off first.
    original = shell.showtraceback

    def showtraceback(*args: Any, **kwargs: Any) -> Any:
        sb.active = False
        return original(*args, **kwargs)

    shell.showtraceback = showtraceback
    return sb


class _Transformer(ast.NodeTransformer):
    def __init__(self, sb: Sandbox):
        self.sb = sb

    def visit(self, node: ast.AST) -> ast.AST:  # called once per cell with the Module
        if isinstance(node, ast.Module):
            return self.sb.visit(node)
        return node
