"""The sparse explanation: the fewest elements whose failures explain the bad flows.

NetBouncer's model: a trial on flow f (a probe sent, or a delay sample taken) succeeds
with probability ``(1 - b) * prod(1 - r_e for e in f)``, where ``b`` is the fabric's
background failure rate and ``r_e`` the failure rate of element e (0 for healthy ones).

A flow whose path is not known exactly (no discovered path, or unknown hops) has several
*alternatives*, one row each (``Rows``): the flow took one of them, every probe the same
one, each a priori as likely as its ``log_prior`` says. Its likelihood is then the mixture
``sum over rows of prior * Binomial(k; n, 1 - success(row))``; a flow with one row is the
plain model. So known paths exonerate or convict elements outright, and unknown ones
count for what they certainly cross and, for the rest, for whichever alternative fits.

Elements are added greedily, each time the one whose best rate (on a coarse grid; where
that falls just under its floor, whether the gain still rises there) raises the
log-likelihood most, with the rates refitted by coordinate ascent after each addition,
until no element gains ``min_gain_nats``. Elements whose best gain comes within
``tie_nats`` (or ``tie_share``) of the chosen one's are recorded as its ties
(``Explanation.ties``): the data cannot tell them apart. A final pass, on the rates
refined, drops any element whose removal costs less than ``min_gain_nats`` or whose rate
falls under its floor. The likelihood and its rows are ``likelihood.py``; the gain of
every candidate rate of every element (``gains.Model``) is vectorised, untouched flows
scored once per distinct key from the ``crossings.CrossingIndex``, touched ones once per
flow state (``states.py``) where states are few.

An element chosen as one of ``second_look_ties`` alike or more (its ties) gets a second
look: the explanation without any of them, kept when it is likelier by more than
``min_gain_nats`` an element and names fewer elements than the set had members. Without
paths two congested links on two leaves were named "one of the four spines": a spine's
alternative covers both leaves' delayed flows at the first greedy step, and once it is
in no link adds enough; the two links alone are 480-530 nats likelier (on the
independent model). Two slow spines, one chosen, were "explained" likelier by seven
leaves' links: an effect on every leaf is the spines', so that is no alternative. The
explanation kept, the set's members may join it again where they still add their share
(a congested link under a spine set that took the busy queues elsewhere). The knobs are
``Thresholds``' (``thresholds.py``); the bench cases, docs/localisation.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from cwctl.telemetry.gains import Model
from cwctl.telemetry.likelihood import F64, Explanation, Rows, log_likelihood, mixture_ll
from cwctl.telemetry.posterior import Posterior
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds

# candidate failure rates: fine where rates are small, up to "down" (all trials fail)
RATE_GRID: F64 = np.unique(
    np.concatenate([np.geomspace(1e-4, 0.5, 40), np.linspace(0.5, 1.0 - 1e-9, 17)])
)
COARSE_GRID: F64 = np.unique(
    np.append(RATE_GRID[::3], RATE_GRID[-1])
)  # the greedy choice; chosen rates are refined on RATE_GRID
COARSE_STEP = float(RATE_GRID[3] / RATE_GRID[0])  # the coarse grid's ratio, below 0.5
FLOOR_STEP = 1.01  # a rate just above an element's floor: does its gain still rise there?
BACKGROUND_GRID: F64 = np.geomspace(1e-7, 0.5, 14)


def explain(
    incidence: sp.csr_matrix | Rows,
    trials: F64,
    failures: F64,
    *,
    candidates: npt.NDArray[np.bool_] | None = None,
    min_rate: float | F64 = 0.0,
    background: float | None = None,
    thresholds: Thresholds = THRESHOLDS,
) -> Explanation:
    """Greedy sparse explanation of ``failures`` out of ``trials`` per flow (module doc).

    ``incidence`` is a (flows x elements) count matrix (every path known) or ``Rows``.
    ``candidates`` restricts which elements may be chosen (e.g. those 007 voting touched);
    an element's rate must reach ``max(min_rate, rate_over_background * b)``, with ``b``
    the lower of the (refitted) background and the failure rate of the flows that do not
    cross the element: a fault's failures inflate the overall rate, not its own yardstick.
    ``min_rate`` is one rate for every element or one per element. An element chosen
    with ``second_look_ties`` ties or more is weighed against the explanation without
    any of them (module doc). The other knobs are ``thresholds``'.
    """
    t = thresholds
    rows = incidence if isinstance(incidence, Rows) else Rows.single(incidence)
    n = np.asarray(trials, np.float64)
    k = np.asarray(failures, np.float64)
    n_el = rows.certain.shape[1]
    total = n.sum()
    if background is None:
        background = k.sum() / total if total else 0.0
    start = float(np.clip(background, 1e-7, 0.5))
    fit = Explanation(background=start, log_success=np.zeros(len(rows.flow)))
    if not total or not n_el:
        return fit
    allowed = np.ones(n_el, bool) if candidates is None else candidates.copy()
    # each element's own yardstick: the failure rate of the flows that never cross it
    touches = ((rows.certain_crossing() + rows.by_flow()) > 0).astype(np.float64)
    out_n = total - touches.T @ n
    out_k = k.sum() - touches.T @ k
    del touches  # a crossing's worth of memory, not held through the search
    greedy = _Greedy(
        model=Model(rows, trials, failures),
        least=np.broadcast_to(np.asarray(min_rate, np.float64), (n_el,)),
        rate_elsewhere=np.where(out_n > 0, out_k / np.maximum(out_n, 1), 0.0),
        rate_over_background=t.rate_over_background,
        min_gain=t.min_gain_nats,
        max_elements=t.max_elements,
        tie_nats=t.tie_nats,
        tie_share=t.tie_share,
    )
    greedy.grow(fit, allowed)
    alike = [e for e, ties in fit.ties.items() if len(ties) >= t.second_look_ties]
    mine = greedy.penalised_ll(fit) if alike else 0.0
    for e in alike:
        without = allowed.copy()
        without[[e, *fit.ties[e]]] = False
        other = Explanation(background=start, log_success=np.zeros(len(rows.flow)))
        greedy.grow(other, without)
        fewer = len(other.rates) < len(fit.ties[e]) + 1  # than the set had members
        if fewer and greedy.penalised_ll(other) > mine:
            # the set was kept out only to weigh the explanation without it: given that
            # one, a member whose own flows carry more still joins (a congested link at
            # load 0.6 under a spine's alternative that takes the busy queues elsewhere:
            # its leaf's links added 420 nats at 13 %)
            greedy.grow(other, allowed)
            return other
    return fit


@dataclass
class _Greedy:
    """The greedy search of one explanation (module doc)."""

    model: Model
    least: F64  # per element, the rate it must reach
    rate_elsewhere: F64  # per element, the failure rate of the flows that never cross it
    rate_over_background: float
    min_gain: float
    max_elements: int
    tie_nats: float
    tie_share: float

    def grow(self, fit: Explanation, candidates: npt.NDArray[np.bool_]) -> None:
        """Add to ``fit`` the ``candidates`` that gain ``min_gain`` each, best first, up to
        ``max_elements`` in all; then prune what no longer pays and polish the rates."""
        model, allowed = self.model, candidates.copy()
        allowed[list(fit.rates)] = False
        while len(fit.rates) < self.max_elements:
            cand = np.flatnonzero(allowed)
            if not len(cand):
                break
            floor = np.maximum(
                self.least[cand],
                self.rate_over_background * np.minimum(fit.background, self.rate_elsewhere[cand]),
            )
            gain = model.gains(fit, cand, COARSE_GRID)
            best = np.argmax(gain, axis=1)
            best_gain = gain[np.arange(len(cand)), best]
            rate = COARSE_GRID[best]
            # the coarse grid steps by about 1.9 times: where the next step up reaches
            # the floor, whether the gain still rises at the floor decides (a link
            # delaying 10.5 % of its probes, its floor 10 %, gained most at the coarse 7 %
            # and was refused)
            short = np.flatnonzero((rate < floor) & (rate * COARSE_STEP >= floor))
            for level in np.unique(floor[short]):
                at = short[floor[short] == level]
                g = model.gains(fit, cand[at], np.array([level, level * FLOOR_STEP]))
                rises = g[:, 1] >= g[:, 0]
                best_gain[at[rises]] = g[rises, 1]
                rate[at[rises]] = level * FLOOR_STEP
            best_gain[rate < floor] = -np.inf
            i = int(np.argmax(best_gain))
            if not best_gain[i] >= self.min_gain:
                break
            e = int(cand[i])
            tie = max(self.tie_nats, self.tie_share * best_gain[i])
            near = (best_gain >= best_gain[i] - tie) & (cand != e)
            fit.ties[e] = [int(x) for x in cand[near]]
            allowed[e] = False
            fit.rates[e] = float(rate[i])
            fit.log_success += model.column(e) * np.log1p(-rate[i])
            _refit(fit, model)
        # the rates refined before the least-rate test: on the grid (steps of 24 %) a rate
        # of 10.5 % reads 8.7 % or 10.8 %, whichever fits better
        _polish(fit, model)
        if _prune(fit, model, self.min_gain, self.least):
            _polish(fit, model)
        fit.ties = {e: t for e, t in fit.ties.items() if e in fit.rates}

    def penalised_ll(self, fit: Explanation) -> float:
        """The fit's log-likelihood less ``min_gain`` for each element it names."""
        ll = self.model.background_ll(fit, np.array([fit.background]))[0]
        return float(ll) - self.min_gain * len(fit.rates)


