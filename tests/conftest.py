"""Fixtures for the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

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
