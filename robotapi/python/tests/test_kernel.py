"""The kernel side of the contract, in a real ipykernel (kernelspec `pyrualean`) driven by jupyter_client."""

import base64
import json

import pytest
from jupyter_client.manager import start_new_kernel

# Every test here talks to a real kernel: `make test-fast` deselects them (-m "not heavy").
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    km, kc = start_new_kernel(kernel_name="pyrualean", cwd=str(tmp_path_factory.mktemp("cwd")))
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run(kc, code, sandbox=False, user_expressions=None):
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": user_expressions or {},
               "allow_stdin": False, "stop_on_error": False}
    msg = kc.session.msg("execute_request", content,
                         metadata={"pyrualean": {"sandbox": True, "author": "agent"}} if sandbox else {})
    kc.shell_channel.send(msg)
    mid = msg["header"]["msg_id"]
    outs = []
    while True:
        m = kc.get_iopub_msg(timeout=120)
        if m["parent_header"].get("msg_id") != mid:
            continue
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
        if m["msg_type"] in ("display_data", "execute_result", "error", "stream"):
            outs.append(m)
    while True:
        reply = kc.get_shell_msg(timeout=120)
        if reply["parent_header"].get("msg_id") == mid:
            return outs, reply["content"]


def images(outs):
    return [(o["content"]["metadata"]["pyrualean"], o["content"]["data"]["image/png"])
            for o in outs if o["msg_type"] == "display_data"]


REPORT = {"r": "__import__('pyrualean_robot').cell_report()"}


def report(reply):
    ue = reply["user_expressions"]["r"]
    assert ue["status"] == "ok", ue
    return ue["data"]["application/json"]


def test_episode_in_a_kernel(kernel, tmp_path):
    outs, rep = run(kernel, "from pyrualean_robot import make; "
                            f"robo = make('tabletop', task='put_block_in_bowl', seed=1, workspace={str(tmp_path)!r})")
    assert rep["status"] == "ok", outs
    # show(): PNG display_data immediately, with the contract's metadata
    outs, rep = run(kernel, "robo.show('wrist')", sandbox=True, user_expressions=REPORT)
    imgs = images(outs)
    assert [m for m, _ in imgs] == [{"camera": "wrist", "source": "show"}]
    assert base64.b64decode(imgs[0][1])[1:4] == b"PNG"
    r = report(rep)
    assert r["moved"] is False and [c["tool"] for c in r["calls"]] == ["show"] and r["sandbox_flags"] == []
    # on-motion: a cell that moved gets both cameras after it ran
    outs, rep = run(kernel, "m = robo.move_to([0.5, 0.0, 0.25])\nm.reached", sandbox=True, user_expressions=REPORT)
    assert [m["camera"] for m, _ in images(outs)] == ["agentview", "wrist"]
    assert {m["source"] for m, _ in images(outs)} == {"on-motion"}
    r = report(rep)
    assert r["moved"] and r["env_steps"] > 0 and r["calls"][0]["tool"] == "move_to" and not r["done"]
    # display() of an array
    outs, _ = run(kernel, "import numpy as np\ndisplay(robo.image(resolution=64))", sandbox=True)
    assert [m for m, _ in images(outs)] == [{"camera": "display_0", "source": "display"}]
    # the sandbox refuses and does not run the cell; a person's cell is unrestricted
    outs, rep = run(kernel, "import os\nx_was_run = 1", sandbox=True, user_expressions=REPORT)
    assert rep["status"] == "error" and rep["ename"] == "SandboxError" and "import os" in rep["evalue"]
    outs, rep = run(kernel, "open('/etc/hostname').read()", sandbox=True, user_expressions=REPORT)
    assert rep["ename"] == "SandboxError" and "outside the workspace" in rep["evalue"]
    # ipykernel skips user_expressions after an error: the next request collects the window, nothing lost
    _, rep = run(kernel, "pass", user_expressions=REPORT)
    assert any(f.startswith("escape:open") for f in report(rep)["sandbox_flags"])
    outs, rep = run(kernel, "robo.move_to.__globals__", sandbox=True)
    assert rep["ename"] == "SandboxError"
    outs, rep = run(kernel, "'x_was_run' in globals(), open('/etc/hostname').read() != ''")
    assert rep["status"] == "ok" and outs[-1]["content"]["data"]["text/plain"] == "(False, True)"
    # solve (the release ends it: it waits for the block to rest), then the next motion is an EpisodeFinished error
    code = ("robo.pick('red_block')\nx, y, _ = robo.segment('bowl').top_xyz\nrobo.move_to([x, y, 0.16])\n"
            "robo.move_to([x, y, 0.08])\nrobo.release()")
    outs, rep = run(kernel, code, sandbox=True, user_expressions=REPORT)
    r = report(rep)
    assert r["done"] and r["success"] and r["episode_finished"] == "terminated"
    outs, rep = run(kernel, "try:\n    robo.move_to([x, y, 0.2])\nexcept Exception:\n    pass", sandbox=True)
    assert rep["status"] == "error" and rep["ename"] == "EpisodeFinished"
    # the episode card
    outs, rep = run(kernel, "1", user_expressions={"c": "__import__('pyrualean_robot').episode_card()"})
    card = rep["user_expressions"]["c"]["data"]["application/json"]
    assert card["robot"] == "tabletop" and card["task"] == "put_block_in_bowl" and card["seed"] == 1
    assert card["task_language"] == "put the red block in the bowl" and "red_block" in card["object_names"]
    assert set(card["images"]) == {"agentview", "wrist"} and base64.b64decode(card["images"]["wrist"])[1:4] == b"PNG"
    assert card["knowledge"].startswith("# Tabletop robot") and "Drawer" in card["knowledge"] and card["max_env_steps"] == 10000
    # the ledger on disk has every call
    lines = [json.loads(x) for x in open(tmp_path / "calls.jsonl")]
    assert lines[0]["tool"] == "show" and lines[-1]["tool"] == "move_to" and lines[-1]["ok"] is False


