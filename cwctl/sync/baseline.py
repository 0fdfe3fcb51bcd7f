"""The NTP-style baseline the benchmarks compare against (never used by a scan).

Per unordered pair, the one exchange with the smallest round-trip time gives the offset
``((t2 - t1) - (t4 - t3)) / 2`` (NTP's clock filter keeps the sample with the least
delay); no coded filter, no drift (0 ppb), no network effect: the pairs are chained
along a BFS spanning tree from the reference, as an NTP stratum hierarchy would be.
"""

from __future__ import annotations

import numpy as np

from cwctl.records import ProbeTable
from cwctl.sync.network import build_graph, tree_solve
from cwctl.sync.solution import ClockSolution
from cwctl.sync.solve import empty_solution, reference_index, window_middle


def ntp_solve(table: ProbeTable, *, reference: str | None = None) -> ClockSolution:
    """Min-RTT midpoint per pair, chained along a BFS tree from the reference."""
    complete = table.complete
    if not complete.any():
        return empty_solution(table, reference, "no complete probe exchange")
    n = len(table.hosts)
    src = table.src[complete].astype(np.intp)
    dst = table.dst[complete].astype(np.intp)
    t1, t2, t3, t4 = (getattr(table, k)[complete] for k in ("t1", "t2", "t3", "t4"))
    rtt = ((t4 - t1) - (t3 - t2)).astype(np.float64)
    theta = ((t2 - t1) - (t4 - t3)).astype(np.float64) / 2  # clock_dst - clock_src
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    theta = np.where(src == lo, theta, -theta)
    keys, pair_of = np.unique(lo.astype(np.int64) * n + hi, return_inverse=True)
    order = np.lexsort((rtt, pair_of))
    first = order[np.unique(pair_of[order], return_index=True)[1]]
    pair_lo = (keys // n).astype(np.intp)
    pair_hi = (keys % n).astype(np.intp)
    names = list(table.hosts)
    graph = build_graph(n, pair_lo, pair_hi, names, reference_index(table, reference))
    offset = tree_solve(graph, theta[first])
    comp = graph.component
    drift = np.where(comp >= 0, 0.0, np.nan)
    return ClockSolution(
        hosts=names,
        offset_ns=offset,
        drift_ppb=drift,
        uncertainty_ns=np.full(n, np.nan),
        reference=names[graph.references[0]],
        t_ref_ns=window_middle(table),
        component_reference=[names[graph.references[c]] if c >= 0 else None for c in comp],
        quality={"method": "ntp (min-RTT midpoint per pair, BFS tree)", "pairs": len(keys)},
    )
