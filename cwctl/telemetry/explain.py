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

Elements are added greedily, each time the one whose best rate raises the
log-likelihood most, with the rates refitted by coordinate ascent after each addition,
until no element gains ``min_gain`` nats. Elements whose best gain comes within
``TIE_NATS`` of the chosen one's are recorded as its ties (``Explanation.ties``): the
data cannot tell them apart. A final pass drops any element whose removal costs less
than ``min_gain``. The gain of every candidate rate of every element is vectorised: one
sparse product for single-row flows, a grouped log-sum-exp for the mixtures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

# candidate failure rates: fine where rates are small, up to "down" (all trials fail)
RATE_GRID: F64 = np.unique(
    np.concatenate([np.geomspace(1e-4, 0.5, 40), np.linspace(0.5, 1.0 - 1e-9, 17)])
)
COARSE_GRID: F64 = np.unique(
    np.append(RATE_GRID[::3], RATE_GRID[-1])
)  # the greedy choice; chosen rates are refined on RATE_GRID
BACKGROUND_GRID: F64 = np.geomspace(1e-7, 0.5, 14)
TIE_NATS = 1.0  # candidates within this of the best gain are indistinguishable from it
_EPS = 1e-12
_CHUNK = 400_000  # (entries x rates) cells per block of the mixture gains


def log_likelihood(n: F64, k: F64, success: F64) -> F64:
    """Binomial log-likelihood (without the constant) of k failures in n trials, per flow."""
    s = np.clip(success, _EPS, 1.0 - _EPS)
    return (n - k) * np.log(s) + k * np.log1p(-s)


def _grid_log_likelihood(n: F64, k: F64, s: F64, factors: F64, power: F64 | None = None) -> F64:
    """``log_likelihood(n, k, s * factors ** power)`` per row and factor (columns).

    Rows share few distinct (trials, failures, success, power) tuples, so the logs are
    taken once per distinct tuple and gathered back per row.
    """
    if not len(n):
        return np.zeros((0, len(factors)))
    if len(factors) <= 2:  # too few columns to repay the sort
        exponent = 1.0 if power is None else power[:, None]
        return log_likelihood(n[:, None], k[:, None], s[:, None] * factors[None, :] ** exponent)
    unique, inverse = _unique_rows([n, k, s] if power is None else [n, k, s, power])
    if power is None:
        trial = unique[:, 2:3] * factors[None, :]
    else:
        trial = unique[:, 2:3] * factors[None, :] ** unique[:, 3:4]
    return log_likelihood(unique[:, 0:1], unique[:, 1:2], trial)[inverse]


@dataclass(frozen=True)
class Rows:
    """What each flow crossed: ``certain[f, e]`` counts how often every trial of flow f
    crosses element e whichever way it went; ``matrix[r, e]`` what alternative row r adds
    (the spine and its links). ``flow[r]`` is the row's flow (a flow's rows contiguous,
    every flow has at least one), ``log_prior[r]`` its prior (a flow's sum to 1)."""

    certain: sp.csr_matrix
    matrix: sp.csr_matrix
    flow: I64
    log_prior: F64

    @property
    def n_flows(self) -> int:
        return int(self.certain.shape[0])

    @classmethod
    def single(cls, matrix: sp.csr_matrix) -> Rows:
        """One row per flow: every path known."""
        n, e = matrix.shape
        return cls(
            sp.csr_matrix(matrix), sp.csr_matrix((n, e)), np.arange(n, dtype=np.int64), np.zeros(n)
        )

    def by_flow(self, weights: F64 | None = None) -> sp.csr_matrix:
        """(flows x elements): per flow, the summed ``weights`` (default 1 each) of its
        rows that cross each element: ``flow_matrix() @ diag(weights) @ (matrix > 0)``,
        merged in place when a flow's rows are contiguous and in flow order (they are
        as built) instead of through two sparse products."""
        crossing = (self.matrix > 0).astype(np.float64).tocsr()
        rows = np.repeat(np.arange(crossing.shape[0]), np.diff(crossing.indptr))
        if weights is not None:
            crossing.data *= weights[rows]
        flow = self.flow
        if len(flow) and (
            flow[0] != 0 or np.any(np.diff(flow) < 0) or flow[-1] != self.n_flows - 1
        ):
            w = sp.diags(np.ones(len(flow)) if weights is None else weights)
            return sp.csr_matrix(self.flow_matrix() @ w @ (self.matrix > 0).astype(np.float64))
        first = np.flatnonzero(np.diff(flow, prepend=-1) != 0)
        if len(first) != self.n_flows:  # a flow without rows: not as built
            w = sp.diags(np.ones(len(flow)) if weights is None else weights)
            return sp.csr_matrix(self.flow_matrix() @ w @ (self.matrix > 0).astype(np.float64))
        indptr = np.append(crossing.indptr[first], crossing.nnz)
        out = sp.csr_matrix(
            (crossing.data, crossing.indices, indptr), shape=(self.n_flows, crossing.shape[1])
        )
        out.sum_duplicates()
        return out

    def flow_matrix(self) -> sp.csr_matrix:
        """(flows x rows) 0/1: which rows are a flow's."""
        r = len(self.flow)
        return sp.csr_matrix((np.ones(r), (self.flow, np.arange(r))), shape=(self.n_flows, r))


