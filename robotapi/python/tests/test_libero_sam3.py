"""LIBERO perception honesty (issue 14 item 13): without a SAM 3 server segment() reads the simulator's own
masks and the card says so; with sam3_endpoint it speaks RPent's SAM 3 protocol (tested against a fake that
follows robots/libero/sam3_server.py) and back-projects the server's mask. Also the original's --libero-type."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest

from pyrualean_robot import ToolError, make

from fixtures import fake_sam3

SUITE = "libero_spatial_swap"


@pytest.fixture(scope="module")
def sim_robo(tmp_path_factory):
    r = make("libero", suite=SUITE, task=0, seed=0, workspace=str(tmp_path_factory.mktemp("sim")), images="none")
    yield r
    r.close()


@pytest.fixture(scope="module")
def sam3(sim_robo, tmp_path_factory):
    """A fake SAM 3 server whose masks for "plate" and "black bowl" are the simulator's (at 1024 px, step 0),
    and a LIBERO robot of the same scene that segments through it."""
    seg = sim_robo._view("agentview", 1024, 0, "seg")
    masks = {"plate": sim_robo._sim.mask("plate_1", seg)}
    fake = fake_sam3.FakeSam3(masks, score=0.87)
    server = fake_sam3.serve(fake)
    r = make("libero", suite=SUITE, task=0, seed=0, workspace=str(tmp_path_factory.mktemp("sam3")), images="none",
             sam3_endpoint=server.url, libero_type="pro")
    yield fake, r
    r.close()
    server.close()


@pytest.mark.heavy
def test_without_sam3_the_card_says_simulator_masks(sim_robo):
    facts = sim_robo._episode_card()["facts"]
    assert facts["perception"] == "simulator-masks" and facts["libero_type"] == "pro"
    assert sim_robo.segment("plate").score == 1.0


@pytest.mark.heavy
def test_segment_speaks_rpents_sam3_protocol(sam3, sim_robo):
    fake, r = sam3
    assert r._episode_card()["facts"]["perception"] == "sam3"
    seg = r.segment("plate", min_score=0.3)
    req = fake.requests[-1]
    # the request: the PNG of the image segment() reads, the words, the threshold; no point with words
    assert req["text_prompt"] == "plate" and req["point"] is None and req["min_score"] == 0.3
    assert req["image"].shape == (1024, 1024, 3) and np.array_equal(req["image"], r.image("agentview"))
    # the answer: SAM 3's score, the server's mask back-projected here (same mask -> same point as the sim's)
    want = sim_robo.segment("plate")
    assert seg.found and seg.score == pytest.approx(0.87) and seg.name == ""
    assert np.allclose(seg.world_xyz, want.world_xyz, atol=1e-4) and seg.box == want.box
    assert r.artifact(seg.overlay_artifact)[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.heavy
def test_sam3_point_prompt_and_misses(sam3, sim_robo):
    fake, r = sam3
    c0, r0, c1, r1 = sim_robo.segment("plate").box
    row, col = (r0 + r1) // 2, (c0 + c1) // 2
    seg = r.segment(point=(row, col))
    assert fake.requests[-1]["point"] == [row, col] and fake.requests[-1]["text_prompt"] is None
    assert seg.found and seg.score == pytest.approx(0.87)
    miss = r.segment("giraffe")
    assert not miss.found and miss.world_xyz is None and "SAM 3" in miss.error and "no candidate" in miss.error
    low = r.segment("plate", min_score=0.95)  # the server's threshold, as RPent's: found False with the score
    assert not low.found and low.score == pytest.approx(0.87) and "below min_score" in low.error


@pytest.mark.heavy
def test_unreachable_sam3_is_a_tool_error_naming_segment(sim_robo, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    r = make("libero", suite=SUITE, task=0, seed=0, workspace=str(tmp_path), images="none",
             sam3_endpoint=f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(ToolError) as e:
            r.segment("plate")
        assert e.value.tool == "segment" and "unreachable" in str(e.value)
    finally:
        r.close()


@pytest.mark.parametrize("kwargs, match", [
    ({"libero_type": "plus"}, "libero_type must be one of"),
    ({"libero_type": "standard"}, "LIBERO-PRO suite"),
    ({"sam3_endpoint": "ftp://x"}, "http://host:port"),
])
def test_bad_libero_type_or_sam3_endpoint_is_a_clear_error(kwargs, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        make("libero", suite=SUITE, task=0, workspace=str(tmp_path), **kwargs)
