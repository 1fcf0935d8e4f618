"""Notes the kernel adds to two errors whose Python message leaves an agent guessing (notebook.attach
installs them).

- NameError: a cell stops at its first error, so the names its later lines assign never exist. An agent
  that resends the rest of a failed cell then hits ``NameError: name 'hx' is not defined`` and, without
  being told where ``hx`` was meant to come from, sends the same cell again (measured: a drawer episode,
  four times). Also named: a robot method written bare (``segment(...)`` for ``robo.segment(...)``), and a
  worked example's helper called without defining it (``put``, measured: stack_three_swap seed 0), and a
  name the cell dropped into ``_`` (``x, y, _ = ...`` then ``top``, measured: bowl_then_plate seed 0).
- TypeError ``cannot unpack non-iterable NoneType object`` on a line that unpacks a segment's position:
  the object was not visible (``found`` False), most often because the arm stands in front of it after an
  earlier attempt (measured: close_drawer seed 0, the same line twice).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Collection, Optional, Sequence

MAX_CELL_CHARS = 20_000  # longer cells are not parsed for a hint
MAX_EARLIER = 20  # earlier cells looked at, newest first


@dataclass(frozen=True)
class CellRun:
    """One cell as the kernel ran it: its source, and where it stopped when it raised."""

    source: str
    error_line: Optional[int] = None  # the cell's line that raised; None when it ran to the end
    error_type: str = ""


def assigned_lines(source: str, name: str) -> list[int]:
    """The lines of ``source`` that bind ``name`` at any depth (assignment, for, with, import, def, class,
    except ... as); empty when the source does not parse."""
    if len(source) > MAX_CELL_CHARS:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            lines.add(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            lines.add(node.lineno)
        elif isinstance(node, ast.ExceptHandler) and node.name == name:
            lines.add(node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if (a.asname or a.name.split(".")[0]) == name:
                    lines.add(node.lineno)
    return sorted(lines)


def _line(source: str, n: int) -> str:
    lines = source.splitlines()
    text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
    return text if len(text) <= 100 else text[:97] + "..."


def called_names(source: str) -> set[str]:
    """The bare names ``source`` calls (``put(...)``); empty when it does not parse."""
    if len(source) > MAX_CELL_CHARS:
        return set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def name_error_note(name: str, cell: str, line: Optional[int], earlier: Sequence[CellRun],
                    robot_names: Collection[str] = ()) -> Optional[str]:
    """Where ``name`` was meant to come from, when this cell (raising NameError at ``line``) or a failed
    earlier cell says so, when it is one of the robot's (``robot_names``: ``segment`` for
    ``robo.segment``), or when this cell calls a function no cell defines (a worked example's helper);
    None otherwise (a plain typo keeps Python's own message)."""
    if not name:
        return None
    note = _earlier_note(name, cell, line, earlier)
    if note:
        return note
    if name in robot_names:
        return f"`{name}` belongs to the robot: write `robo.{name}`."
    if any(assigned_lines(run.source, name) for run in list(earlier)[-MAX_EARLIER:]):
        return None  # an earlier cell bound it (and it is gone since): no guess
    note = _dropped_note(name, cell, line)
    if note:
        return note
    if name in called_names(cell):
        return (f"No cell defines `{name}`: a helper a worked example defines exists only once a cell defines it. "
                f"Define `{name}` (`def {name}(...):`) in this cell before calling it.")
    return None


def _earlier_note(name: str, cell: str, line: Optional[int], earlier: Sequence[CellRun]) -> Optional[str]:
    """name_error_note's first answer: a later line of this cell, or a failed earlier cell, assigns it."""
    later = [k for k in assigned_lines(cell, name) if line is not None and k > line]
    if later:
        return f"`{name}` is first assigned on line {later[0]} of this cell, after line {line} uses it."
    for run in list(earlier)[::-1][:MAX_EARLIER]:
        if run.error_line is None:
            continue
        never = [k for k in assigned_lines(run.source, name) if k >= run.error_line]
        if not never:
            continue
        k, j = never[0], run.error_line
        where = f"line {j} (`{_line(run.source, j)}`)"
        if k == j:
            why = f"an earlier cell assigned it on {where}, the line that raised {run.error_type or 'an error'}, so it never got a value"
        else:
            why = (f"an earlier cell assigns it on line {k}, but that cell stopped at {where} with "
                   f"{run.error_type or 'an error'}, so line {k} never ran")
        return f"`{name}` does not exist: {why}. Assign `{name}` in this cell before using it."
    return None


def _dropped_note(name: str, cell: str, line: Optional[int]) -> Optional[str]:
    """When no cell binds ``name`` and a line of this cell before ``line`` unpacks into ``_`` (one ``_``, plain
    names): the value it drops may be the one wanted. Two worked examples unpack a place's position as
    ``x, y, _`` and ``x, y, top``; the model wrote the first and used ``top`` (bowl_then_plate seed 0, the
    same cell twice)."""
    if line is None or len(cell) > MAX_CELL_CHARS or not name.isidentifier() or name == "_":
        return None
    try:
        tree = ast.parse(cell)
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and node.lineno < line and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Tuple)):
            continue
        elts = node.targets[0].elts
        if all(isinstance(e, ast.Name) for e in elts) and [e.id for e in elts].count("_") == 1 \
                and (found is None or node.lineno > found.lineno):
            found = node
    if found is None or found.end_lineno != found.lineno or found.end_col_offset - found.col_offset > 160:
        return None  # only a short line is quoted back (and unparsed: a deep expression would recurse)
    for e in found.targets[0].elts:
        if e.id == "_":
            e.id = name
    fixed = ast.unparse(found)
    return (f"No cell assigns `{name}`. Line {found.lineno} (`{_line(cell, found.lineno)}`) drops a value into "
            f"`_`: if `{name}` is that value, name it there: `{fixed}`.")


UNPACK_NONE = "cannot unpack non-iterable NoneType object"
SEGMENT_NOT_FOUND = ("`robo.segment(...)` found nothing, so its position is None: `found` is False when the object is "
                     "hidden from that camera (most often behind the arm, after an earlier attempt) or out of view. "
                     "Move the arm up out of the way first, then segment again and check `found`.")


def type_error_note(message: str, line: str) -> Optional[str]:
    """Why ``line`` (the source line that raised) failed with a TypeError ``message``, when it unpacked the
    position of a segment that found nothing; None otherwise."""
    if message == UNPACK_NONE and "segment(" in line and ("top_xyz" in line or "world_xyz" in line):
        return SEGMENT_NOT_FOUND
    return None
