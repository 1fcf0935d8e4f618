"""Served robots: the simulator, the task predicate and the primitive ledger in a robot server process
(:mod:`.server`) owned by the Go side, and in the agent's (sealed) kernel a proxy ``robo`` generated from the
robot class (:mod:`.proxy`) with the same API, docstrings and result types.

    from pyrualean_robot.served import connect
    robo = connect("/run/.../agent.sock")
"""

from .proxy import RobotProxy, connect, proxy_class

__all__ = ["connect", "proxy_class", "RobotProxy"]
