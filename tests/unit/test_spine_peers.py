"""A spine that delays through all of its links stands out against its peers, and is named
at a rate under the 12 % an element must otherwise add; a few busy links of a spine stay
the links (``telemetry/hierarchy.py``'s ``spread_spines``). On the independent record
model: spines whose every probe meets an extra queue of 1.5 us mean at load 0.6 delay
about 10 % of their probes beyond the threshold, and the scan said healthy (exit 0), as
bench/precision's #308 did for two congested spines of four on the simulator."""

from __future__ import annotations

import pytest

from cwctl import settings
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from tests.unit.telemetry_synth import Synth, make

LOAD = 0.6
QUEUE_NS = 1500.0  # mean extra wait on every probe crossing the element


def _scan(queued: tuple[str, ...], seed: int = 1) -> FabricSnapshot:
    synth = Synth(
        n_hosts=64, per_leaf=8, spines=4, peers=settings.PROBE_PEERS, pairs=200,
        rate=settings.PROBE_RATE, queue_ns=1500.0 * LOAD, seed=seed, discovered=0.7,
        stamps="hw", clock_ns=1e6, drift_ppb=2e4, delay_ns={e: QUEUE_NS for e in queued},
    )  # fmt: skip
    collection, _ = make(synth)
    return build_snapshot(collection, solve(collection.table))


@pytest.mark.parametrize("spines", [("spine3",), ("spine2", "spine3")])
def test_a_spine_queued_at_every_link_is_named_under_the_usual_rate(
    spines: tuple[str, ...],
) -> None:
    snap = _scan(spines)
    first = {s.element for s in snap.suspects[: len(spines)] if not s.candidates}
    assert first == set(spines), [s.element for s in snap.suspects]
    assert snap.verdict == "problems"
    rates = snap.telemetry["rates"]
    # what it adds is under the 12 % that a link or a lone busy spine must add
    assert all(rates[s]["delay"] < 0.12 for s in spines), rates


def test_two_busy_links_of_a_spine_stay_the_links() -> None:
    links = ("leaf1-spine2", "leaf2-spine2")
    snap = _scan(links)
    named = [s.element for s in snap.suspects]
    assert set(named[:2]) == set(links), named
    assert "spine2" not in named
