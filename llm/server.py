"""Serve one GGUF model through llama.cpp's own HTTP server (the xllamacpp wheel), for pyrualean.

Started by the Go package ``llm`` (``llm.Serve``); it can also be run by hand::

    .venv/bin/python llm/server.py --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --alias qwen2.5-coder-1.5b --port 18080 --no-stdin-watch

Once the server listens it prints one JSON line on stdout,
``{"listening": "http://127.0.0.1:18080", "alias": ..., "pid": ...}``, then stays up until it gets
SIGTERM/SIGINT or its stdin reaches end of file (so the server dies with the process that started it).

Routes are llama-server's (``/health``, ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``,
``/props``, ...). llama.cpp listens on a private loopback port; this process listens on the public one
and forwards every request unchanged except one case, described next.

Why a front: llama.cpp's template analyser (the "peg-native" auto parser of this build) does not
recognise the Hermes ``<tool_call>`` format in the Qwen2.5 / SmolLM2 chat templates, so it neither
constrains nor parses tool calls, and these small models then answer with a fenced JSON object instead
of a tool call. For a non-streaming ``/v1/chat/completions`` request that carries ``tools``:

- ``tool_choice`` ``"required"`` or a named function: the request gets a ``response_format`` JSON schema
  (one of ``{"name": <tool>, "arguments": <its parameters>}``), so llama.cpp's grammar sampler forces
  exactly one valid call;
- ``tool_choice`` ``"auto"`` (or absent): the reply is left free;

and in both cases a reply whose content is such an object (bare, in a ``<tool_call>`` block or in a
fenced code block) naming one of the tools is returned as an OpenAI ``tool_calls`` message
(``finish_reason`` ``"tool_calls"``). The models read text only, so image parts of a message become
a short note instead of an HTTP 500. Everything else passes through byte for byte.
It never downloads anything and binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import argparse
import ast
import http.client
import http.server
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import uuid
from typing import Any, Callable


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; every one has a default except --model."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--model", required=True, help="path to a .gguf file")
    ap.add_argument("--alias", default="", help="model id reported by /v1/models (default: file name)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--ctx-size", type=int, default=8192)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--cache-ram-mib", type=int, default=512, help="llama.cpp prompt cache in RAM")
    ap.add_argument("--slot-save-path", default="",
                    help="folder for slot save/restore (POST /slots/0?action=save|restore): the prompt cache kept on disk")
    ap.add_argument("--spec-ngram", action="store_true",
                    help="self-speculative decoding from n-grams of the context (no draft model): a reply that "
                         "copies text it was shown, such as a worked example's code, is generated several tokens at a time")
    ap.add_argument("--chat-template", default="", help="file with a Jinja chat template to use instead of the model's")
    ap.add_argument("--verbosity", type=int, default=1, help="llama.cpp log verbosity (0 quiet .. 4 debug)")
    ap.add_argument("--no-stdin-watch", action="store_true", help="do not exit when stdin closes")
    return ap.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# Tool-call shaping (pure functions, unit-tested in llm/server_test.py).


def tool_call_schema(tools: list[dict[str, Any]], only: str | None = None) -> dict[str, Any]:
    """JSON schema for exactly one call of one of ``tools`` (or of the tool named ``only``)."""
    alts = []
    for t in tools:
        fn = t.get("function") or {}
        name = fn.get("name")
        if not name or (only and name != only):
            continue
        params = fn.get("parameters") or {"type": "object"}
        alts.append({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": params},
            "required": ["name", "arguments"],
        })
    if not alts:
        raise ValueError(f"no tool named {only!r}" if only else "no usable tool in 'tools'")
    return alts[0] if len(alts) == 1 else {"anyOf": alts}


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _TAG.finditer(text)]
    out += [m.group(1) for m in _FENCE.finditer(text)]
    out.append(text)
    return [c.strip() for c in out if c.strip().startswith("{")]


def extract_tool_calls(content: str, names: set[str]) -> list[dict[str, Any]]:
    """Tool calls written as JSON text in ``content``, as OpenAI ``tool_calls`` entries ([] if none).

    A call is an object ``{"name": N, "arguments": {...}}`` (``"parameters"`` is accepted for
    ``"arguments"``) with N in ``names``; arguments are returned JSON-encoded, as OpenAI does.
    """
    dec = json.JSONDecoder()
    calls: list[dict[str, Any]] = []
    for cand in _candidates(content or ""):
        try:
            obj, _ = dec.raw_decode(cand)
        except ValueError:
            continue
        if not isinstance(obj, dict) or obj.get("name") not in names:
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if not isinstance(args, dict):
            continue
        calls.append({
            "id": "call_" + uuid.uuid4().hex[:24],
            "type": "function",
            "function": {"name": obj["name"], "arguments": json.dumps(args, ensure_ascii=False)},
        })
        break  # one call per turn: the first complete one
    return calls


def text_only(messages: list[Any]) -> list[Any]:
    """``messages`` with every multi-part content flattened to a string, images replaced by a note.

    The served models read text only; llama.cpp rejects image parts outright (HTTP 500).
    """
    out = []
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            texts = []
            for part in c:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") in ("image_url", "input_image", "image"):
                    texts.append("[image omitted: this model reads text only]")
            m = dict(m, content="\n".join(texts))
        out.append(m)
    return out


def shape_request(req: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """Request to send to llama.cpp, and the tool names whose calls to lift out of the reply."""
    if isinstance(req.get("messages"), list) and any(
            isinstance(m, dict) and isinstance(m.get("content"), list) for m in req["messages"]):
        req = dict(req, messages=text_only(req["messages"]))
    tools = req.get("tools") or []
    if not tools or req.get("stream"):
        return req, set()
    choice = req.get("tool_choice", "auto")
    if choice == "none":
        return req, set()
    names = {(t.get("function") or {}).get("name") for t in tools} - {None}
    only = None
    if isinstance(choice, dict):
        only = (choice.get("function") or {}).get("name")
    if (choice == "required" or only) and "response_format" not in req and "grammar" not in req:
        req = dict(req)
        req["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "tool_call", "schema": tool_call_schema(tools, only)},
        }
        req["tool_choice"] = "auto"
    return req, names


def shape_reply(reply: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """``reply`` with a JSON tool call in the message content turned into ``tool_calls``."""
    for ch in reply.get("choices") or []:
        msg = ch.get("message") or {}
        if msg.get("tool_calls") or not isinstance(msg.get("content"), str):
            continue
        calls = extract_tool_calls(msg["content"], names)
        if calls:
            msg["tool_calls"] = calls
            msg["content"] = None
            ch["finish_reason"] = "tool_calls"
    return reply


# ---------------------------------------------------------------------------------------------
# Code blocks instead of JSON (opt-in per request: "code_block_tool": "python").
#
# A small coder model writes a whole, correct ```python block where, asked for the same code inside a
# JSON string, it stops after a line. So the request is turned into plain chat: the model's earlier
# calls become ```python blocks, tool results become user messages, and a grammar makes the reply one
# ```python block. The block comes back as the tool call; top-level calls of the other tools in it
# (``finish(status="success", summary="...")``) become calls of those tools.

# A block holds code: at most three comment or blank lines come before its first line of code (a 1.5B
# model otherwise copies the prompt's task card into comments until max_tokens, and no call is made).
CODE_BLOCK_GRAMMAR = (
    'root ::= "```python\\n" head body "```"\n'
    'head ::= note? note? note? code\n'
    'note ::= [ \\t]* ( "#" [^`\\n]* )? "\\n"\n'
    'code ::= [ \\t]* [^#` \\t\\n] [^`\\n]* "\\n"\n'
    'body ::= ( [^`] | "`" [^`] | "``" [^`] )*\n'
)


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    esc = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return '"' + "".join(esc.get(ch, ch) for ch in text) + '"'


def code_block_grammar(start: str) -> str:
    """The grammar of one ```python block whose code begins with ``start`` (a line such as the worked
    examples' ``# Example task ...`` header: without it a 1.5B model sometimes copies the prompt's last
    heading, the task card, into its code and then repeats that every turn)."""
    if not start:
        return CODE_BLOCK_GRAMMAR
    if "`" in start:
        raise ValueError("code_block_start must not contain a backtick")
    return CODE_BLOCK_GRAMMAR.replace('"```python\\n" head', '"```python\\n" ' + gbnf_literal(start) + " head", 1)

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _fence(code: str) -> str:
    return "```python\n" + code.rstrip("\n") + "\n```"


