"""Bad flows no suspect explains: what the snapshot calls *unlocalised*.

A flow that is bad in a signal and material (``verdicts.py`` says what material means
per signal, with its ``Thresholds``) and that, under any signal's fit over the same
flows, likely crossed no named suspect or candidate is listed with its evidence in
words; a scan with any of them is not healthy.
"""

from __future__ import annotations

import numpy as np

from cwctl.runtime.arrays import F64, B
from cwctl.scan.snapshot import Suspect
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.evidence import SignalResult
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds
from cwctl.telemetry.verdicts import pair_sided
from cwctl.telemetry.voting import bad_flows
from cwctl.units import fmt_ns


def unexplained(
    counts: FlowCounts,
    results: list[SignalResult],
    suspects: list[Suspect],
    *,
    thresholds: Thresholds = THRESHOLDS,
) -> list[tuple[str, str, str, str]]:
    """Flows bad and material in a signal that no suspect (or candidate) explains, as
    (signal, sender, receiver, how bad in words); see ``verdicts.py``."""
    out: list[tuple[str, str, str, str]] = []
    if not results:
        return out
    likely = _likely_explained(results, suspects)
    for res in results:
        covered = np.broadcast_to(likely[id(res.incidence)] >= 0.5, res.trials.shape)
        sel = np.flatnonzero(res.bad & _material(res, counts, thresholds) & ~covered)
        if res.signal == "floor" and len(sel) < thresholds.min_raised_flows:
            continue
        flows = counts.exchanges if res.signal == "loss" else counts.flows
        for f in sel.tolist():
            a, b = flows.hosts[int(flows.src[f])], flows.hosts[int(flows.dst[f])]
            out.append((res.signal, a, b, _words(res, counts, f)))
    return out


def _likely_explained(results: list[SignalResult], suspects: list[Suspect]) -> dict[int, F64]:
    """Per flow space (the loss rows; the delay and floor rows, which share theirs): the
    probability, under any signal's fit over it, that each flow crossed a named suspect.
    Where a flow's path is unknown, the slow queue's delays say which way it went
    better than its raised floor does."""
    inc = results[0].incidence
    index = {name: i for i, name in enumerate(inc.names)}
    named = sorted(
        {index[m] for s in suspects for m in (s.candidates or [s.element]) if m in index}
    )
    likely: dict[int, F64] = {}
    for res in results:
        space = id(res.incidence)
        p = res.crossed.summed(named) if named else 0.0
        likely[space] = np.maximum(likely.get(space, 0.0), p)
    return likely


def _material(res: SignalResult, counts: FlowCounts, t: Thresholds) -> B:
    """Per flow: bad enough in ``res``'s signal to be unlocalised (``verdicts.py``)."""
    n, k = res.trials, res.failures
    share = k / np.maximum(n, 1)
    if res.signal == "loss":
        return share >= t.min_loss_rate  # type: ignore[no-any-return]
    if res.signal != "delay":
        return res.material if res.material is not None else np.ones(len(n), bool)
    # its median probe beyond the threshold (a healthy flow's is far below)
    shift = np.maximum(t.delay_shift_of_floor * counts.floor_ns, counts.flow_threshold_ns)
    material = (share >= t.material_delay_share) & (counts.excess_p50_ns >= shift)
    # ...seen often enough that chance queueing cannot do it
    material &= (counts.samples >= t.min_delay_samples) & bad_flows(
        n, k, res.fit.background, t.material_delay_p
    )
    # ...and on both probes of its pairs (a path's queue holds both alike)
    material &= ~pair_sided(
        counts.samples, counts.delayed, counts.second_samples, counts.second_delayed, t
    )
    return material  # type: ignore[no-any-return]


def _words(res: SignalResult, counts: FlowCounts, f: int) -> str:
    """How bad flow ``f`` is in ``res``'s signal, in words."""
    if res.signal == "loss":
        return f"lost {int(res.failures[f])} of {int(res.trials[f])} exchanges"
    if res.signal == "delay":
        return f"{int(counts.delayed[f])} of {int(counts.samples[f])} probes delayed"
    return f"floor {fmt_ns(float(counts.flow_floor_ns[f]))}"
