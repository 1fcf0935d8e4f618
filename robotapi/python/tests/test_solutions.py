"""Every task's reference solution on a few seeds (the offline check of 10 seeds per task is
`python -m pyrualean_robot.solutions --seeds 0-9`)."""

import pytest

from pyrualean_robot.robots.tabletop import TabletopRobot
from pyrualean_robot.solutions import run_solution, split_cells

TASKS = [t.name for t in TabletopRobot.tasks()]


def test_at_least_ten_tasks_in_every_family():
    assert len(TASKS) >= 10
    fams = {t.family for t in TabletopRobot.tasks()}
    assert {"pick_place", "stack", "drawer", "multi_step"} <= fams
    for t in TabletopRobot.tasks():
        if not t.name.endswith("_swap"):
            assert t.name + "_swap" in TASKS


def test_split_cells():
    src = "# %% [markdown]\n# note\n# %%\nx = 1\n\n# %%\n\n# %%\nprint(x)\n"
    assert split_cells(src) == ["x = 1\n", "print(x)\n"]


@pytest.mark.heavy
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("seed", [11, 12])
def test_reference_solution(task, seed, tmp_path):
    run = run_solution("tabletop", task, seed, workspace=str(tmp_path))
    assert run.success, run
