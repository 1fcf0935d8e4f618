"""Check a ``pyrualean rollouts export`` file with the libraries its format feeds.

Usage: ``python rollouts/validate_formats.py chat|trl|verifiers FILE.jsonl`` (in .venv-train, which
holds datasets, transformers, TRL and verifiers; scripts/setup.d/train.sh). Every format is loaded
with ``datasets.load_dataset("json", ...)`` (one Arrow schema for the whole file); then

* chat: every tool message answers a call made before it, images are files;
* trl: each row passes ``trl.data_utils.is_conversational`` and renders through
  ``trl.data_utils.apply_chat_template`` with a real chat template (llm/chatml_tools.jinja, the one
  the embedded models are served with), tool calls and results included;
* verifiers: the file reads back through ``verifiers.v1.utils.trace_store.read_episodes`` as
  ``Trace[WireTaskData, State, WireAgentConfig]`` (how verifiers reads any saved run).

Prints one JSON line (records, groups, what was checked); exits non-zero on the first failure.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile
from typing import Any


def check_images(base: pathlib.Path, paths: list[str]) -> int:
    """Every image path exists relative to the export's folder; returns how many."""
    for p in paths:
        if not (base / p).is_file():
            raise AssertionError(f"image {p} is not a file under {base}")
    return len(paths)


def check_chat(rows: list[dict[str, Any]], base: pathlib.Path) -> dict[str, Any]:
    """OpenAI chat messages: roles, call ids answered in order, image files."""
    images = 0
    for row in rows:
        called: set[str] = set()
        for m in row["messages"]:
            assert m["role"] in ("user", "assistant", "tool"), m["role"]
            for tc in m.get("tool_calls") or []:
                called.add(tc["id"])
                assert isinstance(tc["function"]["arguments"], str), "arguments are JSON text in OpenAI's form"
            if m["role"] == "tool":
                assert m["tool_call_id"] in called, f"tool message answers no earlier call: {m['tool_call_id']}"
            if isinstance(m["content"], list):
                images += check_images(base, [p["image_url"]["url"] for p in m["content"] if p.get("type") == "image_url"])
    return {"image_files": images}


def check_trl(rows: list[dict[str, Any]], base: pathlib.Path) -> dict[str, Any]:
    """TRL's conversational checks and chat-template rendering."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.data_utils import apply_chat_template, is_conversational

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    root = pathlib.Path(__file__).resolve().parent.parent
    tokenizer.chat_template = (root / "llm" / "chatml_tools.jinja").read_text()
    rendered = images = 0
    for row in rows:
        assert is_conversational(row), "not TRL's conversational format"
        out = apply_chat_template({"prompt": row["prompt"], "completion": row["completion"]}, tokenizer, tools=row["tools"])
        assert out["prompt"].endswith("<|im_start|>assistant\n"), out["prompt"][-80:]
        for m in row["completion"]:
            for tc in m.get("tool_calls") or []:
                assert f'"name": "{tc["function"]["name"]}"' in out["completion"], tc
        images += check_images(base, row.get("images") or [])
        rendered += 1
    return {"rendered": rendered, "image_files": images}


def check_verifiers(path: pathlib.Path) -> dict[str, Any]:
    """verifiers' own reader of saved rollouts."""
    from verifiers.v1.configs.agent import WireAgentConfig
    from verifiers.v1.state import State
    from verifiers.v1.task import WireTaskData
    from verifiers.v1.trace import Trace
    from verifiers.v1.utils.trace_store import TRACES_FILE, read_episodes

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(path, pathlib.Path(d) / TRACES_FILE)
        eps = read_episodes(pathlib.Path(d), Trace[WireTaskData, State, WireAgentConfig])
    sampled = tokens = 0
    for e in eps:
        assert e.group is not None and e.traces, e
        tr = e.traces[0]
        assert "success" in tr.rewards and tr.nodes[0].tools, tr
        sampled += sum(n.sampled for n in tr.nodes)
        for n in tr.nodes:
            if n.token_ids:  # a sampled node's layout: logprobs and advantages over its sampled tokens
                assert n.sampled and len(n.logprobs) == sum(n.mask) == len(n.advantages or []), n
                tokens += len(n.token_ids)
    return {"episodes": len(eps), "sampled_nodes": sampled, "token_ids": tokens}


def main() -> int:
    """Validate one file; print what was checked."""
    fmt, path = sys.argv[1], pathlib.Path(sys.argv[2])
    from datasets import load_dataset

    ds = load_dataset("json", data_files=str(path), split="train")
    rows = [dict(r) for r in ds]
    groups = {r["group"]["id"] if isinstance(r["group"], dict) else r["group"] for r in rows}
    if fmt == "chat":
        info = check_chat(rows, path.parent)
    elif fmt == "trl":
        info = check_trl(rows, path.parent)
    elif fmt == "verifiers":
        info = check_verifiers(path)
    else:
        raise SystemExit(f"unknown format {fmt}")
    print(json.dumps({"format": fmt, "records": len(rows), "groups": len(groups), **info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
