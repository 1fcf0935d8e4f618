import dataclasses
import json
import math
import re

import numpy as np
import pytest

from pyrualean_robot import EpisodeFinished, ToolError, make
from pyrualean_robot.results import Move, Pick, State


def snapshot(r):
    return r._data.qpos.copy(), r.env_steps


@pytest.mark.parametrize("call", [
    lambda r: r.move_to([0.5, 0.0]),
    lambda r: r.move_to([0.5, 0.0, float("nan")]),
    lambda r: r.move_to("0.5, 0, 0.2"),
    lambda r: r.move_to([2.0, 0.0, 0.2]),
    lambda r: r.move_to([0.5, 0.0, -0.1]),
    lambda r: r.move_to([0.5, 0.0, 0.2], gripper=2.0),
    lambda r: r.move_to([0.5, 0.0, 0.2], max_steps=0),
    lambda r: r.move_to([0.5, 0.0, 0.2], step_clip=1.0),
    lambda r: r.move_pose([0.5, 0.0, 0.2], target_pitch=3.0),
    lambda r: r.rotate_wrist(),
    lambda r: r.rotate_wrist(target_yaw=0.1, delta_yaw=0.1),
    lambda r: r.set_gripper(True),
    lambda r: r.set_gripper(0.5, steps=0),
    lambda r: r.release(max_steps=-1),
    lambda r: r.pick("bowl"),
    lambda r: r.pick("blue_block"),  # not in this task
    lambda r: r.pick("drawer_handle"),
    lambda r: r.image("top"),
    lambda r: r.image(resolution=4),
    lambda r: r.back_project(256, 0),
    lambda r: r.segment(""),
    lambda r: r.policy(max_chunks=0),
])
def test_invalid_arguments_raise_before_moving(make_robot, call):
    r = make_robot()
    before = snapshot(r)
    with pytest.raises(ValueError):
        call(r)
    after = snapshot(r)
    assert after[1] == before[1] and np.array_equal(after[0], before[0])
    assert r.ledger[-1]["ok"] is False and r.ledger[-1]["error"].startswith("ValueError")


@pytest.mark.parametrize("xyz,says", [
    ([-0.17, 0, 0.012], r"target x=-0\.170 .*not a distance to move; to move by -0\.17 along x, add it to a "
                        r"position you read, e\.g\. x - 0\.17$"),
    ([0.5, 0.0, -0.012], r"target z=-0\.012 .*e\.g\. z - 0\.01$"),
    ([0.95, 0.0, 0.2], r"^target x=0\.950 is outside the workspace \[0\.15, 0\.85\]$"),  # a place, too far
    ([0.5, 0.0, 1e300], r"^target z=1\d{300}\.000 is outside the workspace \[0\.005, 0\.65\]$"),  # no hint
])
def test_a_target_outside_the_workspace_says_whether_it_reads_as_a_distance(make_robot, xyz, says):
    """A coordinate small enough to be a slide's size (the model wrote move_to([-0.17, 0, 0.012]) for "pull to
    hx - 0.17") is told xyz is a place; a far one only hears the bounds. Nothing moves."""
    r = make_robot()
    before = snapshot(r)
    with pytest.raises(ValueError, match=says):
        r.move_to(xyz)
    assert np.array_equal(snapshot(r)[0], before[0])


@pytest.mark.parametrize("name", ["drawer_handle", "drawer", "the drawer handle", "cabinet"])
def test_pick_on_the_drawer_says_how_it_moves(make_robot, name):
    r = make_robot(task="open_drawer")
    # the line to write in the pick's place, word for word (the model copies it)
    with pytest.raises(ValueError, match=r"never picked up.*In place of the pick and of grasp\.top_xyz, read the "
                                         r"handle: hx, hy, hz = robo\.segment\('drawer_handle'\)\.top_xyz\. .*hx - 0\.17 opens the drawer, to hx \+ 0\.25 closes it"):
        r.pick(name)
    # where there is no drawer, the error does not talk of one
    with pytest.raises(ValueError, match=r"pick works on blocks") as e:
        make_robot().pick(name)
    assert "drawer is never picked" not in str(e.value)


