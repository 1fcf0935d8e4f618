"""Exceptions the agent's code can see."""

from __future__ import annotations

from typing import Any

EPISODE_END_REASONS = ("terminated", "truncated", "timeout", "cancelled", "call_budget")


class ToolError(RuntimeError):
    """A primitive could not run (backend failure, unreachable endpoint, out-of-bounds pixel)."""

    def __init__(self, tool: str, message: str, payload: Any = None):
        super().__init__(f"{tool}: {message}")
        self.tool = tool
        self.message = message
        self.payload = payload


class EpisodeFinished(BaseException):
    """The episode is over: the task predicate fired (``terminated``), the simulator step budget ran out
    (``truncated``), or the host stopped it (``timeout``, ``cancelled``, ``call_budget``).

    It derives from BaseException so ``except Exception`` in policy code cannot swallow it.
    Read-only calls (state, image, show, ...) keep working after it."""

    def __init__(self, reason: str):
        super().__init__(f"episode finished: {reason}")
        self.reason = reason


class SandboxError(PermissionError):
    """A sandboxed (agent-written) cell used something outside the documented ``robo`` API: the cell was
    refused before running, or the operation (subprocess, network, a file outside the workspace) was blocked.

    It is a PermissionError so library code that tolerates OSError (e.g. the import system's bytecode cache)
    degrades instead of breaking."""
