"""A spine over its links: when a link's excess is its spine's, the spine is named.

A congested spine queues on every egress towards the leaves, each link's queue a little
busier or quieter than the next: the fit may find one link's share of delayed probes
over the rate an element must add while the spine's, over all its links, stays under it
(the simulator at load 0.6: leaf3-spine4 14 %, spine4 9 % over a background of 4 %), and
the shifted-floor test may find two links of a spine a little over the material shift
while the spine's median is a little under. A link is the finding only when its own
flows, not its spine's, carry the excess: when the spine's flows through its *other*
links carry at least ``spine_share`` of the link's excess, significantly (``spine_p``),
the spine is named.

A spine is held against its peers too (``spread_spines``). Under load a queue's
utilisation varies from link to link, and at load 0.6 the simulator's busiest healthy
queues run at 0.9, the level of a congested element: a healthy spine with two such links
delays 9 % of its probes, its busiest links 14-15 %, while two spines of four congested
at every egress delay 7-8 % each over the background, under the rate an element must
add (and the scan exited 0; the bench cases: docs/localisation.md). The share cannot
tell them; where
it sits can. A congested spine holds every flow through it at one of its egress queues,
so all of its links carry the excess; load makes a few links busy. A spine whose median
link is delayed ``spread_factor`` times as often as the fabric's quiet links (their
``spread_quiet_quantile``: two congested spines of four lift half of the links, which a
median takes for normal) need only add ``spread_min_rate``. The knobs are
``Thresholds``' (``thresholds.py``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import bdtrc

from cwctl.runtime.arrays import F64, B
from cwctl.telemetry.elements import Incidence
from cwctl.telemetry.thresholds import Thresholds


def link_spines(inc: Incidence) -> dict[int, int]:
    """Each leaf-spine link's spine (``leaf3-spine4``: spine4), by element index."""
    switches: dict[str, int] = {}
    for j, (name, kind) in enumerate(zip(inc.names, inc.kinds, strict=True)):
        if kind == "switch":
            switches.setdefault(name, j)
    out: dict[int, int] = {}
    for e, (name, kind) in enumerate(zip(inc.names, inc.kinds, strict=True)):
        spine = switches.get(name.split("-", 1)[1]) if kind == "link" and "-" in name else None
        if spine is not None:
            out[e] = spine
    return out


def spine_of(inc: Incidence, e: int) -> int | None:
    """The spine of a leaf-spine link, None for anything else."""
    return link_spines(inc).get(e)


def _flows(inc: Incidence, e: int, usable: B) -> B:
    m = inc.by_element
    on = np.zeros(len(usable), bool)
    on[m.indices[m.indptr[e] : m.indptr[e + 1]]] = True
    return on & usable


def spine_rate_instead(
    inc: Incidence,
    e: int,
    trials: F64,
    failures: F64,
    background: float,
    elsewhere: B,
    thresholds: Thresholds,
) -> int | None:
    """For a link chosen by a rate signal (loss, delay): its spine when the flows
    certainly through the spine's other links, and likely through no other chosen
    element (not ``elsewhere``: a round trip out by one spine may come back by a dead
    one), fail at least ``spine_share`` of the link's own excess over ``background``,
    improbably (``spine_p``) at it; else None."""
    spine = spine_of(inc, e)
    if spine is None:
        return None
    usable = (trials > 0) & ~elsewhere
    mine = _flows(inc, e, usable)
    others = _flows(inc, spine, usable) & ~mine
    n_l, k_l = trials[mine].sum(), failures[mine].sum()
    n_o, k_o = trials[others].sum(), failures[others].sum()
    if n_l <= 0 or n_o <= 0:
        return None
    b = float(np.clip(background, 1e-7, 1 - 1e-7))
    excess_link = k_l / n_l - b
    excess_others = k_o / n_o - b
    p = float(bdtrc(int(np.floor(k_o)) - 1, int(np.rint(n_o)), b))
    t = thresholds
    if excess_link > 0 and excess_others >= t.spine_share * excess_link and p < t.spine_p:
        return spine
    return None


def spine_shift_instead(
    inc: Incidence,
    e: int,
    resid: F64,
    se_one: F64,
    link_shift: float,
    thresholds: Thresholds,
) -> int | None:
    """For a link chosen by its flows' shifted floors (``shifts.py``; ``resid`` per flow,
    NaN where unusable, ``se_one`` each flow's standard error): its spine when the flows
    through the spine's other links stand at least ``spine_share`` of the link's shift up,
    ``shift_sigmas`` standard errors; else None."""
    spine = spine_of(inc, e)
    if spine is None:
        return None
    usable = np.isfinite(resid)
    others = _flows(inc, spine, usable) & ~_flows(inc, e, usable)
    if not others.any():
        return None
    shift = float(np.median(resid[others]))
    se = float(np.sqrt(np.mean(se_one[others] ** 2)) / np.sqrt(others.sum()))
    if shift >= thresholds.spine_share * link_shift and shift >= thresholds.shift_sigmas * se:
        return spine
    return None


def spread_spines(inc: Incidence, trials: F64, failures: F64, thresholds: Thresholds) -> list[int]:
    """The spines whose failures are spread over all their links: the median of their
    links' shares (flows certainly through the link) at least ``spread_factor`` times the
    ``spread_quiet_quantile`` of every leaf-spine link's share (module doc)."""
    t = thresholds
    spines = link_spines(inc)
    link, spine = list(spines), list(spines.values())
    if not link:
        return []
    m = inc.by_element[:, link]
    n = np.asarray(m.T @ np.where(trials > 0, trials, 0.0)).ravel()
    k = np.asarray(m.T @ np.where(trials > 0, failures, 0.0)).ravel()
    seen = n >= t.min_link_trials
    if not seen.any():
        return []
    share = k[seen] / n[seen]
    quiet = float(np.quantile(share, t.spread_quiet_quantile))
    of = np.asarray(spine)[seen]
    return [
        int(j)
        for j in np.unique(of)
        if quiet > 0 and float(np.median(share[of == j])) >= t.spread_factor * quiet
    ]
