"""A spine whose every link carries the excess is the spine, not its busiest link: a
congested spine under load (the simulator's hidden hash, bench/precision's #16, #202,
#322), by the delay fit and by shifted floors; a lossy link beside a dead spine stays
the link (its round trips back by the dead spine are the spine's losses, not its own)."""

from __future__ import annotations

import pytest

from cwctl import settings
from cwctl.fabric.topology import leaf_spine
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from cwctl.transport.sim import run_model


def _scan(seed: int, stamps: str, load: float, faults: list[str]) -> FabricSnapshot:
    names, topo = leaf_spine(64, 8, 4)
    params = SimParams(timestamps=stamps, load=load)
    model = FabricModel(names, topo, params=params, seed=seed, faults=faults)
    collection = run_model(model, settings.PROBE_DURATION_S)
    return build_snapshot(collection, solve(collection.table))


@pytest.mark.parametrize(
    ("seed", "stamps", "load", "faults", "spine"),
    [
        (16, "hw", 0.6, ["switch:spine4:congested"], "spine4"),  # was leaf3-spine4
        (322, "sw", 0.6, ["switch:spine3:down", "switch:spine4:congested"], "spine4"),
    ],
)
def test_a_congested_spine_is_named_not_its_links(
    seed: int, stamps: str, load: float, faults: list[str], spine: str
) -> None:
    snap = _scan(seed, stamps, load, faults)
    named = [s.element for s in snap.suspects]
    assert spine in named[: len(faults)], named
    assert not [n for n in named if n.endswith(f"-{spine}")], named


def test_a_lossy_link_beside_a_dead_spine_stays_the_link() -> None:
    snap = _scan(5, "hw", 0.3, ["switch:spine2:down", "link:leaf1-spine3:lossy=0.05"])
    assert {s.element for s in snap.suspects[:2]} == {"spine2", "leaf1-spine3"}, [
        s.element for s in snap.suspects
    ]
