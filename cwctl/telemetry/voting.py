"""Which flows are bad, and what they vote for: the binomial tests and 007's voting.

A flow's failures (lost probes, delayed samples, a raised floor) are judged against the
fabric's background rate: improbable counts make it *bad* (``Thresholds.bad_flow_p``)
and, looser, a *voter* (``vote_p``) whose votes pick the elements the explanation (``explain.py``)
may choose; a flow too thin ever to be bad (``thin_flows``) is weighed apart.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import bdtrc

from cwctl.runtime.arrays import F64
from cwctl.telemetry.elements import Incidence


def bad_flows(trials: F64, failures: F64, background: float, p_max: float) -> npt.NDArray[np.bool_]:
    """Flows whose failures are improbable (p < p_max) at the background rate."""
    # P(X >= failures) for X ~ Binomial(trials, background): the upper tail above failures-1
    # whole counts: a half trial (one probe of a pair delayed) is not a failure
    k, n = np.floor(failures + 1e-9).astype(np.int64), np.rint(trials).astype(np.int64)
    p = bdtrc(k - 1, n, np.clip(background, 1e-7, 1 - 1e-7))
    return (failures > 0) & (p < p_max)


def thin_flows(trials: F64, background: float, p_max: float) -> npt.NDArray[np.bool_]:
    """Flows too thin ever to be bad: over its own floor a flow of n trials fails at most
    n - 1, and where even that is not improbable (p >= p_max) no count of its own is
    significant (at the watch budget a delay flow holds 2-3 pairs: a spine delaying two
    thirds of its probes left no flow bad, and the scan said healthy)."""
    n = np.floor(trials + 1e-9).astype(np.int64)
    b = float(np.clip(background, 1e-7, 1 - 1e-7))
    most = np.where(n >= 2, bdtrc(np.maximum(n - 2, 0), n, b), 1.0)  # P(X >= n - 1)
    return most >= p_max  # type: ignore[no-any-return]


def cast_votes(inc: Incidence, bad: npt.NDArray[np.bool_]) -> F64:
    """007 voting: each bad flow gives 1/h votes to each of the h elements it crosses (an
    alternative's own elements: times the alternative's prior)."""
    rows = inc.rows
    certain = rows.certain_crossing()
    prior = np.exp(rows.log_prior)
    h_flow = np.asarray(certain.sum(axis=1)).ravel()
    h_flow += np.bincount(rows.flow, prior * rows.crossings_per_row(), rows.n_flows)
    weight = np.where(bad & (h_flow > 0), 1.0 / np.maximum(h_flow, 1e-9), 0.0)
    return np.asarray(certain.T @ weight).ravel() + rows.crossed_sums(weight[rows.flow] * prior)


def background(trials: F64, failures: F64, bad_p: float, rounds: int = 6) -> float:
    """The fabric's background failure rate, robust to faults: the pooled rate of the flows
    that are not significantly bad (``bad_p``) under it (iterated down from the overall
    rate)."""
    if not trials.sum():
        return 1e-6
    b = float(max(failures.sum() / trials.sum(), 1e-6))
    for _ in range(rounds):
        good = ~bad_flows(trials, failures, b, bad_p)
        if not good.any():
            break
        b_next = float(max(failures[good].sum() / trials[good].sum(), 1e-6))
        if abs(b_next - b) <= 1e-3 * b:
            break
        b = b_next
    return b