def _set_rate(fit: Explanation, model: Model, e: int, candidates: F64) -> None:
    """Element e's best rate among ``candidates`` given every other rate."""
    col = model.column(e)
    fit.log_success -= col * np.log1p(-fit.rates[e])
    gain = model.gains(fit, np.array([e]), candidates)[0]
    rate = float(candidates[int(np.argmax(gain))])
    fit.rates[e] = rate
    fit.log_success += col * np.log1p(-rate)


def _refit(fit: Explanation, model: Model, passes: int = 3) -> None:
    """Coordinate ascent: the background, then each chosen element's rate, on the grid.

    The background is sought on a coarse grid over its whole range plus a fine one
    around its current value (the likelihood over every row, per candidate, is the cost)."""
    rates0 = np.concatenate([[0.0], RATE_GRID])
    for _ in range(passes):
        near = fit.background * np.exp(np.linspace(-1.5, 1.5, 13))
        cand = np.unique(np.clip(np.concatenate([BACKGROUND_GRID, near]), 1e-7, 0.5))
        ll = model.background_ll(fit, cand)
        fit.background = float(cand[int(np.argmax(ll))])
        for e in list(fit.rates):
            _set_rate(fit, model, e, rates0)


def _polish(fit: Explanation, model: Model, rounds: int = 2) -> None:
    """Refine each chosen rate on a fine grid around its value (the coarse grid steps ~24%)."""
    steps = np.exp(np.linspace(-0.25, 0.25, 51))
    for _ in range(rounds):
        for e, r in list(fit.rates.items()):
            if 0 < r < 0.5:
                _set_rate(fit, model, e, np.clip(r * steps, 1e-7, 1 - 1e-9))


