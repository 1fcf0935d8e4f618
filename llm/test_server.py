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
