import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture
def make_robot(tmp_path):
    """Factory for tabletop robots writing their ledger under tmp_path."""
    from pyrualean_robot import make

    def _make(task="put_block_in_bowl", seed=0, **kw):
        kw.setdefault("images", "none")
        return make("tabletop", task=task, seed=seed, workspace=str(tmp_path / f"ws-{task}-{seed}"), **kw)

    return _make