@dataclass
class Explanation:
    """The fitted model: background rate, and the chosen elements with rates and gains."""

    background: float
    rates: dict[int, float] = field(default_factory=dict)  # element -> failure rate
    gains: dict[int, float] = field(default_factory=dict)  # element -> nats lost without it
    ties: dict[int, list[int]] = field(default_factory=dict)  # element -> indistinguishable
    log_success: F64 = field(default_factory=lambda: np.zeros(0))  # per row, chosen only

    def success(self) -> F64:
        return (1.0 - self.background) * np.exp(self.log_success)


def mixture_ll(table: Rows, rows: npt.NDArray[np.intp], row_ll: F64) -> tuple[F64, I64, I64]:
    """Per flow of ``rows`` (complete flows, contiguous): the log of the prior-weighted
    mixture of ``row_ll`` (rows x columns, or rows). Returns (per flow, the flows, each
    row's group)."""
    flow = table.flow[rows]
    new = np.ones(len(rows), bool)
    new[1:] = flow[1:] != flow[:-1]
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    if not len(rows):
        return np.zeros((0, *row_ll.shape[1:])), flow, group
    prior = table.log_prior[rows]
    if row_ll.ndim == 1:
        v = prior + row_ll
        top = np.maximum.reduceat(v, starts)
        total = np.add.reduceat(np.exp(v - top[group]), starts)
        return top + np.log(total), flow[starts], group
    vt = np.ascontiguousarray(row_ll.T) + prior  # columns as rows: reduceat runs along rows
    top = np.maximum.reduceat(vt, starts, axis=1)
    vt -= top[:, group]
    np.exp(vt, out=vt)
    return (top + np.log(np.add.reduceat(vt, starts, axis=1))).T, flow[starts], group


