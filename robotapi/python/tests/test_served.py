"""Served robots: the proxy is generated from the robot class (same API reference), values cross as JSON,
and the robot server serves the public API only (the judge's numbers stay on the host socket)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from pyrualean_robot import results
from pyrualean_robot.apiref import api_reference, tool_schemas
from pyrualean_robot.errors import EpisodeFinished, ToolError
from pyrualean_robot.robots import REGISTRY, RobotUnavailable, robot_class
from pyrualean_robot.robots.rpent import EnvServerClient
from pyrualean_robot.served import connect, proxy_class
from pyrualean_robot.served.proxy import rebuild_exception
from pyrualean_robot.served.wire import from_wire, result_types, to_json, to_wire


def _classes():
    out = []
    for name in REGISTRY:
        try:
            out.append(robot_class(name))
        except RobotUnavailable:
            continue  # an adapter whose dependencies this install lacks
    return out


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.NAME)
def test_proxy_reference_is_the_robots(cls):
    proxy = proxy_class(cls)
    assert proxy.__name__ == cls.__name__ and proxy.__doc__ == cls.__doc__
    for primitives in ("full", "no-vla"):
        assert api_reference(proxy, primitives=primitives) == api_reference(cls, primitives=primitives)
        assert tool_schemas(proxy, primitives=primitives) == tool_schemas(cls, primitives=primitives)


def test_tabletop_is_registered():
    assert "tabletop" in [c.NAME for c in _classes()]


def test_wire_round_trip():
    types = result_types(robot_class("tabletop"))
    seg = results.Segment(found=True, name="red_block", world_xyz=(0.5, 0.1, 0.02), top_xyz=None, n_pixels=3,
                          box=(1, 2, 3, 4), camera="agentview", step=7)
    got = from_wire(to_wire({"seg": seg, "img": np.arange(12, dtype=np.uint8).reshape(2, 2, 3), "png": b"\x89PNG"}),
                    types)
    assert got["seg"] == seg and isinstance(got["seg"].box, tuple)
    assert got["img"].dtype == np.uint8 and got["img"].shape == (2, 2, 3)
    assert got["png"] == b"\x89PNG"
    assert to_json(seg)["world_xyz"] == [0.5, 0.1, 0.02]
    # an unknown type name stays data: the proxy never imports what the wire names
    assert from_wire({"__dataclass__": "os.system", "fields": {"a": 1}}, types) == {"a": 1}


def test_exceptions_cross_as_themselves():
    e = rebuild_exception({"type": "EpisodeFinished", "reason": "truncated"})
    assert isinstance(e, EpisodeFinished) and e.reason == "truncated"
    t = rebuild_exception({"type": "ToolError", "tool": "render", "tool_message": "no GL"})
    assert isinstance(t, ToolError) and t.tool == "render" and t.message == "no GL"
    assert isinstance(rebuild_exception({"type": "ValueError", "message": "bad"}), ValueError)
    assert type(rebuild_exception({"type": "SystemExit", "message": "x"})) is RuntimeError


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("served")
    agent, host = str(d / "a.sock"), str(d / "h.sock")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "pyrualean_robot.served", "--robot", "tabletop", "--task",
                             "stack_blocks", "--seed", "0", "--workspace", str(d / "robot"), "--images", "none",
                             "--agent-socket", agent, "--host-socket", host],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdout.readline().strip() == b"ready"
    yield agent, host, d
    proc.stdin.close()
    proc.wait(30)


def test_served_primitives_and_judge(server, tmp_path):
    agent, host, d = server
    robo = connect(agent, workspace=str(tmp_path))
    judge = EnvServerClient("unix://" + host)
    judge.call("host.report")  # start a fresh window
    m = robo.move_to([0.5, 0.1, 0.3])
    assert isinstance(m, results.Move) and m.reached and robo.env_steps >= m.steps_used
    with pytest.raises(ValueError, match="outside the workspace"):
        robo.move_to([5, 5, 5])  # validated in the server, raised here as itself
    raised = robo._client.call("robot.call", "_mark_terminated", [], {})["raised"]
    assert raised["type"] == "AttributeError"
    with pytest.raises(ToolError):
        robo._client.call("robot.get", "_sim")
    rep = judge.call("host.report")
    assert [c["tool"] for c in rep["calls"]] == ["move_to", "move_to"] and rep["success"] is False
    assert rep["refused"] == ["robot.call _mark_terminated", "robot.get _sim"]
    assert rep["env_steps"] == m.steps_used
    # the ledger is the server's file, not the kernel workspace's
    assert (d / "robot" / "calls.jsonl").read_text().count("move_to") == 2
    assert not (tmp_path / "calls.jsonl").exists()


def test_make_returns_the_proxy_and_checks_the_episode(server, tmp_path, monkeypatch):
    from pyrualean_robot import make

    agent, _, _ = server
    monkeypatch.setenv("PYRUALEAN_ROBOT_SERVER", agent)
    robo = make("tabletop", task="stack_blocks", seed=0, workspace=str(tmp_path), images="none")
    assert type(robo).__name__ == "TabletopRobot" and not hasattr(robo, "_sim")
    with pytest.raises(ValueError, match="another episode"):
        make("tabletop", task="stack_blocks", seed=3, workspace=str(tmp_path), images="none")


def test_unix_transport_keeps_one_connection(server):
    agent, _, _ = server
    c = EnvServerClient("unix://" + agent)
    c.call("healthz")
    first = c._conn
    for _ in range(5):
        assert c.call("healthz") == {"status": "ok"}
    assert c._conn is first  # kept alive, not reconnected per call


def test_binary_reply_round_trip_and_malformed():
    from pyrualean_robot.robots.rpent import decode_buffers, encode_buffers

    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    depth = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    body = encode_buffers({"ok": True, "result": {"img": img, "d": [depth, np.int64(4)], "s": "x"}})
    got = decode_buffers(body)["result"]
    assert np.array_equal(got["img"], img) and np.array_equal(got["d"][0], depth) and got["d"][1] == 4
    with pytest.raises(ValueError):
        decode_buffers(body[:-1])  # truncated
    with pytest.raises(ValueError):
        decode_buffers(b"\x00\x00")


# --- the forker: what a peer on its socket may ask ---------------------------------------------------------

from pyrualean_robot.served.forker import RequestError, parse_request  # noqa: E402

_PINNED = {"PYTHONPATH": "/repo/robotapi/python", "MUJOCO_GL": "egl"}
_LIMITS = {"as": 1 << 34, "nofile": 4096, "fsize": 1 << 30, "cpu": 14400}


def _request(**over):
    import json

    req = {"argv": ["--robot", "tabletop"], "env": dict(_PINNED, HOME="/root"), "cwd": "/tmp", "limits": dict(_LIMITS)}
    req.update(over)
    return json.dumps(req).encode()


@pytest.mark.parametrize("msg, fds, why", [
    (_request(), [3, 4], "3 file descriptors"),
    (b"not json", [3, 4, 5], "not JSON"),
    (b"[1, 2]", [3, 4, 5], "JSON object"),
    (_request(shell="rm -rf /"), [3, 4, 5], "unknown request fields"),
    (_request(argv=[]), [3, 4, 5], "argv"),
    (_request(argv=["a\x00b"]), [3, 4, 5], "NUL"),
    (_request(env={"A=B": "x", **_PINNED}), [3, 4, 5], "variable name"),
    (_request(env={"PYTHONPATH": "/evil", "MUJOCO_GL": "egl"}), [3, 4, 5], "PYTHONPATH"),
    (_request(env={"PYTHONPATH": _PINNED["PYTHONPATH"]}), [3, 4, 5], "MUJOCO_GL"),
    (_request(cwd="relative"), [3, 4, 5], "absolute"),
    (_request(cwd="/no/such/folder"), [3, 4, 5], "folder"),
    (_request(limits={"as": 1}), [3, 4, 5], "limits must name"),
    (_request(limits=dict(_LIMITS, cpu=0)), [3, 4, 5], "positive"),
    (_request(limits=dict(_LIMITS, cpu=True)), [3, 4, 5], "positive"),
])
def test_forker_refuses_bad_requests(msg, fds, why):
    with pytest.raises(RequestError, match=why):
        parse_request(msg, fds, _PINNED)


def test_forker_request_ok():
    req = parse_request(_request(), [7, 8, 9], _PINNED)
    assert req.argv == ("--robot", "tabletop") and req.fds == (7, 8, 9) and req.cwd == "/tmp"
    assert req.env["HOME"] == "/root" and req.limits == _LIMITS
