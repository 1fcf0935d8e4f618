"""The robot registry is the one list of robot names; suites and default seeds come from the robots."""

from __future__ import annotations

import pytest

from pyrualean_robot.robots import COMMON_ARGS, DEFAULT_ROBOT, REGISTRY, describe, robot_for_suite, suite_names
from pyrualean_robot.robots import suites as suites_mod
from pyrualean_robot.robots.tabletop import TabletopRobot


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


def test_each_class_names_itself_as_the_registry_does():
    from pyrualean_robot.robots import robot_class

    assert {n: robot_class(n).NAME for n in REGISTRY} == {n: n for n in REGISTRY}


def test_describe_lists_make_options_through_kwargs():
    rows = {n: describe(n) for n in REGISTRY}
    names = {n: {o["name"] for o in r["options"]} for n, r in rows.items()}
    # tabletop's __init__ takes **opts: the base Robot's own parameters are its options too, the episode's
    # common arguments (task, seed, ...) are not options
    assert "vla_endpoint" in names["tabletop"] and not set(COMMON_ARGS) & names["tabletop"]
    assert "libero_type" in names["libero"] and "libero_type" not in names["tabletop"]
    assert all(("env_url" in names[n]) == r["remote"] for n, r in rows.items())
    assert not {"self", "opts", "kwargs"} & set().union(*names.values())
    assert {o["name"]: o["kind"] for o in rows["libero"]["options"]}["libero_type"] == "str"


def test_options_are_coerced_and_refused_by_name():
    from pyrualean_robot.robots import coerce_options

    assert coerce_options("libero", {"libero_type": "pro"}) == {"libero_type": "pro"}
    with pytest.raises(ValueError, match="has no option 'libero_type'.*robots that take it: libero"):
        coerce_options("tabletop", {"libero_type": "pro"})


def test_suites_lists_every_robot_of_the_registry():
    rows = suites_mod.rows()
    assert [r["robot"] for r in rows] == sorted((r["robot"] for r in rows), key=list(REGISTRY).index)
    assert {r["robot"] for r in rows} == set(REGISTRY)
    for name, e in REGISTRY.items():  # a robot with suites lists exactly those
        if e.suites:
            assert {r["suite"] for r in rows if r["robot"] == name} <= set(suite_names(name)), name


def test_suites_rows_of_a_robot_without_suites_are_its_task_families():
    rows = suites_mod.rows(DEFAULT_ROBOT)
    families = {t.family or DEFAULT_ROBOT for t in TabletopRobot.tasks()}
    assert {r["suite"] for r in rows} == families and all(r["robot"] == DEFAULT_ROBOT for r in rows)
    assert sum(r["tasks"] for r in rows) == len(TabletopRobot.tasks())


def test_suites_refuses_an_unknown_robot_and_a_robot_with_suites_but_no_rows(monkeypatch):
    with pytest.raises(ValueError, match="robots: " + ", ".join(REGISTRY)):
        suites_mod.rows("no_such_robot")
    import dataclasses

    monkeypatch.setitem(REGISTRY, "libero", dataclasses.replace(REGISTRY["libero"], rows=""))
    with pytest.raises(RuntimeError, match="names no rows function"):
        suites_mod.rows("libero")
