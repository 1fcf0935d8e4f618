import pytest

from pyrualean_robot.errors import SandboxError
from pyrualean_robot.sandbox import check_source


@pytest.mark.parametrize("code, refused", [
    ("robo.move_to([0.5, 0, 0.2])", []),
    ("import numpy as np\nfrom scipy import ndimage\nimport math, time", []),
    ("import os", ["import os"]),
    ("from subprocess import run", ["import subprocess"]),
    ("from . import x", ["import ."]),
    ("f.__globals__", ["__globals__"]),
    ("getattr(robo, '__class__').__subclasses__()", ["__subclasses__", "robo.__class__ (private)"]),
    ("getattr(f, '__glo' + 'bals__')", []),  # a static check cannot see through this; the audit hook remains
    ("eval('1')", ["eval"]),
    ("exec('x=1')", ["exec"]),
    ("__import__('os')", ["__import__"]),
    ("x = '__builtins__'", ["__builtins__"]),
    # private attributes of the robot are refused, however they are reached
    ("robo._data", ["robo._data (private)"]),
    ("robo._model.opt.timestep = 0.1", ["robo._model (private)"]),
    ("robo.__dict__", ["robo.__dict__ (private)"]),
    ("type(robo)._run_tool", ["robo._run_tool (private)"]),
    ("robo.state()._replace", ["robo._replace (private)"]),
    ("getattr(robo, '_sim')", ["robo._sim (private)"]),
    ("setattr(robo, '_done_reason', None)", ["robo._done_reason (private)"]),
    ("name = '_si' + 'm'\ngetattr(robo, name)", ["getattr(robo, <computed name>)"]),
    ("getattr(robo, 'move_to')([0.5, 0, 0.2])\nhasattr(robo, 'pick')", []),
    ("r = robo\nr._data", ["r._data (private)"]),
    ("a = b = [robo]\nb[0]._sim", ["b._sim (private)"]),
    ("for r in [robo]:\n    r._ledger", ["r._ledger (private)"]),
    ("(r := robo)._x", ["robo._x (private)"]),
    # frame walking from an exception back to the robot's `self`
    ("try:\n    robo.move_to(1)\nexcept Exception as e:\n    e.__traceback__.tb_next.tb_frame.f_locals",
     ["f_locals", "tb_frame", "tb_next", "__traceback__"]),
    ("getattr(f, 'f_back')", ["f_back"]),
    # private attributes elsewhere (the agent's own classes, numpy) are only flagged
    ("class H:\n    def __init__(self):\n        self._k = 1\nH()._k", []),
    ("import numpy as np\nnp.zeros(3).__class__.__name__", []),
])
def test_static_refusals(code, refused, tmp_path):
    got, _ = check_source(code, str(tmp_path))
    assert got == refused


def test_flags_and_workspace_modules(tmp_path):
    (tmp_path / "helpers.py").write_text("X = 1\n")
    refused, flags = check_source("import helpers\nh = helpers.X\nh._data\np = '/etc/passwd'", str(tmp_path))
    assert refused == []
    assert flags == ["import:helpers", "private-attr:_data", "path:/etc/passwd"]


def test_robot_names_from_the_namespace(tmp_path):
    """The kernel passes names bound to the robot by earlier cells (r = robo, Out[3], _3)."""
    refused, flags = check_source("r._data\n_3._sim\nOut[3]._x\nq._ok", str(tmp_path), {"r", "_3", "Out"})
    assert refused == ["r._data (private)", "_3._sim (private)", "Out._x (private)"]
    assert "private-attr:_ok" in flags


def test_sandbox_error_is_a_permission_error():
    assert issubclass(SandboxError, PermissionError)