@pytest.mark.parametrize("call,message", [
    (lambda r: r.move_to([0.5, 0.0, 0.2], above=0.03),
     r"got an unexpected keyword argument 'above'; move_to takes xyz, gripper, \*, tol, step_clip, max_steps, "
     r"target_yaw$"),
    (lambda r: r.move_to(), r"missing a required argument: 'xyz'; move_to takes xyz, "),
    (lambda r: r.release(3, 4), r"too many positional arguments; release takes max_steps$"),
    (lambda r: r.pick("red_block", **{"x" * 100_000: 1}), r"^got an unexpected keyword argument 'x{200,}; pick takes "
                                                          r"object, \*, lift, max_steps$"),
])
def test_a_call_with_wrong_arguments_names_the_parameters(make_robot, call, message):
    """Python's TypeError names only the wrong argument; the primitive's says which ones it takes. Nothing
    moves, the ledger records the refused call, and an agent's huge keyword cannot make the message huge."""
    r = make_robot()
    before = snapshot(r)
    with pytest.raises(TypeError, match=message) as e:
        call(r)
    assert len(str(e.value)) < 400
    after = snapshot(r)
    assert after[1] == before[1] and np.array_equal(after[0], before[0])
    assert r.ledger[-1]["ok"] is False and r.ledger[-1]["error"].startswith("TypeError")
    assert all(len(k) <= 103 for k in r.ledger[-1]["kwargs"]) and len(r.ledger[-1]["error"]) < 400


def test_make_options_are_validated(tmp_path):
    for kw in ({"images": "always"}, {"primitives": "some"}, {"task": "no_such_task"}, {"seed": "1"},
               {"max_env_steps": 0}):
        with pytest.raises(ValueError):
            make("tabletop", workspace=str(tmp_path), **kw)
    with pytest.raises(ValueError, match="unknown robot"):
        make("nope")


def test_results_are_frozen_and_ledgered(make_robot):
    r = make_robot()
    st = r.state()
    assert isinstance(st, State) and st.step == 0 and st.gripper_opening == pytest.approx(0.08, abs=0.002)
    assert st.object_names == ("red_block", "green_block", "bowl")
    m = r.move_to([0.5, 0.05, 0.25])
    assert isinstance(m, Move) and m.reached and m.final_dist_m <= 0.01 and 0 < m.steps_used <= m.max_steps
    assert not m.terminated and not m.truncated
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.reached = False
    assert "Move(target_xyz=" in repr(m)
    g = r.set_gripper(r.CLOSE, steps=5)
    assert g.steps == 5 and g.gripper_opening < 0.01
    rel = r.release()
    assert rel.final_gripper_opening > 0.07
    rot = r.rotate_wrist(delta_yaw=0.4)
    assert rot.reached and abs(rot.final - 0.4) < 0.05
    mp = r.move_pose([0.5, 0.0, 0.3], target_pitch=0.3)
    assert mp.reached and abs(mp.final_pitch - 0.3) < 0.06
    lines = [json.loads(x) for x in open(r._ledger_path)]
    assert [x["tool"] for x in lines] == ["state", "move_to", "set_gripper", "release", "rotate_wrist", "move_pose"]
    keys = {"index", "tool", "kwargs", "started_at", "elapsed_s", "ok", "stateful", "privileged", "env_steps", "error", "summary"}
    assert all(set(x) == keys for x in lines)
    mv = lines[1]
    assert mv["stateful"] and mv["kwargs"]["xyz"] == [0.5, 0.05, 0.25] and mv["env_steps"] == m.steps_used
    assert mv["summary"]["reached"] is True and "final_eef_pos" in mv["summary"]


def test_pick_lifts_a_block(make_robot):
    r = make_robot(seed=3)
    p = r.pick("red_block")
    assert isinstance(p, Pick) and p.success and p.peak_lift_m > 0.1
    assert 0.01 < p.final_gripper_opening < 0.06
    assert r.ledger[-1]["tool"] == "pick" and len(r.ledger) == 1  # sub-motions are not separate entries


