"""The pyrualean gateway this Jupyter Server runs against (``--gateway-url``), as the extension talks to
it: short REST calls (episodes, actions, trace) and a kernel's channels WebSocket."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect


class GatewayGone(Exception):
    """The gateway did not answer (the episode and its linger are over, or it never ran)."""


@dataclass(frozen=True)
class Answer:
    """A gateway answer: HTTP status and the decoded JSON body (None when not JSON)."""

    status: int
    body: Any


class Gateway:
    """REST and channels of one gateway, with the Jupyter Server's own GatewayClient settings."""

    def __init__(self, url: str, headers: dict[str, str], ws_url: Optional[str] = None) -> None:
        self.url = url.rstrip("/")
        self.ws = (ws_url or ("ws" + self.url[len("http"):] if self.url.startswith("http") else self.url)).rstrip("/")
        self.headers = dict(headers)

    @classmethod
    def from_server(cls) -> Optional["Gateway"]:
        """The gateway of this server's GatewayClient, or None when the server runs its own kernels."""
        from jupyter_server.gateway.gateway_client import GatewayClient

        gc = GatewayClient.instance()
        if not gc.gateway_enabled:
            return None
        args = gc.load_connection_args()
        headers = {k: str(v) for k, v in (args.get("headers") or {}).items()}
        return cls(gc.url, headers, gc.ws_url or None)

    async def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Answer:
        """One REST call; raises GatewayGone when the gateway cannot be reached."""
        req = HTTPRequest(self.url + path, method=method, headers=self.headers,
                          body=None if body is None and method == "GET" else json.dumps(body or {}),
                          connect_timeout=3.0, request_timeout=timeout)
        try:
            resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        except OSError as e:
            raise GatewayGone(f"gateway {self.url} unreachable: {e}") from e
        if resp.code == 599:  # tornado's "no HTTP answer" (refused, timed out)
            raise GatewayGone(f"gateway {self.url} unreachable: {resp.error}")
        try:
            data = json.loads(resp.body) if resp.body else None
        except ValueError:
            data = None
        return Answer(resp.code, data)

    async def channels(self, kernel_id: str, session_id: str) -> WebSocketClientConnection:
        """The kernel's channels WebSocket (legacy JSON frames), as a client of session ``session_id``:
        reconnecting with the same id resumes where the gateway's acknowledgements stopped."""
        url = f"{self.ws}/api/kernels/{quote(kernel_id)}/channels?session_id={quote(session_id)}"
        req = HTTPRequest(url, headers=self.headers, connect_timeout=5.0, request_timeout=30.0)
        try:
            return await websocket_connect(req, max_message_size=64 << 20)
        except OSError as e:
            raise GatewayGone(f"gateway {self.url} unreachable: {e}") from e