def _call_source(name: str, args: dict[str, Any]) -> str:
    return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def code_block_request(req: dict[str, Any], tool: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The chat request without tools, its history in code blocks, and each tool's parameter names."""
    start = req.pop("code_block_start", "") or ""
    if not isinstance(start, str):
        raise ValueError("code_block_start must be a string")
    grammar = code_block_grammar(start)
    params = {}
    for t in req.get("tools") or []:
        fn = t.get("function") or {}
        if fn.get("name"):
            params[fn["name"]] = list(((fn.get("parameters") or {}).get("properties") or {}).keys())
    msgs = []
    codes: list[str] = []  # the code of each assistant reply so far, in order
    told = 0  # replies whose results have been given
    looped: dict[int, bool] = {}  # replies (1-based) cut back to the lines before their loop
    for m in req.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant" and m.get("tool_calls"):
            codes.append("")
            parts = [m["content"]] if isinstance(m.get("content"), str) and m["content"].strip() else []
            for tc in m["tool_calls"]:
                fn = tc.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                if not isinstance(args, dict):
                    args = {}
                if fn.get("name") == tool:
                    code = str(args.get(next(iter(params.get(tool) or ["code"])), ""))
                    if code.rstrip("\n").endswith(LOOP_NOTE):
                        # The model is shown its cell without the note (it copied the note into its next
                        # cell) and told with the result instead.
                        code, looped[len(codes)] = code.rstrip("\n")[:-len(LOOP_NOTE)], True
                    codes[-1] += code
                    parts.append(_fence(code))
                else:
                    parts.append(_fence(_call_source(str(fn.get("name")), args)))
            msgs.append({"role": "assistant", "content": "\n".join(parts)})
        elif m.get("role") == "tool":
            text = str(m.get("content") or "")
            note = ""
            if told < len(codes):  # once per reply, on its first result
                note = repeat_note(codes) + (LOOPED_NOTE if looped.get(len(codes)) else "")
            told = len(codes)
            msgs.append({"role": "user", "content": "Result of your call:\n" + text + raised_note(text) + note})
        else:
            msgs.append(m)
    out = {k: v for k, v in req.items() if k not in ("tools", "tool_choice", "response_format", "parallel_tool_calls")}
    out["messages"] = msgs
    out["grammar"] = grammar
    return out, params


def raised_note(result: str) -> str:
    """A line telling the model its call raised (a small model otherwise sends the same code again)."""
    try:
        fb = json.loads(result)
    except ValueError:
        return ""
    exc = fb.get("exception") if isinstance(fb, dict) else None
    if not exc:
        return ""
    what = exc if isinstance(exc, str) else (exc.get("type") or exc.get("ename") or "an exception") if isinstance(exc, dict) else "an exception"
    return f"\nYour call raised {what}. Fix that line and write the corrected code; do not send the same code again."


def repeat_note(codes: list[str]) -> str:
    """A line telling the model its last call was the code of the call before it (at low temperature a
    small model sends one cell again and again, each time with the same result)."""
    if len(codes) < 2 or not codes[-1].strip() or codes[-1].strip() != codes[-2].strip():
        return ""
    return ("\nThat was the same code as your call before it, and the task is not done: the next call must do "
            "something different (read the results above: what did not change?).")


REPEAT_ASKS = 3  # hotter asks after a reply that repeats code already run

LEFT_OUT = ("(The code I sent here is left out: my next reply repeated it. Its result follows; I write "
            "different code.)")


def left_out(messages: list[Any], keys: Callable[[str], set[str]], repeated: set[str]) -> list[Any]:
    """The history with every assistant message that carries a repeated reply (``keys`` of its text meet
    ``repeated``) replaced by a sentence saying so. A 1.5B model copies a cell that is in its context at
    any temperature (measured: four identical 215-token replies at 0.2, 0.8, 1.0 and 1.2); without it,
    the results and the notes that say what went wrong are still there, and the model writes anew."""
    out = []
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), str) \
                and keys(m["content"]) & repeated:
            m = dict(m, content=LEFT_OUT)
        out.append(m)
    return out


