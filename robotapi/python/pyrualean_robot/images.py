"""Image helpers every layer may use (a leaf module: numpy, Pillow and IPython only, nothing of this package):
PNG encoding and showing a PNG in the running IPython cell's output."""

from __future__ import annotations

import io
from typing import Any

import numpy as np


def png_bytes(img: Any) -> bytes:
    """Encode an (H, W, 3|4) uint8 or (H, W) array as PNG (other dtypes are scaled to 0..255)."""
    from PIL import Image

    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
        arr = np.nan_to_num((arr - lo) / (hi - lo + 1e-9) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def ipython() -> Any:
    """The running IPython shell, or None (plain Python, pytest)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is in base.txt
        return None
    return get_ipython()


def display_png(png: bytes, meta: dict) -> bool:
    """Show a PNG in the current cell's output, as display_data with metadata {"pyrualean": meta}.
    Returns False (and shows nothing) outside IPython, so the caller can keep the image instead."""
    if ipython() is None:
        return False
    from IPython.display import display as ipy_display

    ipy_display({"image/png": png}, raw=True, metadata={"image/png": {}, "pyrualean": meta})
    return True