class _Model:
    """The rows, their trials and failures, and the likelihood of a fit over them."""

    def __init__(self, rows: Rows, trials: F64, failures: F64) -> None:
        self.rows = rows
        self.cc = rows.certain.tocsc()
        self.mc = rows.matrix.tocsc()
        self.nf = np.asarray(trials, np.float64)
        self.kf = np.asarray(failures, np.float64)
        self.n = self.nf[rows.flow]
        self.k = self.kf[rows.flow]
        self.rows_per_flow = np.bincount(rows.flow, minlength=rows.n_flows)
        self.first_row = np.zeros(rows.n_flows, np.intp)
        if len(rows.flow):
            flow_starts = np.flatnonzero(np.diff(rows.flow, prepend=rows.flow[0] - 1) != 0)
            self.first_row[rows.flow[flow_starts]] = flow_starts
        self.multi = self.rows_per_flow[rows.flow] > 1
        # (nf, kf) of every flow as a small integer: flows no chosen element touches
        # share their likelihood with every other flow of the same counts
        classes, self.count_class = _unique_rows([self.nf, self.kf])
        self.class_n, self.class_k = classes[:, 0], classes[:, 1]
        self._plain: _PlainIndex | None = None

    def flows_crossing(self, elements: I64) -> npt.NDArray[np.bool_]:
        """Which flows cross any of ``elements`` (certainly, or on one of their rows)."""
        out = np.zeros(self.rows.n_flows, bool)
        for m, to_flow in ((self.cc, None), (self.mc, self.rows.flow)):
            idx = np.concatenate(
                [m.indices[m.indptr[e] : m.indptr[e + 1]] for e in elements.tolist()] or [[]]
            ).astype(np.intp)
            out[idx if to_flow is None else to_flow[idx]] = True
        return out

    def rows_of(self, flows: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
        """The rows of the flows marked (in order: each flow's rows stay contiguous)."""
        return np.flatnonzero(flows[self.rows.flow])

    def subset_flow_ll(self, rows: npt.NDArray[np.intp], row_ll: F64) -> tuple[F64, I64, I64]:
        """``mixture_ll`` over some of the model's rows."""
        return mixture_ll(self.rows, rows, row_ll)

    def touched(self, fit: Explanation) -> npt.NDArray[np.bool_]:
        """Flows some chosen element crosses (their rows' success is not the background's)."""
        out = np.zeros(self.rows.n_flows, bool)
        out[self.rows.flow[fit.log_success != 0]] = True
        return out

    def plain_index(self) -> _PlainIndex:
        """Every crossing of the model coded for ``_PlainIndex`` (built on first use)."""
        if self._plain is None:
            self._plain = _PlainIndex(self)
        return self._plain

    def background_ll(self, fit: Explanation, candidates: F64) -> F64:
        """The total log-likelihood with each candidate background (the chosen rates as
        they are): untouched flows once per (trials, failures) class, the rest per row."""
        touched = self.touched(fit)
        sizes = np.bincount(self.count_class[~touched], minlength=len(self.class_n))
        plain = sizes @ log_likelihood(
            self.class_n[:, None], self.class_k[:, None], 1.0 - candidates[None, :]
        )
        rows = self.rows_of(touched)
        if not len(rows):
            return np.asarray(plain, np.float64)
        other = np.exp(fit.log_success[rows])
        step = max(1, _CHUNK * 10 // max(len(rows), 1))  # columns at a time: bounded memory
        parts = [
            self.subset_flow_ll(
                rows, _grid_log_likelihood(self.n[rows], self.k[rows], other, 1 - c)
            )[0].sum(0)
            for c in np.array_split(candidates, max(1, -(-len(candidates) // step)))
        ]
        return np.asarray(plain + np.concatenate(parts), np.float64)

    def drop_gain(self, fit: Explanation, e: int, rate: float) -> float:
        """What the log-likelihood loses if element e's ``rate`` is taken out: the flows
        that cross it, with and without it."""
        rows = self.rows_of(self.flows_crossing(np.array([e])))
        if not len(rows):
            return 0.0
        n, k = self.n[rows], self.k[rows]
        with_e = (1.0 - fit.background) * np.exp(fit.log_success[rows])
        col = self.column(e)[rows]
        without = (1.0 - fit.background) * np.exp(fit.log_success[rows] - col * np.log1p(-rate))
        now = self.subset_flow_ll(rows, log_likelihood(n, k, with_e))[0].sum()
        then = self.subset_flow_ll(rows, log_likelihood(n, k, without))[0].sum()
        return float(now - then)

    def column(self, e: int) -> F64:
        """How often each row's trial crosses element e."""
        out = np.zeros(self.cc.shape[0])
        lo, hi = self.cc.indptr[e], self.cc.indptr[e + 1]
        out[self.cc.indices[lo:hi]] = self.cc.data[lo:hi]
        row = out[self.rows.flow]
        lo, hi = self.mc.indptr[e], self.mc.indptr[e + 1]
        row[self.mc.indices[lo:hi]] += self.mc.data[lo:hi]
        return row

    def gains(self, fit: Explanation, elements: I64, rates: F64) -> F64:
        """(elements x rates): the log-likelihood each element would add at each rate,
        given the fit as it stands (take an element's own rate out before asking).

        What a flow certainly crosses is scored on the flow's expected success (its rows'
        successes weighted by their posterior); the alternatives' own elements exactly,
        as a mixture. Only flows that cross the elements asked about can gain; of those,
        a flow no chosen element touches has the background's success on every row, so
        its gain depends only on its counts, how often it crosses the element and (for a
        mixture) the prior weight of the rows that do: such flows are scored once per
        distinct (counts, crossings, weight) (``_PlainGains``), the rest row by row."""
        out = np.zeros((len(elements), len(rates)))
        if not len(elements):
            return out
        factors = 1.0 - rates
        plain = self.plain_index()
        entries = plain.entries(elements)
        crossing = plain.flows(entries, self.rows.n_flows)
        slow = (self.touched(fit) | plain.uneven) & crossing
        out += plain.gains(elements, entries, ~slow, fit.background, factors)
        del entries
        if not slow.any():
            return out
        sub = self.mc[:, elements].tocoo()
        sub_flow = self.rows.flow[sub.row]
        simple = ~self.multi[sub.row]
        cert = self.cc[:, elements].tocoo()
        f, j, c = cert.row, cert.col, cert.data
        rows = self.rows_of(slow)
        s = fit.success()
        row_ll = np.zeros(len(s))
        log_w = np.zeros(len(s))
        row_ll[rows] = log_likelihood(self.n[rows], self.k[rows], s[rows])
        flow_ll, _, group = self.subset_flow_ll(rows, row_ll[rows])
        log_w[rows] = self.rows.log_prior[rows] + row_ll[rows] - flow_ll[group]
        hard = slow[f]
        if hard.any():
            s_flow = np.bincount(
                self.rows.flow[rows], np.exp(log_w[rows]) * s[rows], minlength=self.rows.n_flows
            )
            f, j, c = f[hard], j[hard], c[hard]
            base = log_likelihood(self.nf[f], self.kf[f], s_flow[f])
            delta = _grid_log_likelihood(self.nf[f], self.kf[f], s_flow[f], factors, c)
            out += _gather(j, len(out)) @ (delta - base[:, None])
        hard = simple & slow[sub_flow]
        if hard.any():
            r, j, c = sub.row[hard], sub.col[hard], sub.data[hard]
            delta = _grid_log_likelihood(self.n[r], self.k[r], s[r], factors, c) - row_ll[r, None]
            out += _gather(j, len(out)) @ delta
        hard = ~simple & slow[sub_flow]
        if hard.any():
            self._mixture_gains(out, sub, hard, s, row_ll, log_w, factors)
        return out

    def _mixture_gains(
        self,
        out: F64,
        sub: sp.coo_matrix,
        mask: npt.NDArray[np.bool_],
        s: F64,
        row_ll: F64,
        log_w: F64,
        factors: F64,
    ) -> None:
        """Gains over multi-row flows: per (element, flow), ``log((1 - W) + sum of
        w_row exp(delta_row))`` over the flow's rows that cross the element."""
        r, j, c = sub.row[mask], sub.col[mask], sub.data[mask]
        flow = self.rows.flow[r]
        if not _grouped(j, flow):
            order = np.lexsort((flow, j))
            r, j, c, flow = r[order], j[order], c[order], flow[order]
        step = max(1, _CHUNK // len(factors))
        lo = 0
        while lo < len(r):
            hi = min(len(r), lo + step)
            while hi < len(r) and (j[hi], flow[hi]) == (j[hi - 1], flow[hi - 1]):
                hi += 1  # keep each (element, flow) group in one block
            rr, jj, cc, ff = r[lo:hi], j[lo:hi], c[lo:hi], flow[lo:hi]
            new = np.ones(len(rr), bool)
            new[1:] = (jj[1:] != jj[:-1]) | (ff[1:] != ff[:-1])
            starts = np.flatnonzero(new)
            group = np.cumsum(new) - 1
            delta = _grid_log_likelihood(self.n[rr], self.k[rr], s[rr], factors, cc)
            # rates as rows: reduceat runs along contiguous memory
            vt = np.ascontiguousarray(delta.T)
            vt += log_w[rr] - row_ll[rr]
            rest = self._log_rest_rows(rr, ff, starts, group, log_w)
            top = np.maximum(np.maximum.reduceat(vt, starts, axis=1), rest[None, :])
            vt -= top[:, group]
            np.exp(vt, out=vt)
            summed = np.add.reduceat(vt, starts, axis=1)
            summed += np.exp(rest[None, :] - top)
            value = (top + np.log(summed)).T
            out += _gather(jj[starts], len(out)) @ value
            lo = hi

    def _log_rest_rows(self, rr: I64, ff: I64, starts: I64, group: I64, log_w: F64) -> F64:
        """Per (element, flow) group: the log of the summed weight of the flow's rows
        that do not cross the element (-inf if every row does), summed over those rows
        themselves: ``1 - W`` would lose a weight the fit has made tiny but not zero."""
        flows = ff[starts]
        sizes = self.rows_per_flow[flows]
        offset = np.cumsum(sizes) - sizes
        owner = np.repeat(np.arange(len(starts)), sizes)
        rows = self.first_row[flows][owner] + np.arange(len(owner)) - offset[owner]
        value = log_w[rows]
        value[offset[group] + rr - self.first_row[ff]] = -np.inf  # the rows that cross
        top = np.maximum.reduceat(value, offset)
        safe = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):
            return safe + np.log(np.add.reduceat(np.exp(value - safe[owner]), offset))


class _PlainIndex:
    """Every (element, flow) crossing of a model, coded once, to score untouched flows.

    A flow no chosen element touches has the background's success ``1 - b`` on every
    row, so what crossing element e at rate r adds depends only on a key: the flow's
    (trials, failures) class, how often it crosses e (``c``) and, for a mixture, the
    prior weight ``W`` of its rows that cross e: ``delta`` for a single row (or a
    certain crossing), ``log((1 - W) + W exp(delta))`` for a mixture, with ``delta`` the
    log-likelihood at ``(1 - b)(1 - r)^c`` less that at ``1 - b`` (as ``_Model.gains``
    computes it row by row). The crossings are kept sorted by element with their flow
    and key; a gains call counts, per element asked, the keys of its untouched flows and
    evaluates each key once. Mixture groups whose rows cross e unequally often have no
    such key: their flows (``uneven``) are always scored row by row."""

    def __init__(self, model: _Model) -> None:
        cc, mc, flow_of = model.cc, model.mc, model.rows.flow
        n_el = cc.shape[1]
        # the classes' counts, not the model: no cycle keeping the model's matrices alive
        self.class_n, self.class_k = model.class_n, model.class_k
        self.uneven = np.zeros(model.rows.n_flows, bool)
        elements = np.arange(n_el, dtype=np.int32)
        singles, mixtures = [], []
        # the alternatives' crossings a slice of elements at a time: their temporaries
        # (a few arrays the length of the slice) stay bounded however many rows there are
        for lo, hi in _column_slices(mc.indptr, _INDEX_SLICE):
            a, b = mc.indptr[lo], mc.indptr[hi]
            el = np.repeat(elements[lo:hi], np.diff(mc.indptr[lo : hi + 1]))
            row, c = mc.indices[a:b], mc.data[a:b]
            simple = ~model.multi[row]
            singles.append((el[simple], flow_of[row[simple]].astype(np.int32), c[simple]))
            mixed = ~simple
            mixtures.append(
                self._groups(model, el[mixed], flow_of[row[mixed]], row[mixed], c[mixed])
            )
            del el, row, c, simple, mixed
        s_el, s_flow, s_c = _joined(singles, 3)
        g_el, g_flow, g_c, g_w = _joined(mixtures, 4)
        parts: list[tuple[Any, Any, Any, Any]] = [  # certain, single-row, mixtures
            (np.repeat(elements, np.diff(cc.indptr)), cc.indices, cc.data, None),
            (s_el, s_flow, s_c, None),
            (g_el, g_flow, g_c, g_w),
        ]
        del singles, mixtures
        self.keys, key = _key_codes(model.count_class, parts)
        el = np.concatenate([p[0] for p in parts])
        order = np.argsort(el, kind="stable")
        self.ptr = np.searchsorted(el[order], np.arange(n_el + 1))
        del el
        self.flow = np.concatenate([p[1] for p in parts]).astype(np.int32)[order]
        self.key = key[order]

    def _groups(
        self, model: _Model, j: I64, flow: I64, row: I64, c: F64
    ) -> tuple[I64, I64, F64, F64]:
        """Mixture rows grouped per (element, flow): element, flow, crossings, weight."""
        if not len(j):
            return j, flow, c, np.zeros(0)
        if not _grouped(j, flow):
            order = np.lexsort((flow, j))
            j, flow, row, c = j[order], flow[order], row[order], c[order]
        new = np.ones(len(j), bool)
        new[1:] = (j[1:] != j[:-1]) | (flow[1:] != flow[:-1])
        starts = np.flatnonzero(new)
        weight = np.add.reduceat(np.exp(model.rows.log_prior[row]), starts)
        every = np.diff(np.append(starts, len(j))) == model.rows_per_flow[flow[starts]]
        weight[every] = 1.0  # every row crosses it: no rest (see _log_rest)
        uneven = np.minimum.reduceat(c, starts) != np.maximum.reduceat(c, starts)
        self.uneven[flow[starts][uneven]] = True
        return j[starts], flow[starts].astype(np.int32), c[starts], weight

    def entries(self, elements: I64) -> npt.NDArray[np.intp]:
        """The positions of ``elements``' crossings, element after element."""
        lo, hi = self.ptr[elements], self.ptr[elements + 1]
        sizes = hi - lo
        return np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))

    def flows(self, entries: npt.NDArray[np.intp], n_flows: int) -> npt.NDArray[np.bool_]:
        """The flows those crossings are on (every flow crossing the elements)."""
        out = np.zeros(n_flows, bool)
        out[self.flow[entries]] = True
        return out

    def gains(
        self,
        elements: I64,
        entries: npt.NDArray[np.intp],
        plain: npt.NDArray[np.bool_],
        background: float,
        factors: F64,
    ) -> F64:
        """(elements x rates): the gains over the flows marked ``plain`` only; ``entries``
        from ``entries(elements)``. Keys are few: counted per element in one bincount."""
        sizes = self.ptr[elements + 1] - self.ptr[elements]
        owner = np.repeat(np.arange(len(elements), dtype=np.int64), sizes)
        keep = plain[self.flow[entries]]
        n_keys = len(self.keys)
        cell = owner[keep] * n_keys + self.key[entries[keep]]
        del owner, keep
        counts = np.bincount(cell, minlength=len(elements) * n_keys).reshape(-1, n_keys)
        return counts @ self._values(background, factors)

    def _values(self, background: float, factors: F64) -> F64:
        """(keys x rates): each key's gain at each rate (the class docstring)."""
        s, keys = 1.0 - background, self.keys
        n = self.class_n[keys[:, 0].astype(np.intp)][:, None]
        k = self.class_k[keys[:, 0].astype(np.intp)][:, None]
        power, weight, mixture = keys[:, 1:2], keys[:, 2], keys[:, 3] > 0
        delta = log_likelihood(n, k, s * factors[None, :] ** power) - log_likelihood(
            n, k, np.full_like(n, s)
        )
        rest = _log_rest(weight[mixture], weight[mixture] == 1.0)
        delta[mixture] = np.logaddexp(
            rest[:, None], np.log(weight[mixture])[:, None] + delta[mixture]
        )
        return delta


def _log_rest(weight: F64, every: npt.NDArray[np.bool_]) -> F64:
    """``log(1 - W)``: the weight of a flow's rows that do not cross the element; none
    (-inf) where ``every`` row crosses it (``1 - W`` is then a rounding error, not a
    weight: taken as one it would floor the gain of a deadly rate at about -37 nats)."""
    rest = np.log(np.clip(1.0 - weight, 0.0, 1.0) + 1e-300)
    rest[every] = -np.inf
    return rest


_INDEX_SLICE = 2_000_000  # alternatives' crossings the index takes at a time


def _joined(parts: list[tuple[Any, ...]], width: int) -> list[Any]:
    """The slices' arrays joined column by column (empty ones if there were none)."""
    if not parts:
        return [np.zeros(0, np.int32), np.zeros(0, np.int32)] + [np.zeros(0)] * (width - 2)
    return [np.concatenate(x) for x in zip(*parts, strict=True)]


def _column_slices(indptr: npt.NDArray[np.integer], size: int) -> list[tuple[int, int]]:
    """Runs of columns (lo, hi) holding about ``size`` entries each (a column whole)."""
    n = len(indptr) - 1
    if n <= 0:
        return []
    cuts = np.searchsorted(indptr, np.arange(size, int(indptr[-1]), size), side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 1, n), [n]]))
    return [(int(a), int(b)) for a, b in pairwise(bounds.tolist()) if b > a]


