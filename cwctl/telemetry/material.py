"""Is a delay suspect material: does it move its flows' delays, and more than load does?

The delay fit (``localize.py``) picks elements that delay a share of their probes beyond
the threshold. Two tests then keep only those an operator must act on:

shift   a queue somewhat busier than the rest shows up in the tail long before it
        matters: a suspect must shift the median excess of its flows, over that of the
        flows crossing no suspect, by ``delay_shift_of_floor`` of the fabric's typical
        path floor. Each flow counts by the odds the fit gives that it crossed the
        suspect (where paths are unknown, a delayed flow may be a link's or a spine's at
        even odds), and crosses no suspect when those odds sum under a half.
hot     under load the links' queues differ, and the busiest healthy ones delay their
        probes as often as a congested link does (the simulator at load 0.6 runs healthy
        queues up to 0.9 utilisation: a healthy link was once named at 13 % of its
        probes, while a congested link at load 0.5 with software stamps fitted 11 %).
        Where the share cannot tell them, the median
        can: a congested link's flows wait far longer than the fabric's typical link's,
        a busy healthy link's a little longer. A leaf-spine link of known paths must
        have the median excess of its flows (the median over them of each flow's median
        excess) ``hot_link_ratio`` times the typical link's, both over the quiet links'
        (the ``hot_quiet_quantile`` of the links': what every path waits, software
        stamps' noise included); a spine, the median over its links, ``hot_spine_ratio``
        times.
        The typical link is the median of those no chosen spine holds (two congested
        spines of four hold half of the links). Without path records no link's flows
        are certain, and the test says nothing.

The knobs are ``Thresholds``' (``thresholds.py``); their measured separation, and the
bench cases behind it, are in docs/localisation.md.
"""

from __future__ import annotations

import numpy as np

from cwctl.runtime.arrays import F64
from cwctl.sync.robust import median_per_group, weighted_median
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.evidence import SignalResult
from cwctl.telemetry.hierarchy import link_spines
from cwctl.telemetry.thresholds import Thresholds


def drop_immaterial_delays(res: SignalResult, counts: FlowCounts, thresholds: Thresholds) -> None:
    """Drop from ``res``'s fit the delay suspects that fail either test (module doc)."""
    if not res.fit.rates or not np.isfinite(counts.floor_ns):
        return
    m = res.crossed
    chosen = list(res.fit.rates)
    # each flow counted by how likely it crossed the suspect: where paths are unknown a
    # delayed flow may be the suspect's as likely as another chosen element's (a link's
    # alternative beside a spine's, 0.5 each), and "more likely
    # than not" would leave the suspect no flow at all
    crossed = {e: m.column(e) for e in chosen}
    clean = np.sum([crossed[e] for e in chosen], axis=0) < 0.5
    p50 = counts.excess_p50_ns
    finite = np.isfinite(p50)
    base = float(np.median(p50[clean & finite])) if np.any(clean & finite) else 0.0
    hot = _Hot(res, p50, thresholds)
    # spines first, each against the links no chosen spine holds (two congested spines of
    # four hold half of the links, whose median would be theirs); then links, against
    # those no spine that passed holds
    spines = [e for e in chosen if hot.is_spine(e)]
    passed = [e for e in spines if hot.passes(e, held=spines)]
    for e in chosen:
        theirs = weighted_median(p50, np.where(finite, crossed[e], 0.0))
        shift = theirs - base if np.isfinite(theirs) else 0.0
        material = e in passed if e in spines else hot.passes(e, held=passed)
        if shift < thresholds.delay_shift_of_floor * counts.floor_ns or not material:
            res.fit.rates.pop(e)
            res.fit.gains.pop(e, None)


class _Hot:
    """The hot-link test: each leaf-spine link's median excess (module doc)."""

    def __init__(self, res: SignalResult, p50: F64, thresholds: Thresholds) -> None:
        self.thresholds = t = thresholds
        spine_of = link_spines(res.incidence)
        self.links: dict[int, list[int]] = {e: [e] for e in spine_of}
        for link, spine in spine_of.items():
            self.links.setdefault(spine, []).append(link)
        links = np.fromiter(spine_of, np.intp, len(spine_of))
        through = res.incidence.by_element[:, links].tocoo()  # (flow, link's column)
        values = p50[through.row]
        values = np.where(np.isfinite(values), values, np.nan)
        flows = np.bincount(through.col, ~np.isnan(values), len(links))
        median = median_per_group(values, through.col, len(links))
        self.median = {
            int(links[j]): float(median[j]) for j in np.flatnonzero(flows >= t.min_link_flows)
        }
        measured = list(self.median.values())
        self.quiet = float(np.quantile(measured, t.hot_quiet_quantile)) if measured else 0.0

    def is_spine(self, e: int) -> bool:
        return e in self.links and self.links[e] != [e]

    def passes(self, e: int, held: list[int]) -> bool:
        """True unless ``e`` is a leaf-spine link or a spine whose links' median excess
        (a spine's: the median over its links) stands under ``hot_link_ratio`` (a spine:
        ``hot_spine_ratio``) times the typical link's, of those the spines ``held`` do not
        hold; True wherever too few links are measured to say what is typical."""
        values = [self.median[link] for link in self.links.get(e, ()) if link in self.median]
        busy = {link for spine in held for link in self.links.get(spine, ())}
        free = [v for link, v in self.median.items() if link not in busy]
        t = self.thresholds
        if not values or len(free) < t.min_links:
            return True
        typical = float(np.median(free)) - self.quiet
        ratio = t.hot_spine_ratio if self.is_spine(e) else t.hot_link_ratio
        return typical <= 0 or float(np.median(values)) - self.quiet >= ratio * typical
