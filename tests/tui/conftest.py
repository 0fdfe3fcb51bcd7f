"""Fixtures for the TUI tests: a known snapshot, a tiny simulated fleet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tui_fixtures import known_snapshot

from cwctl.pipeline import ScanRequest, SimOptions
from cwctl.snapshot import FabricSnapshot
from cwctl.transport.sim import forget_kept_models


@pytest.fixture
def known() -> FabricSnapshot:
    return known_snapshot()


@pytest.fixture
def sim_request() -> Iterator[ScanRequest]:
    """16 simulated hosts, 0.3 s windows, a link that turns lossy at 0.3 s (the second
    window); a fresh kept model per test."""
    forget_kept_models()
    yield ScanRequest(
        sim=SimOptions(
            hosts=16,
            hosts_per_leaf=4,
            spines=2,
            seed=7,
            faults=("link:leaf1-spine2:lossy=0.2@0.3",),
        ),
        duration_s=0.3,
    )
    forget_kept_models()
