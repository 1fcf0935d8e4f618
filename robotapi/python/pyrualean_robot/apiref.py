"""The API reference the agent reads, generated from the live class (one source of truth): text for the
cells arm, JSON function schemas for the tool-calling arm. Needs no simulator."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import typing
from typing import Any, Optional

from . import results
from .base import PRIMITIVE_SETS
from .errors import EpisodeFinished, SandboxError, ToolError

FORMATS = ("text", "tools")


def tool_methods(cls: type, primitives: str = "full") -> list[tuple[str, Any, dict]]:
    """(name, function, {stateful, vla}) for every public primitive, in definition order (base first)."""
    seen: dict[str, tuple[Any, dict]] = {}
    for klass in reversed(cls.__mro__):
        for name, fn in vars(klass).items():
            info = getattr(fn, "_pyrualean_tool", None)
            if info is None or name.startswith("_"):
                if name in seen and not name.startswith("_") and info is None:
                    del seen[name]  # overridden by a non-primitive
                continue
            seen.pop(name, None)
            seen[name] = (fn, info)
    out = []
    for name, (fn, info) in seen.items():
        if (primitives == "no-vla" and info["vla"]) or (primitives == "paper" and info.get("privileged")):
            continue
        out.append((name, fn, info))
    # keep the subclass's own order: sort by first appearance in the most-derived class that defines it
    order = {n: i for i, n in enumerate(vars(cls))}
    out.sort(key=lambda t: order.get(t[0], -1))
    return out


def _hints(fn: Any) -> dict:
    raw = inspect.unwrap(fn)
    try:
        return typing.get_type_hints(raw)
    except Exception:
        return {}


def _ann_text(tp: Any) -> str:
    if tp is inspect.Parameter.empty:
        return ""
    if isinstance(tp, type):
        return tp.__name__
    s = str(tp).replace("typing.", "")
    for mod in ("numpy.ndarray", "pyrualean_robot.results."):
        s = s.replace(mod, "ndarray" if mod == "numpy.ndarray" else "")
    return s


def signature_text(name: str, fn: Any, var: str = "robo") -> str:
    raw = inspect.unwrap(fn)
    sig = inspect.signature(raw)
    hints = _hints(fn)
    parts = []
    star = False
    for p in list(sig.parameters.values())[1:]:
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        s = p.name
        if p.name in hints:
            s += f": {_ann_text(hints[p.name])}"
        if p.default is not p.empty:
            s += f" = {p.default!r}"
        parts.append(s)
    ret = hints.get("return")
    r = f" -> {_ann_text(ret)}" if ret is not None else " -> None"
    return f"{var}.{name}({', '.join(parts)}){r}"


def _doc(obj: Any) -> str:
    return inspect.cleandoc(inspect.getdoc(obj) or "")


def _nested_dataclasses(tp: Any, seen: list[type]) -> None:
    """Append the dataclasses reachable from a type annotation (fields of fields, tuple[X, ...], Optional[X])."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if tp in seen:
            return
        seen.append(tp)
        try:
            hints = typing.get_type_hints(tp)
        except Exception:  # unresolvable forward reference: list the type itself only
            return
        for f in dataclasses.fields(tp):
            _nested_dataclasses(hints.get(f.name), seen)
        return
    for arg in typing.get_args(tp):
        _nested_dataclasses(arg, seen)


def _apply_vla_edits(cls: type, text: str) -> str:
    """Under no-vla, rewrite the VLA sentences a robot lists in ``VLA_REFERENCE_EDITS`` ((full, no_vla) pairs,
    matched across line breaks and indentation), so the reference never mentions calls the run lacks."""
    for full, trimmed in getattr(cls, "VLA_REFERENCE_EDITS", ()):
        words = full.split()
        if not words:
            continue
        pattern = r"\s+".join(re.escape(w) for w in words)
        text = re.sub(pattern, lambda _m, t=trimmed: t, text)
    return text


