"""Two congested links on two leaves, paths unknown: named as each leaf's links, not as
"one of the four spines" (telemetry/explain.py, ``Thresholds.second_look_ties``).

Without path records every cross-leaf flow may have crossed any spine, so a spine's
alternative covers both leaves' delayed flows at the greedy's first step, and once it is
chosen no link adds enough. The explanation without any spine (the two links) is
hundreds of nats likelier: the second look keeps it. On the independent record model.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cwctl import settings
from cwctl.records.path import PathTable
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from tests.unit.telemetry_synth import Synth, make


@pytest.mark.parametrize(
    ("seed", "stamps", "links"),
    [(515, "sw", ("leaf8-spine4", "leaf6-spine3")), (441, "hw", ("leaf8-spine4", "leaf5-spine2"))],
)
def test_two_delaying_links_without_paths_are_each_in_a_set(
    seed: int, stamps: str, links: tuple[str, str]
) -> None:
    synth = Synth(
        n_hosts=64, per_leaf=8, spines=4, peers=settings.PROBE_PEERS, pairs=200,
        rate=settings.PROBE_RATE, queue_ns=600.0, seed=seed, discovered=0.7, stamps=stamps,
        clock_ns=1e6, drift_ppb=2e4, sw_early_share=0.2, delay_ns={x: 6000.0 for x in links},
    )  # fmt: skip
    collection, _ = make(synth)
    solution = solve(collection.table)
    snap = build_snapshot(collection, solution)
    assert {s.element for s in snap.suspects[:2]} == set(links)  # with paths: outright
    blind = build_snapshot(replace(collection, paths=PathTable()), solution)
    assert blind.verdict == "problems"
    assert all(any(s.covers(x) for s in blind.suspects) for x in links), [
        s.element for s in blind.suspects
    ]
    assert not any(s.kind == "switch" for s in blind.suspects), [s.element for s in blind.suspects]


def test_two_slow_spines_without_paths_are_not_traded_for_every_leaf_s_links() -> None:
    """Two slow spines, one of the four chosen: seven leaves' links were likelier still
    (bench precision #83); an alternative naming more elements than the set it replaces
    had members is the set's effect spread over their neighbours, not another answer."""
    spines = ("spine4", "spine1")
    synth = Synth(
        n_hosts=64, per_leaf=8, spines=4, peers=settings.PROBE_PEERS, pairs=200,
        rate=settings.PROBE_RATE, queue_ns=150.0, seed=83, discovered=0.7, stamps="sw",
        clock_ns=1e6, drift_ppb=2e4, sw_early_share=0.2, slow_ns={x: 5000.0 for x in spines},
    )  # fmt: skip
    collection, _ = make(synth)
    blind = build_snapshot(replace(collection, paths=PathTable()), solve(collection.table))
    assert all(any(s.covers(x) for s in blind.suspects) for x in spines), [
        s.element for s in blind.suspects
    ]
