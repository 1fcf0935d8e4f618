"""Rollouts against ``pyrualean serve --openenv`` with OpenEnv's own client (``GenericEnvClient``).

This is what a trainer's rollout function does, without the trainer: connect, ``reset`` an episode,
``step`` tool calls until ``done``, read the reward and the run folder's summary (``state``). Two
policies are built in:

* ``replay``: the cells of a percent-format script (a task's reference solution), each sent as
  ``{"code": ...}`` (the ``python`` call, as OpenEnv's coding environment takes it), then ``finish``.
* ``trl_env``: the replay again, through :class:`trl_env.PyrualeanEnv` (TRL's ``environment_factory``
  interface: ``reset``, the ``python`` and ``finish`` tools, ``get_reward``).
* ``model``: an OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, the embedded model of
  ``pyrualean models serve``) chooses each tool call from the observations so far (a job's
  ``extra_body`` is merged into each request: ``{"code_block_tool": "python"}`` has the embedded
  model's server take ```python blocks, as ``--runtime local`` does).

Several jobs run at once, each in its own session (one WebSocket each)::

    python openenv/rollout.py --url http://127.0.0.1:8888 --token T \\
        --job '{"task": "put_block_in_bowl", "seed": 0, "policy": "replay",
                "solution": "robotapi/solutions/tabletop/put_block_in_bowl.py"}' \\
        --job '{"task": "stack_blocks", "seed": 1, "policy": "model",
                "base_url": "http://127.0.0.1:8091/v1", "model": "smollm2-135m", "max_turns": 3}'

Each job prints one JSON line (:class:`Rollout`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import threading
import urllib.request
from typing import Any

from openenv.core.generic_client import GenericEnvClient

#: reset keys a job may carry (the rest of a job is the policy's own).
RESET_KEYS = ("robot", "suite", "task", "seed", "arm", "images", "feedback", "prompt_profile", "max_turns", "budget_s",
              "cell_timeout_s", "episode_id", "model")


@dataclasses.dataclass(frozen=True)
class Step:
    """One step as the client saw it."""

    tool: str
    is_error: bool
    done: bool
    reward: float | None
    text: str


@dataclasses.dataclass(frozen=True)
class Rollout:
    """One finished rollout: what the client saw, and the server's run-folder summary (``state``)."""

    job: int
    episode_id: str
    run_dir: str
    reward: float | None
    done: bool
    steps: list[Step]
    state: dict[str, Any]
    error: str | None = None


def solution_cells(path: str) -> list[str]:
    """The code cells of a percent-format script (``# %%`` separators; markdown cells skipped)."""
    with open(path, encoding="utf-8") as f:
        parts = f.read().split("# %%")
    return [p.strip() for p in parts if p.strip() and not p.startswith(" [markdown]")]


