"""Fixtures for the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from cwctl.runtime.blockpool import THREADS_ENV

# In CI (CI=true) hypothesis runs a fixed set of examples, so a red CI is reproducible;
# on a developer's machine it explores new ones every run.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _isolated_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own cwctl state dir: no test reads or writes the operator's
    journal or a simulated fabric's saved actions (``$CWCTL_STATE_DIR``)."""
    directory = tmp_path_factory.mktemp("cwctl-state")
    monkeypatch.setenv("CWCTL_STATE_DIR", str(directory))
    return directory


@pytest.fixture(autouse=True)
def _one_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's workers already fill the cores (``make test``: three on two): each
    analysis works its blocks one after another (``runtime.blockpool``), as before the
    blocks ran on two threads, so the namespace fabric's agents are not starved by the
    unit tests beside them. ``test_runtime_blockpool`` runs the analysis both ways."""
    monkeypatch.setenv(THREADS_ENV, "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules on the namespace fabric first (stable otherwise): they are the longest and
    mostly wait (scans, watch holds, iperf3), so on ``make test``'s workers they start at
    once and the CPU-bound unit tests fill the time around them, not after them."""
    fabric = {item.nodeid.split("::")[0] for item in items if _on_fabric(item)}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in fabric)


def _on_fabric(item: pytest.Item) -> bool:
    return "testbed" in getattr(item, "fixturenames", ())
