"""What a served robot's values look like on the wire, above RPent's JSON encoding (:mod:`..robots.rpent`):
result dataclasses as ``{"__dataclass__": "<Name>", "fields": {...}}``, tuples as ``{"__tuple__": [...]}``,
bytes (PNGs, artifacts) as ``{"__bytes__": <uint8 array>}``. Only JSON crosses the socket (never pickle): the kernel side is
untrusted, so the server decodes nothing that can run code, and the proxy rebuilds only the result types the
robot class declares."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .. import results
from ..robots.rpent import decode, encode

#: Exceptions the proxy re-raises as themselves; anything else arrives as a RuntimeError naming its type.
RAISABLE = ("ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError", "NotImplementedError",
            "AttributeError", "ToolError", "EpisodeFinished", "SandboxError")


def to_wire(v: Any) -> Any:
    """A robot value (result dataclass, array, tuple, PNG bytes, ...) in JSON-safe form."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {"__dataclass__": type(v).__name__,
                "fields": {f.name: to_wire(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    if isinstance(v, bytes):
        return {"__bytes__": np.frombuffer(v, dtype=np.uint8)}
    if isinstance(v, tuple):
        return {"__tuple__": [to_wire(x) for x in v]}
    if isinstance(v, list):
        return [to_wire(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_wire(x) for k, x in v.items()}
    return v  # arrays and numpy scalars: the transport encodes them (raw buffers on the unix socket)


def to_json(v: Any) -> Any:
    """A robot value as plain JSON for the host (Go) side: dataclasses as objects, tuples as lists."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: to_json(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    return encode(v)


def result_types(cls: type) -> dict[str, type]:
    """The dataclasses a robot class's primitives return (and their nested field types), by name."""
    from ..apiref import _hints, _nested_dataclasses, tool_methods

    seen: list[type] = list(results.RESULT_TYPES)
    for _, fn, _ in tool_methods(cls, "full"):
        _nested_dataclasses(_hints(fn).get("return"), seen)
    return {t.__name__: t for t in seen}


def from_wire(v: Any, types: dict[str, type]) -> Any:
    """Inverse of :func:`to_wire`; an unknown dataclass name stays a plain dict (never an import)."""
    if isinstance(v, dict):
        if "__ndarray__" in v:
            return decode(v)
        if set(v) == {"__dataclass__", "fields"}:
            fields = {k: from_wire(x, types) for k, x in (v["fields"] or {}).items()}
            t = types.get(str(v["__dataclass__"]))
            return t(**fields) if t is not None else fields
        if set(v) == {"__tuple__"}:
            return tuple(from_wire(x, types) for x in v["__tuple__"])
        if set(v) == {"__bytes__"}:
            return np.asarray(decode(v["__bytes__"]), dtype=np.uint8).tobytes()
        return {k: from_wire(x, types) for k, x in v.items()}
    if isinstance(v, list):
        return [from_wire(x, types) for x in v]
    return v
