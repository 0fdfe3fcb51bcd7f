"""Placeholder until the Huygens-style solver lands: NTP-style min-RTT per pair, tree solve."""

from __future__ import annotations

import numpy as np

from cwctl.records import ProbeTable
from cwctl.sync.solution import ClockSolution


def solve(table: ProbeTable, *, reference: str | None = None) -> ClockSolution:
    n = len(table.hosts)
    nan = np.full(n, np.nan)
    complete = table.complete
    t_ref = int(np.median(table.t1[complete])) if complete.any() else 0
    return ClockSolution(
        hosts=list(table.hosts),
        offset_ns=nan.copy(),
        drift_ppb=nan.copy(),
        uncertainty_ns=nan.copy(),
        reference=reference or (table.hosts[0] if n else None),
        t_ref_ns=t_ref,
    )
