"""Standalone XPolicyLab-compatible WebSocket policy server for this policy dir (what XPolicyLab's
``client_server/ws/model_server.py`` does, for machines without XPolicyLab: tests, a laptop).

    python serve.py --config_path deploy.yml [--host 127.0.0.1] [--port 19000]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import os
import sys
import time
from typing import Any, Optional

import yaml
from websockets.asyncio.server import serve as ws_serve

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xpl_protocol as xp  # noqa: E402

log = logging.getLogger("pyrualean.robodojo")


class PolicyServer:
    """Dispatches XPolicyLab frames to a Model: hello, prepare_case, reset, infer (update_obs + get_action),
    trial_end, heartbeat, close. Errors reply with an ``error`` frame {code, message, details}; the
    connection keeps serving."""

    def __init__(self, model: Any, host: str = "127.0.0.1", port: int = 19000):
        self.model, self.host, self.port = model, host, port
        self._lock = asyncio.Lock()
        self._server: Any = None

    async def start(self) -> str:
        self._server = await ws_serve(self._conn, self.host, self.port, max_size=None)
        self.port = self._server.sockets[0].getsockname()[1]
        return f"ws://{self.host}:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _conn(self, ws: Any) -> None:
        async for raw in ws:
            if not isinstance(raw, (bytes, bytearray)):
                await ws.send(xp.encode(xp.frame("error", payload={"code": "invalid_frame",
                                                                   "message": "frames are binary msgpack", "details": {}})))
                continue
            try:
                req = xp.decode(bytes(raw))
            except xp.ProtocolError as e:
                await ws.send(xp.encode(xp.frame("error", payload={"code": e.code, "message": str(e), "details": {}})))
                continue
            if req["message_type"] == "close":
                await ws.close()
                return
            resp = await self._dispatch(req)
            await ws.send(xp.encode(resp))

    async def _call(self, fn: Any, *args: Any) -> Any:
        async with self._lock:
            out = await asyncio.to_thread(fn, *args)
            return await out if inspect.isawaitable(out) else out

    async def _dispatch(self, req: dict) -> dict:
        t = req["message_type"]
        p = req.get("payload") or {}
        try:
            if t == "hello":
                return xp.reply(req, "hello_ack", {"ok": True, "server": "pyrualean_policy_server"})
            if t == "heartbeat":
                return xp.reply(req, "heartbeat_ack", {"ok": True})
            if t == "prepare_case":
                hook = getattr(self.model, "prepare_case", None)
                res = await self._call(hook, dict(p)) if callable(hook) else None
                return xp.reply(req, "prepare_case_ack", {"ok": True, **({"result": res} if res is not None else {})})
            if t == "reset":
                res = await self._call(self.model.reset)
                return xp.reply(req, "reset_result", {"ok": True, **({"result": res} if res is not None else {})})
            if t == "infer":
                obs = p.get("observation")
                if obs is None:
                    raise xp.ProtocolError("invalid_frame", "infer payload missing observation")
                start = time.perf_counter()

                def run() -> Any:
                    self.model.update_obs(obs)
                    return self.model.get_action()

                try:
                    actions = await self._call(run)
                except Exception as e:
                    raise xp.ProtocolError("infer_failed", f"{type(e).__name__}: {e}") from e
                return xp.reply(req, "infer_result", {"actions": actions,
                                                      "latency_ms": (time.perf_counter() - start) * 1000})
            if t == "trial_end":
                hook = getattr(self.model, "on_trial_end", None)
                res = await self._call(hook, dict(p)) if callable(hook) else None
                return xp.reply(req, "trial_end_ack", {"ok": True, **({"result": res} if res is not None else {})})
            raise xp.ProtocolError("unknown_message_type", f"unsupported request type: {t}")
        except xp.ProtocolError as e:
            return xp.reply(req, "error", {"code": e.code, "message": str(e), "details": {}})
        except Exception as e:  # reset failures etc.: say what happened, keep serving
            code = "reset_failed" if t == "reset" else "internal"
            return xp.reply(req, "error", {"code": code, "message": f"{type(e).__name__}: {e}", "details": {}})


def load_model(cfg: dict) -> Any:
    from model import Model  # this directory's model.py

    return Model(cfg)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config-path", "--config_path", dest="config_path", required=True)
    ap.add_argument("--host")
    ap.add_argument("--port", type=int)
    ap.add_argument("--overrides", nargs="*", default=[], help="key=value pairs over deploy.yml")
    a = ap.parse_args(argv)
    with open(a.config_path, encoding="utf-8") as f:
        cfg = yaml.safe_load(f) or {}
    for kv in a.overrides:
        k, _, v = kv.partition("=")
        cfg[k] = yaml.safe_load(v)
    host = a.host or cfg.get("policy_server_host", "127.0.0.1")
    port = a.port if a.port is not None else int(cfg.get("policy_server_port", 19000))
    model = load_model(cfg)
    server = PolicyServer(model, host, port)

    async def run() -> None:
        url = await server.start()
        print(f"pyrualean policy server on {url}", flush=True)
        await asyncio.Future()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    finally:
        getattr(model, "close", lambda: None)()
    return 0


if __name__ == "__main__":
    sys.exit(main())
