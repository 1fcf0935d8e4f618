"""Resume a Jupyter kernel WebSocket with Python's websocket-client, as many Jupyter tools do.

Run by gateway/reconnect_py_test.go against a real gateway (directly, or through jupyter_server in
gateway mode): execute a cell that prints N lines, read for a while, leave (a clean close, or the socket
shut down under the client), reconnect with the same session_id and read until the cell's idle status.
Two client styles: "recv" (a plain create_connection/recv loop) and "app" (WebSocketApp.run_forever on a
thread, closed from the main thread, as jupyter-kernel-client does). Prints one JSON object: the
stream text received (deduplicated by message id, in order), and how many frames came twice.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field

import websocket  # websocket-client


@dataclass(frozen=True)
class Outcome:
    """What one trial received."""

    text: str
    repeats: int
    repeats_are_tail: bool  # what came twice opened the resumed stream and is the tail read before the leave
    frames_before: int
    frames_after: int


@dataclass
class _Collector:
    """Keeps the cell's messages, first copy of each, in order."""

    msg_id: str
    seen: set[str] = field(default_factory=set)
    order: list[list[str]] = field(default_factory=lambda: [[], []])  # message ids per phase, as they came
    text: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=lambda: [0, 0])
    repeats: int = 0
    phase: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def take(self, raw: str | bytes) -> bool:
        """Records one frame; True once the cell's idle status arrived."""
        m = json.loads(raw)
        if m.get("parent_header", {}).get("msg_id") != self.msg_id:
            return self.done.is_set()
        self.counts[self.phase] += 1
        mid = m["header"]["msg_id"]
        self.order[self.phase].append(mid)
        if mid in self.seen:
            self.repeats += 1
            return self.done.is_set()
        self.seen.add(mid)
        if m["msg_type"] == "stream":
            self.text.append(m["content"]["text"])
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            self.done.set()
        return self.done.is_set()

    def repeats_are_tail(self) -> bool:
        """Whether every repeat came first after the resume and is the tail of what came before it."""
        before, after = self.order
        k = 0
        while k < len(after) and after[k] in before:
            k += 1
        return k == self.repeats and (k == 0 or after[:k] == before[-k:])


def _request(session: str, lines: int) -> tuple[str, str]:
    """An execute_request (legacy JSON wire format) for a paced cell printing lines, and its msg_id."""
    # Paced (about 1.5 s in all) so the leave falls mid-output, as in a long-running cell.
    code = (f"import sys, time\nfor i in range({lines}):\n    print(i)\n"
            "    if i % 10 == 9:\n        sys.stdout.flush()\n        time.sleep(0.005)\n")
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "session": session, "username": "t",
              "date": "2026-01-01T00:00:00Z", "version": "5.3"}
    return json.dumps({"channel": "shell", "header": header, "parent_header": {}, "metadata": {},
                       "content": {"code": code, "silent": False, "store_history": True,
                                   "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                       "buffers": []}), msg_id


def _leave(ws: websocket.WebSocket, mode: str) -> None:
    if mode == "clean":
        ws.close()
    else:
        ws.sock.shutdown(socket.SHUT_RDWR)
        ws.sock.close()


def run_recv(url: str, req: str, col: _Collector, mode: str, read_for: float) -> None:
    """A plain recv loop: read by the clock, leave, reconnect and read to the end."""
    ws = websocket.create_connection(url, timeout=60)
    ws.send(req)
    until = time.monotonic() + read_for
    while not col.done.is_set() and time.monotonic() < until:
        col.take(ws.recv())
    _leave(ws, mode)
    if not col.done.is_set():
        col.phase = 1
        ws = websocket.create_connection(url, timeout=60)
        while not col.take(ws.recv()):
            pass
        ws.close()


def run_app(url: str, req: str, col: _Collector, mode: str, read_for: float) -> None:
    """WebSocketApp on a thread, left from the main thread, then a second app to read to the end."""
    first = [True]

    def on_open(app: websocket.WebSocketApp) -> None:
        if first[0]:
            first[0] = False
            app.send(req)

    def start() -> tuple[websocket.WebSocketApp, threading.Thread]:
        app = websocket.WebSocketApp(url, on_open=on_open, on_message=lambda _a, raw: col.take(raw))
        th = threading.Thread(target=app.run_forever, daemon=True)
        th.start()
        return app, th

    app, th = start()
    col.done.wait(read_for)
    if mode == "clean":
        app.close(timeout=1)  # the run_forever thread may read the server's close frame first
    elif app.sock is not None and app.sock.sock is not None:
        app.sock.sock.shutdown(socket.SHUT_RDWR)
    th.join(2)
    if not col.done.is_set():
        col.phase = 1
        app, th = start()
        col.done.wait(60)
        app.close(timeout=1)
        th.join(1)  # its thread may linger after close (a daemon: it goes with the process)


def main(url: str, style: str, mode: str, read_for: float, lines: int) -> Outcome:
    """One trial."""
    session = url.split("session_id=")[1].split("&")[0]
    req, msg_id = _request(session, lines)
    col = _Collector(msg_id)
    (run_app if style == "app" else run_recv)(url, req, col, mode, read_for)
    return Outcome(text="".join(col.text), repeats=col.repeats, repeats_are_tail=col.repeats_are_tail(),
                   frames_before=col.counts[0], frames_after=col.counts[1])


if __name__ == "__main__":
    out = main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
    print(json.dumps(asdict(out)))
