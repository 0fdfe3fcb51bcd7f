"""R in the TUI: steer around the selected suspect at the hosts (reroute --at hosts); on
the simulator the plan changes the model the TUI probes, so the next scans clear it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_fixtures import SIZE, wait_for

from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.session import ScanSession
from cwctl.tui.app import make_app
from cwctl.tui.screens.confirm import ConfirmScreen
from cwctl.tui.widgets.suspects import SuspectsTable


async def test_steer_key_plans_host_steering_and_the_suspect_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    request = ScanRequest(
        sim=SimOptions(hosts=16, hosts_per_leaf=4, seed=3, faults=("switch:spine3:down",)),
        duration_s=0.3,
        overrides=ProbeOverrides(rate=100.0),
    )
    source = ScanSession(request, sliding=True)
    app = make_app(source, interval_s=0.01)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None and app.snapshot.suspects)
            assert app.dashboard.query_one(SuspectsTable).selected_element == "spine3"
            await pilot.press("R")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 20)
            text = str(app.screen.query_one("#plan-text").render())
            assert "host pair(s): new flows leave from source ports off spine3" in text
            await pilot.press("y")
            await wait_for(pilot, lambda: bool(app.applied), 20)
            assert set(source.model.state.steered.values()) == {"spine3"}
            assert source.model.state.ecmp_weight == {}  # the switches were left alone
            applied_at = app.scans
            await wait_for(pilot, lambda: app.scans > applied_at + 1, 20)
            assert app.snapshot is not None
            assert "spine3" not in {s.element for s in app.snapshot.suspects}
    finally:
        await source.aclose()
