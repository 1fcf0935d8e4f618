"""The NameError note (hints.name_error_note): where a missing name was meant to come from."""

import pytest

from pyrualean_robot.hints import SEGMENT_NOT_FOUND, type_error_note, CellRun, assigned_lines, name_error_note

PICK_HANDLE = '''grasp = robo.pick("drawer_handle")
assert grasp.success, grasp
hx, hy, hz = grasp.top_xyz
robo.move_to([hx, hy, hz + 0.10])'''


@pytest.mark.parametrize("name,cell,line,earlier,want", [
    # the rest of a failed cell sent again: hx came from a line that never ran
    ("hx", "robo.move_to([hx, hy, hz + 0.10])", 1, [CellRun(PICK_HANDLE, 1, "ValueError")],
     "`hx` does not exist: an earlier cell assigns it on line 3, but that cell stopped at line 1 "
     "(`grasp = robo.pick(\"drawer_handle\")`) with ValueError, so line 3 never ran. Assign `hx` in this cell "
     "before using it."),
    # the name of the very line that raised
    ("grasp", "hx, hy, hz = grasp.top_xyz", 1, [CellRun(PICK_HANDLE, 1, "ValueError")],
     "`grasp` does not exist: an earlier cell assigned it on line 1 (`grasp = robo.pick(\"drawer_handle\")`), "
     "the line that raised ValueError, so it never got a value. Assign `grasp` in this cell before using it."),
    # used before this cell assigns it
    ("grasp", "hx = grasp.top_xyz\ngrasp = robo.move_to([0.5, 0, 0.3])", 1, [],
     "`grasp` is first assigned on line 2 of this cell, after line 1 uses it."),
    # the newest failed cell that would have bound it speaks
    ("x", "print(x)", 1, [CellRun("a = 1/0\nx = 2", 1, "ZeroDivisionError"), CellRun("y = 1\nz = q\nx = 3", 2, "NameError")],
     "`x` does not exist: an earlier cell assigns it on line 3, but that cell stopped at line 2 (`z = q`) with "
     "NameError, so line 3 never ran. Assign `x` in this cell before using it."),
    # a plain typo, a name bound before the error line, a cell that ran to the end: Python's message stands
    ("robbo", "robbo.state()", 1, [CellRun(PICK_HANDLE, 1, "ValueError")], None),
    ("a", "print(a)", 1, [CellRun("a = 1\nb = 1/0", 2, "ZeroDivisionError")], None),
    ("a", "print(a)", 1, [CellRun("del a\na = 1", None)], None),
    ("", "print(a)", 1, [], None),
    # the agent's source is anything: unparsable, huge, no line known
    ("x", "print(x", None, [CellRun("x = (", 1, "SyntaxError"), CellRun("x = 1\n" * 20_000, 1, "E")], None),
])
def test_name_error_note(name, cell, line, earlier, want):
    assert name_error_note(name, cell, line, earlier) == want


def test_assigned_lines_every_binding():
    src = "import os.path\nfrom m import f as x\nfor x in []: pass\nwith o as x: pass\ndef x(): pass\n" \
          "class x: pass\ntry:\n    pass\nexcept E as x:\n    pass\n(x, [y, *x]) = 1, 2\nx += 1\nprint(x)"
    assert assigned_lines(src, "x") == [2, 3, 4, 5, 6, 9, 11, 12]
    assert assigned_lines(src, "os") == [1] and assigned_lines(src, "print") == []


@pytest.mark.parametrize("message,line,want", [
    ("cannot unpack non-iterable NoneType object", 'hx, hy, hz = robo.segment("drawer_handle").top_xyz', SEGMENT_NOT_FOUND),
    ("cannot unpack non-iterable NoneType object", "x, y, z = robo.segment('bowl', camera='wrist').world_xyz", SEGMENT_NOT_FOUND),
    # another None, another TypeError, a segment line that is not unpacked: Python's message stands
    ("cannot unpack non-iterable NoneType object", "a, b = f()", None),
    ("'NoneType' object is not subscriptable", 'x = robo.segment("bowl").top_xyz[0]', None),
    ("cannot unpack non-iterable NoneType object", "", None),
])
def test_type_error_note(message, line, want):
    assert type_error_note(message, line) == want


ROBOT = ("segment", "move_to", "pick", "CLOSE")


@pytest.mark.parametrize("name,cell,earlier,want", [
    ("segment", 'hx, hy, hz = segment("drawer_handle").top_xyz', [], "`segment` belongs to the robot: write `robo.segment`."),
    ("CLOSE", "robo.set_gripper(CLOSE)", [], "`CLOSE` belongs to the robot: write `robo.CLOSE`."),
    ("put", 'put("green_block", "blue_block", 0.025)', [],
     "No cell defines `put`: a helper a worked example defines exists only once a cell defines it. "
     "Define `put` (`def put(...):`) in this cell before calling it."),
    # an earlier cell defined it (and it was deleted since), a name that is not called, a failed earlier
    # cell's own note first: no guess
    ("put", "put(1)", [CellRun("def put(x):\n    pass\ndel put", None)], None),
    ("grasp", "print(grasp)", [], None),
    ("put", "put(1)", [CellRun("a = 1/0\ndef put(x): pass", 1, "ZeroDivisionError")],
     "`put` does not exist: an earlier cell assigns it on line 2, but that cell stopped at line 1 (`a = 1/0`) "
     "with ZeroDivisionError, so line 2 never ran. Assign `put` in this cell before using it."),
    # unparsable or huge cells: no guess
    ("put", "put(", [], None),
    ("put", "put(1)\n" * 20_000, [], None),
])
def test_name_error_note_robot_and_helpers(name, cell, earlier, want):
    assert name_error_note(name, cell, 1, earlier, ROBOT) == want
