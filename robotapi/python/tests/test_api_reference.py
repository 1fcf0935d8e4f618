import json
import subprocess
import sys

import pytest

from pyrualean_robot.apiref import api_reference, render, tool_schemas
from pyrualean_robot.robots import RobotUnavailable, robot_class
from pyrualean_robot.robots.tabletop import TabletopRobot


def test_text_reference_documents_every_primitive():
    text = api_reference(TabletopRobot)
    for name in ("state", "image", "show", "camera_meta", "depth", "world_map", "back_project", "segment",
                 "move_to", "move_pose", "rotate_wrist", "set_gripper", "release", "pick", "policy"):
        assert f"robo.{name}(" in text, name
        assert getattr(TabletopRobot, name).__doc__.split()[0] in text
    assert "Constants:" in text and "robo.OPEN = -1.0" in text
    assert "Result types (frozen dataclasses" in text and "Move(target_xyz" in text
    assert "EpisodeFinished(BaseException)" in text
    assert "close(" not in text  # not a primitive


def test_no_vla_hides_policy():
    text = api_reference(TabletopRobot, primitives="no-vla")
    assert "robo.policy(" not in text
    names = [t["function"]["name"] for t in tool_schemas(TabletopRobot, primitives="no-vla")]
    assert "policy" not in names and "move_to" in names


def test_tool_schemas_match_signatures():
    tools = {t["function"]["name"]: t for t in tool_schemas(TabletopRobot)}
    mv = tools["move_to"]["function"]["parameters"]
    assert mv["required"] == ["xyz"]
    assert mv["properties"]["xyz"] == {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
    assert mv["properties"]["gripper"] == {"type": "number"}
    assert mv["properties"]["max_steps"] == {"type": "integer", "default": 100}
    assert tools["pick"]["function"]["parameters"]["required"] == ["object"]
    assert tools["move_to"]["x-pyrualean"] == {"stateful": True, "vla": False, "privileged": False}
    assert tools["image"]["x-pyrualean"]["stateful"] is False
    # the description is the same docstring the text reference prints
    assert TabletopRobot.move_to.__doc__.split("\n")[0].strip() in tools["move_to"]["function"]["description"]


def test_bad_arguments():
    with pytest.raises(ValueError):
        api_reference(TabletopRobot, primitives="some")
    with pytest.raises(ValueError):
        render("tabletop", "full", "xml")
    with pytest.raises(ValueError, match="unknown robot"):
        robot_class("nope")


def test_registered_adapters_fail_clearly_when_missing():
    for name in ("robotwin", "robocasa", "robodojo_xpl_rgb", "libero"):
        try:
            robot_class(name)
        except RobotUnavailable as e:
            assert name in str(e) and "needs" in str(e)


def test_cli_modules_need_no_simulator():
    code = ("import sys, runpy; sys.argv=['x','--format','tools']; "
            "import pyrualean_robot.api as a; rc=a.main(['--format','tools']); "
            "assert 'mujoco' not in sys.modules, 'api CLI imported mujoco'; sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["type"] == "function"
    out = subprocess.run([sys.executable, "-m", "pyrualean_robot.tasks", "--json"], capture_output=True,
                         text=True, timeout=60)
    rows = json.loads(out.stdout)
    assert len(rows) >= 10 and set(rows[0]) == {"name", "family", "instruction", "solution"}
    out = subprocess.run([sys.executable, "-m", "pyrualean_robot.api", "--robot", "nope"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "unknown robot" in out.stderr


def test_result_types_reached_through_fields_are_documented():
    """A result's nested dataclasses (State.left: ArmState, WorldSamples.samples: tuple[WorldSample, ...])
    are listed too: the agent meets them as attribute values."""
    text = render("robotwin")
    for name in ("State(", "ArmState(", "WorldSamples(", "WorldSample(", "Move(", "Gripper(", "VlaRun("):
        assert "\n  " + name in text, name
    assert "\n  VlaRun(" not in render("robotwin", primitives="no-vla")


@pytest.mark.parametrize("robot", ["tabletop", "libero", "robotwin", "robocasa", "robodojo_xpl_rgb"])
def test_no_vla_reference_never_names_a_hidden_call(robot):
    import re

    from pyrualean_robot.apiref import tool_methods

    full, trimmed = render(robot), render(robot, primitives="no-vla")
    hidden = [n for n, _, info in tool_methods(robot_class(robot)) if info["vla"]]
    for name in hidden:
        assert f"robo.{name}(" in full and not re.search(rf"\b{name}\(|``{name}``", trimmed), (robot, name)
    lines = [ln for ln in trimmed.splitlines()[:-1] if re.search(r"\bVLA\b|RLDX|LingBot|Pi0", ln)]
    assert not lines, (robot, lines)


def test_vla_reference_edits_match_across_line_breaks():
    from pyrualean_robot.apiref import _apply_vla_edits

    class R:
        VLA_REFERENCE_EDITS = (("the VLA acts on exactly this text.", "this is the task."),)

    assert _apply_vla_edits(R, "task: the instruction;\n    the VLA acts\n    on exactly this text.") == \
        "task: the instruction;\n    this is the task."


@pytest.mark.parametrize("robot, vla_word", [("libero", "pi0"), ("robotwin", "lingbot"), ("robocasa", "rldx")])
def test_no_vla_reference_edits_all_apply(robot, vla_word):
    """Every VLA sentence the no-vla reference rewrites exists in the full one (a docstring edit fails loudly),
    and the no-vla reference names no VLA call (the original's VLA_REFERENCE_EDITS trimming)."""
    from pyrualean_robot.apiref import tool_methods

    cls = robot_class(robot)
    full = " ".join(api_reference(cls).split())
    for sentence, _ in cls.VLA_REFERENCE_EDITS:
        assert " ".join(sentence.split()) in full, sentence
    trimmed = api_reference(cls, primitives="no-vla")
    assert vla_word not in trimmed.lower() and "\n\n\n" not in trimmed
    assert cls.VLA_PRIMITIVES and all(f"robo.{n}(" not in trimmed for n in cls.VLA_PRIMITIVES)
    assert {n for n, _, info in tool_methods(cls) if info["vla"]} == set(cls.VLA_PRIMITIVES)


def test_paper_primitive_set_hides_privileged_primitives():
    """The paper's primitive set (--primitives paper) has no primitive that reads the simulator's ground
    truth: LIBERO's scripted pick is in the full reference and its tool schemas, not in the paper's."""
    from pyrualean_robot.apiref import api_reference, tool_schemas
    from pyrualean_robot.robots import robot_class

    cls = robot_class("libero")
    full, paper = api_reference(cls, primitives="full"), api_reference(cls, primitives="paper")
    assert "robo.pick(" in full and "robo.pick(" not in paper and "robo.pi0_pick(" in paper
    names = {t["function"]["name"]: t["x-pyrualean"] for t in tool_schemas(cls, primitives="full")}
    assert names["pick"]["privileged"] is True and names["move_to"]["privileged"] is False
    assert "pick" not in {t["function"]["name"] for t in tool_schemas(cls, primitives="paper")}
