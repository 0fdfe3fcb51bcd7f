"""A window whose flows are too thin for any one of them to be significant still names
the element whose flows, pooled, are delayed (``telemetry/voting.py``'s
``thin_flows``). At the watch budget (10 coded pairs a peer over 4 ports) a delay flow
holds two or three pairs, and its own floor's never counts as delayed: no flow was bad,
nothing voted, nothing was fitted, and a spine queueing most of its probes was named by
nothing (the simulator's seed 9 said healthy, exit 0). On the independent record model."""

from __future__ import annotations

import pytest

from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from tests.unit.telemetry_synth import Synth, make


def _watch_window(seed: int, delay_ns: dict[str, float]) -> FabricSnapshot:
    synth = Synth(
        n_hosts=64, per_leaf=8, spines=4, peers=10, pairs=10, ports=4, rate=2.0,
        queue_ns=300.0, seed=seed, discovered=0.7, delay_ns=delay_ns,
    )  # fmt: skip
    collection, _ = make(synth)
    return build_snapshot(collection, solve(collection.table))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_queued_spine_is_named_from_flows_too_thin_to_be_bad_alone(seed: int) -> None:
    snap = _watch_window(seed, {"spine2": 3000.0})  # a mean extra wait of 3 us
    assert [s.element for s in snap.suspects][:1] == ["spine2"], snap.suspects
    assert snap.verdict == "problems" and not snap.healthy
    assert "delay" in snap.telemetry["rates"]["spine2"]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_same_thin_window_without_a_fault_stays_healthy(seed: int) -> None:
    snap = _watch_window(seed, {})
    assert (snap.verdict, snap.suspects) == ("healthy", [])