def codes_run(req: dict[str, Any]) -> list[str]:
    """The code of every ```python block the model sent in ``req``'s history (code-block form)."""
    out = []
    for m in req.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), str):
            out.extend(code.strip() for code in _BLOCK.findall(m["content"]))
    return out


def summed_usage(usages: list[Any]) -> dict[str, Any]:
    """One usage for several generations of one reply: their token counts added."""
    out: dict[str, Any] = {}
    for u in usages:
        if not isinstance(u, dict):
            continue
        for k, v in u.items():
            if isinstance(v, int) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
            elif isinstance(v, dict):  # prompt_tokens_details and the like
                inner = out.setdefault(k, {})
                if isinstance(inner, dict):
                    for ik, iv in v.items():
                        if isinstance(iv, int) and not isinstance(iv, bool):
                            inner[ik] = inner.get(ik, 0) + iv
    return out


def repeat_key(text: Any) -> str:
    """What a plain reply says, for comparing: a JSON value's canonical form (the tools arm's calls,
    however spaced), else the stripped text."""
    if not isinstance(text, str):
        return ""
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text.strip()


def reply_key(reply: dict[str, Any]) -> str:
    """repeat_key of the reply's text ("" if none)."""
    for ch in reply.get("choices") or []:
        return repeat_key((ch.get("message") or {}).get("content"))
    return ""


