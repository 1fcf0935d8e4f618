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


@pytest.mark.parametrize("name,cell,line,earlier,want", [
    # a value unpacked into `_`, then used by another name (bowl_then_plate seed 0, the model's cell)
    ("top", 'grasp = robo.pick("green_block")\nx, y, _ = robo.segment("plate").top_xyz\n'
            'robo.move_to([x, y, top + 0.10])', 3, [],
     "No cell assigns `top`. Line 2 (`x, y, _ = robo.segment(\"plate\").top_xyz`) drops a value into `_`: if "
     "`top` is that value, name it there: `x, y, top = robo.segment('plate').top_xyz`."),
    # the nearest such line before the error; none after it, none with two `_`, none once any cell binds it
    ("top", "a, _ = 1, 2\nb, _ = 3, 4\nprint(top)\nc, _ = 5, 6", 3, [],
     "No cell assigns `top`. Line 2 (`b, _ = 3, 4`) drops a value into `_`: if `top` is that value, name it "
     "there: `b, top = (3, 4)`."),
    ("top", "print(top)\nx, _ = 1, 2", 1, [], None),
    ("top", "x, _ = 1, 2\nprint(top)", None, [], None),  # no line known
    ("top", "_, y, _ = 1, 2, 3\nprint(top)", 2, [], None),
    ("top", "x, _ = 1, 2\nprint(top)", 2, [CellRun("top = 1/0", 1, "ZeroDivisionError")],
     "`top` does not exist: an earlier cell assigned it on line 1 (`top = 1/0`), the line that raised "
     "ZeroDivisionError, so it never got a value. Assign `top` in this cell before using it."),
    ("top", "x, _ = 1, 2\nprint(top)", 2, [CellRun("top = 1\ndel top", None)], None),
    ("top", "x, _ = 1, 2\nprint(top)", 2, [], "No cell assigns `top`. Line 1 (`x, _ = 1, 2`) drops a value into `_`: "
     "if `top` is that value, name it there: `x, top = (1, 2)`."),
    ("t" * 200, "x, _ = 1, 2\nprint(" + "t" * 200 + ")", 2, [],
     "No cell assigns `" + "t" * 200 + "`. Line 1 (`x, _ = 1, 2`) drops a value into `_`: if `" + "t" * 200 +
     "` is that value, name it there: `x, " + "t" * 200 + " = (1, 2)`."),  # a name Python ran: bounded by the cell
    ("top", "x, _ = " + "-" * 990 + "1, 2\nprint(top)", 2, [], None),  # too long to quote, too deep to unparse
    ("top", "x, _ = (1,\n 2)\nprint(top)", 3, [], None),  # an assignment over two lines: not quoted
    ("top", "x, _ = 1, 2\n" * 20_000 + "print(top)", 20_001, [], None),  # a huge cell: not parsed
])
def test_name_error_note_names_a_value_dropped_into_underscore(name, cell, line, earlier, want):
    assert name_error_note(name, cell, line, earlier, ROBOT) == want
