"""Client of RPent's SAM 3 server (``robots/libero/sam3_server.py``), so LIBERO's ``segment`` can use the
original's perception instead of the simulator's own masks.

The wire (RPent's RPC, http or socket, see :class:`~pyrualean_robot.robots.rpent.EnvServerClient`): method
``sam3.segment`` with keyword arguments ``image_base64`` (a PNG), exactly one of ``text_prompt`` (words) or
``point`` ([row, col]), and ``min_score`` in [0, 1]. The reply carries ``found``, and as they apply
``score``, ``box`` ([x0, y0, x1, y1] pixels), ``mask_png_base64`` (one 8-bit mask, 255 = object) with
``mask_shape`` [H, W], or ``reason`` when nothing was found. The top-scoring candidate is the only one."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..errors import ToolError
from .rpent import EnvServerClient

METHOD = "sam3.segment"
TIMEOUT_S = 120.0  # RPent's toolkit waits this long for one segmentation


@dataclass(frozen=True)
class Sam3Mask:
    """One SAM 3 answer: found, the top candidate's score and box, its boolean mask (image-sized) or why not."""
    found: bool
    score: Optional[float]
    box: Optional[tuple[float, ...]]
    mask: Optional[np.ndarray]
    reason: Optional[str]


class Sam3Client:
    """Segments PNG images on a SAM 3 server; every transport or protocol failure is ToolError("segment")."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S):
        self._rpc = EnvServerClient(url, timeout_s=timeout_s, tool_name="segment")
        self.url = self._rpc.url

    def segment(self, png: bytes, shape: tuple[int, int], *, text_prompt: Optional[str] = None,
                point: Optional[Sequence[int]] = None, min_score: float = 0.2) -> Sam3Mask:
        """Ask for the mask of `text_prompt` or of the object at `point` in the PNG image of `shape` (H, W)."""
        if (text_prompt is None) == (point is None):
            raise ValueError("SAM 3 takes exactly one of a text prompt or a point")
        kwargs: dict = {"image_base64": base64.b64encode(png).decode("ascii"), "min_score": float(min_score)}
        if text_prompt is not None:
            kwargs["text_prompt"] = text_prompt
        else:
            kwargs["point"] = [int(v) for v in point]  # type: ignore[union-attr]
        reply = self._rpc.call(METHOD, **kwargs)
        if not isinstance(reply, dict) or not isinstance(reply.get("found"), bool):
            raise ToolError("segment", f"{METHOD}: malformed reply from {self.url}: {str(reply)[:200]}")
        score = reply.get("score")
        score = None if score is None else float(score)
        box = reply.get("box")
        box = None if box is None else tuple(float(v) for v in box)
        reason = reply.get("reason")
        if not reply["found"] or not reply.get("mask_png_base64"):
            return Sam3Mask(False, score, box, None, str(reason or "SAM 3 found nothing"))
        try:
            from PIL import Image

            mask = np.asarray(Image.open(io.BytesIO(base64.b64decode(reply["mask_png_base64"]))))
        except Exception as e:  # not a PNG: not RPent's server, or a broken one
            raise ToolError("segment", f"{METHOD}: the mask from {self.url} is not a PNG: {e}") from e
        if mask.ndim == 3:
            mask = mask[..., 0]
        if mask.shape != tuple(shape):
            raise ToolError("segment", f"{METHOD}: SAM 3 mask {mask.shape} does not match the {tuple(shape)} image")
        return Sam3Mask(True, score, box, mask >= 128, None)
