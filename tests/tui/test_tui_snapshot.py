"""One SVG snapshot of the dashboard on the known four-host snapshot (pinned clock, UTC)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from tui_fixtures import known_snapshot

from cwctl.tui.app import make_app
from cwctl.tui.source import FixedSource

PINNED_EPOCH_S = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC


def test_dashboard_snapshot(snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    app = make_app(
        FixedSource([known_snapshot()], label="SIMULATED"),
        max_scans=1,
        clock=lambda: PINNED_EPOCH_S,
    )

    async def scanned(pilot: Any) -> None:
        # the scan worker delivers within seconds; a hang fails here, not at the suite's
        # timeout (pytest-timeout), saying what it waited for
        async with asyncio.timeout(60):
            while app.scans < 1:
                await pilot.pause(0.02)
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=(120, 40), run_before=scanned)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
