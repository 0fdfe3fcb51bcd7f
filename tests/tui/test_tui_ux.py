"""The operator's experience of the TUI (issue 25): keys, layout at the stated sizes,
and the heatmap's cursor and drill-down, through Textual's Pilot."""

from __future__ import annotations

from typing import Any

import pytest
from tui_fixtures import SIZE, known_snapshot, wait_for

from cwctl.tui.app import CwctlApp, make_app
from cwctl.tui.screens.filter import FilterScreen
from cwctl.tui.screens.help import HelpScreen
from cwctl.tui.source import FixedSource


def fixed_app(snapshot: Any = None, **kwargs: Any) -> CwctlApp:
    source = FixedSource([snapshot or known_snapshot()], label="SIMULATED")
    kwargs.setdefault("max_scans", 1)
    return make_app(source, **kwargs)


async def test_ctrl_c_quits_from_the_dashboard() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans >= 1)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit
    assert app.return_code == 0


@pytest.mark.parametrize(
    ("opener", "screen"), [("question_mark", HelpScreen), ("slash", FilterScreen)]
)
async def test_ctrl_c_quits_from_a_dialog_and_the_filter_prompt(opener: str, screen: type) -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans >= 1)
        await pilot.press(opener)
        await wait_for(pilot, lambda: isinstance(app.screen, screen))
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit
