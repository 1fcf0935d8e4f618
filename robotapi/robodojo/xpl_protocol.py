"""XPolicyLab's policy WebSocket protocol, wire-compatible with ``client_server/ws/protocol`` (msgpack maps,
numpy arrays via msgpack_numpy): a frame is ``{message_type, message_id, evaluation_id, action_case_id,
trial_id, repeat_index, step, sent_at, payload}``. Used by serve.py when XPolicyLab itself is not installed
(tests, a standalone policy server) and by the tests' fake RoboDojo eval client."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Optional

import msgpack
import msgpack_numpy
import numpy as np

# message_type -> the reply type (XPolicyLab's REQUEST_RESPONSE_PAIRS)
PAIRS = {"hello": "hello_ack", "prepare_case": "prepare_case_ack", "reset": "reset_result", "call": "call_result",
         "infer": "infer_result", "trial_end": "trial_end_ack", "heartbeat": "heartbeat_ack"}
TYPES = set(PAIRS) | set(PAIRS.values()) | {"close", "error"}
FIELDS = ("message_type", "message_id", "evaluation_id", "action_case_id", "trial_id", "repeat_index", "step",
          "sent_at", "payload")


class ProtocolError(ValueError):
    """A frame that is not a valid XPolicyLab envelope; ``code`` is XPolicyLab's ErrorCode value."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def _enc(obj: Any) -> Any:
    if isinstance(obj, np.ndarray) and obj.dtype.kind == "O":
        raise ProtocolError("invalid_frame", "object dtype numpy arrays are not supported")
    return msgpack_numpy.encode(obj)


def _dec(obj: dict) -> Any:
    if obj.get(b"nd") is True and obj.get(b"kind") == b"O":
        raise ValueError("object dtype numpy arrays are not supported")
    out = msgpack_numpy.decode(obj)
    if isinstance(out, dict) and not all(isinstance(k, str) for k in out):
        out = {(str(k) if isinstance(k, int) and not isinstance(k, bool) else k): v for k, v in out.items()}
    return out


def frame(message_type: str, *, evaluation_id: str = "pyrualean", payload: Optional[dict] = None,
          message_id: Optional[str] = None, action_case_id: Optional[str] = None, trial_id: Optional[str] = None,
          repeat_index: Optional[int] = None, step: int = 0) -> dict:
    return {"message_type": message_type, "message_id": message_id or str(uuid.uuid4()),
            "evaluation_id": evaluation_id, "action_case_id": action_case_id, "trial_id": trial_id,
            "repeat_index": repeat_index, "step": step, "sent_at": datetime.now(timezone.utc).isoformat(),
            "payload": payload or {}}


def reply(req: dict, message_type: str, payload: Optional[dict] = None) -> dict:
    return frame(message_type, evaluation_id=req.get("evaluation_id") or "", payload=payload,
                 message_id=req.get("message_id"), action_case_id=req.get("action_case_id"),
                 trial_id=req.get("trial_id"), repeat_index=req.get("repeat_index"), step=int(req.get("step") or 0))


def encode(f: dict) -> bytes:
    try:
        return msgpack.packb(f, default=_enc, use_bin_type=True)
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError("invalid_frame", f"msgpack encode failed: {e}") from e


def decode(data: bytes) -> dict:
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False, object_hook=_dec)
    except Exception as e:
        raise ProtocolError("invalid_frame", f"msgpack decode failed: {e}") from e
    if not isinstance(obj, dict):
        raise ProtocolError("invalid_frame", "frame must be a msgpack map")
    for key in ("message_type", "message_id", "evaluation_id"):
        if obj.get(key) is None:
            raise ProtocolError("invalid_frame", f"missing {key}")
    if obj["message_type"] not in TYPES:
        raise ProtocolError("invalid_frame", f"unknown message_type: {obj['message_type']!r}")
    if not isinstance(obj.get("payload") or {}, dict):
        raise ProtocolError("invalid_frame", "payload must be a map")
    obj.setdefault("payload", {})
    return obj
