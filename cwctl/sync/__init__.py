"""Clock sync: from probe records to every host's offset and drift (docs/sync.md).

Public API (the contract the pipeline, telemetry and benches use):

``solve(table, *, reference=None) -> ClockSolution``
``one_way_delays(table, solution) -> (fwd_ns, rev_ns)`` float arrays, one per row,
NaN where the exchange is incomplete.
"""

from __future__ import annotations

from cwctl.sync.solution import ClockSolution, one_way_delays
from cwctl.sync.solve import solve

__all__ = ["ClockSolution", "one_way_delays", "solve"]