def test_episode_finished_after_success(make_robot):
    r = make_robot("put_block_in_bowl", seed=1)
    r.pick("red_block")
    x, y, _ = r.segment("bowl").top_xyz
    r.move_to([x, y, 0.16])
    r.move_to([x, y, 0.08])
    rel = r.release()
    if not r.done:
        r.set_gripper(r.OPEN, steps=20)
    assert r.done and r.state().terminated
    with pytest.raises(EpisodeFinished) as ei:
        r.move_to([x, y, 0.2])
    assert ei.value.reason == "terminated"
    assert not isinstance(ei.value, Exception)  # `except Exception` cannot swallow it
    assert r.state().terminated and r.image().shape == (256, 256, 3)  # read-only calls keep working
    refused = [c for c in r.ledger if c["error"]]
    assert len(refused) == 1 and refused[0]["tool"] == "move_to"
    assert refused[0]["error"] == "EpisodeFinished: episode finished: terminated" and refused[0]["env_steps"] == 0


@pytest.mark.parametrize("task,block,target,height", [
    ("put_block_in_bowl", "red_block", "bowl", None),        # lowered onto the bowl's top, as a small model does
    ("put_block_on_plate", "green_block", "plate", None),
    ("stack_blocks", "red_block", "blue_block", "carry"),    # dropped from carry height onto the lower block
])
def test_release_waits_for_the_drop_to_settle(make_robot, task, block, target, height):
    """The checks want a released block at rest: release waits for that, so the release that solves the task
    is the call that says so (it used to stop as the fingers opened, with the block still falling)."""
    r = make_robot(task, seed=0)
    p = r.pick(block)
    x, y, z = r.segment(target).top_xyz
    r.move_to([x, y, p.final_eef_pos[2] if height == "carry" else z])
    rel = r.release()
    assert rel.terminated and r.done


def test_release_in_the_air_stops_when_blocks_rest(make_robot):
    r = make_robot("put_block_in_bowl", seed=0)
    r.move_to([0.5, 0.0, 0.2], gripper=r.CLOSE)
    rel = r.release(max_steps=40)
    assert not rel.terminated and rel.steps_used < 40 and rel.final_gripper_opening > 0.075


def test_pick_of_a_held_block_moves_nothing(make_robot):
    """A cell sent again after failing past its pick picks the held block again: opening to grasp it anew
    would drop it from carry height."""
    r = make_robot("stack_blocks", seed=0)
    first = r.pick("red_block")
    again = r.pick("red_block")
    assert first.success and again.success and again.steps_used == 0 and again.diagnostics == "already held: nothing moved"
    assert again.final_eef_pos == first.final_eef_pos and r.state().gripper_opening > 0.01


@pytest.mark.parametrize("task", ["open_drawer", "close_drawer", "open_drawer_swap", "close_drawer_swap"])
@pytest.mark.parametrize("seed", [0, 1])
def test_drawer_facts_of_the_knowledge_file_work(make_robot, task, seed):
    """The knowledge file's Drawer lines, followed as written (a model takes their numbers literally: an
    earlier "push 0.17 m" from hx - 0.06 ended at hx + 0.11 and closed 2 of 10). Both directions are the
    same grasp and a slide along x: to hx - 0.17 opens, to hx + 0.25 (past the stop) closes."""
    r = make_robot(task, seed=seed)
    hx, hy, hz = r.segment("drawer_handle").top_xyz
    r.move_to([hx, hy, hz + 0.10], r.OPEN, target_yaw=0)
    r.move_to([hx, hy, hz - 0.012], step_clip=0.01)
    r.set_gripper(r.CLOSE)
    dx = -0.17 if task.startswith("open") else 0.25
    last = r.move_to([hx + dx, hy, hz - 0.012], step_clip=0.01, max_steps=150)
    assert last.terminated and r.done


