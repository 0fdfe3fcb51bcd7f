"""A window whose clocks are degraded says so in its verdict (issue 36)."""

from __future__ import annotations

import numpy as np

from cwctl.telemetry.thresholds import THRESHOLDS
from cwctl.telemetry.window import HEALTHY_UNCERTAINTY_NS, clock_reasons


def test_clocks_far_beyond_the_budgets_healthy_uncertainty_are_a_reason() -> None:
    unc = np.full(512, 76_000.0)  # a dead spine's sparse window before issue 36
    unc[0] = 0.0  # the reference
    (reason,) = clock_reasons("watch", "hw", unc)
    assert reason.startswith("clocks degraded") and "watch" in reason


def test_clocks_within_the_bar_or_of_no_known_budget_are_not() -> None:
    healthy = HEALTHY_UNCERTAINTY_NS[("quick", "sw")]
    assert clock_reasons("quick", "sw", np.full(64, THRESHOLDS.degraded_clocks * healthy)) == []
    assert clock_reasons(None, "hw", np.full(64, 1e9)) == []
    assert clock_reasons("watch", "hw", np.full(4, np.nan)) == []
