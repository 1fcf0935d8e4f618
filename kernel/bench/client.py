"""Benchmark peers for `pyrualean bench kernel`.

Runs one client against a running kernel (given its connection file) and times cells on request:
reads one JSON line {"code": ...} per cell from stdin and answers {"ms": ..., "status": ..., "outputs": N}.
A cell is done when both its execute_reply and its status: idle have arrived, as for our Go client.

    python client.py jupyter_client|floor CONNECTION_FILE
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable


Runner = tuple[Callable[[], None], Callable[[str], tuple[str, int]]]


def jupyter_client_runner(connection_file: str) -> Runner:
    """jupyter_client's BlockingKernelClient, waiting the documented way (execute_interactive)."""
    from jupyter_client import BlockingKernelClient

    kc = BlockingKernelClient(connection_file=connection_file)
    kc.load_connection_file()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)

    def drain() -> None:
        while kc.iopub_channel.msg_ready():
            kc.iopub_channel.get_msg(timeout=0)

    def run(code: str) -> tuple[str, int]:
        outputs: list[dict[str, Any]] = []
        reply = kc.execute_interactive(code, output_hook=outputs.append, timeout=120)
        return reply["content"]["status"], len(outputs)

    return drain, run


def floor_runner(connection_file: str) -> Runner:
    """A minimal raw pyzmq client: sign, send, poll shell+iopub, verify and parse, nothing else."""
    import zmq

    cfg = json.load(open(connection_file))
    key = cfg["key"].encode()
    session = uuid.uuid4().hex
    ctx = zmq.Context()
    base = f"{cfg['transport']}://{cfg['ip']}:"
    shell = ctx.socket(zmq.DEALER)
    shell.setsockopt(zmq.IDENTITY, session.encode())
    shell.connect(base + str(cfg["shell_port"]))
    iopub = ctx.socket(zmq.SUB)
    iopub.setsockopt(zmq.SUBSCRIBE, b"")
    iopub.connect(base + str(cfg["iopub_port"]))

    def sign(parts: list[bytes]) -> bytes:
        h = hmac.new(key, digestmod=hashlib.sha256)
        for p in parts:
            h.update(p)
        return h.hexdigest().encode()

    def send(msg_type: str, content: dict[str, Any]) -> str:
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": msg_type, "session": session, "username": "floor",
                  "date": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"), "version": "5.4"}
        parts = [json.dumps(x).encode() for x in (header, {}, {}, content)]
        shell.send_multipart([b"<IDS|MSG>", sign(parts), *parts])
        return msg_id

    def recv(sock: Any) -> tuple[dict[str, Any], str, dict[str, Any]]:
        frames = sock.recv_multipart()
        i = frames.index(b"<IDS|MSG>")
        parts = frames[i + 2:i + 6]
        if not hmac.compare_digest(frames[i + 1], sign(parts)):
            raise ValueError("bad signature")
        header, parent, _, content = (json.loads(p) for p in parts)
        return header, parent.get("msg_id", ""), content

    poller = zmq.Poller()
    poller.register(shell, zmq.POLLIN)
    poller.register(iopub, zmq.POLLIN)

    def wait(msg_id: str, want_iopub: Callable[[dict[str, Any], dict[str, Any]], bool], timeout: float) -> bool:
        replied = got_iopub = False
        deadline = time.monotonic() + timeout
        while not (replied and got_iopub):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for sock, _ in poller.poll(left * 1000):
                header, parent, content = recv(sock)
                if sock is shell and parent == msg_id:
                    replied = True
                elif sock is iopub and want_iopub(header, content) and (parent == msg_id or not parent):
                    got_iopub = True
        return True

    # readiness: nudge kernel_info until a reply and any iopub message have arrived
    while not wait(send("kernel_info_request", {}), lambda h, c: True, 0.5):
        pass

    def drain() -> None:
        while iopub.poll(0):
            iopub.recv_multipart()

    def run(code: str) -> tuple[str, int]:
        msg_id = send("execute_request", {"code": code, "silent": False, "store_history": True,
                                          "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        status, n, replied, idle = "", 0, False, False
        while not (replied and idle):
            for sock, _ in poller.poll():
                header, parent, content = recv(sock)
                if parent != msg_id:
                    continue
                if sock is shell:
                    replied, status = True, content["status"]
                elif header["msg_type"] == "status":
                    idle = content["execution_state"] == "idle"
                elif header["msg_type"] in ("stream", "display_data", "execute_result", "error"):
                    n += 1
        return status, n

    return drain, run


def main() -> None:
    mode, connection_file = sys.argv[1], sys.argv[2]
    drain, run = {"jupyter_client": jupyter_client_runner, "floor": floor_runner}[mode](connection_file)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        code = json.loads(line)["code"]
        drain()  # other clients' messages when the kernel is shared: not part of this cell's time
        t0 = time.perf_counter()
        status, n = run(code)
        ms = (time.perf_counter() - t0) * 1000
        print(json.dumps({"ms": ms, "status": status, "outputs": n}), flush=True)


if __name__ == "__main__":
    main()
