"""What one signal's localisation found, and how a suspect is said in words.

``SignalResult`` is a signal's fit with its bad flows and votes (``localize.py`` makes
one per signal); ``score_and_words`` scores an element by the bad flows it alone
explains and words the evidence an operator reads; ``twin_ids`` finds the elements the
data cannot tell from it (crossed by exactly the same flows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from cwctl.scan.snapshot import Suspect
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.elements import Incidence
from cwctl.telemetry.likelihood import F64, Explanation
from cwctl.telemetry.posterior import Posterior
from cwctl.units import fmt_ns

EVEN_ODDS = 1e-6  # a posterior this close to one half is even odds


@dataclass(frozen=True)
class SignalResult:
    """One signal's localisation: the fit, the bad flows, the votes."""

    signal: str  # "loss" | "delay"
    incidence: Incidence
    fit: Explanation
    bad: npt.NDArray[np.bool_]
    votes: F64
    trials: F64
    failures: F64
    crossed: Posterior  # (flows x elements): P(flow crossed element) under the fit
    material: npt.NDArray[np.bool_] | None = None  # bad enough to be unlocalised (floor)
    # failed flows too thin to be bad alone (``voting.thin_flows``): evidence
    # against the switches and links they crossed only, not their hosts' (their clocks')
    thin: npt.NDArray[np.bool_] | None = None


def suspect_of(inc: Incidence, e: int, found: tuple[float, float, str], ties: list[int]) -> Suspect:
    """One suspect; with ties, the set the data cannot narrow (every member a candidate)."""
    score, _, words = found
    if not ties:
        kind = inc.kinds[e]
        return Suspect(inc.names[e], kind, float(round(score, 4)), words)  # type: ignore[arg-type]
    ids = sorted([e, *ties], key=lambda t: _natural(inc.names[t]))
    members = [inc.names[t] for t in ids]
    kinds = [inc.kinds[t] for t in ids]
    kind = kinds[0] if len(set(kinds)) == 1 else "set"
    words = (
        f"one of {' or '.join(members)} (the records cannot tell them apart: paths unknown, "
        "or every flow crossing one crosses the others); " + words.replace(inc.names[e], "it")
    )
    return Suspect(
        element="|".join(members),
        kind=kind,  # type: ignore[arg-type]
        score=float(round(score, 4)),
        evidence=words,
        candidates=members,
        kinds=kinds if kind == "set" else [],
    )


def _natural(name: str) -> tuple[str, int]:
    stem = name.rstrip("0123456789")
    return (stem, int(name[len(stem) :]) if len(stem) < len(name) else -1)


def score_and_words(
    res: SignalResult, e: int, chosen: list[int], counts: FlowCounts
) -> tuple[float, str]:
    """Score: (share of the flows through e that are bad) x (share of the bad flows not
    through another chosen element that go through e). Words: the counts behind it.
    A flow goes through e when it did at even odds or better under the fit, through
    another element when better than even, unless the two are equally likely and
    neither certain: two slow spines of four, every path unknown, split each raised
    flow half and half (two spines down, each lost round trip 7/12 each), and each of
    them scores those flows. A switch or link counts the signal's thin failed flows as
    bad too (``SignalResult.thin``); a host or NIC its significant ones only."""
    inc = res.incidence
    crossed = res.crossed
    p_e = crossed.column(e)
    on = p_e > 0.5 - EVEN_ODDS
    usable = res.trials > 0
    others = np.zeros(len(on), bool)
    for o in chosen:
        if o != e:
            p_o = crossed.column(o)
            shared = (np.abs(p_o - p_e) <= EVEN_ODDS) & (p_e < 1.0 - EVEN_ODDS)
            others |= (p_o > 0.5 + EVEN_ODDS) & ~shared
    bad = res.bad | res.thin if res.thin is not None and is_fabric(inc, e) else res.bad
    n_in = int((on & usable).sum())
    bad_in = int((on & bad).sum())
    n_out = int((~on & ~others & usable).sum())  # flows crossing no suspect
    bad_out = int((~on & ~others & bad).sum())
    unexplained_bad = int((bad & ~others).sum())
    purity = bad_in / n_in if n_in else 0.0
    coverage = int((on & bad & ~others).sum()) / unexplained_bad if unexplained_bad else 0.0
    score = float(np.clip(purity * coverage, 0.0, 1.0))
    rate = res.fit.rates[e]
    name = inc.names[e]
    if res.signal == "loss":
        sel = on & res.bad
        lossy = res.failures[sel] / np.maximum(res.trials[sel], 1)
        typical = f" (median {100 * np.median(lossy):.0f}% lost)" if sel.any() else ""
        words = (
            f"loss: {bad_in} of {n_in} probe flows crossing {name} (either way) lost "
            f"probes{typical}; {bad_out} of {n_out} flows crossing no suspect did; model: {name} "
            f"drops {_pct(rate)}"
        )
    elif res.signal == "floor":
        sel = on & res.bad
        raised = counts.flow_floor_ns[sel]
        typical = (
            f" (median floor {fmt_ns(float(np.median(raised)))},"
            f" the fabric's {fmt_ns(counts.floor_ns)})"
            if sel.any()
            else ""
        )
        words = (
            f"slow: {bad_in} of {n_in} flows through {name} have a raised minimum delay"
            f"{typical}; {bad_out} of {n_out} flows crossing no suspect do; model: {name} "
            f"raises {_pct(rate)} of its flows' floors"
        )
    else:
        sel = on & bad
        med = float(np.nanmedian(counts.excess_p50_ns[sel])) if sel.any() else float("nan")
        typical = f" (median excess {fmt_ns(med)})" if np.isfinite(med) else ""
        words = (
            f"delay: {bad_in} of {n_in} flows through {name} were delayed >"
            f"{fmt_ns(counts.threshold_ns)} over their floor{typical}; {bad_out} of {n_out} "
            f"flows crossing no suspect were; model: {name} delays {_pct(rate)} of probes"
        )
    twins = _twins(inc, e, usable)
    if twins:
        words += f" (the same flows cross {', '.join(twins)}: indistinguishable here)"
    return score, words


