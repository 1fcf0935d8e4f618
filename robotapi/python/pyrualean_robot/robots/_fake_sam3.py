"""A stand-in for RPent's SAM 3 server (``robots/libero/sam3_server.py``), for tests without a GPU.

It serves ``sam3.segment`` over RPent's RPC wire (either transport) and checks each request as RPent's
``SegmentRequest`` does (base64 PNG image, exactly one of a non-empty ``text_prompt`` or a 2-int ``point``
inside the image, ``min_score`` in [0, 1]). It answers from masks it was given, by prompt, instead of a
model: the point prompt returns the given mask under that pixel. Replies have RPent's shape (found, score,
box [x0, y0, x1, y1], mask_png_base64, mask_shape, or reason), ``None`` fields left out."""

from __future__ import annotations

import base64
import io
import threading
from typing import Any, Optional

import numpy as np

from .rpent import RpcServer


def _mask_png(mask: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(mask, dtype=np.uint8) * 255).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


class FakeSam3:
    """``segment(image_base64, *, text_prompt=None, point=None, min_score=0.2)`` answered from `masks`
    (prompt -> boolean mask of the image's shape) with score `score`; every request is kept in `requests`."""

    def __init__(self, masks: dict[str, np.ndarray], *, score: float = 0.9):
        self.masks = {k: np.asarray(v, dtype=bool) for k, v in masks.items()}
        self.score = float(score)
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    def segment(self, image_base64: Any = None, *, text_prompt: Optional[str] = None, point: Any = None,
                min_score: float = 0.2) -> dict:
        from PIL import Image

        if not isinstance(image_base64, str) or not image_base64:
            raise ValueError("image_base64 is empty")
        has_text = isinstance(text_prompt, str) and bool(text_prompt.strip())
        if has_text == (point is not None):
            raise ValueError("provide exactly one of text_prompt or point")
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1:
            raise ValueError(f"min_score must be in [0, 1], not {min_score!r}")
        try:
            with Image.open(io.BytesIO(base64.b64decode(image_base64, validate=True))) as src:
                image = np.asarray(src.convert("RGB"))
        except Exception as e:
            raise ValueError(f"invalid image data: {e}") from e
        h, w = image.shape[:2]
        with self._lock:
            self.requests.append({"text_prompt": text_prompt, "point": point, "min_score": min_score,
                                  "image": image})
        if has_text:
            mask = self.masks.get(text_prompt.strip())  # type: ignore[union-attr]
        else:
            if not (isinstance(point, (list, tuple)) and len(point) == 2
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in point)):
                raise ValueError(f"point must be [row, col], not {point!r}")
            row, col = point
            if row < 0 or col < 0 or row >= h or col >= w:
                raise ValueError(f"point [row, col] {point} is outside image shape [{h}, {w}]")
            mask = next((m for m in self.masks.values() if m.shape == (h, w) and m[row, col]), None)
        if mask is None or not mask.any():
            return {"found": False, "reason": "SAM3 returned no candidate"}
        if mask.shape != (h, w):
            raise RuntimeError(f"fake mask {mask.shape} does not fit the {h}x{w} image")
        rows, cols = np.nonzero(mask)
        box = [float(cols.min()), float(rows.min()), float(cols.max()), float(rows.max())]
        if self.score < min_score:
            return {"found": False, "score": self.score, "box": box,
                    "reason": f"top score {self.score:.3f} is below min_score {min_score:.3f}"}
        return {"found": True, "score": self.score, "box": box, "mask_png_base64": _mask_png(mask),
                "mask_shape": [h, w]}


def serve(fake: FakeSam3, *, transport: str = "http", host: str = "127.0.0.1", port: int = 0) -> RpcServer:
    """Serve `fake` as ``sam3.segment`` (RPent's method name) until ``close()``."""
    return RpcServer({"sam3.segment": fake.segment}, host, port, transport=transport)
