"""A raised floor that a busy queue holds up is no finding (telemetry/verdicts.py).

Each flow's median wait over its own floor is held against its own kind's: a flow
within one leaf meets half the queues a cross-leaf flow meets, so against every flow's
median (7 in 8 cross-leaf) a same-leaf flow behind a busy access queue looked normal.
"""

from __future__ import annotations

import numpy as np

from cwctl.fabric.topology import leaf_spine
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from cwctl.telemetry.verdicts import queue_held
from cwctl.transport.sim import run_model


def test_a_flow_is_held_against_its_own_kind() -> None:
    same = np.array([True] * 8 + [False] * 56)
    wait = np.where(same, 1_400.0, 3_600.0)
    wait[0] = 4_500.0  # a same-leaf flow 3.2x its kind's, 1.5x every flow's median
    wait[8] = 6_500.0  # a cross-leaf flow 1.8x its kind's
    wait[9] = 8_000.0  # ...and 2.2x
    held = queue_held(wait, same)
    assert held.tolist() == [True] + [False] * 8 + [True] + [False] * 54


def test_no_kind_with_no_wait_known_holds_anything() -> None:
    same = np.array([True, True, False])
    wait = np.array([np.nan, np.nan, 5_000.0])
    assert not queue_held(wait, same).any()


def test_a_healthy_fabric_with_busy_access_queues_is_healthy() -> None:
    """Bench precision's scans #480 and #516 (hw stamps, load 0.6, healthy): "unlocalised
    floor" on 3-4 same-leaf flows raised ~1 us, each of whose probes waited 4-8 us at the
    median behind access queues the model runs at up to 0.9."""
    names, topo = leaf_spine(64, 8, 4)
    for seed in (480, 516):
        model = FabricModel(names, topo, params=SimParams(timestamps="hw", load=0.6), seed=seed)
        collection = run_model(model, 2.0)
        snap = build_snapshot(collection, solve(collection.table))
        assert snap.healthy, (seed, snap.verdict_reasons())