def _grouped(j: I64, flow: I64) -> bool:
    """Whether entries already come ordered by (element, flow): a column slice of a CSC
    matrix whose rows (each flow's, contiguous and in flow order) are sorted does."""
    if len(j) < 2:
        return True
    dj, df = np.diff(j), np.diff(flow)
    return bool(np.all((dj > 0) | ((dj == 0) & (df >= 0))))


def _key_codes(
    count_class: npt.NDArray[np.intp], parts: list[tuple[Any, Any, Any, Any]]
) -> tuple[F64, npt.NDArray[np.int32]]:
    """The distinct (class, crossings, weight, mixture) keys of the parts' entries (as
    rows) and each entry's key, without a sort of the entries: the classes and
    crossings are small integers and a scan's mixture weights few, so each entry gets an
    integer code and the codes present are read off a table (or, for a table larger than
    the entries, found by ``np.unique``). Non-integral crossings fall back to rows."""
    n = sum(len(p[2]) for p in parts)
    if not n:
        return np.zeros((0, 4)), np.zeros(0, np.int32)
    for part in parts:
        c = np.asarray(part[2])
        if len(c) and (np.any(c != np.rint(c)) or c.min() < 0):
            return _key_rows(count_class, parts)
    weights = np.unique(np.concatenate([*(p[3] for p in parts if p[3] is not None), [1.0]]))
    n_c = 1 + max((int(np.max(p[2])) for p in parts if len(p[2])), default=0)
    n_w = len(weights)
    one = int(np.searchsorted(weights, 1.0))
    code = np.empty(n, np.int64)
    at = 0
    for _, flow, c, w in parts:  # each part's codes straight into their slice
        piece = code[at : at + len(c)]
        np.multiply(count_class[flow], n_c, out=piece)
        piece += np.asarray(c, np.int64)
        piece *= n_w
        piece += one if w is None else np.searchsorted(weights, w)
        piece *= 2
        piece += 0 if w is None else 1
        at += len(c)
    size = (int(count_class.max()) + 1) * n_c * n_w * 2
    if size <= 2 * len(code):  # a table no bigger than the entries
        present = np.bincount(code, minlength=size) > 0
        codes = np.flatnonzero(present)
        inverse = (np.cumsum(present, dtype=np.int64) - 1)[code]
    else:
        codes, inverse = np.unique(code, return_inverse=True)
    mixture, rest = codes % 2, codes // 2
    keys = np.stack(
        [rest // n_w // n_c, rest // n_w % n_c, weights[rest % n_w], mixture], axis=1
    ).astype(np.float64)
    return keys, inverse.ravel().astype(np.int32)


def _key_rows(
    count_class: npt.NDArray[np.intp], parts: list[tuple[Any, Any, Any, Any]]
) -> tuple[F64, npt.NDArray[np.int32]]:
    """``_key_codes`` by a sort of the entries' key rows (any crossings)."""
    cols = [[], [], [], []]  # type: list[list[Any]]
    for el, flow, c, w in parts:
        cols[0].append(count_class[np.asarray(flow, np.intp)].astype(np.float64))
        cols[1].append(np.asarray(c, np.float64))
        cols[2].append(np.ones(len(el)) if w is None else w)
        cols[3].append(np.full(len(el), 0.0 if w is None else 1.0))
    keys, inverse = _unique_rows([np.concatenate(x) for x in cols])
    return keys, inverse.astype(np.int32)


def _unique_rows(cols: list[F64]) -> tuple[F64, npt.NDArray[np.intp]]:
    """The distinct rows of the columns (as a (rows x columns) array) and each row's
    index among them: a lexsort, not ``np.unique(axis=0)``'s slow byte-wise sort."""
    order = np.lexsort(cols[::-1])
    key = np.stack(cols, axis=1)[order]
    new = np.ones(len(order), bool)
    new[1:] = np.any(key[1:] != key[:-1], axis=1)
    inverse = np.empty(len(order), np.intp)
    inverse[order] = np.cumsum(new) - 1
    return key[new], inverse


def _gather(j: npt.NDArray[np.integer], n: int) -> sp.csr_matrix:
    """(n x len(j)) 0/1: sums entries into their element's row."""
    return sp.csr_matrix((np.ones(len(j)), (j, np.arange(len(j)))), shape=(n, len(j)))


def explain(
    incidence: sp.csr_matrix | Rows,
    trials: F64,
    failures: F64,
    *,
    candidates: npt.NDArray[np.bool_] | None = None,
    min_gain: float = 15.0,
    min_rate: float = 0.0,
    rate_over_background: float = 2.0,
    max_elements: int = 8,
    background: float | None = None,
) -> Explanation:
    """Greedy sparse explanation of ``failures`` out of ``trials`` per flow (module doc).

    ``incidence`` is a (flows x elements) count matrix (every path known) or ``Rows``.
    ``candidates`` restricts which elements may be chosen (e.g. those 007 voting touched);
    an element's rate must reach ``max(min_rate, rate_over_background * b)``, with ``b``
    the lower of the (refitted) background and the failure rate of the flows that do not
    cross the element: a fault's failures inflate the overall rate, not its own yardstick.
    """
    rows = incidence if isinstance(incidence, Rows) else Rows.single(incidence)
    model = _Model(rows, trials, failures)
    n = np.asarray(trials, np.float64)
    k = np.asarray(failures, np.float64)
    n_el = rows.certain.shape[1]
    total = n.sum()
    if background is None:
        background = k.sum() / total if total else 0.0
    fit = Explanation(
        background=float(np.clip(background, 1e-7, 0.5)), log_success=np.zeros(len(rows.flow))
    )
    if not total or not n_el:
        return fit
    allowed = np.ones(n_el, bool) if candidates is None else candidates.copy()
    # each element's own yardstick: the failure rate of the flows that never cross it
    touches = (rows.certain > 0).astype(np.float64)
    touches = ((touches + rows.by_flow()) > 0).astype(np.float64)
    out_n = total - touches.T @ n
    out_k = k.sum() - touches.T @ k
    rate_elsewhere = np.where(out_n > 0, out_k / np.maximum(out_n, 1), 0.0)
    for _ in range(max_elements):
        cand = np.flatnonzero(allowed)
        if not len(cand):
            break
        gain = model.gains(fit, cand, COARSE_GRID)
        best = np.argmax(gain, axis=1)
        best_gain = gain[np.arange(len(cand)), best]
        rate = COARSE_GRID[best]
        floor = np.maximum(
            min_rate, rate_over_background * np.minimum(fit.background, rate_elsewhere[cand])
        )
        best_gain[rate < floor] = -np.inf
        i = int(np.argmax(best_gain))
        if not best_gain[i] >= min_gain:
            break
        e = int(cand[i])
        near = (best_gain >= best_gain[i] - max(TIE_NATS, 1e-3 * best_gain[i])) & (cand != e)
        fit.ties[e] = [int(x) for x in cand[near]]
        allowed[e] = False
        fit.rates[e] = float(rate[i])
        fit.log_success += model.column(e) * np.log1p(-rate[i])
        _refit(fit, model)
    _prune(fit, model, min_gain, floor=min_rate)
    _polish(fit, model)
    fit.ties = {e: t for e, t in fit.ties.items() if e in fit.rates}
    return fit


def _set_rate(fit: Explanation, model: _Model, e: int, candidates: F64) -> None:
    """Element e's best rate among ``candidates`` given every other rate."""
    col = model.column(e)
    fit.log_success -= col * np.log1p(-fit.rates[e])
    gain = model.gains(fit, np.array([e]), candidates)[0]
    rate = float(candidates[int(np.argmax(gain))])
    fit.rates[e] = rate
    fit.log_success += col * np.log1p(-rate)


def _refit(fit: Explanation, model: _Model, passes: int = 3) -> None:
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


def _polish(fit: Explanation, model: _Model, rounds: int = 2) -> None:
    """Refine each chosen rate on a fine grid around its value (the coarse grid steps ~24%)."""
    steps = np.exp(np.linspace(-0.25, 0.25, 51))
    for _ in range(rounds):
        for e, r in list(fit.rates.items()):
            if 0 < r < 0.5:
                _set_rate(fit, model, e, np.clip(r * steps, 1e-7, 1 - 1e-9))


def _prune(fit: Explanation, model: _Model, min_gain: float, floor: float) -> None:
    """Drop chosen elements that explain too little; record each survivor's drop-one gain."""
    while fit.rates:
        gains = {e: model.drop_gain(fit, e, r) for e, r in fit.rates.items()}
        weakest = min(gains, key=lambda x: gains[x])
        if gains[weakest] >= min_gain and fit.rates[weakest] >= floor:
            fit.gains = gains
            return
        fit.log_success -= model.column(weakest) * np.log1p(-fit.rates.pop(weakest))
        _refit(fit, model, passes=1)
    fit.gains = {}


def posterior(fit: Explanation, rows: Rows, trials: F64, failures: F64) -> sp.csr_matrix:
    """(flows x elements): the probability, under the fit, that flow f crossed element e
    (1 or 0 where its path is known; the weight of its alternatives that cross e else)."""
    n = np.asarray(trials, np.float64)[rows.flow]
    k = np.asarray(failures, np.float64)[rows.flow]
    row_ll = log_likelihood(n, k, fit.success())
    flow_ll, _, group = mixture_ll(rows, np.arange(len(rows.flow)), row_ll)
    w = np.exp(rows.log_prior + row_ll - flow_ll[group])
    tier = rows.by_flow(w)
    certain = (rows.certain > 0).astype(np.float64)
    return sp.csr_matrix(certain.maximum(tier))