def test_sandbox_refuses_private_robot_attributes(kernel, tmp_path):
    """An agent cell touching the robot's private state is refused before anything in it runs, also through
    a name an earlier cell bound to the robot; the same code typed by a person runs."""
    outs, rep = run(kernel, "from pyrualean_robot import make; "
                            f"robo = make('tabletop', task='put_block_in_bowl', seed=2, workspace={str(tmp_path)!r}, "
                            "images='none')\nalias = robo\nbox = {'r': robo}")
    assert rep["status"] == "ok", outs
    for code, refused in [("ran = 1\nrobo._data.qpos[:] = 0", "robo._data (private)"),
                          ("ran = 1\ngetattr(robo, '_model')", "robo._model (private)"),
                          ("ran = 1\nalias._ledger.clear()", "alias._ledger (private)"),
                          ("ran = 1\nbox['r']._done_reason = None", "box._done_reason (private)"),
                          ("ran = 1\nrobo.move_to.__globals__", "__globals__"),
                          ("ran = 1\nrobo.__dict__", "robo.__dict__ (private)")]:
        outs, rep = run(kernel, code, sandbox=True, user_expressions=REPORT)
        assert rep["status"] == "error" and rep["ename"] == "SandboxError", (code, rep)
        assert refused in rep["evalue"] and "was not run" in rep["evalue"], (code, rep["evalue"])
    _, rep = run(kernel, "pass", user_expressions=REPORT)
    assert "private-attr:_data" in report(rep)["sandbox_flags"]
    outs, rep = run(kernel, "'ran' in dir(), robo.state().step", sandbox=True)
    assert rep["status"] == "ok" and outs[-1]["content"]["data"]["text/plain"] == "(False, 0)", outs
    outs, rep = run(kernel, "type(robo._data).__name__, alias._ledger[-1]['tool']")
    assert rep["status"] == "ok" and outs[-1]["content"]["data"]["text/plain"] == "('MjData', 'state')", outs


