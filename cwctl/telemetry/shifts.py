"""Slow elements by the shift of their flows' floors, where no single floor can tell.

The floor signal (``floors.py``) calls one flow raised when its floor stands
``floor_sigmas`` of the fabric's floor spread above its kind's: that needs a slow
element's fixed delay to be several times the spread of single floors. Under load with
the kernel's stamps a flow's floor is a low quantile of stamps and queues, and single
floors spread by a microsecond (the simulator's sw scans at load 0.6: 0.7 us across
leaves): a host 3 us slow raises each of its flows by four of those, and the per-flow
test sees a few of them raised. Yet its 150 flows are raised *together*: the median of
its flows' raises stands a hundred standard errors above the fabric's.

So, as a location test per element: each usable flow's raise over its kind's floor
(clock errors taken out as in ``floors.py``), and per switch, link, NIC and host that
``min_shift_flows`` flows certainly cross (a discovered path, or what every alternative
crosses) the median of those raises, its *shift*, with its standard error (1.2533 x the
kind's spread of single floors over the root of the count). Greedily, the element with
the largest significant (``shift_sigmas``) and material shift is chosen, its shift taken
off its flows, and the rest judged again: a slow spine's links and a slow host's leaf
carry its shift too, but fewer flows of it (the links) or diluted by the healthy hosts'
(the leaf), so the spine and the host are chosen, and then their parts have none left.

Material is what separates a slow element from the fabric's own unevenness, which is
highly significant too (a host whose NIC is busier has every floor a microsecond up at
load 0.6): a shift of at least ``min_shift_of_floor`` of its flows' floors (the median
of their raises over their kind's floor or the median path's, whichever is higher: on
two leaves of 8 hosts most paths stay in a leaf, the median path's floor a quarter of a
cross-leaf one, while a same-leaf floor of 400 ns makes a 150 ns shift look large). Flows
that queued (delayed ones, those crossing a delay suspect) say nothing of floors and
are left out, as for the floor signal. The knobs are ``Thresholds``' (``thresholds.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cwctl.runtime.arrays import B
from cwctl.sync.robust import median_per_group
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.elements import Incidence
from cwctl.telemetry.evidence import EVEN_ODDS, SignalResult
from cwctl.telemetry.floors import floor_raises, raise_share
from cwctl.telemetry.hierarchy import spine_shift_instead
from cwctl.telemetry.thresholds import Thresholds
from cwctl.units import fmt_ns

MEDIAN_SE = 1.2533  # a median's standard error over a mean's, for normal data


@dataclass(frozen=True)
class Shift:
    """One slow element found by its shift: its column, the shift (ns), its z and flows."""

    element: int
    shift_ns: float
    z: float
    flows: int
    raised: int  # its flows raised by at least half its shift

    def score(self) -> float:
        """The share of its flows that carry (half) its shift: a slow element's are all."""
        return self.raised / self.flows if self.flows else 0.0

    def words(self, inc: Incidence, floor_ns: float) -> str:
        name = inc.names[self.element]
        return (
            f"slow: the floors of the {self.flows} flows through {name} stand "
            f"{fmt_ns(self.shift_ns)} above the fabric's (median; the median path's floor "
            f"{fmt_ns(floor_ns)}), {self.z:.0f} standard errors; {self.raised} of them by "
            "at least half that"
        )


def shifted_elements(
    counts: FlowCounts,
    leaf_of: Mapping[str, str],
    inc: Incidence,
    usable: B,
    thresholds: Thresholds,
) -> list[Shift]:
    """The slow elements whose flows' floors stand shifted together (module docstring),
    over the ``usable`` flows (timed, not queued)."""
    t = thresholds
    floor_ns = counts.floor_ns
    if not np.isfinite(floor_ns) or floor_ns <= 0:
        return []
    above, sigma, typical = floor_raises(counts, leaf_of, t)
    ok = usable & np.isfinite(above) & np.isfinite(sigma) & (sigma > 0)
    m = inc.matrix.tocoo()
    keep = ok[m.row]
    flow, element = m.row[keep], m.col[keep]
    del m, keep  # the whole matrix's triplets (millions): gone before the medians
    n_el = len(inc.names)
    n = np.bincount(element, minlength=n_el)
    var = np.bincount(element, sigma[flow] ** 2, minlength=n_el) / np.maximum(n, 1)
    se = MEDIAN_SE * np.sqrt(var) / np.sqrt(np.maximum(n, 1))
    resid = np.where(ok, above, np.nan)
    found: list[Shift] = []
    for _ in range(t.max_shifted):
        shift = median_per_group(resid[flow], element, n_el)
        relative = median_per_group(raise_share(resid, typical, floor_ns)[flow], element, n_el)
        z = np.where(n >= t.min_shift_flows, shift / np.maximum(se, 1e-9), -np.inf)
        z = np.nan_to_num(z, nan=-np.inf)
        z[~(relative >= t.min_shift_of_floor) | (z < t.shift_sigmas)] = -np.inf
        for s in found:
            z[s.element] = -np.inf
        e = int(np.argmax(z))
        if not np.isfinite(z[e]):
            break
        # a link whose spine's other links stand shifted too: the spine (hierarchy.py)
        spine = spine_shift_instead(inc, e, resid, MEDIAN_SE * sigma, float(shift[e]), t)
        if spine is not None and all(s.element != spine for s in found):
            e = spine
        mine = flow[element == e]
        raised = int(np.sum(resid[mine] >= shift[e] / 2))
        z_e = float(shift[e] / max(float(se[e]), 1e-9))
        found.append(Shift(e, float(shift[e]), z_e, len(mine), raised))
        resid[mine] -= shift[e]
    return found


def drop_immaterial_floors(
    res: SignalResult, counts: FlowCounts, leaf_of: Mapping[str, str], thresholds: Thresholds
) -> None:
    """Keep a floor suspect (``floors.py``'s per-flow test, judged against its kind's
    lower part) only if the flows likely through it stand, at their median, at least
    ``min_shift_of_floor`` of their floors up (as ``shifted_elements`` weighs them): a part of
    the fabric somewhat busier than the rest (a spine carrying a rerouted one's flows), or
    one spine's cables a little longer than the other's on two leaves, raises its flows'
    minima together, and is no slow element."""
    if not res.fit.rates or not np.isfinite(counts.floor_ns):
        return
    above, _, typical = floor_raises(counts, leaf_of, thresholds)
    relative = raise_share(above, typical, counts.floor_ns)
    m = res.crossed
    for e in list(res.fit.rates):
        sel = (m.column(e) > 0.5 - EVEN_ODDS) & (res.trials > 0)
        sel &= np.isfinite(relative)
        shift = float(np.median(relative[sel])) if sel.any() else 0.0
        if shift < thresholds.min_shift_of_floor:
            res.fit.rates.pop(e)
            res.fit.gains.pop(e, None)
