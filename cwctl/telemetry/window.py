"""The window's own verdict: could it have seen a fault, and is any queue beyond excuse.

A scan with no suspect is *healthy* only if its window could have seen a fault of the
documented sensitivity: an element losing ``sensitivity_loss`` of what crosses it. That
takes enough exchanges across every switch, link and host that ``min_expected_losses``
of them would be lost (``min_element_exchanges``; where a flow's path is unknown it
counts for each element by the chance that it crossed it), and enough coded pairs per
peer for the clocks (``few_pairs_per_peer``: at 2 pairs/s, 4 s; docs/scale.md "Agent
cost"). Short of either the verdict is
*inconclusive*, with the reasons: it exits 3 like problems, never 0.

Beside the statistics, an absolute line: a path whose median delay stands above the
fabric's median floor by at least ``absolute_queue_ns`` and ``absolute_queue_of_floor``
times that floor is a finding whatever the tests say (a window of a few probes can fail
every significance test while each probe waited 15 ms; a queue that never drained
raises the path's own floor with it, so the line is over the fabric's floor).

The verdict: ``problems`` when anything was found (suspects, unreachable hosts,
unlocalised loss or delay, such a queue), else ``inconclusive`` when the window could
not tell, else ``healthy``. The knobs are ``Thresholds``' (``thresholds.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cwctl.records import ProbeTable
from cwctl.runtime.arrays import F64
from cwctl.scan.pathreports import PathReport, path_column
from cwctl.telemetry.evidence import SignalResult
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds
from cwctl.units import fmt_ns

# The stated clock uncertainty (p99 over hosts, ns) of one healthy window at each budget
# and timestamp source: the simulator at its busiest (load 0.6), 256 hosts, seed 1 (at
# load 0.2: quick 162 / 249, watch 106 / 557). A window whose clocks are
# ``Thresholds.degraded_clocks`` times worse cannot vouch for a one-way delay: beside a
# dead spine a watch window's stood at 30-76 us before issue 36 (residual rms 455 us),
# and a round that says so is inconclusive, not "healthy" with a big number in its header.
HEALTHY_UNCERTAINTY_NS = {
    ("quick", "hw"): 240.0,
    ("quick", "sw"): 465.0,
    ("watch", "hw"): 1_110.0,
    ("watch", "sw"): 1_315.0,
}
SHOWN = 5  # thin elements named in the reason
THIN_LISTED = 50  # ...and listed in telemetry.window.thin


def pairs_per_peer(table: ProbeTable) -> float:
    """The median directed (host, peer) edge's coded pairs in the table."""
    if not len(table):
        return 0.0
    n = len(table.hosts)
    edge = table.src.astype(np.int64) * n + table.dst.astype(np.int64)
    # rows come in runs of one edge (a simulator's edge-major table, an agent's batch):
    # where no edge has two runs, the runs' lengths are the counts, without a sort
    starts = np.flatnonzero(np.r_[True, edge[1:] != edge[:-1]])
    if len(np.unique(edge[starts])) == len(starts):
        rows = np.diff(np.r_[starts, len(edge)])
    else:
        _, rows = np.unique(edge, return_counts=True)
    return float(np.median(rows)) / 2.0  # two probes a pair


def thin_elements(loss: SignalResult, thresholds: Thresholds = THRESHOLDS) -> dict[str, float]:
    """Elements (switches, links, NICs, hosts) crossed, but by fewer than
    ``min_element_exchanges`` exchanges (expected, where paths are unknown), fewest first.
    An element no probe crossed (a spine of a one-leaf fabric) is on no probed path: a
    longer window would not cross it either."""
    inc = loss.incidence
    trials = np.where(loss.trials > 0, loss.trials, 0.0)
    if not len(inc.names) or not trials.sum():
        return {}
    crossed = loss.crossed.weighted_sums(trials)
    thin = np.flatnonzero((crossed >= 1.0) & (crossed < thresholds.min_element_exchanges))
    order = thin[np.argsort(crossed[thin], kind="stable")]
    return {inc.names[int(e)]: round(float(crossed[e]), 1) for e in order}


