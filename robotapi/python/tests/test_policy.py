import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from pyrualean_robot import ToolError


class VLA(BaseHTTPRequestHandler):
    """A scripted VLA server: moves +x for a chunk, then says done."""
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        VLA.seen.append(body)
        reply = {"actions": [[0.01, 0.0, -0.005, 0.0, -1.0]] * 4, "done": len(VLA.seen) >= 2}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture
def vla_url():
    VLA.seen = []
    srv = HTTPServer(("127.0.0.1", 0), VLA)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}/act"
    srv.shutdown()
    srv.server_close()


def test_policy_calls_the_endpoint(make_robot, vla_url):
    r = make_robot(vla_endpoint=vla_url)
    x0 = r.state().eef_pos[0]
    res = r.policy("push forward", max_chunks=5)
    assert res.chunks_used == 2 and res.steps_used == 8
    assert r.state().eef_pos[0] > x0 + 0.05
    first = VLA.seen[0]
    assert first["instruction"] == "push forward" and set(first["images"]) == {"agentview", "wrist"}
    assert first["state"]["step"] == 0
    pol = [c for c in r.ledger if c["tool"] == "policy"]
    assert len(pol) == 1 and pol[0]["ok"] and pol[0]["env_steps"] == 8


def test_policy_without_endpoint_is_a_clear_error(make_robot, monkeypatch):
    monkeypatch.delenv("PYRUALEAN_VLA_ENDPOINT", raising=False)
    r = make_robot()
    with pytest.raises(ToolError, match="no VLA endpoint configured"):
        r.policy()
    assert r.env_steps == 0


def test_policy_unreachable_endpoint(make_robot):
    r = make_robot(vla_endpoint="http://127.0.0.1:9/act")
    with pytest.raises(ToolError, match="failed"):
        r.policy(timeout_s=2)


def test_policy_refused_under_no_vla(make_robot, vla_url):
    r = make_robot(vla_endpoint=vla_url, primitives="no-vla")
    with pytest.raises(RuntimeError, match="not available in this run"):
        r.policy()
    assert VLA.seen == []
