"""The sparse explanation: the fewest elements whose failures explain the bad flows.

NetBouncer's model: a trial on flow f (a probe sent, or a delay sample taken) succeeds
with probability ``(1 - b) * prod(1 - r_e for e in f)``, where ``b`` is the fabric's
background failure rate and ``r_e`` the failure rate of element e (0 for healthy ones).
Elements are added greedily, each time the one whose best rate raises the binomial
log-likelihood most, with the rates refitted by coordinate ascent after each addition,
until no element gains ``min_gain`` nats. A final pass drops any element whose removal
costs less than ``min_gain``. Every step is vectorised over flows and candidate rates:
the per-element gain of every candidate rate is one sparse product ``A.T @ D``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

F64 = npt.NDArray[np.float64]

# candidate failure rates: fine where rates are small, up to "down" (all trials fail)
RATE_GRID: F64 = np.unique(
    np.concatenate([np.geomspace(1e-4, 0.5, 56), np.linspace(0.5, 1.0 - 1e-9, 25)])
)
_EPS = 1e-12


def log_likelihood(n: F64, k: F64, success: F64) -> F64:
    """Binomial log-likelihood (without the constant) of k failures in n trials, per flow."""
    s = np.clip(success, _EPS, 1.0 - _EPS)
    return (n - k) * np.log(s) + k * np.log1p(-s)


@dataclass
class Explanation:
    """The fitted model: background rate, and the chosen elements with rates and gains."""

    background: float
    rates: dict[int, float] = field(default_factory=dict)  # element -> failure rate
    gains: dict[int, float] = field(default_factory=dict)  # element -> nats lost without it
    log_success: F64 = field(default_factory=lambda: np.zeros(0))  # per flow, chosen only

    def success(self) -> F64:
        return (1.0 - self.background) * np.exp(self.log_success)


def explain(
    incidence: sp.csr_matrix,
    trials: F64,
    failures: F64,
    *,
    candidates: npt.NDArray[np.bool_] | None = None,
    min_gain: float = 15.0,
    min_rate: float = 0.0,
    rate_over_background: float = 4.0,
    max_elements: int = 8,
) -> Explanation:
    """Greedy sparse explanation of ``failures`` out of ``trials`` per flow (see module doc).

    ``candidates`` restricts which elements may be chosen (e.g. those 007 voting touched);
    an element's rate must reach ``max(min_rate, rate_over_background * background)``.
    """
    n = np.asarray(trials, np.float64)
    k = np.asarray(failures, np.float64)
    n_flows, n_el = incidence.shape
    total = n.sum()
    fit = Explanation(
        background=float(np.clip(k.sum() / total, 1e-7, 0.5)) if total else 1e-7,
        log_success=np.zeros(n_flows),
    )
    if not total or not n_el:
        return fit
    a_t = incidence.T.tocsr()
    allowed = np.ones(n_el, bool) if candidates is None else candidates.copy()
    grid_log = np.log1p(-RATE_GRID)
    for _ in range(max_elements):
        s = fit.success()
        base = log_likelihood(n, k, s)
        trial = s[:, None] * (1.0 - RATE_GRID)[None, :]
        delta = log_likelihood(n[:, None], k[:, None], trial) - base[:, None]
        gain = np.asarray(a_t @ delta)  # (n_el, n_grid)
        best = np.argmax(gain, axis=1)
        best_gain = gain[np.arange(n_el), best]
        rate = RATE_GRID[best]
        floor = max(min_rate, rate_over_background * fit.background)
        best_gain[~allowed | (rate < floor)] = -np.inf
        e = int(np.argmax(best_gain))
        if not best_gain[e] >= min_gain:
            break
        allowed[e] = False
        fit.rates[e] = float(rate[e])
        fit.log_success += incidence[:, e].toarray().ravel() * grid_log[best[e]]
        _refit(fit, incidence, n, k)
    _prune(fit, incidence, n, k, min_gain, floor=min_rate)
    return fit


def _column(incidence: sp.csr_matrix, e: int) -> npt.NDArray[np.bool_]:
    return incidence[:, e].toarray().ravel() > 0


def _refit(fit: Explanation, incidence: sp.csr_matrix, n: F64, k: F64, passes: int = 3) -> None:
    """Coordinate ascent: the background, then each chosen element's rate, on the grid."""
    rates0 = np.concatenate([[0.0], RATE_GRID])
    logs0 = np.log1p(-rates0)
    for _ in range(passes):
        # background: every flow
        other = np.exp(fit.log_success)
        cand = np.clip(rates0, 1e-7, 0.5)
        ll = log_likelihood(n[:, None], k[:, None], other[:, None] * (1 - cand)[None, :]).sum(0)
        fit.background = float(cand[int(np.argmax(ll))])
        for e, r in list(fit.rates.items()):
            on = _column(incidence, e)
            without = fit.log_success[on] - np.log1p(-r)
            s = (1 - fit.background) * np.exp(without)
            ll = log_likelihood(n[on, None], k[on, None], s[:, None] * (1 - rates0)[None, :])
            j = int(np.argmax(ll.sum(0)))
            fit.rates[e] = float(rates0[j])
            fit.log_success[on] = without + logs0[j]


def _prune(
    fit: Explanation, incidence: sp.csr_matrix, n: F64, k: F64, min_gain: float, floor: float
) -> None:
    """Drop chosen elements that explain too little; record each survivor's drop-one gain."""
    while fit.rates:
        full = log_likelihood(n, k, fit.success()).sum()
        gains = {}
        for e, r in fit.rates.items():
            on = _column(incidence, e)
            ls = fit.log_success.copy()
            ls[on] -= np.log1p(-r)
            gains[e] = float(full - log_likelihood(n, k, (1 - fit.background) * np.exp(ls)).sum())
        weakest = min(gains, key=lambda x: gains[x])
        if gains[weakest] >= min_gain and fit.rates[weakest] >= floor:
            fit.gains = gains
            return
        on = _column(incidence, weakest)
        fit.log_success[on] -= np.log1p(-fit.rates.pop(weakest))
        _refit(fit, incidence, n, k, passes=1)
    fit.gains = {}
