"""A TRL ``GRPOTrainer`` environment backed by ``pyrualean serve --openenv``.

TRL (1.16) takes ``environment_factory=PyrualeanEnv``: one instance per rollout, whose ``reset`` gets
the dataset row and returns the text appended to its prompt, whose public methods are the model's
tools, and whose ``get_reward`` scores the finished rollout. Here each instance is one OpenEnv
session (``GenericEnvClient``) on the server; the tools are the cells arm's ``python`` and ``finish``,
and the reward is the benchmark's success, as the server reports it.

The server and its token come from the environment: ``PYRUALEAN_OPENENV_URL`` (e.g.
``http://gpu-box:8888``) and ``PYRUALEAN_OPENENV_TOKEN``. A dataset row's reset keys (``task``,
``seed``, ``arm``, ``images``, ``max_turns``, ...) choose the episode; its ``prompt`` is TRL's.
"""

from __future__ import annotations

import os
from typing import Any

from openenv.core.generic_client import GenericEnvClient

#: dataset columns passed on to the server's reset (its settings; the server's limits apply).
RESET_KEYS = ("robot", "suite", "task", "seed", "arm", "images", "feedback", "prompt_profile", "max_turns", "budget_s",
              "cell_timeout_s", "model", "episode_id")


class PyrualeanEnv:
    """One rollout's robot episode: ``python`` and ``finish`` are the model's tools."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout_s: float = 600) -> None:
        url = url or os.environ["PYRUALEAN_OPENENV_URL"]
        token = token if token is not None else os.environ.get("PYRUALEAN_OPENENV_TOKEN", "")
        headers = {"Authorization": f"token {token}"} if token else {}
        self._client = GenericEnvClient(base_url=url, headers=headers, message_timeout_s=timeout_s).sync()
        self._client.connect()
        self.reward = 0.0
        self.done = False
        self.run_dir = ""

    def reset(self, **row: Any) -> str:
        """Start the row's episode; returns its prompt (task card, API reference, rules)."""
        result = self._client.reset(**{k: row[k] for k in RESET_KEYS if k in row})
        self.reward, self.done = 0.0, False
        self.run_dir = result.observation["metadata"]["run_dir"]
        return result.observation["text"]

    def _step(self, tool: str, arguments: dict[str, Any]) -> str:
        if self.done:
            return '{"error": "the episode is over"}'
        result = self._client.step({"tool": tool, "arguments": arguments})
        self.done = result.done
        if result.done:
            self.reward = float(result.reward or 0.0)
        return result.observation["text"]

    def python(self, code: str) -> str:
        """Run Python code in the persistent session where `robo` (the robot), `np`, `math` and `time` exist.

        Args:
            code: Python source; variables, functions and imports carry over between calls.

        Returns:
            The cell's feedback: stdout, stderr, the exception if any, the final expression's value, the robot state.
        """
        return self._step("python", {"code": code})

    def finish(self, status: str, summary: str) -> str:
        """End the episode once the task predicate has fired, or when you cannot make progress.

        Args:
            status: success, failure or stuck.
            summary: one or two sentences.

        Returns:
            The episode's final word.
        """
        return self._step("finish", {"status": status, "summary": summary})

    def get_reward(self) -> float:
        """The rollout's reward: the benchmark's success (1.0 or 0.0), known once the episode is done."""
        return self.reward

    def _close(self) -> None:
        """End the session (an unfinished episode is recorded as interrupted). Private: TRL makes every
        public method a tool."""
        self._client.close()
