"""Fixtures for the TUI tests: a known snapshot, a tiny simulated fleet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tui_fixtures import known_snapshot

from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.scan.snapshot import FabricSnapshot


@pytest.fixture
def known() -> FabricSnapshot:
    return known_snapshot()


@pytest.fixture
def sim_request() -> Iterator[ScanRequest]:
    """16 simulated hosts, 0.3 s windows at rate 100 (volume enough to see a loss), a
    link that turns lossy at 0.3 s (the second window); each session that scans it
    builds its own model."""
    yield ScanRequest(
        sim=SimOptions(
            hosts=16,
            hosts_per_leaf=4,
            spines=2,
            seed=7,
            faults=("link:leaf1-spine2:lossy=0.2@0.3",),
        ),
        duration_s=0.3,
        overrides=ProbeOverrides(rate=100.0),
    )