def reply_code(reply: dict[str, Any]) -> str:
    """The code of the reply's ```python block ("" if none)."""
    for ch in reply.get("choices") or []:
        m = _BLOCK.search((ch.get("message") or {}).get("content") or "")
        if m:
            return m.group(1).strip()
    return ""


def split_calls(code: str, tool: str, params: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Tool calls for a code block: runs of statements become calls of ``tool``; a top-level
    statement that calls another tool with literal arguments becomes that tool's call, in order."""
    def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}

    arg = (params.get(tool) or ["code"])[0]
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [call(tool, {arg: code})]  # the kernel reports the syntax error
    lines = code.splitlines(keepends=True)
    calls: list[dict[str, Any]] = []
    start = 0  # first line (0-based) of the code not yet handed out

    def flush(end: int) -> None:
        chunk = "".join(lines[start:end]).strip("\n")
        if chunk.strip():
            calls.append(call(tool, {arg: chunk + "\n"}))

    for st in tree.body:
        c = st.value if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
        name = c.func.id if c is not None and isinstance(c.func, ast.Name) else None
        if name is None or name == tool or name not in params:
            continue
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in c.keywords if kw.arg}
            for i, a in enumerate(c.args):
                args[params[name][i]] = ast.literal_eval(a)
        except (ValueError, IndexError, SyntaxError):
            continue  # not literal: leave it to the kernel
        flush(st.lineno - 1)
        calls.append(call(name, args))
        start = st.end_lineno or st.lineno
    flush(len(lines))
    return calls or [call(tool, {arg: code})]


LOOP_NOTE = "# (cut here: the reply went on repeating itself until its token limit)"
LOOPED_NOTE = ("\nYour cell was cut at its token limit: it went on repeating itself, and only its lines up to the "
               "repetition ran. Write each step once, and end the cell with ```.")


def cut_loop(text: str) -> str | None:
    """The code of a ```python block that ran out of tokens because it repeats itself: its lines up to the
    first writing of the repeated group, and a comment that says so; None when the open block does not
    loop. A loop is a group of up to twelve lines written three times in a row, or twice and then again up
    to the cut (a long line fits only twice in the reply), or blank lines to the cut. Nothing is invented:
    the kept lines are the model's, in its order."""
    i = text.find("```python\n")
    if i < 0 or "```" in text[i + 10:]:
        return None
    *lines, tail = text[i + 10:].split("\n")  # tail: the line the cut left unfinished

    def to_the_cut(group: list[str], at: int) -> bool:
        """Whether lines[at:] and the tail go on writing group (indexed, not sliced: a long reply that
        defeats the rule at every line must not cost its length squared)."""
        k = len(group)
        for j in range(at, len(lines)):
            if lines[j] != group[(j - at) % k]:
                return False
        return group[(len(lines) - at) % k].startswith(tail)

    for start in range(len(lines)):
        for k in range(1, 13):
            group = lines[start:start + k]
            if len(group) < k or not any(ln.strip() for ln in group):
                break
            if lines[start + k:start + 2 * k] != group:
                continue
            if lines[start + 2 * k:start + 3 * k] == group or to_the_cut(group, start + 2 * k):
                return "\n".join(lines[:start + k] + [LOOP_NOTE]) + "\n"
    # Blank lines to the cut (after a fence the model did not finish, such as ``}`): the code before them,
    # without the unfinished fence's line.
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    if not tail.strip() and len(lines) - end >= 8:
        while end and "`" in lines[end - 1]:
            end -= 1
        if any(ln.strip() and not ln.lstrip().startswith("#") for ln in lines[:end]):
            return "\n".join(lines[:end] + [LOOP_NOTE]) + "\n"
    return None


