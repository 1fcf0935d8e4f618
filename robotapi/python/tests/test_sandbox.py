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
    ("getattr(robo, '__class__').__subclasses__()", ["__subclasses__"]),
    ("getattr(f, '__glo' + 'bals__')", []),  # a static check cannot see through this; the audit hook remains
    ("eval('1')", ["eval"]),
    ("exec('x=1')", ["exec"]),
    ("__import__('os')", ["__import__"]),
    ("x = '__builtins__'", ["__builtins__"]),
])
def test_static_refusals(code, refused, tmp_path):
    got, _ = check_source(code, str(tmp_path))
    assert got == refused


def test_flags_and_workspace_modules(tmp_path):
    (tmp_path / "helpers.py").write_text("X = 1\n")
    refused, flags = check_source("import helpers\nrobo._data\np = '/etc/passwd'", str(tmp_path))
    assert refused == []
    assert flags == ["import:helpers", "private-attr:_data", "path:/etc/passwd"]


def test_sandbox_error_is_a_permission_error():
    assert issubclass(SandboxError, PermissionError)
