"""The localiser's thresholds are one object passed in: every field is read where it
decides, and one field replaced is all it takes to change an answer (judged against
the simulator's own fault, not the localiser's functions)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import cwctl.telemetry
from cwctl import settings
from cwctl.fabric.topology import leaf_spine
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import solve
from cwctl.telemetry import THRESHOLDS, Thresholds, build_snapshot
from cwctl.transport.sim import run_model

LINK = "leaf1-spine3"


def test_every_threshold_is_read_by_the_code_it_decides() -> None:
    package = Path(cwctl.telemetry.__file__).parent
    source = "\n".join(p.read_text() for p in sorted(package.glob("*.py")))
    unread = [f.name for f in dataclasses.fields(Thresholds) if f".{f.name}" not in source]
    assert unread == []


def test_the_thresholds_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        THRESHOLDS.min_loss_rate = 0.5  # type: ignore[misc]


def test_a_lossy_link_is_unnamed_when_the_least_loss_asked_is_above_its_own() -> None:
    names, topo = leaf_spine(64, 8, 4)
    model = FabricModel(
        names, topo, params=SimParams(load=0.3), seed=5, faults=[f"link:{LINK}:lossy=0.05"]
    )
    collection = run_model(model, settings.PROBE_DURATION_S)
    solution = solve(collection.table)
    default = build_snapshot(collection, solution)
    assert default.suspects[0].element == LINK
    stricter = dataclasses.replace(THRESHOLDS, min_loss_rate=0.2)
    snap = build_snapshot(collection, solution, thresholds=stricter)
    assert LINK not in {m for s in snap.suspects for m in s.members}