def test_name_error_says_where_the_name_was_meant_to_come_from(kernel, tmp_path):
    """A cell stops at its first error; resent without that line, its names do not exist, and the
    NameError says why (hints.name_error_note) in the traceback the agent reads."""
    outs, rep = run(kernel, "from pyrualean_robot import make; "
                            f"robo = make('tabletop', task='open_drawer', seed=0, workspace={str(tmp_path)!r})")
    assert rep["status"] == "ok", outs
    outs, rep = run(kernel, 'grasp = robo.pick("drawer_handle")\nhx, hy, hz = grasp.top_xyz', sandbox=True)
    assert rep["status"] == "error" and rep["ename"] == "ValueError"
    outs, rep = run(kernel, "robo.move_to([hx, hy, hz + 0.10])", sandbox=True)
    assert rep["status"] == "error" and rep["ename"] == "NameError"
    tb = "\n".join(o["content"]["traceback"][-1] for o in outs if o["msg_type"] == "error")
    assert "`hx` does not exist: an earlier cell assigns it on line 2, but that cell stopped at line 1" in tb, tb
    # a typo keeps Python's own message, and the kernel goes on
    outs, rep = run(kernel, "robbo.state()", sandbox=True)
    tb = "\n".join(o["content"]["traceback"][-1] for o in outs if o["msg_type"] == "error")
    assert rep["ename"] == "NameError" and "does not exist" not in tb and "robbo" in tb
    outs, rep = run(kernel, "print(robo.state().step)", sandbox=True)
    assert rep["status"] == "ok", outs
    # an error whose str() raises is shown as Python shows it, and the notes stay on (IPython drops a
    # handler that raises)
    outs, rep = run(kernel, "class T(TypeError):\n    def __str__(self):\n        raise RuntimeError('str')\nraise T()",
                    sandbox=True)
    assert rep["status"] == "error", outs
    # a robot method written bare, a worked example's helper never defined
    for code, want in (("segment('drawer_handle')", "`segment` belongs to the robot: write `robo.segment`."),
                       ("put('red_block', 'bowl', 0.035)", "No cell defines `put`"),
                       # a value the cell dropped into `_` (bowl_then_plate seed 0); on a line too long to
                       # quote, Python's message
                       ("x, y, _ = robo.segment('drawer_handle').top_xyz\nprint(top)",
                        "Line 1 (`x, y, _ = robo.segment('drawer_handle').top_xyz`) drops a value into `_`"),
                       ("x, _ = " + "-" * 400 + "1, 2\nprint(top)", "name 'top' is not defined")):
        outs, rep = run(kernel, code, sandbox=True)
        tb = "\n".join(o["content"]["traceback"][-1] for o in outs if o["msg_type"] == "error")
        assert rep["ename"] == "NameError" and want in tb, (code, tb)


def test_unpacking_a_segment_that_found_nothing_says_why(kernel, tmp_path):
    """With the arm in the open drawer, in front of its handle (close_drawer seed 0, as an agent left it),
    segment finds nothing and top_xyz is None: the TypeError the agent reads says why, also raised inside
    a function an earlier cell defined; another TypeError keeps Python's message."""
    outs, rep = run(kernel, "from pyrualean_robot import make; "
                            f"robo = make('tabletop', task='close_drawer', seed=0, workspace={str(tmp_path)!r})")
    assert rep["status"] == "ok", outs
    outs, rep = run(kernel, "hx, hy, hz = robo.segment('drawer_handle').top_xyz\n"
                            "robo.move_to([hx, hy, hz + 0.10], target_yaw=0, gripper=robo.CLOSE)\n"
                            "robo.move_to([hx - 0.06, hy, hz + 0.10])\n"
                            "robo.move_to([hx + 0.17, hy, hz - 0.012])\n"
                            "def where(name):\n    x, y, z = robo.segment(name).top_xyz\n    return x, y, z",
                    sandbox=True)
    assert rep["status"] == "ok", outs
    for code in ("hx, hy, hz = robo.segment('drawer_handle').top_xyz", "where('drawer_handle')"):
        outs, rep = run(kernel, code, sandbox=True)
        tb = "\n".join(o["content"]["traceback"][-1] for o in outs if o["msg_type"] == "error")
        assert rep["ename"] == "TypeError" and "found nothing" in tb and "Move the arm up" in tb, (code, tb)
    outs, rep = run(kernel, "a, b = None", sandbox=True)
    tb = "\n".join(o["content"]["traceback"][-1] for o in outs if o["msg_type"] == "error")
    assert rep["ename"] == "TypeError" and "found nothing" not in tb, tb
    outs, rep = run(kernel, "print(robo.segment('drawer_handle', camera='wrist').found)", sandbox=True)
    assert rep["status"] == "ok" and "True" in str(outs), outs
