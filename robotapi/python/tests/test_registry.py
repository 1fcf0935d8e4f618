"""The robot registry is the one list of robot names; suites and default seeds come from the robots."""

from __future__ import annotations

import pytest

from pyrualean_robot.robots import REGISTRY, describe, robot_for_suite, suite_names
from pyrualean_robot.robots import suites as suites_mod


@pytest.mark.parametrize("suite,robot", [("libero_spatial_swap", "libero"), ("libero_90", "libero"),
                                         ("demo_randomized", "robotwin"), ("target50", "robocasa"),
                                         ("robodojo_sim", "robodojo_xpl_rgb")])
def test_a_suite_names_its_robot(suite, robot):
    assert robot_for_suite(suite) == robot


def test_an_unknown_suite_names_the_known_ones():
    with pytest.raises(ValueError, match="libero_spatial_swap"):
        robot_for_suite("libero_nowhere")


def test_describe_reads_the_class():
    rows = {n: describe(n) for n in REGISTRY}
    assert rows["robotwin"]["default_seed"] == 100000 and rows["robotwin"]["remote"]
    assert rows["tabletop"]["default"] and not rows["tabletop"]["remote"] and rows["tabletop"]["suites"] == []
    assert all(r["available"] for r in rows.values()), rows


def test_suites_lists_every_adapter_of_the_registry():
    assert set(suites_mod.ADAPTER_ROBOTS) == set(REGISTRY) - {"tabletop"}
    assert {r["suite"] for r in suites_mod.robodojo_rows()} == set(suite_names("robodojo_xpl_rgb"))
