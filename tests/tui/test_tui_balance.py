"""``b``: the uplinks' load and the moves that level it, planned through the one front
door (``cwctl rebalance``'s plan) and confirmed in a dialog; never under --readonly. The
plan itself on real hosts: tests/integration/test_rebalance_testbed.py."""

from __future__ import annotations

from tui_fixtures import SIZE, known_snapshot, wait_for

from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.session import ScanSession
from cwctl.tui.app import make_app
from cwctl.tui.screens.confirm import NoticeScreen
from cwctl.tui.source import FixedSource


async def test_b_without_hosts_says_so_and_applies_nothing() -> None:
    app = make_app(FixedSource([known_snapshot()], label="FIXED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, NoticeScreen))
        text = str(app.screen.query_one("#notice-text").render())
        assert "spread colliding flows over the leaves' uplinks" in text
        assert "From a shell: cwctl rebalance  (prints the plan" in text
        await pilot.press("escape")
        assert app.screen is app.dashboard and app.applied == []


async def test_b_on_the_simulator_names_why_not() -> None:
    session = ScanSession(ScanRequest(sim=SimOptions(hosts=16), duration_s=0.5))
    app = make_app(session, max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, NoticeScreen))
        text = str(app.screen.query_one("#notice-text").render())
        assert "give an inventory (-i), not --sim" in text
    await session.aclose()


async def test_b_is_unbound_under_readonly() -> None:
    app = make_app(FixedSource([known_snapshot()], label="FIXED"), readonly=True, max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("b")
        await pilot.pause(0.3)
        assert app.screen is app.dashboard
