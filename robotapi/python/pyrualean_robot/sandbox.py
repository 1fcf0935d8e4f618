"""Sandbox for agent-written cells (contract: active only when the execute_request metadata carries
{"pyrualean": {"sandbox": true}}; person-typed cells are unrestricted).

Two layers, like the seed's (an in-process Python sandbox cannot be sealed; this raises the bar and records
what was tried):

1. a static check of the cell's AST: blocked dunder names (as names, attributes or strings), dynamic-code
   builtins, and imports outside the allow-list. A refused cell is replaced by ``raise SandboxError(...)``
   and does not run;
2. an audit hook (sys.addaudithook) that, while a sandboxed cell runs on the kernel's main thread, refuses
   subprocesses, sockets, native-library loading and opening files outside the workspace (reads of the
   Python installation stay allowed so imports work).
"""

from __future__ import annotations

import ast
import os
import sys
import tempfile
import threading
from typing import Any, Optional

from .errors import SandboxError

ALLOWED_MODULES = frozenset("""__future__ abc array bisect cmath collections contextlib copy cv2 dataclasses datetime
decimal enum fractions functools heapq io itertools json math numbers numpy operator PIL pprint random re scipy
skimage statistics string struct textwrap time traceback types typing warnings""".split())
BLOCKED_NAMES = frozenset("""__builtins__ __closure__ __code__ __func__ __globals__ __import__ __loader__ __self__
__spec__ __subclasses__ __wrapped__""".split())
BLOCKED_CALLS = frozenset("exec eval compile breakpoint input help exit quit globals vars".split())
REFUSED_EVENTS = ("subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
                  "os.kill", "os.killpg", "socket.", "ctypes.dlopen", "pty.", "shutil.", "os.remove",
                  "os.rename", "os.rmdir", "os.unlink", "os.chmod", "os.chown", "os.truncate", "os.symlink",
                  "os.link", "webbrowser.", "urllib.Request", "http.client.connect", "ftplib.", "smtplib.")
MAX_FLAGS = 40


def check_source(code: str, workspace: str) -> tuple[list[str], list[str]]:
    """Return (refusals, flags) for a cell's source. Refusals stop the cell; flags are only recorded."""
    refusals: list[str] = []
    flags: list[str] = []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [], []  # IPython reports the SyntaxError itself (and IPython magics never reach here parsed)

    def allowed_import(mod: str) -> bool:
        top = mod.split(".")[0]
        if top in ALLOWED_MODULES:
            return True
        return os.path.isfile(os.path.join(workspace, top + ".py"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in BLOCKED_NAMES:
            refusals.append(node.id)
        elif isinstance(node, ast.Attribute):
            if node.attr in BLOCKED_NAMES:
                refusals.append(node.attr)
            elif node.attr.startswith("_") and not node.attr.startswith("__"):
                flags.append(f"private-attr:{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for b in BLOCKED_NAMES:
                if b in node.value:
                    refusals.append(b)
            if node.value.startswith("/") and len(node.value) > 1:
                flags.append(f"path:{node.value[:80]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BLOCKED_CALLS:
            refusals.append(node.func.id)
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
            f"Stay within the documented `robo` API (allowed imports: {', '.join(sorted(ALLOWED_MODULES))}).")


class Sandbox:
    """Installed once per kernel; switches on for sandboxed cells only."""

    def __init__(self, shell: Any, workspace: str):
        self.shell = shell
        self.workspace = workspace
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

    # IPython ast transformer: refuse before anything runs.
    def visit(self, tree: ast.Module) -> ast.Module:
        if not self.requested():
            return tree
        code = ast.unparse(tree)
        refusals, flags = check_source(code, self.workspace)
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


def install(shell: Any, workspace: str) -> Sandbox:
    sb = Sandbox(shell, workspace)
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