def is_fabric(inc: Incidence, e: int) -> bool:
    return inc.kinds[e] in ("switch", "link")


def _twins(inc: Incidence, e: int, usable: npt.NDArray[np.bool_], limit: int = 3) -> list[str]:
    """Hosts and NICs crossed by exactly the same usable flows as e (the data cannot
    tell them apart: a one-NIC host and its NIC); fabric twins are candidates instead."""
    ids = [j for j in twin_ids(inc, e, usable) if not (is_fabric(inc, j) and is_fabric(inc, e))]
    return [inc.names[j] for j in ids][:limit]


def alike_ids(inc: Incidence, e: int, usable: npt.NDArray[np.bool_]) -> list[int]:
    """For an element no usable flow certainly crossed (every path through it unknown):
    the elements of its kind that no usable flow certainly crossed either and that
    exactly the same usable flows may have crossed. Without paths a slow spine is one of
    the spines its flows could take; which of them, the data cannot say (the greedy
    explanation, choosing a second spine after a link, can break that tie by chance)."""
    by_element, maybe = inc.by_element, inc.maybe

    def flows(m: sp.csc_matrix, j: int) -> npt.NDArray[np.int32]:
        f = m.indices[m.indptr[j] : m.indptr[j + 1]]
        return np.sort(f[usable[f]])

    if len(flows(by_element, e)):
        return []
    mine = flows(maybe, e)
    if not len(mine):
        return []
    return [
        j
        for j in range(len(inc.names))
        if j != e
        and inc.kinds[j] == inc.kinds[e]
        and not len(flows(by_element, j))
        and np.array_equal(flows(maybe, j), mine)
    ]


def twin_ids(inc: Incidence, e: int, usable: npt.NDArray[np.bool_]) -> list[int]:
    """Elements certainly crossed by exactly the usable flows that certainly cross e."""
    by_element, matrix = inc.by_element, inc.matrix
    flows = by_element.indices[by_element.indptr[e] : by_element.indptr[e + 1]]
    flows = flows[usable[flows]]
    if not len(flows):
        return []
    # elements every one of e's flows crosses, then those crossed by no other usable flow
    common = np.bincount(matrix[flows].indices, minlength=matrix.shape[1]) == len(flows)
    out = []
    for j in np.flatnonzero(common).tolist():
        theirs = by_element.indices[by_element.indptr[j] : by_element.indptr[j + 1]]
        if j != e and int(usable[theirs].sum()) == len(flows):
            out.append(j)
    return out


def _pct(rate: float) -> str:
    return f"{100 * rate:.2g}%" if rate < 0.995 else "all"