def api_reference(cls: type, *, var: str = "robo", primitives: str = "full") -> str:
    """Text reference: class docstring, constants, properties, primitives, result types, exceptions."""
    if primitives not in PRIMITIVE_SETS:
        raise ValueError(f"primitives must be one of {PRIMITIVE_SETS}, not {primitives!r}")
    out = [f"`{var}`: {cls.__name__} (robot {getattr(cls, 'NAME', '?')!r})", "", _doc(cls), "", "Constants:"]
    for c in getattr(cls, "CONSTANTS", ()):
        if primitives == "no-vla" and c.startswith("VLA_"):
            continue  # constants of the hidden VLA calls
        out.append(f"  {var}.{c} = {getattr(cls, c)!r}")
    out += ["", "Properties:"]
    for pname in ("task", "done", "env_steps"):
        prop = getattr(cls, pname, None)
        if isinstance(prop, property):
            out.append(f"  {var}.{pname}: {_doc(prop)}")
    out += ["", "Methods:"]
    used_types: list[type] = []
    for name, fn, info in tool_methods(cls, primitives):
        out.append(signature_text(name, fn, var))
        doc = _doc(fn)
        if doc:
            out += ["    " + line if line else "" for line in doc.splitlines()]
        _nested_dataclasses(_hints(fn).get("return"), used_types)
        out.append("")
    out.append("Result types (frozen dataclasses; access fields as attributes):")
    for t in used_types:
        fields = ", ".join(f.name for f in dataclasses.fields(t))
        out.append(f"  {t.__name__}({fields})")
        d = _doc(t)
        if d and not d.startswith(t.__name__ + "("):
            out += ["    " + line for line in d.splitlines()]
    out += ["", "Exceptions:",
            f"  ValueError: invalid arguments; raised before anything moves (nothing executed).",
            f"  ToolError(RuntimeError): {_doc(ToolError)}",
            f"  EpisodeFinished(BaseException): {_doc(EpisodeFinished)}",
            f"  SandboxError: {_doc(SandboxError)}"]
    text = "\n".join(out).rstrip() + "\n"
    if primitives == "no-vla":
        text = _apply_vla_edits(cls, text)
        text += "\nThe VLA policy primitives are not available in this run (no-VLA primitive set).\n"
    return text


def _schema(tp: Any) -> dict:
    origin = typing.get_origin(tp)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if origin is typing.Union:
        if len(args) == 1:
            return _schema(args[0])
        types = []
        for a in args:
            s = _schema(a)
            types.append(s.get("type", "string"))
        return {"type": types}
    if tp is float:
        return {"type": "number"}
    if tp is int:
        return {"type": "integer"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is str:
        return {"type": "string"}
    if origin in (list, tuple, typing.Sequence) or str(origin).endswith("Sequence'>"):
        item = _schema(args[0]) if args else {"type": "number"}
        return {"type": "array", "items": item}
    return {"type": "string"}


def tool_schemas(cls: type, *, primitives: str = "full") -> list[dict]:
    """OpenAI-style function schemas for the primitives (the tool-calling arm), same docs as the text."""
    if primitives not in PRIMITIVE_SETS:
        raise ValueError(f"primitives must be one of {PRIMITIVE_SETS}, not {primitives!r}")
    out = []
    for name, fn, info in tool_methods(cls, primitives):
        raw = inspect.unwrap(fn)
        sig = inspect.signature(raw)
        hints = _hints(fn)
        props: dict[str, Any] = {}
        required = []
        for p in list(sig.parameters.values())[1:]:
            s = _schema(hints.get(p.name, str))
            if p.name == "xyz" and s.get("type") == "array":  # positions are always (x, y, z)
                s.update(minItems=3, maxItems=3)
            if p.default is not p.empty:
                if p.default is not None:
                    s["default"] = p.default
            else:
                required.append(p.name)
            props[p.name] = s
        desc = f"{signature_text(name, fn)}\n{_doc(fn)}".strip()
        if primitives == "no-vla":
            desc = _apply_vla_edits(cls, desc)
        out.append({"type": "function",
                    "function": {"name": name, "description": desc,
                                 "parameters": {"type": "object", "properties": props, "required": required,
                                                "additionalProperties": False}},
                    "x-pyrualean": {"stateful": info["stateful"], "vla": info["vla"],
                                    "privileged": info.get("privileged", False)}})
    return out


def render(robot: str, primitives: str = "full", fmt: str = "text") -> str:
    from .robots import robot_class

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    cls = robot_class(robot)
    if fmt == "tools":
        return json.dumps(tool_schemas(cls, primitives=primitives), indent=2) + "\n"
    return api_reference(cls, primitives=primitives)