def replay_actions(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The replay policy's actions: an optional leading bad call (``probe``), each cell, then finish."""
    actions: list[dict[str, Any]] = []
    if job.get("probe"):
        actions.append({"tool": "no_such_tool", "arguments": {}})
    actions += [{"code": c} for c in solution_cells(job["solution"])]
    actions.append({"tool": "finish", "arguments": {"status": "success", "summary": "replayed the reference solution"}})
    return actions


class ChatPolicy:
    """An OpenAI-compatible chat model choosing each tool call (``tool_choice: required``)."""

    def __init__(self, base_url: str, model: str, max_tokens: int = 256, seed: int | None = None,
                 extra_body: dict[str, Any] | None = None) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.max_tokens, self.seed = model, max_tokens, seed
        self.extra_body = dict(extra_body or {})
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []

    def start(self, observation: dict[str, Any]) -> None:
        """Begin the conversation with the reset observation: the prompt and the arm's tools."""
        self.messages = [{"role": "user", "content": observation["text"]}]
        self.tools = observation.get("tools") or []

    def act(self) -> tuple[dict[str, Any], str]:
        """The next action (a tool call) and the call id it answers to."""
        body: dict[str, Any] = {"model": self.model, "messages": self.messages, "tools": self.tools,
                                "tool_choice": "required", "max_tokens": self.max_tokens, "temperature": 1.0}
        if self.seed is not None:
            body["seed"] = self.seed
        body.update(self.extra_body)
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as resp:
            msg = json.load(resp)["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        self.messages.append({"role": "assistant", "content": msg.get("content") or "", "tool_calls": calls[:1]})
        if not calls:  # the endpoint ignored tool_choice: a call of no tool, which the episode refuses
            return {"tool": "(no tool call)", "arguments": {}}, ""
        fn = calls[0]["function"]
        return {"tool": fn["name"], "arguments": fn.get("arguments") or "{}"}, calls[0].get("id", "")

    def observe(self, call_id: str, observation: dict[str, Any]) -> None:
        """Add a step's observation to the conversation as the tool's result."""
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": observation["text"]})


def run_job(url: str, headers: dict[str, str], i: int, job: dict[str, Any], timeout_s: float,
            together: threading.Barrier | None = None) -> Rollout:
    """One rollout in a session of its own; with ``together``, no step before every job has reset."""
    steps: list[Step] = []
    reset = {k: job[k] for k in RESET_KEYS if k in job}
    with GenericEnvClient(base_url=url, headers=headers, message_timeout_s=timeout_s).sync() as env:
        try:
            result = env.reset(**reset)
        finally:
            if together is not None:
                together.wait(timeout=timeout_s)
        meta = result.observation["metadata"]
        policy = None
        if job["policy"] == "replay":
            actions = iter(replay_actions(job))
        else:
            policy = ChatPolicy(job["base_url"], job["model"], max_tokens=job.get("max_tokens", 256), seed=job.get("sampling_seed"),
                                extra_body=job.get("extra_body"))
            policy.start(result.observation)
        while not result.done:
            if policy is None:
                action, call_id = next(actions), ""
            else:
                action, call_id = policy.act()
            result = env.step(action)
            obs = result.observation
            steps.append(Step(tool=action.get("tool", "python"), is_error=bool(obs["is_error"]), done=result.done,
                              reward=result.reward, text=obs["text"][:2000]))
            if policy is not None:
                policy.observe(call_id, obs)
        state = env.state()
    return Rollout(job=i, episode_id=meta["episode_id"], run_dir=meta["run_dir"], reward=result.reward, done=result.done,
                   steps=steps, state=state)


def run_trl_env(url: str, token: str, i: int, job: dict[str, Any], together: threading.Barrier | None = None) -> Rollout:
    """A replay through :class:`trl_env.PyrualeanEnv`, the way TRL's GRPOTrainer drives it."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from trl_env import PyrualeanEnv

    env = PyrualeanEnv(url, token)
    try:
        try:
            env.reset(**job)
        finally:
            if together is not None:
                together.wait(timeout=600)
        steps = []
        for code in solution_cells(job["solution"]):
            text = env.python(code)
            steps.append(Step(tool="python", is_error=False, done=env.done, reward=None, text=text[:2000]))
        text = env.finish("success", "replayed through the TRL environment")
        steps.append(Step(tool="finish", is_error=False, done=env.done, reward=env.get_reward(), text=text[:2000]))
        state = env._client.state()
    finally:
        env._close()
    return Rollout(job=i, episode_id=state["episode_id"], run_dir=env.run_dir, reward=env.get_reward(), done=env.done,
                   steps=steps, state=state)


def main(argv: list[str] | None = None) -> int:
    """Run the jobs concurrently and print one JSON line per rollout; exit 1 if any failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="the server's base URL (http://host:port[/base])")
    ap.add_argument("--token", default="", help="the gateway's token (sent as Authorization: token T)")
    ap.add_argument("--job", action="append", required=True, help="a rollout as JSON (reset keys + policy)")
    ap.add_argument("--timeout-s", type=float, default=600, help="the longest one reset or step may take")
    ap.add_argument("--together", action="store_true", help="every rollout resets before any steps (a group)")
    args = ap.parse_args(argv)
    headers = {"Authorization": f"token {args.token}"} if args.token else {}
    jobs = [json.loads(j) for j in args.job]
    out: list[Rollout | None] = [None] * len(jobs)
    lock = threading.Lock()
    together = threading.Barrier(len(jobs)) if args.together else None

    def work(i: int) -> None:
        try:
            if jobs[i]["policy"] == "trl_env":
                r = run_trl_env(args.url, args.token, i, jobs[i], together)
            else:
                r = run_job(args.url, headers, i, jobs[i], args.timeout_s, together)
        except Exception as e:  # noqa: BLE001 (reported per job; the others go on)
            r = Rollout(job=i, episode_id="", run_dir="", reward=None, done=False, steps=[], state={}, error=f"{type(e).__name__}: {e}")
        with lock:
            out[i] = r
            print(json.dumps(dataclasses.asdict(r)), flush=True)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 1 if any(r is None or r.error for r in out) else 0


if __name__ == "__main__":
    sys.exit(main())