def code_block_reply(reply: dict[str, Any], tool: str, params: dict[str, list[str]]) -> dict[str, Any]:
    """``reply`` with its ```python block turned into tool calls (split_calls); a block cut at max_tokens
    while it looped becomes the call of its lines up to the loop (cut_loop)."""
    for ch in reply.get("choices") or []:
        msg = ch.get("message") or {}
        m = _BLOCK.search(msg.get("content") or "")
        if not m and ch.get("finish_reason") == "length":
            code = cut_loop(msg.get("content") or "")
            if code is not None:  # finish_reason stays "length": the turn's record says the reply was cut
                msg["tool_calls"] = split_calls(code, tool, params)
                msg["content"] = None
            continue
        if not m:
            continue
        msg["tool_calls"] = split_calls(m.group(1), tool, params)
        msg["content"] = None
        ch["finish_reason"] = "tool_calls"
    return reply


def assemble_stream(lines: Any) -> dict[str, Any]:
    """One chat completion from llama.cpp's server-sent events (``data: {chunk}`` lines, then
    ``data: [DONE]``): the deltas' text joined, the last finish reason, usage and timings."""
    out: dict[str, Any] = {"object": "chat.completion", "choices": []}
    content: list[str] = []
    reasoning: list[str] = []
    finish = None
    for raw in lines:
        line = raw.decode("utf-8", "replace").strip() if isinstance(raw, bytes) else str(raw).strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        if "error" in chunk:
            raise OSError(f"llama.cpp stream error: {chunk['error']}")
        for k in ("id", "created", "model", "system_fingerprint", "usage", "timings"):
            if chunk.get(k) is not None:
                out[k] = chunk[k]
        for ch in chunk.get("choices") or []:
            delta = ch.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            if isinstance(delta.get("reasoning_content"), str):
                reasoning.append(delta["reasoning_content"])
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if reasoning:
        msg["reasoning_content"] = "".join(reasoning)
    out["choices"] = [{"index": 0, "message": msg, "finish_reason": finish or "stop"}]
    return out


# ---------------------------------------------------------------------------------------------
# HTTP front.


