"""RPent env RPC (both transports), env-server discovery and errors, shared by the remote robots."""

from __future__ import annotations

import json
import os
import sys
import urllib.request

import numpy as np
import pytest

from pyrualean_robot import EpisodeFinished, ToolError, make
from pyrualean_robot.robots import RobotUnavailable
from pyrualean_robot.robots.rpent import EnvServerClient, EnvServerUnavailable


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for k in ("PYRUALEAN_ENV_SERVER", "RPENT_ROOT", "PYRUALEAN_RPENT_ENV_CMD"):
        monkeypatch.delenv(k, raising=False)


@pytest.mark.parametrize("robot", ["robotwin", "robocasa"])
def test_without_env_server_the_error_names_what_to_install(robot, tmp_path):
    with pytest.raises(EnvServerUnavailable) as e:
        make(robot, workspace=str(tmp_path))
    msg = str(e.value)
    assert "RPENT_ROOT" in msg and "PYRUALEAN_ENV_SERVER" in msg and "RLinf/RPent" in msg
    assert ("GPU" in msg) if robot == "robotwin" else ("robocasa-download-assets" in msg)


def test_rpent_wire_both_transports_and_arrays():
    """RPent's http_rpc (JSON, __ndarray__ tags) and socket_rpc (length-prefixed pickle) transports."""
    from pyrualean_robot.robots.rpent import RpcServer, decode, encode

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    wire = encode({"x": a})
    assert set(wire["x"]) == {"__ndarray__", "dtype", "shape"} and wire["x"]["dtype"] == "float32"
    assert np.array_equal(decode(wire)["x"], a)
    with pytest.raises(ValueError, match="malformed array"):
        decode({"__ndarray__": "!!", "dtype": "float32", "shape": [2]})
    with pytest.raises(ValueError, match="malformed array"):
        decode({"__ndarray__": "", "dtype": "object", "shape": [0]})
    for transport in ("http", "socket"):
        srv = RpcServer({"env.echo": lambda x, *, k=1: {"x": x * k, "dtype": str(x.dtype)}}, transport=transport)
        try:
            c = EnvServerClient(srv.url)
            out = c.call("env.echo", a, k=2)
            assert np.array_equal(out["x"], a * 2) and out["dtype"] == "float32", transport
            with pytest.raises(ToolError, match="unknown RPC method"):
                c.call("env.nope")
            assert c.call("healthz") == {"status": "ok"}
        finally:
            srv.close()
    with pytest.raises(ValueError, match="http://host:port or socket://host:port"):
        EnvServerClient("ftp://x:1")


def test_env_server_errors_are_clear_and_it_keeps_serving():
    from pyrualean_robot.robots.rpent import RpcServer

    def step(action):
        if len(action) != 16:
            raise ValueError(f"ee action must be 16 numbers, got {len(action)}")
        return [{}, 0.0, False, False, {}]

    server = RpcServer({"env.step": step, "env.get_env_meta": lambda: {"runtime": "x"}})
    client = EnvServerClient(server.url)
    with pytest.raises(ToolError, match="unknown RPC method") as e:
        client.call("env.teleport")
    assert "Traceback" in e.value.payload["traceback"]
    with pytest.raises(ToolError, match="16 numbers"):
        client.call("env.step", [0, 1])
    req = urllib.request.Request(server.url + "/call", data=b"{not json", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:  # RPent's envelope: always 200, ok false inside
        reply = json.loads(resp.read())
    assert resp.status == 200 and reply["ok"] is False and "Expecting property name" in reply["error"]
    assert client.call("healthz") == {"status": "ok"}
    assert client.call("env.get_env_meta") == {"runtime": "x"}  # still serving
    server.close()
    dead = EnvServerClient("http://127.0.0.1:9")
    with pytest.raises(ToolError, match="unreachable, timed out or gone mid-reply"):
        dead.call("env.reset", timeout_s=2)


def test_registry_names_and_tasks_need_no_server():
    from pyrualean_robot.robots import robot_class

    assert robot_class("robotwin").NAME == "robotwin" and robot_class("robocasa").NAME == "robocasa"
    assert len(robot_class("robotwin").tasks()) == 50
    assert any(t.name == "PickPlaceCounterToCabinet" for t in robot_class("robocasa").tasks())
    assert issubclass(RobotUnavailable, RuntimeError)




def test_bounded_server_refuses_big_bodies_and_extra_connections(tmp_path):
    """max_body and max_connections (a served robot's agent socket): past either the caller gets an error
    envelope saying why, the server holds no thread or memory for it, and it keeps serving."""
    import socket
    import threading

    from pyrualean_robot.robots.rpent import RpcServer

    path = str(tmp_path / "r.sock")
    srv = RpcServer({"env.echo": lambda x: x}, transport="unix", path=path, max_body=1024, max_connections=3)
    try:
        c = EnvServerClient("unix://" + path)
        assert c.call("env.echo", "ok") == "ok"
        # a raw client: refused unread, told why, the connection closed
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
            s.sendall(b"POST /call HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
            s.settimeout(5)
            raw = b""
            while chunk := s.recv(65536):
                raw += chunk
        assert b"request body of 100000000 bytes refused" in raw and b"Connection: close" in raw
        # our client checks first once it knows the bound (the proxy learns it from describe)
        c.max_body = 1024
        with pytest.raises(ToolError, match="refused: the server takes at most 1024 bytes"):
            c.call("env.echo", "x" * 2000)
        # connections: c holds one; two more are served, the rest answered 503 and closed at once
        held = [socket.socket(socket.AF_UNIX) for _ in range(10)]
        for s in held:
            s.connect(path)
        replies = []
        for s in held:
            s.settimeout(0.5)
            try:
                replies.append(s.recv(4096))
            except TimeoutError:
                replies.append(b"")  # served: waiting for a request
        refused = [r for r in replies if b"503" in r]
        assert len(refused) == 8 and b"already serves 3 connections" in refused[0]
        assert threading.active_count() < 20
        with pytest.raises(ToolError, match="already serves 3 connections"):
            EnvServerClient("unix://" + path).call("healthz")
        assert c.call("env.echo", "still") == "still"  # the kept-alive connection is served
        for s in held:
            s.close()
        for _ in range(50):  # the held connections' threads end as they close
            try:
                assert EnvServerClient("unix://" + path).call("healthz") == {"status": "ok"}
                break
            except ToolError:
                import time

                time.sleep(0.05)
        else:
            raise AssertionError("the server did not take connections again after the flood closed")
    finally:
        srv.close()
