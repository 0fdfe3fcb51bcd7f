"""Load against congestion: at load 0.6 the simulator runs its busiest healthy queues at
0.9, and they delay their probes as often as a congested link (issue 21). A healthy
fabric under that load names nothing; a congested link whose flows wait far longer than
the typical link's is named even where its share delayed is small (software stamps at
load 0.5); two congested spines of four, holding half of the links, are both named.

The scans are the simulator's (its hidden hash, its own queues): nothing here shares
the localiser's tests."""

from __future__ import annotations

import pytest

from tests.unit.sim_scans import sim_scan


@pytest.mark.parametrize("seed", [14, 22, 30])
def test_a_healthy_fabric_at_load_0_6_names_no_busy_link(seed: int) -> None:
    # these named leaf6-spine1, leaf6-spine3, leaf6-spine1 at 0.23-0.27 (3 of seeds 1-39):
    # healthy queues at 0.9 utilisation
    snap = sim_scan(seed, "hw", 0.6)
    assert snap.healthy, [(s.element, s.score, s.evidence) for s in snap.suspects]


@pytest.mark.parametrize(
    ("seed", "link"), [(3, "leaf4-spine4"), (6, "leaf7-spine3"), (8, "leaf1-spine1")]
)
def test_a_congested_link_with_kernel_stamps_at_load_0_5_is_named(seed: int, link: str) -> None:
    # each delayed 10-12 % of its probes, under the 12 % an element had to add, and the
    # scan exited 0 (12 of seeds 1-29)
    snap = sim_scan(seed, "sw", 0.5, (f"link:{link}:congested",))
    assert not snap.healthy
    assert snap.suspects[0].element == link, [s.element for s in snap.suspects]


def test_two_congested_spines_of_four_are_both_named_at_load_0_6() -> None:
    # half of the links are theirs: the typical link is one of the other spines'
    faults = ("switch:spine2:congested=0.95", "switch:spine4:congested=0.95")
    snap = sim_scan(308, "hw", 0.6, faults)
    named = {s.element for s in snap.suspects[:2]}
    assert named == {"spine2", "spine4"}, [(s.element, s.score) for s in snap.suspects]