def _prune(fit: Explanation, model: Model, min_gain: float, least: F64) -> bool:
    """Drop chosen elements that explain too little (under ``min_gain``, or under their
    ``least`` rate); record each survivor's drop-one gain. True if any was dropped (the
    rates are then refitted on the grid)."""
    dropped = False
    while fit.rates:
        gains = {e: model.drop_gain(fit, e, r) for e, r in fit.rates.items()}
        weakest = min(gains, key=lambda x: gains[x])
        if gains[weakest] >= min_gain and fit.rates[weakest] >= least[weakest]:
            fit.gains = gains
            return dropped
        fit.log_success -= model.column(weakest) * np.log1p(-fit.rates.pop(weakest))
        _refit(fit, model, passes=1)
        dropped = True
    fit.gains = {}
    return dropped


def posterior(fit: Explanation, rows: Rows, trials: F64, failures: F64) -> Posterior:
    """(flows x elements): the probability, under the fit, that flow f crossed element e
    (1 or 0 where its path is known; the weight of its alternatives that cross e else),
    kept as each row's weight and read a few columns at a time (``posterior.py``)."""
    n = np.asarray(trials, np.float64)[rows.flow]
    k = np.asarray(failures, np.float64)[rows.flow]
    row_ll = log_likelihood(n, k, fit.success())
    flow_ll, _, group = mixture_ll(rows, np.arange(len(rows.flow)), row_ll)
    return Posterior(rows, np.exp(rows.log_prior + row_ll - flow_ll[group]))