def make_handler(upstream: tuple[str, int]) -> type[http.server.BaseHTTPRequestHandler]:
    """Request handler class forwarding to llama.cpp at ``upstream``."""

    class Front(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: llama.cpp logs requests itself
            pass

        def _forward(self, body: bytes | None) -> None:
            names: set[str] = set()
            code_tool, params = "", {}
            sent: dict[str, Any] = {}  # the request as shaped, for the repeat guard
            guard = False  # "repeat_guard": ask again when a plain reply repeats an earlier one (the tools arm)
            path = self.path.split("?", 1)[0]
            if body and self.command == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
                try:
                    req = json.loads(body)
                    if isinstance(req, dict):
                        code_tool = str(req.pop("code_block_tool", "") or "")
                        guard = req.pop("repeat_guard", False) is True
                        tools = {(t.get("function") or {}).get("name") for t in req.get("tools") or []}
                        if code_tool in tools and not req.get("stream") and req.get("tool_choice") != "none":
                            req, params = code_block_request(req, code_tool)
                        else:
                            code_tool = ""
                            req, names = shape_request(req)
                        body, sent = json.dumps(req).encode(), req
                except ValueError as e:
                    if isinstance(e, json.JSONDecodeError):
                        names = set()  # malformed JSON: llama.cpp says so itself
                    else:
                        self._send(400, json.dumps({"error": {"code": 400, "message": str(e),
                                                              "type": "invalid_request_error"}}).encode(),
                                   "application/json")
                        return
            collect = ""  # a non-streaming chat request goes upstream streamed (see _await), unless it asks for logprobs
            if body and self.command == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
                try:
                    req = json.loads(body)
                    if isinstance(req, dict) and not req.get("stream") and req.get("logprobs"):
                        # A request for logprobs (--record-tokens) goes unstreamed: llama.cpp's stream leaves
                        # out the logprobs of n-gram draft tokens and of the end-of-turn token, and refuses
                        # them next to tools. The price: a client that hangs up does not stop its generation.
                        collect = "json"
                    elif isinstance(req, dict) and not req.get("stream"):
                        req["stream"], req["stream_options"] = True, {"include_usage": True}
                        body, collect = json.dumps(req).encode(), "stream"
                except ValueError:
                    pass
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "content-length", "connection", "transfer-encoding")}
            try:
                conn, got = self._ask(body, headers, collect)
                said, ran = reply_code, set(codes_run(sent)) if code_tool else set()
                keys: Callable[[str], set[str]] = lambda text: {c.strip() for c in _BLOCK.findall(text)}
                if guard and not code_tool:
                    said, ran = reply_key, {repeat_key(m.get("content")) for m in sent.get("messages") or []
                                            if isinstance(m, dict) and m.get("role") == "assistant"}
                    keys = lambda text: {repeat_key(text)}
                if isinstance(got, dict) and said(got) and said(got) in ran:
                    # What the model already did: at low temperature a small model repeats itself after an
                    # error (with a fixed seed, the same cell or call each turn). Ask again, hotter, each time
                    # with another seed derived from the request's (so an episode replays as it ran), until
                    # a reply brings something new or REPEAT_ASKS are spent; the last reply stands. Its
                    # usage counts every generation, so token counts stay honest in both arms. The asks
                    # leave the repeated replies out of the history (left_out), both arms alike.
                    first = json.loads(body)
                    repeated = {said(got)}
                    seed = first.get("seed")
                    base = seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 \
                        else int.from_bytes(os.urandom(3), "big")
                    temp = first.get("temperature")
                    temp = float(temp) if isinstance(temp, (int, float)) and not isinstance(temp, bool) and 0 <= temp <= 2 else 0.0
                    spent = [got.get("usage")]
                    for i in range(1, REPEAT_ASKS + 1):
                        conn.close()
                        hot = min(1.2, max(0.8, temp + 0.6) + 0.2 * (i - 1))
                        hotter = dict(first, temperature=hot, seed=(base + i) & 0x7FFFFFFF,
                                      messages=left_out(first.get("messages") or [], keys, repeated))
                        conn, got = self._ask(json.dumps(hotter).encode(), headers, collect)
                        if not isinstance(got, dict):
                            break
                        spent.append(got.get("usage"))
                        if any(isinstance(u, dict) for u in spent):
                            got["usage"] = summed_usage(spent)
                        if not said(got) or said(got) not in ran:
                            break
                        repeated.add(said(got))
            except OSError as e:  # llama.cpp gone or hung up: say so instead of dropping the connection
                self._send(502, json.dumps({"error": {"code": 502, "type": "server_error",
                                                      "message": f"llama.cpp server unreachable: {e}"}}).encode(),
                           "application/json")
                return  # _ask closed its connection
            if got is None:  # the client hung up: closing the stream makes llama.cpp stop generating
                conn.close()
                self.close_connection = True
                return
            if isinstance(got, dict):
                reply = code_block_reply(got, code_tool, params) if code_tool else shape_reply(got, names)
                self._send(200, json.dumps(reply).encode(), "application/json")
                conn.close()
                return
            resp = got
            ctype = resp.getheader("Content-Type", "application/json")
            if "text/event-stream" in ctype:
                self.send_response(resp.status)
                self.send_header("Content-Type", ctype)
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                while chunk := resp.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            else:
                self._send(resp.status, resp.read(), ctype)
            conn.close()

        def _ask(self, body: bytes | None, headers: dict[str, str], collect: str) -> tuple[http.client.HTTPConnection, Any]:
            """Send the request upstream; the connection and what _await makes of the answer."""
            conn = http.client.HTTPConnection(*upstream, timeout=3600)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                return conn, self._await(conn, collect)
            except OSError:
                conn.close()
                raise

        def _await(self, conn: http.client.HTTPConnection, collect: str) -> Any:
            """llama.cpp's answer: the reply as a dict (collect "stream": assembled from a 200 event
            stream; "json": a 200 JSON body), else the response;
            None once the client has hung up while it was computing.

            A client that gives up (its deadline, a cancelled episode) must not leave a generation
            running: with one slot, the next request would wait for it to reach max_tokens. llama.cpp
            stops a streamed generation whose connection closed, a non-streamed one it runs to the end:
            so chat requests go upstream streamed, and the stream is closed when the client leaves.
            """
            box: dict[str, Any] = {}
            done = threading.Event()

            def wait() -> None:
                try:
                    resp = conn.getresponse()
                    ctype = resp.getheader("Content-Type", "")
                    if collect == "stream" and resp.status == 200 and "text/event-stream" in ctype:
                        box["out"] = assemble_stream(resp)
                    elif collect == "json" and resp.status == 200 and "application/json" in ctype:
                        try:
                            box["out"] = json.load(resp)
                        except ValueError as e:
                            raise OSError(f"llama.cpp reply is not JSON: {e}") from e
                    else:
                        box["out"] = resp
                except BaseException as e:  # noqa: BLE001 (handed to the caller's thread)
                    box["err"] = e
                done.set()

            threading.Thread(target=wait, daemon=True).start()
            while not done.wait(0.25):
                if client_gone(self.connection):
                    try:
                        if conn.sock is not None:
                            conn.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return None
            if "err" in box:
                raise box["err"]
            return box["out"]

        def _send(self, status: int, data: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes | None:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else None

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            self._forward(None)

        def do_POST(self) -> None:  # noqa: N802
            self._forward(self._body())

        def do_DELETE(self) -> None:  # noqa: N802
            self._forward(self._body())

        def do_OPTIONS(self) -> None:  # noqa: N802
            self._forward(None)

    return Front


def client_gone(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` has closed its end (readable with nothing to read)."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
        if not r:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def free_port(host: str) -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    """Start llama.cpp and the front, announce the address, wait for a stop signal."""
    a = parse_args(argv)
    if not os.path.isfile(a.model):
        print(f"server.py: no such model file: {a.model}", file=sys.stderr)
        return 2
    # Bind the public port first, so a busy port fails fast, before the model loads.
    try:
        front = http.server.ThreadingHTTPServer((a.host, a.port), make_handler(("127.0.0.1", 0)))
    except OSError as e:
        print(f"server.py: cannot listen on {a.host}:{a.port}: {e}", file=sys.stderr)
        return 3
    front.daemon_threads = True

    import xllamacpp as xlc  # imported late so --help and a busy port need no model load

    alias = a.alias or os.path.basename(a.model)
    p = xlc.CommonParams()
    p.model.path = a.model
    p.model_alias = {alias}
    p.hostnames = ["127.0.0.1"]
    p.port = free_port("127.0.0.1")
    p.n_ctx = a.ctx_size
    p.n_parallel = a.parallel
    threads = a.threads or (os.cpu_count() or 1)
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.use_jinja = True
    p.verbosity = a.verbosity
    p.endpoint_props = True
    p.cache_ram_mib = a.cache_ram_mib
    if a.spec_ngram:
        p.speculative.types = [xlc.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    p.endpoint_slots = True  # GET /slots: the progress of a request in flight
    if a.slot_save_path:
        os.makedirs(a.slot_save_path, exist_ok=True)
        p.slot_save_path = a.slot_save_path.rstrip("/") + "/"
    if a.chat_template:
        with open(a.chat_template, encoding="utf-8") as f:
            p.chat_template = f.read()

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if not a.no_stdin_watch:
        def watch() -> None:
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except OSError:
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()

    srv = xlc.Server(p)  # loads the model and listens on a background thread
    front.RequestHandlerClass = make_handler(("127.0.0.1", p.port))
    threading.Thread(target=front.serve_forever, daemon=True).start()
    host, port = front.server_address[:2]
    print(json.dumps({"listening": f"http://{host}:{port}", "alias": alias, "pid": os.getpid(),
                      "upstream": srv.listening_address}), flush=True)
    while not stop.wait(0.5):
        pass
    front.shutdown()
    # The native server thread may hold the process; leave without running its destructors.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