@pytest.mark.parametrize("task", ["close_drawer", "close_drawer_swap"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_close_cell_that_pulls_first_still_shuts_the_drawer(make_robot, task, seed):
    """The cell the model wrote in close tasks (seeds 0-1, every time): grasp, pull, open the fingers, push.
    With the push to hx + 0.17 the open fingers left the drawer at 0.027-0.037 m (the check wants < 0.015);
    the knowledge's hx + 0.25, past the stop, shuts it."""
    r = make_robot(task, seed=seed)
    hx, hy, hz = r.segment("drawer_handle").top_xyz
    r.move_to([hx, hy, hz + 0.10], step_clip=0.01)
    r.move_to([hx, hy, hz - 0.012], step_clip=0.01, max_steps=150)
    r.set_gripper(r.CLOSE)
    r.move_to([hx - 0.17, hy, hz - 0.012], step_clip=0.01)
    r.set_gripper(r.OPEN)
    last = r.move_to([hx + 0.25, hy, hz - 0.012], step_clip=0.01)
    assert last.terminated and r.done


def test_knowledge_file_states_the_slide_it_tests():
    """The numbers the test above moves by are the ones the knowledge file gives (one source a model reads)."""
    from pyrualean_robot.robots.tabletop import KNOWLEDGE
    text = " ".join(KNOWLEDGE.split())  # a line may wrap
    for line in ("(hx, hy, hz - 0.012)", "(hx - 0.17, hy, hz - 0.012)", "(hx + 0.25, hy, hz - 0.012)"):
        assert line in text, line


@pytest.mark.parametrize("task,named,start", [
    ("open_drawer", True, r"closed \(pushed in\)"),
    ("close_drawer_swap", True, r"open, pulled out 0\.1[4-7] m"),  # the layout's 0.14-0.17 m
    ("stack_blocks", False, None),
])
def test_card_says_the_drawer_handle_is_not_a_block(make_robot, task, named, start):
    """A drawer task's card says, next to the agent's first reply, that pick refuses the handle and where the
    drawer stands at the start."""
    facts = make_robot(task, seed=0)._episode_card()["facts"]
    assert ("drawer_handle" in facts) == named and ("drawer_at_start" in facts) == named
    if named:
        assert "not a block" in facts["drawer_handle"] and "Drawer" in facts["drawer_handle"]
        assert re.fullmatch(start, facts["drawer_at_start"]), facts["drawer_at_start"]
    assert list(facts)[-1] == "simulator"


@pytest.mark.parametrize("task,check", [
    ("put_block_in_bowl", "red_block in the bowl"),
    ("put_block_on_plate_swap", "green_block on the plate"),
    ("stack_blocks", "red_block on blue_block"),
    ("stack_three", "green_block on blue_block and red_block on green_block, both at once"),
    ("open_drawer", "the drawer pulled out more than 0.12 m"),
    ("close_drawer_swap", "the drawer pushed in to less than 0.015 m"),
    ("bowl_then_plate", "first red_block in the bowl, then green_block on the plate (the first still holding)"),
])
def test_card_states_the_success_check_with_the_apis_names(make_robot, task, check):
    """The card says what the simulator checks, in the names the API takes (one definition: the goals)."""
    assert make_robot(task, seed=0)._episode_card()["facts"]["success_check"] == check


@pytest.mark.parametrize("ordered,timeline,solved_at", [
    (False, [(0, 0), (1, 0), (1, 1)], 2),          # both at once
    (False, [(1, 0), (0, 1), (0, 0)], None),       # never both at once
    (True, [(1, 0), (1, 1)], 1),                   # first, then second
    (True, [(0, 1), (1, 1)], None),                # second began first
    (True, [(1, 0), (0, 0), (0, 1), (1, 1)], None),  # the first stopped holding: it began again after the second
    (True, [(1, 0), (0, 0), (1, 0), (1, 1)], 3),   # the first holds again before the second begins
])
def test_task_success_from_its_goals(ordered, timeline, solved_at):
    """A task is solved when its goals hold together, or (ordered) each began after the one before it."""
    from pyrualean_robot.robots import tabletop_tasks as tt

    now: dict = {}
    goals = tuple(tt.Goal(f"g{i}", lambda s, i=i: bool(now[i])) for i in range(2))
    spec = tt.TaskSpec("t", "f", "do", (), lambda rng, swap: tt.Layout({}), goals, ordered=ordered)
    mon, solved = tt.Monitor(), []
    for step, state in enumerate(timeline):
        now.update(enumerate(state))
        if spec.success(None, mon, step):
            solved.append(step)
    assert (solved[0] if solved else None) == solved_at


def test_step_budget_truncates(make_robot):
    r = make_robot(max_env_steps=5)
    m = r.move_to([0.6, 0.2, 0.1])
    assert m.truncated and not m.reached and m.steps_used == 5 and r.env_steps == 5
    with pytest.raises(EpisodeFinished, match="truncated"):
        r.set_gripper(1.0)


def test_host_can_stop_the_episode(make_robot):
    r = make_robot()
    r._stop_episode("timeout")
    with pytest.raises(EpisodeFinished) as ei:
        r.move_to([0.5, 0.0, 0.3])
    assert ei.value.reason == "timeout" and r.done


def trajectory(make_robot, seed):
    r = make_robot("stack_blocks", seed=seed)
    out = [r._data.qpos.copy()]
    r.move_to([0.5, 0.1, 0.2], r.OPEN)
    out.append(r._data.qpos.copy())
    r.pick("red_block")
    out.append(r._data.qpos.copy())
    r.rotate_wrist(delta_yaw=0.3)
    out.append(r._data.qpos.copy())
    return np.stack(out)


def test_deterministic(make_robot):
    a = trajectory(make_robot, 4)
    b = trajectory(make_robot, 4)
    assert np.array_equal(a, b)
    c = trajectory(make_robot, 5)
    assert not np.allclose(a[0], c[0])  # another seed, another layout


def test_images_depth_and_geometry(make_robot):
    r = make_robot("stack_blocks", seed=2)
    assert r.image().shape == (256, 256, 3) and r.image().dtype == np.uint8
    assert r.image("wrist", resolution=128).shape == (128, 128, 3)
    assert r.image(resolution="low").shape == (128, 128, 3)
    d = r.depth(resolution=64)
    assert d.shape == (64, 64) and d.dtype == np.float32 and np.all(d > 0)
    wm = r.world_map()
    assert wm.shape == (256, 256, 3)
    meta = r.camera_meta()
    assert meta["width"] == 256 and len(meta["intrinsic_K"]) == 3
    truth = r._data.xpos[r._body["blue_block"]]
    seg = r.segment("the blue block")
    assert seg.found and seg.name == "blue_block" and seg.n_pixels > 20
    assert math.dist(seg.top_xyz[:2], truth[:2]) < 0.015 and abs(seg.top_xyz[2] - 0.04) < 0.01
    r0, c0, r1, c1 = seg.box
    bp = r.back_project((r0 + r1) // 2, (c0 + c1) // 2)
    assert math.dist(bp.world_xyz, truth) < 0.04
    assert np.allclose(wm[(r0 + r1) // 2, (c0 + c1) // 2], bp.world_xyz, atol=1e-3)
    # camera_meta projects the world point back onto the same pixel
    K = np.array(meta["intrinsic_K"])
    pc = np.array(meta["extrinsic_cv"]) @ np.array([*bp.world_xyz, 1.0])
    uv = (K @ pc[:3]) / pc[2]
    assert abs(uv[0] - (bp.pixel[1] + 0.5)) < 1.0 and abs(uv[1] - (bp.pixel[0] + 0.5)) < 1.0
    missing = r.segment("unicorn")
    assert not missing.found and "no object matches" in missing.error


def test_ledger_records_carry_stateful(make_robot):
    """Every calls.jsonl record has the original's fields in the original's order; `stateful` is true exactly for the
    primitives that may step the simulator (motion, skills, the VLA), also when the call fails, and the
    per-cell report hands the host the same whole records."""
    from pyrualean_robot.apiref import tool_methods
    from pyrualean_robot.base import LEDGER_KEYS

    r = make_robot(seed=4)
    declared = {name: info["stateful"] for name, _, info in tool_methods(type(r))}
    assert {n for n, s in declared.items() if s} == {"move_to", "move_pose", "rotate_wrist", "set_gripper",
                                                     "release", "pick", "policy"}
    r._cell_report([])  # start a report window
    r.state(); r.image(resolution=64); r.show("wrist"); r.camera_meta(); r.depth(resolution=64)
    r.world_map(resolution=64); r.back_project(10, 10); r.segment("bowl")
    r.move_to([0.5, 0.0, 0.3]); r.move_pose([0.5, 0.0, 0.3], target_pitch=0.1); r.rotate_wrist(delta_yaw=0.1)
    r.set_gripper(r.OPEN, steps=3); r.release(max_steps=3); r.pick("red_block")
    with pytest.raises(ToolError):
        r.policy()  # no endpoint: refused, still a stateful record
    with pytest.raises(ValueError):
        r.move_to([9.0, 0.0, 0.3])
    r._stop_episode("cancelled")
    with pytest.raises(EpisodeFinished):
        r.set_gripper(r.CLOSE)
    assert r.state().step > 0  # read-only calls keep working

    lines = [json.loads(x) for x in open(r._ledger_path)]
    assert all(tuple(x) == LEDGER_KEYS for x in lines)
    assert [x["index"] for x in lines] == list(range(len(lines)))
    assert set(x["tool"] for x in lines) == set(declared)
    for x in lines:
        assert x["stateful"] is declared[x["tool"]], x
    moves = [x for x in lines if x["stateful"] and x["ok"]]
    assert moves and all(x["env_steps"] > 0 for x in moves)
    assert all(x["env_steps"] == 0 for x in lines if not x["stateful"])
    failed = [x for x in lines if not x["ok"]]
    assert [(x["tool"], x["stateful"], x["error"].split(":")[0]) for x in failed] == [
        ("policy", True, "ToolError"), ("move_to", True, "ValueError"), ("set_gripper", True, "EpisodeFinished")]
    report = r._cell_report([])
    assert report["calls"] == lines and report["done"] and report["episode_finished"] == "cancelled"


def test_make_attaches_the_robot_to_the_notebook_session(make_robot):
    """make() (not each robot) attaches: the robot becomes the session's, and shown images reach the session
    (kept in emitted outside IPython); a robot built without make() shows nowhere but still works."""
    from pyrualean_robot import notebook
    from pyrualean_robot.robots.tabletop import TabletopRobot

    r = make_robot()
    s = notebook.session()
    assert s.robot is r
    before = len(s.emitted)
    r.show("wrist")
    png, meta = s.emitted[-1]
    assert len(s.emitted) == before + 1 and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert meta == {"camera": "wrist", "source": "show"}
    bare = TabletopRobot(task="stack_blocks", workspace=str(r.workspace) + "-bare", images="none")
    bare.show("agentview")  # no session: the image is dropped, not an error
    assert notebook.session().robot is r and len(s.emitted) == before + 1


def test_a_missing_result_attribute_names_the_ones_there(make_robot):
    r = make_robot()
    move = r.move_to([0.5, 0.0, 0.2])
    with pytest.raises(AttributeError, match=r"'Move' object has no attribute 'success': a Move has target_xyz, .*reached"):
        move.success
    grasp = r.pick("red_block")
    with pytest.raises(AttributeError, match=r"a Pick has success, .*; a Pick does not say where objects are: where an "
                                             r"object is: robo.segment\(name\).top_xyz, and where a block goes, the "
                                             r"place's top: x, y, top = robo.segment\(place\).top_xyz$"):
        grasp.top_xyz
    assert not hasattr(move, "__getstate_missing__") and move.reached in (True, False)


@pytest.mark.parametrize("task,name", [("stack_three", "bowl"), ("open_drawer", "plate"), ("put_block_in_bowl", "drawer_handle"),
                                       ("stack_blocks", "the bowl")])
def test_segment_refuses_an_object_the_task_does_not_use(make_robot, task, name):
    """Its position would be None (parked out of reach): the agent's `x, y, z = segment(...).top_xyz` raised
    "cannot unpack non-iterable NoneType object"; the error names the task's objects instead."""
    r = make_robot(task, seed=0)
    with pytest.raises(ValueError, match="is not in this task.*This task's objects: "):
        r.segment(name)
    assert r.segment("table").found and r.segment(r.state().object_names[0]).found
