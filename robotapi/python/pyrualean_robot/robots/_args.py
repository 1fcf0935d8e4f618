"""Argument checks shared by the robots' primitives. Each returns the clean value or raises ValueError naming
the argument, so a primitive can check everything before it touches the simulator."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np


def _num(v: Any, name: str) -> float:
    """A finite number (not a bool)."""
    if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(float(v)):
        raise ValueError(f"{name} must be a finite number, not {v!r}")
    return float(v)


def _bounded(v: Any, name: str, lo: float, hi: float, *, open_lo: bool = False, hint: str = "") -> float:
    """A finite number in [lo, hi] ((lo, hi] with open_lo); ``hint`` says what the range means."""
    x = _num(v, name)
    if x > hi or x < lo or (open_lo and x <= lo):
        raise ValueError(f"{name} must be in {'(' if open_lo else '['}{lo:g}, {hi:g}]{hint}, not {x:g}")
    return x


def _vec(v: Any, n: int, name: str) -> np.ndarray:
    """Exactly n finite numbers (not a string), as a float array."""
    if isinstance(v, (str, bytes)):
        raise ValueError(f"{name} must be {n} numbers, not {v!r}")
    try:
        a = np.asarray(v, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {n} numbers, not {v!r}") from None
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be {n} finite numbers, not {v!r}")
    return a


def _floats(v: Any, n: int, name: str) -> tuple[float, ...]:
    """:func:`_vec` as a tuple of Python floats."""
    return tuple(float(x) for x in _vec(v, n, name))


def _int_in(v: Any, name: str, lo: int, hi: int) -> int:
    """An int (not a bool) in lo..hi."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise ValueError(f"{name} must be an int in {lo}..{hi}, not {v!r}")
    return int(v)


def _positive_int(v: Any, name: str, most: int) -> int:
    """An int (not a bool) in 1..most."""
    return _int_in(v, name, 1, most)


def _pixel_pairs(pixels: Any, most: int) -> list[tuple[int, int]]:
    """1..``most`` [row, col] pairs (one bare pair is accepted too), truncated to ints as the original does."""
    try:
        seq = list(pixels)
    except TypeError:
        raise ValueError(f"pixels must be [row, col] pairs, got {pixels!r}") from None
    if len(seq) == 2 and all(isinstance(v, Real) and not isinstance(v, bool) for v in seq):
        seq = [seq]
    if not 1 <= len(seq) <= most:
        raise ValueError(f"pixels must contain between 1 and {most} [row, col] pairs")
    out = []
    for p in seq:
        try:
            r, c = p
        except (TypeError, ValueError):
            raise ValueError(f"every pixel must be a [row, col] pair, got {p!r}") from None
        if any(isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(float(v)) for v in (r, c)):
            raise ValueError(f"pixel coordinates must be finite numbers, got {p!r}")
        out.append((int(r), int(c)))
    return out
