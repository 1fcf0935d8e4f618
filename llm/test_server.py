"""Unit tests for llm/server.py's tool-call shaping (run by `go test ./llm -run TestServerPy`)."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import server  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "python", "parameters": {
        "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}},
    {"type": "function", "function": {"name": "finish", "parameters": {
        "type": "object", "properties": {"summary": {"type": "string"}}}}},
]
NAMES = {"python", "finish"}


@pytest.mark.parametrize("content,name,args", [
    ('{"name": "python", "arguments": {"code": "print(1)"}}', "python", {"code": "print(1)"}),
    ('```json\n{"name": "finish", "arguments": {"summary": "done"}}\n```', "finish", {"summary": "done"}),
    ('I will run it.\n<tool_call>\n{"name": "python", "arguments": {"code": "x=1"}}\n</tool_call>', "python", {"code": "x=1"}),
    ('{"name": "python", "parameters": {"code": "y"}}', "python", {"code": "y"}),
    ('{"name": "python", "arguments": "{\\"code\\": \\"z\\"}"}', "python", {"code": "z"}),
])
def test_extract_tool_calls(content: str, name: str, args: dict) -> None:
    calls = server.extract_tool_calls(content, NAMES)
    assert len(calls) == 1
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert calls[0]["function"]["name"] == name
    assert json.loads(calls[0]["function"]["arguments"]) == args


@pytest.mark.parametrize("content", [
    "Just prose.",
    '{"name": "rm_rf", "arguments": {}}',          # not one of the tools
    '{"name": "python", "arguments": [1, 2]}',     # arguments not an object
    '```python\nprint("hi")\n```',
    '{"name": "python", "arguments": {"code": ',   # truncated
])
def test_extract_tool_calls_none(content: str) -> None:
    assert server.extract_tool_calls(content, NAMES) == []


def test_shape_request_required_adds_schema() -> None:
    req = {"messages": [], "tools": TOOLS, "tool_choice": "required"}
    out, names = server.shape_request(req)
    assert names == NAMES
    schema = out["response_format"]["json_schema"]["schema"]
    assert [a["properties"]["name"]["const"] for a in schema["anyOf"]] == ["python", "finish"]
    assert "response_format" not in req  # the caller's dict is not modified


def test_shape_request_named_and_auto_and_none() -> None:
    named, _ = server.shape_request({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "finish"}}})
    assert named["response_format"]["json_schema"]["schema"]["properties"]["name"]["const"] == "finish"
    auto, names = server.shape_request({"tools": TOOLS})
    assert "response_format" not in auto and names == NAMES
    none, names = server.shape_request({"tools": TOOLS, "tool_choice": "none"})
    assert names == set()
    stream, names = server.shape_request({"tools": TOOLS, "tool_choice": "required", "stream": True})
    assert names == set() and "response_format" not in stream
    with pytest.raises(ValueError):
        server.shape_request({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}})


def test_shape_reply() -> None:
    reply = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant",
             "content": '{"name": "python", "arguments": {"code": "1"}}'}}]}
    out = server.shape_reply(reply, NAMES)
    ch = out["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None
    assert ch["message"]["tool_calls"][0]["function"]["name"] == "python"
    prose = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}]}
    assert server.shape_reply(prose, NAMES)["choices"][0]["message"] == {"role": "assistant", "content": "hello"}


def test_text_only() -> None:
    req = {"messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    ]}
    out, names = server.shape_request(req)
    assert names == set()
    assert out["messages"][0] == {"role": "system", "content": "sys"}
    assert out["messages"][1]["content"] == "look\n[image omitted: this model reads text only]"
    assert isinstance(req["messages"][1]["content"], list)  # caller's request untouched


PARAMS = {"python": ["code"], "finish": ["status", "summary"]}


def _calls(calls: list) -> list:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


@pytest.mark.parametrize("code,want", [
    ("x = 1\nprint(x)\n", [("python", {"code": "x = 1\nprint(x)\n"})]),
    ('finish(status="success", summary="ok")\n', [("finish", {"status": "success", "summary": "ok"})]),
    ('robo.pick("a")\nfinish("success", "done")\n',
     [("python", {"code": 'robo.pick("a")\n'}), ("finish", {"status": "success", "summary": "done"})]),
    ("def f(:\n", [("python", {"code": "def f(:\n"})]),  # the kernel reports the syntax error
    ("finish(status=s)\n", [("python", {"code": "finish(status=s)\n"})]),  # not literal: the kernel's
    ("if robo.done:\n    finish(status='success')\n", [("python", {"code": "if robo.done:\n    finish(status='success')\n"})]),
])
def test_split_calls(code: str, want: list) -> None:
    assert _calls(server.split_calls(code, "python", PARAMS)) == want


def test_code_block_request_and_reply() -> None:
    req = {"model": "m", "tool_choice": "required", "tools": TOOLS, "max_tokens": 9, "messages": [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "python", "arguments": '{"code": "x = 1"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]}
    out, params = server.code_block_request(req, "python")
    assert "tools" not in out and "tool_choice" not in out and out["grammar"] == server.CODE_BLOCK_GRAMMAR
    assert out["max_tokens"] == 9 and params["python"] == ["code"]
    assert out["messages"][1] == {"role": "assistant", "content": "```python\nx = 1\n```"}
    assert out["messages"][2] == {"role": "user", "content": "Result of your call:\nok"}
    reply = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "```python\nprint(2)\n```"}}]}
    got = server.code_block_reply(reply, "python", params)["choices"][0]
    assert got["finish_reason"] == "tool_calls" and got["message"]["content"] is None
    assert _calls(got["message"]["tool_calls"]) == [("python", {"code": "print(2)\n"})]


@pytest.mark.parametrize("start,want", [
    ("", server.CODE_BLOCK_GRAMMAR),
    ('# Task "a\\b": x\n', 'root ::= "```python\\n" "# Task \\"a\\\\b\\": x\\n" head body "```"\n'),
])
def test_code_block_start(start: str, want: str) -> None:
    req = {"model": "m", "tools": TOOLS, "code_block_start": start, "messages": [{"role": "user", "content": "do it"}]}
    out, _ = server.code_block_request(req, "python")
    assert "code_block_start" not in out and out["grammar"].startswith(want)


@pytest.mark.parametrize("start", ["# ```\n", 7])
def test_code_block_start_refused(start: object) -> None:
    with pytest.raises(ValueError, match="code_block_start"):
        server.code_block_request({"tools": TOOLS, "code_block_start": start, "messages": []}, "python")


def test_assemble_stream() -> None:
    events = [
        b'data: {"id": "c1", "created": 5, "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}\n',
        b"\n",
        b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "```python\\nprint("}}]}\n',
        b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "1)\\n```"}, "finish_reason": "stop"}]}\n',
        b'data: {"id": "c1", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}, "timings": {"cache_n": 4, "prompt_n": 3}}\n',
        b"data: [DONE]\n",
        b'data: {"choices": [{"delta": {"content": "after the end"}}]}\n',
    ]
    r = server.assemble_stream(events)
    assert r["id"] == "c1" and r["model"] == "m" and r["created"] == 5
    assert r["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "```python\nprint(1)\n```"}, "finish_reason": "stop"}]
    assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == 4 and r["timings"]["cache_n"] == 4
    with pytest.raises(OSError, match="stream error"):
        server.assemble_stream([b'data: {"error": {"message": "context full"}}\n'])


def test_raised_note_and_codes_run() -> None:
    assert "raised NameError" in server.raised_note('{"cell": 3, "exception": "NameError: name \'self\' is not defined"}')
    assert server.raised_note('{"cell": 3, "stdout": "ok"}') == "" and server.raised_note("not json") == ""
    req = {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "```python\nx = 1\n```"},
                        {"role": "user", "content": "Result of your call:\n{}"}]}
    assert server.codes_run(req) == ["x = 1"]
    assert server.reply_code({"choices": [{"message": {"content": "```python\nx = 1\n```"}}]}) == "x = 1"
    assert server.codes_run({"messages": [{"role": "user", "content": "go"}]}) == []
    req["messages"] += [{"role": "assistant", "content": "```python\ny = 2\n```"}, {"role": "assistant", "content": None}]
    assert server.codes_run(req) == ["x = 1", "y = 2"]


def test_summed_usage() -> None:
    u = server.summed_usage([{"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}},
                             None, "x", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": True,
                                         "prompt_tokens_details": {"cached_tokens": 9}}])
    assert u == {"prompt_tokens": 19, "completion_tokens": 8, "prompt_tokens_details": {"cached_tokens": 13}}


def _turn(i: int, code: str) -> list:
    return [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "python", "arguments": json.dumps({"code": code})}}]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"}]


@pytest.mark.parametrize("codes,told", [
    (["a = 1", "b = 2"], [False, False]),
    (["a = 1", "a = 1"], [False, True]),
    (["a = 1", "a = 1\n", "a = 1"], [False, True, True]),
    (["a = 1", "b = 2", "a = 1"], [False, False, False]),
    (["", ""], [False, False]),
])
def test_repeated_code_is_told(codes: list, told: list) -> None:
    msgs = [{"role": "user", "content": "do it"}]
    for i, c in enumerate(codes):
        msgs += _turn(i, c)
    out, _ = server.code_block_request({"tools": TOOLS, "messages": msgs}, "python")
    results = [m["content"] for m in out["messages"] if m["role"] == "user"][1:]
    assert [("same code as your call before it" in r) for r in results] == told


LOOPED = ("```python\n# Task \"close_drawer\": close the drawer\nx = 1\n"
          + "robo.move_to([0.63, 0, 0.086], gripper=0)\nrobo.move_to([0.63, 0, 0.086], gripper=1)\n" * 4
          + "robo.move_to([0.63, 0")


@pytest.mark.parametrize("text,want", [
    # a two-line group written four times, cut mid-line: kept once, with the note
    (LOOPED, "# Task \"close_drawer\": close the drawer\nx = 1\nrobo.move_to([0.63, 0, 0.086], gripper=0)\n"
             "robo.move_to([0.63, 0, 0.086], gripper=1)\n" + server.LOOP_NOTE + "\n"),
    ("```python\nprint(1)\nprint(1)\nprint(1)\npri", "print(1)\n" + server.LOOP_NOTE + "\n"),
    # a long line written twice, then again up to the cut (close_drawer seed 1's reply)
    ("```python\n# c\ng = m(1)\nm(2, s=0.01)\nm(2, s=0.01)\nm(2, s=0.0", "# c\ng = m(1)\nm(2, s=0.01)\n" + server.LOOP_NOTE + "\n"),
    # twice, then something else up to the cut, is not a loop; blank lines are not a group; a closed block is not cut
    ("```python\na = 1\nb = 2\na = 1\nb = 2\nc", None),
    ("```python\nm(2)\nm(2)\nm(3", None),
    # blank lines to the cut after an unfinished fence (close_drawer seed 0's fourth reply)
    ("```python\n# c\nx = 1\nrelease()\n``}`" + "\n" * 40, "# c\nx = 1\nrelease()\n" + server.LOOP_NOTE + "\n"),
    ("```python\n# only a comment" + "\n" * 40, None),
    # a seven-line group (an if block) written twice, then again up to the cut
    ("```python\n" + "if a:\n    b()\n    c()\n    d()\n    e()\n    f()\n    g()\n" * 2 + "if a:\n    b(",
     "if a:\n    b()\n    c()\n    d()\n    e()\n    f()\n    g()\n" + server.LOOP_NOTE + "\n"),
    ("```python\na = 1\n\n\n\n\nb", None),
    ("```python\nprint(1)\nprint(1)\nprint(1)\n```", None),
    ("no block at all", None),
])
def test_cut_loop(text: str, want: str | None) -> None:
    assert server.cut_loop(text) == want


def test_a_looping_reply_becomes_its_call() -> None:
    reply = {"choices": [{"finish_reason": "length", "message": {"role": "assistant", "content": LOOPED}}]}
    got = server.code_block_reply(reply, "python", PARAMS)["choices"][0]
    assert got["finish_reason"] == "length" and got["message"]["content"] is None
    (name, args), = _calls(got["message"]["tool_calls"])
    assert name == "python" and args["code"].count("robo.move_to") == 2 and args["code"].endswith(server.LOOP_NOTE + "\n")
    cut = {"choices": [{"finish_reason": "length", "message": {"role": "assistant", "content": "```python\n# a\n# b\nx = "}}]}
    assert "tool_calls" not in server.code_block_reply(cut, "python", PARAMS)["choices"][0]["message"]


def test_a_cut_cell_is_shown_without_its_note() -> None:
    looped = "x = 1\nprint(x)\n" + server.LOOP_NOTE + "\n"
    msgs = [{"role": "user", "content": "do it"}] + _turn(0, looped) + _turn(1, "y = 2")
    out, _ = server.code_block_request({"tools": TOOLS, "messages": msgs}, "python")
    shown = [m["content"] for m in out["messages"]]
    assert shown[1] == "```python\nx = 1\nprint(x)\n```" and server.LOOP_NOTE not in "".join(shown)
    assert "only its lines up to the repetition ran" in shown[2] and "repetition" not in shown[4]


class _Upstream:
    """A llama.cpp stand-in: answers every chat request with ``content`` as an event stream cut at
    max_tokens (finish_reason "length"), as a model that never closed its block."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.content = ""
        self.queue: list[str] = []  # replies to give first, in order; then ``content``
        self.requests: list[dict] = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                outer.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                text = outer.queue.pop(0) if outer.queue else outer.content
                for i in range(0, len(text), 4096):  # many deltas, as a stream
                    chunk = {"choices": [{"index": 0, "delta": {"content": text[i:i + 4096]}}]}
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                       "usage": {"prompt_tokens": 9, "completion_tokens": 384}}
                self.wfile.write(b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n")

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()


@pytest.fixture
def proxy():
    import http.server
    import threading

    up = _Upstream()
    front = http.server.ThreadingHTTPServer(("127.0.0.1", 0), server.make_handler(up.srv.server_address[:2]))
    threading.Thread(target=front.serve_forever, daemon=True).start()
    yield up, front.server_address[1]
    front.shutdown()
    up.srv.shutdown()


def _ask(port: int, messages: list) -> dict:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(
        {"model": "m", "messages": messages, "tools": TOOLS, "code_block_tool": "python", "max_tokens": 384}),
        headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    return json.load(resp)


def test_hostile_replies_through_the_proxy(proxy) -> None:
    """The model is the agent: what it writes reaches the host's proxy. A loop becomes one call; a reply
    built to defeat the loop rule at every line (3 MB) is answered, with no call, in bounded time; a model
    that writes the cut note itself is shown its code without it and told it was cut, nothing else."""
    up, port = proxy
    up.content = LOOPED
    reply = _ask(port, [{"role": "user", "content": "go"}])
    got = reply["choices"][0]
    (name, args), = _calls(got["message"]["tool_calls"])
    assert name == "python" and args["code"].count("robo.move_to") == 2 and got["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 384  # the whole reply's tokens stay counted

    up.content = "```python\n" + "".join(f"a\na\nb{i}\n" for i in range(200000)) + "y"
    got = _ask(port, [{"role": "user", "content": "go"}])["choices"][0]
    assert not got["message"].get("tool_calls") and got["finish_reason"] == "length"

    spoof = "import os\n" + server.LOOP_NOTE + "\n"
    up.content = LOOPED
    _ask(port, [{"role": "user", "content": "go"}] + _turn(0, spoof))
    shown = up.requests[-1]["messages"]
    assert shown[1]["content"] == "```python\nimport os\n```" and "only its lines up to the repetition ran" in shown[2]["content"]


@pytest.mark.parametrize("seed,want", [(7, 8), (0x7FFFFFFF, 0), (None, None), ("7", None), (-3, None), (True, None)])
def test_a_repeated_reply_is_asked_again_hotter_with_seeds_from_the_request(proxy, seed: object, want: int | None) -> None:
    """Code already run is asked for again, hotter, up to REPEAT_ASKS times, each with another seed. A
    request that names its seed (the local runtime's LocalSeed) gets the next ones, so an episode replays
    as it ran; any other gets random ones and is still answered. The usage counts every generation."""
    import http.client

    up, port = proxy
    up.content = "```python\nx = 1\n```"
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}] + _turn(0, "x = 1") + _turn(1, "y = 2"),
            "tools": TOOLS, "code_block_tool": "python", "max_tokens": 384, "temperature": 0.2}
    if seed is not None:
        body["seed"] = seed
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    got = json.load(resp)
    assert resp.status == 200 and json.loads(got["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"code": "x = 1\n"}
    asks = up.requests[-1 - server.REPEAT_ASKS:]
    assert asks[0].get("seed") == seed and asks[0]["temperature"] == 0.2
    assert [a["temperature"] for a in asks[1:]] == pytest.approx([0.8, 1.0, 1.2])
    seeds = [a["seed"] for a in asks[1:]]
    assert all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds) and len(set(seeds)) == len(seeds)
    if want is not None:
        assert seeds[0] == want and seeds[1] == (want + 1) & 0x7FFFFFFF
    assert got["usage"]["prompt_tokens"] == 9 * (1 + server.REPEAT_ASKS)
    # The asks leave the repeated cell out of the history (the model copies it at any temperature); the
    # other cell, every result and the first ask's history stay as sent.
    shown = [[m["content"] for m in a["messages"] if m["role"] == "assistant"] for a in asks]
    assert shown[0] == ["```python\nx = 1\n```", "```python\ny = 2\n```"]
    assert all(s == [server.LEFT_OUT, "```python\ny = 2\n```"] for s in shown[1:])
    assert all(len(a["messages"]) == len(asks[0]["messages"]) and a["messages"][2] == asks[0]["messages"][2] for a in asks)


def test_asking_again_stops_at_new_code(proxy) -> None:
    """An earlier cell repeated (not only the last) is asked again; the first reply with new code stands.
    Each ask leaves out every cell repeated so far."""
    up, port = proxy
    up.queue = ["```python\nx = 1\n```", "```python\ny = 2\n```", "```python\nz = 3\n```"]
    n = len(up.requests)
    got = _ask(port, [{"role": "user", "content": "go"}] + _turn(0, "x = 1") + _turn(1, "y = 2"))
    calls = got["choices"][0]["message"]["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"code": "z = 3\n"}
    assert len(up.requests) - n == 3 and got["usage"]["completion_tokens"] == 3 * 384
    shown = [[m["content"] for m in r["messages"] if m["role"] == "assistant"] for r in up.requests[n:]]
    assert shown == [["```python\nx = 1\n```", "```python\ny = 2\n```"],
                     [server.LEFT_OUT, "```python\ny = 2\n```"],
                     [server.LEFT_OUT, server.LEFT_OUT]]
    up.queue = ["```python\nw = 4\n```"]
    n = len(up.requests)
    _ask(port, [{"role": "user", "content": "go"}] + _turn(0, "x = 1"))
    assert len(up.requests) - n == 1  # new code: asked once


@pytest.mark.parametrize("guard,asks", [(True, 1 + server.REPEAT_ASKS), (None, 1), ("yes", 1), (1, 1)])
def test_repeat_guard_asks_again_when_a_plain_reply_repeats_an_earlier_one(proxy, guard: object, asks: int) -> None:
    """The tools arm's plain chat (a JSON call per reply) asks for the guard with "repeat_guard": true: a
    reply equal to an earlier assistant message (as JSON, however spaced) is asked again, hotter. Anything
    but true is no guard; the field never reaches llama.cpp."""
    import http.client

    up, port = proxy
    up.content = '{"tool": "move_to", "args": {"xyz": [-0.7, 0, 0]}}'
    body: dict = {"model": "m", "max_tokens": 64, "temperature": 0.2, "seed": 1, "messages": [
        {"role": "user", "content": "go"}, {"role": "assistant", "content": '{"tool":"move_to","args":{"xyz":[-0.7,0,0]}}'},
        {"role": "user", "content": "Your call of move_to was refused: outside the workspace"}]}
    if guard is not None:
        body["repeat_guard"] = guard
    n = len(up.requests)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    got = json.load(resp)
    assert resp.status == 200 and json.loads(got["choices"][0]["message"]["content"])["tool"] == "move_to"
    assert len(up.requests) - n == asks
    assert all("repeat_guard" not in r for r in up.requests[n:])
    assert [r["seed"] for r in up.requests[n:]] == list(range(1, asks + 1))
    assert got["usage"]["prompt_tokens"] == 9 * asks
    assert [r["messages"][1]["content"] for r in up.requests[n:]] == [body["messages"][1]["content"]] + [server.LEFT_OUT] * (asks - 1)
    up.queue = ['{"tool": "pick", "args": {"object": "red_block"}}']
    n = len(up.requests)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 200 and len(up.requests) - n == 1  # a new call: asked once