def queued_paths(
    paths: Sequence[PathReport], thresholds: Thresholds = THRESHOLDS
) -> list[tuple[str, str, str, str]]:
    """Paths queueing beyond the absolute line, as unlocalised flows (signal ``queue``).
    A path's median over the floor is judged with its way back's, so that a clock off by
    e (e more one way, e less the other: a window of a few probes can leave one so)
    raises nothing: the round trip's median over two floors must pass the line too."""
    floors = path_column(paths, "owd_min_ns")
    floors = floors[~np.isnan(floors)]
    if not len(floors):
        return []
    floor = float(np.median(floors))
    line = max(thresholds.absolute_queue_ns, thresholds.absolute_queue_of_floor * floor)
    medians = path_column(paths, "owd_p50_ns")
    if not np.any(medians[~np.isnan(medians)] - floor >= line):  # healthy: one pass
        return []
    p50 = {(p.src, p.dst): p.owd_p50_ns for p in paths if p.owd_p50_ns is not None}
    out = []
    for (a, b), there in p50.items():
        back = p50.get((b, a))
        queue = there - floor
        if queue >= line and (back is None or there + back - 2 * floor >= line):
            words = (
                f"median delay {fmt_ns(queue)} over the fabric's floor {fmt_ns(floor)} "
                f"(the absolute line: {fmt_ns(line)})"
            )
            out.append(("queue", a, b, words))
    return out


def window_reasons(
    pairs: float, thin: dict[str, float], thresholds: Thresholds = THRESHOLDS
) -> list[str]:
    """Why the window could not tell (empty when it could)."""
    t = thresholds
    reasons = []
    if pairs < t.few_pairs_per_peer:
        reasons.append(
            f"few probes: {pairs:g} coded pairs per peer, under {t.few_pairs_per_peer}: "
            "clocks and localisation have little to go on"
        )
    if thin:
        shown = ", ".join(f"{name} {n:g}" for name, n in list(thin.items())[:SHOWN])
        more = f" and {len(thin) - SHOWN} more" if len(thin) > SHOWN else ""
        reasons.append(
            f"{len(thin)} elements crossed by fewer than {t.min_element_exchanges} exchanges "
            f"({shown}{more}): a {100 * t.sensitivity_loss:g} % loss there could go unseen"
        )
    return reasons


def clock_reasons(
    budget: str | None, stamps: str, uncertainty_ns: F64, thresholds: Thresholds = THRESHOLDS
) -> list[str]:
    """The window's clocks are degraded: their stated uncertainty (p99 over the solved
    hosts) beyond ``degraded_clocks`` times the budget's healthy figure (empty when not,
    or when the budget or the stamps have no healthy figure: rate and window by hand)."""
    healthy = HEALTHY_UNCERTAINTY_NS.get((budget or "", stamps))
    solved = uncertainty_ns[np.isfinite(uncertainty_ns) & (uncertainty_ns > 0)]
    if healthy is None or not len(solved):
        return []
    p99 = float(np.percentile(solved, 99))
    if p99 <= thresholds.degraded_clocks * healthy:
        return []
    return [
        f"clocks degraded: uncertainty p99 {fmt_ns(p99)}, {p99 / healthy:.0f}x the {budget} "
        f"budget's healthy {fmt_ns(healthy)} ({stamps} stamps): one-way delays are not"
        " to be trusted"
    ]


def window_json(
    pairs: float,
    thin: dict[str, float],
    reasons: list[str],
    thresholds: Thresholds = THRESHOLDS,
) -> dict[str, Any]:
    """The ``telemetry.window`` object: what the verdict was judged on."""
    t = thresholds
    return {
        "pairs_per_peer": round(pairs, 2),
        "needed_pairs_per_peer": t.few_pairs_per_peer,
        "thin_elements": len(thin),
        "thin": dict(list(thin.items())[:THIN_LISTED]),
        "min_element_exchanges": t.min_element_exchanges,
        "sensitivity_loss": t.sensitivity_loss,
        "inconclusive": reasons,
    }
