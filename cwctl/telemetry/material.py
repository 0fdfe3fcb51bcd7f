"""Is a delay suspect material: does it move its flows' delays, and more than load does?

The delay fit (``localize.py``) picks elements that delay a share of their probes beyond
the threshold. Two tests then keep only those an operator must act on:

shift   a queue somewhat busier than the rest shows up in the tail long before it
        matters: a suspect must shift the median excess of its flows, over that of the
        flows crossing no suspect, by ``DELAY_SHIFT_OF_FLOOR`` of the fabric's typical
        path floor. Each flow counts by the odds the fit gives that it crossed the
        suspect (where paths are unknown, a delayed flow may be a link's or a spine's at
        even odds), and crosses no suspect when those odds sum under a half.
hot     under load the links' queues differ, and the busiest healthy ones delay their
        probes as often as a congested link does (the simulator at load 0.6 runs healthy
        queues up to 0.9 utilisation: bench/precision #504 named a healthy
        ``leaf8-spine4`` at 13 % of its probes, while a congested link at load 0.5 with
        software stamps fitted 11 %, #258). Where the share cannot tell them, the median
        can: a congested link's flows wait far longer than the fabric's typical link's,
        a busy healthy link's a little longer. A leaf-spine link of known paths must
        have the median excess of its flows (the median over them of each flow's median
        excess) ``HOT_LINK_RATIO`` times the typical link's, both over the quiet links'
        (the ``QUIET_QUANTILE`` of the links': what every path waits, software stamps'
        noise included); a spine, the median over its links, ``HOT_SPINE_RATIO`` times.
        The typical link is the median of those no chosen spine holds (two congested
        spines of four hold half of the links). Without path records no link's flows
        are certain, and the test says nothing.

Measured over bench/precision #0-#599 (``docs/simulator.md``): congested links at 6.2-58
(hw and sw, loads 0.1-0.6, 0.95 at 0.6), healthy links up to 6.1 (#384, at load 0.6), the
healthy links that were named (#132, #504, #516) 2.1-4.9; congested spines 5.8-69, the
healthy spines named (#384, #516) 2.8-3.0.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cwctl.sync.robust import median_per_group, weighted_median
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.evidence import SignalResult
from cwctl.telemetry.hierarchy import link_spines

F64 = npt.NDArray[np.float64]

DELAY_SHIFT_OF_FLOOR = 0.2  # a suspect moves its flows' median delay this share of the floor
HOT_LINK_RATIO = 5.5  # a congested link's median excess over the typical link's (module doc)
HOT_SPINE_RATIO = 4.5  # ...a congested spine's (the median over its links)
QUIET_QUANTILE = 0.1  # ...both over this quantile of the links'
MIN_LINK_FLOWS = 5  # a link's median counts from this many flows of known path
MIN_LINKS = 8  # ...and the fabric's from this many links


def drop_immaterial_delays(res: SignalResult, counts: FlowCounts) -> None:
    """Drop from ``res``'s fit the delay suspects that fail either test (module doc)."""
    if not res.fit.rates or not np.isfinite(counts.floor_ns):
        return
    m = res.crossed.tocsc()
    chosen = list(res.fit.rates)
    # each flow counted by how likely it crossed the suspect: where paths are unknown a
    # delayed flow may be the suspect's as likely as another chosen element's (a link's
    # alternative beside a spine's, 0.5 each: bench precision #488), and "more likely
    # than not" would leave the suspect no flow at all
    crossed = {e: np.asarray(m[:, e].toarray()).ravel() for e in chosen}
    clean = np.sum([crossed[e] for e in chosen], axis=0) < 0.5
    p50 = counts.excess_p50_ns
    finite = np.isfinite(p50)
    base = float(np.median(p50[clean & finite])) if np.any(clean & finite) else 0.0
    hot = _Hot(res, p50)
    # spines first, each against the links no chosen spine holds (two congested spines of
    # four hold half of the links, whose median would be theirs); then links, against
    # those no spine that passed holds
    spines = [e for e in chosen if hot.is_spine(e)]
    passed = [e for e in spines if hot.passes(e, held=spines)]
    for e in chosen:
        theirs = weighted_median(p50, np.where(finite, crossed[e], 0.0))
        shift = theirs - base if np.isfinite(theirs) else 0.0
        material = e in passed if e in spines else hot.passes(e, held=passed)
        if shift < DELAY_SHIFT_OF_FLOOR * counts.floor_ns or not material:
            res.fit.rates.pop(e)
            res.fit.gains.pop(e, None)


class _Hot:
    """The hot-link test: each leaf-spine link's median excess (module doc)."""

    def __init__(self, res: SignalResult, p50: F64) -> None:
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
            int(links[j]): float(median[j]) for j in np.flatnonzero(flows >= MIN_LINK_FLOWS)
        }
        measured = list(self.median.values())
        self.quiet = float(np.quantile(measured, QUIET_QUANTILE)) if measured else 0.0

    def is_spine(self, e: int) -> bool:
        return e in self.links and self.links[e] != [e]

    def passes(self, e: int, held: list[int]) -> bool:
        """True unless ``e`` is a leaf-spine link or a spine whose links' median excess
        (a spine's: the median over its links) stands under ``HOT_LINK_RATIO`` (a spine:
        ``HOT_SPINE_RATIO``) times the typical link's, of those the spines ``held`` do not
        hold; True wherever too few links are measured to say what is typical."""
        values = [self.median[link] for link in self.links.get(e, ()) if link in self.median]
        busy = {link for spine in held for link in self.links.get(spine, ())}
        free = [v for link, v in self.median.items() if link not in busy]
        if not values or len(free) < MIN_LINKS:
            return True
        typical = float(np.median(free)) - self.quiet
        ratio = HOT_SPINE_RATIO if self.is_spine(e) else HOT_LINK_RATIO
        return typical <= 0 or float(np.median(values)) - self.quiet >= ratio * typical
