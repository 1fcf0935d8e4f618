"""pyrualean_robot: the `robo` object an LLM agent drives from notebook cells.

    from pyrualean_robot import make
    robo = make("tabletop", task="stack_blocks", seed=0)
"""

from __future__ import annotations

import os
from typing import Any, Optional

# Offscreen CPU rendering; must be decided before mujoco is first imported.
os.environ.setdefault("MUJOCO_GL", "egl")

from .base import Robot, TaskInfo, tool
from .errors import EpisodeFinished, SandboxError, ToolError
from . import notebook
from .notebook import cell_report, display, episode_card
from .robots import DEFAULT_ROBOT, REGISTRY, RobotUnavailable, create, robot_class

__all__ = ["make", "Robot", "TaskInfo", "tool", "EpisodeFinished", "SandboxError", "ToolError", "cell_report",
           "display", "episode_card", "REGISTRY", "RobotUnavailable", "robot_class"]


def make(robot: str = DEFAULT_ROBOT, *, task: Optional[str] = None, seed: Optional[int] = None,
         workspace: Optional[str] = None,
         images: str = "on-motion", primitives: str = "full", suite: Optional[str] = None,
         vla_endpoint: Optional[str] = None, max_env_steps: int = 10000, **extra: Any) -> Robot:
    """Create a robot and make it the kernel's active robot (hooks, cell_report, episode_card).

    robot: a name of ``REGISTRY`` (``python -m pyrualean_robot.robots``); the default is ``DEFAULT_ROBOT``, the
    embedded MuJoCo tabletop.
    task: the task name (`pyrualean tasks --robot R`); seed: layout seed (same task+seed+cells = same run;
    default: the robot's own, e.g. 0 for tabletop/libero, 100000 for RoboTwin's verified demo_randomized scene).
    workspace: folder for calls.jsonl and the files policy code may open (default: the current directory).
    images: "on-motion" | "on-demand" | "none"; primitives: "full" | "no-vla".
    With $PYRUALEAN_ROBOT_SERVER set (a sealed episode) the robot already runs in that robot server and this
    returns its proxy (:mod:`pyrualean_robot.served`), checked against these arguments.
    extra: the robot's own options (e.g. libero's sam3_endpoint and libero_type, env_url of remote robots).
    """
    served = os.environ.get("PYRUALEAN_ROBOT_SERVER")
    if served:  # a sealed episode: the robot runs in its server, this kernel gets the proxy (same API)
        from .served import connect

        return connect(served, workspace=workspace, expect={
            "robot": robot, "task": task, "seed": seed, "images": images, "primitives": primitives,
            "suite": suite, "max_env_steps": max_env_steps})
    robo = create(robot, task=task, seed=seed, workspace=workspace, images=images, primitives=primitives,
                  suite=suite, vla_endpoint=vla_endpoint, max_env_steps=max_env_steps, **extra)
    notebook.attach(robo)  # here, not in each robot: every robot made gets the kernel's hooks the same way
    return robo
