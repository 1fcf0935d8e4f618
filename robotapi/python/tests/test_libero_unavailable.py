"""Without LIBERO installed, every way into the libero robot fails with one catchable type (RobotUnavailable)
and the tasks CLI says so in one line. LIBERO is hidden from the import system here; it is installed in .venv."""

import subprocess
import sys

import pytest

from pyrualean_robot import RobotUnavailable, make
from pyrualean_robot.robots import robot_class


@pytest.fixture
def no_libero(monkeypatch):
    for name in [m for m in sys.modules if m == "libero" or m.startswith("libero.")] + ["libero"]:
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: `import libero...` raises ImportError


def test_libero_unavailable_is_a_robot_unavailable():
    from pyrualean_robot.robots._libero_sim import LiberoUnavailable
    from pyrualean_robot.robots.libero import LiberoUnavailable as reexported

    assert reexported is LiberoUnavailable and issubclass(LiberoUnavailable, RobotUnavailable)


@pytest.mark.parametrize("call", [
    lambda: robot_class("libero").tasks(),
    lambda: make("libero", suite="libero_spatial", task=0, images="none"),
])
def test_without_libero_one_type_is_raised(no_libero, tmp_path, monkeypatch, call):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RobotUnavailable, match="LIBERO is not installed") as e:
        call()
    assert "\n" not in str(e.value) and "requirements/libero.txt" in str(e.value)


def test_tasks_cli_without_libero_is_one_line():
    code = ("import sys; sys.modules['libero'] = None\n"
            "from pyrualean_robot.tasks import main; sys.exit(main(['--robot', 'libero', '--json']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: robot 'libero': LIBERO is not installed"), p.stderr
