"""The explanation's model: how much each element would raise the log-likelihood.

``Model`` holds one signal's rows with their trials and failures; ``Model.gains`` is the
log-likelihood each candidate element would add at each candidate rate, the fit as it
stands. Flows no chosen element touches are scored from the ``CrossingIndex`` (once per
distinct key), the rest once per flow state and crossing (``states.py``) or, where states
are nearly as many as flows, row by row; the background refit and the prune read only
the flows that matter (``background_ll``, ``drop_gain``). A call takes its elements
``_BLOCK_ENTRIES`` crossings at a time: no temporary is the length of every crossing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import B
from cwctl.telemetry.crossings import CrossingIndex, grouped
from cwctl.telemetry.likelihood import (
    F64,
    I64,
    Explanation,
    Rows,
    gather,
    grid_log_likelihood,
    log_likelihood,
    mixture_ll,
    unique_rows,
)
from cwctl.telemetry.states import FlowStates, counted, flow_states, too_few

_STATES_KEPT = 4  # flow states kept for the refit's repeated questions
_CHUNK = 400_000  # (entries x rates) cells per block of the mixture gains
_SUM_CELLS = 1_000_000  # (entries x rates) cells per block of a certain or simple gain


def _summed(j: I64, n: int, width: int, values: Callable[[slice], F64]) -> F64:
    """(n x width): the sum of ``values`` (entries x width) into each entry's row ``j``,
    the entries taken a block at a time so that no (entries x width) matrix is held
    whole. Added in entry order from zero, as ``gather(j, n) @ values`` adds them (a
    sparse product accumulates a row's entries in column order): the same sums to the
    last bit, without a congested spine's gigabyte of temporaries."""
    out = np.zeros((n, width))
    step = max(1, _SUM_CELLS // max(width, 1))
    for lo in range(0, len(j), step):
        block = slice(lo, min(len(j), lo + step))
        np.add.at(out, j[block], values(block))
    return out


class Model:
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
        starts = rows.flow_starts()
        self.first_row[rows.flow[starts]] = starts
        self.multi = self.rows_per_flow[rows.flow] > 1
        # (nf, kf) of every flow as a small integer: flows no chosen element touches
        # share their likelihood with every other flow of the same counts
        classes, self.count_class = unique_rows([self.nf, self.kf])
        self.class_n, self.class_k = classes[:, 0], classes[:, 1]
        self._plain: CrossingIndex | None = None
        self._states_seen: dict[bytes, FlowStates | None] = {}  # the last few, by digest

    @cached_property
    def integral(self) -> bool:
        """Crossings counted in whole numbers: flows can be grouped by state
        (``states.py``). Asked only where states are wanted: the check reads every
        crossing (5.5 M at 10 000 hosts)."""
        return all(_whole_numbers(d) for d in (self.cc.data, self.mc.data))

    def flows_crossing(self, elements: I64) -> npt.NDArray[np.bool_]:
        """Which flows cross any of ``elements`` (certainly, or on one of their rows)."""
        index = self.plain_index()
        return index.flows(index.entries(elements), self.rows.n_flows)

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

    def plain_index(self) -> CrossingIndex:
        """Every crossing of the model coded for ``CrossingIndex`` (built on first use)."""
        if self._plain is None:
            self._plain = CrossingIndex(self)
        return self._plain

    def background_ll(self, fit: Explanation, candidates: F64) -> F64:
        """The total log-likelihood with each candidate background (the chosen rates as
        they are): untouched flows once per (trials, failures) class, the rest per row."""
        touched = self.touched(fit)
        sizes = np.bincount(self.count_class[~touched], minlength=len(self.class_n))
        plain = sizes @ log_likelihood(
            self.class_n[:, None], self.class_k[:, None], 1.0 - candidates[None, :]
        )
        # one flow per state, weighed by the state's size (``states.py``)
        states = self._states(fit, touched)
        weight = np.zeros(self.rows.n_flows)
        if states is not None:
            touched = np.zeros(self.rows.n_flows, bool)
            touched[states.flow] = True
            weight[states.flow] = states.size
        rows = self.rows_of(touched)
        if not len(rows):
            return np.asarray(plain, np.float64)
        n, k, other = self.n[rows], self.k[rows], np.exp(fit.log_success[rows])
        distinct = unique_rows([n, k, other])  # once, not once per chunk of columns
        step = max(1, _CHUNK * 10 // max(len(rows), 1))  # columns at a time: bounded memory
        parts = []
        for c in np.array_split(candidates, max(1, -(-len(candidates) // step))):
            grid = grid_log_likelihood(n, k, other, 1 - c, distinct=distinct)
            flow_ll, flows, _ = self.subset_flow_ll(rows, grid)
            parts.append(flow_ll.sum(0) if states is None else weight[flows] @ flow_ll)
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
        distinct (counts, crossings, weight) (``CrossingIndex.gains``). The rest are
        scored once per flow state and crossing (``states.py``), or row by row where
        touched flows are few, states nearly as many as flows, or a mixture uneven."""
        out = np.zeros((len(elements), len(rates)))
        if not len(elements):
            return out
        factors = 1.0 - rates
        plain = self.plain_index()
        blocks = _blocks(plain.ptr, elements)
        crossing = np.zeros(self.rows.n_flows, bool)
        for block in blocks:
            crossing |= plain.flows(plain.entries(elements[block]), self.rows.n_flows)
        touched = self.touched(fit) & crossing
        slow = touched | (plain.uneven & crossing)
        del crossing
        # states pay for many touched flows; an uneven mixture's row by row regardless
        states = self._states(fit, touched)
        del touched
        # row by row: each slow row's weight once for every block
        every = None if states is not None or not slow.any() else self._scoring(fit, slow, factors)
        for block in blocks:
            els = elements[block]
            entries = plain.entries(els)
            out[block] += plain.gains(els, entries, ~slow, fit.background, factors)
            del entries
            if slow.any():
                self._slow_gains(out[block], fit, els, slow, factors, states, every)
        return out

    def _slow_gains(
        self,
        out: F64,
        fit: Explanation,
        elements: I64,
        slow: B,
        factors: F64,
        states: FlowStates | None,
        every: _Scoring | None,
    ) -> None:
        """The gains over the ``slow`` flows (touched, or uneven mixtures) into ``out``:
        their certain crossings, single-row flows' and mixtures' rows, row by row (with
        ``every`` slow row's weight) or once per (state, crossing)."""
        cert = self.cc[:, elements].tocoo()
        keep = slow[cert.row]
        cert_f, cert_j, cert_c = cert.row[keep], cert.col[keep], cert.data[keep]
        sub = self.mc[:, elements].tocoo()
        keep = slow[self.rows.flow[sub.row]]
        single, mixed = keep & ~self.multi[sub.row], keep & self.multi[sub.row]
        one_r, one_j, one_c = sub.row[single], sub.col[single], sub.data[single]
        mix_r, mix_j, mix_c = sub.row[mixed], sub.col[mixed], sub.data[mixed]
        del cert, sub, keep, single, mixed
        if not grouped(mix_j, self.rows.flow[mix_r]):
            order = np.lexsort((self.rows.flow[mix_r], mix_j))
            mix_r, mix_j, mix_c = mix_r[order], mix_j[order], mix_c[order]
        if states is None:
            assert every is not None
            every.certain(out, cert_j, cert_f, cert_c)
            every.single(out, one_j, one_r, one_c)
            self._mixture_gains(out, mix_r, mix_j, mix_c, every)
            return
        # once per (state, crossings): each key scored on its state's flow, then counted;
        # what no state holds (an uneven mixture's rows, untouched flows) row by row
        one_f, mix_f = self.rows.flow[one_r], self.rows.flow[mix_r]
        cert_in, one_in = states.of_flow[cert_f] >= 0, states.of_flow[one_f] >= 0
        mix_in = _alone(mix_j, mix_f) & (states.of_flow[mix_f] >= 0)
        cert_key, cert_s, (cert_x,) = states.keys(cert_f[cert_in], _whole(cert_c[cert_in]))
        one_key, one_s, (one_x,) = states.keys(one_f[one_in], _whole(one_c[one_in]))
        mix_at = (mix_r - self.first_row[mix_f])[mix_in]  # the row's place in its flow
        mix_key, mix_s, (mix_x, mix_cx) = states.keys(mix_f[mix_in], mix_at, _whole(mix_c[mix_in]))
        scored = np.zeros(self.rows.n_flows, bool)
        scored[states.flow[np.concatenate([cert_s, one_s, mix_s])]] = True
        for flows in (cert_f[~cert_in], one_f[~one_in], mix_f[~mix_in]):
            scored[flows] = True
        ctx = self._scoring(fit, scored, factors)
        f = states.flow[cert_s]
        values = np.zeros((len(f), len(factors)))
        ctx.certain(values, np.arange(len(f)), f, cert_x.astype(np.float64))
        out += counted(cert_j[cert_in], cert_key, len(out), values)
        r = self.first_row[states.flow[one_s]]
        values = np.zeros((len(r), len(factors)))
        ctx.single(values, np.arange(len(r)), r, one_x.astype(np.float64))
        out += counted(one_j[one_in], one_key, len(out), values)
        r = self.first_row[states.flow[mix_s]] + mix_x
        values = np.zeros((len(r), len(factors)))
        self._mixture_gains(values, r, np.arange(len(r)), mix_cx.astype(np.float64), ctx)
        out += counted(mix_j[mix_in], mix_key, len(out), values)
        ctx.certain(out, cert_j[~cert_in], cert_f[~cert_in], cert_c[~cert_in])
        ctx.single(out, one_j[~one_in], one_r[~one_in], one_c[~one_in])
        self._mixture_gains(out, mix_r[~mix_in], mix_j[~mix_in], mix_c[~mix_in], ctx)

    def _scoring(self, fit: Explanation, flows: B, factors: F64) -> _Scoring:
        """What scoring the rows of the flows marked reads (``_Scoring``)."""
        s = fit.success()
        return _Scoring(self, s, *self._row_weights(flows, s), factors)

    def _states(self, fit: Explanation, flows: B) -> FlowStates | None:
        """The flows' states (``states.py``), or ``None`` to score them row by row: too
        few flows, too many states, or crossing counts not small integers. The refit asks
        again of the same flows and successes: the last few answers are kept, by a
        digest of both (a tenth of the cost of finding them)."""
        if too_few(flows) or not self.integral:
            return None
        digest = hashlib.blake2b(digest_size=16)
        digest.update(np.packbits(flows).data)
        digest.update(np.ascontiguousarray(fit.log_success).data)
        key = digest.digest()
        if key not in self._states_seen:
            if len(self._states_seen) >= _STATES_KEPT:
                del self._states_seen[next(iter(self._states_seen))]
            self._states_seen[key] = flow_states(
                self.rows.log_prior, fit.log_success, self.count_class,
                self.first_row, self.rows_per_flow, flows,
            )  # fmt: skip
        return self._states_seen[key]

    def _row_weights(self, flows: B, s: F64) -> tuple[F64, F64, F64]:
        """Per row of the flows marked (zero elsewhere): its log-likelihood at success
        ``s`` and its log posterior weight within its flow; per flow marked, its rows'
        success weighted by their posterior."""
        rows = self.rows_of(flows)
        row_ll = np.zeros(len(s))
        log_w = np.zeros(len(s))
        row_ll[rows] = log_likelihood(self.n[rows], self.k[rows], s[rows])
        flow_ll, _, group = self.subset_flow_ll(rows, row_ll[rows])
        log_w[rows] = self.rows.log_prior[rows] + row_ll[rows] - flow_ll[group]
        weighted = np.exp(log_w[rows]) * s[rows]
        s_flow = np.bincount(self.rows.flow[rows], weighted, minlength=self.rows.n_flows)
        return row_ll, log_w, np.asarray(s_flow, np.float64)

    def _mixture_gains(self, out: F64, r: I64, j: I64, c: F64, ctx: _Scoring) -> None:
        """Gains over multi-row flows' rows ``r`` into ``out``'s rows ``j``: per (j, flow),
        ``log((1 - W) + sum of w_row exp(delta_row))`` over the flow's rows that cross."""
        if not len(r):
            return
        flow = self.rows.flow[r]
        if not grouped(j, flow):
            order = np.lexsort((flow, j))
            r, j, c, flow = r[order], j[order], c[order], flow[order]
        s, row_ll, log_w, factors = ctx.s, ctx.row_ll, ctx.log_w, ctx.factors
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
            delta = grid_log_likelihood(self.n[rr], self.k[rr], s[rr], factors, cc)
            # rates as rows: reduceat runs along contiguous memory
            vt = np.ascontiguousarray(delta.T)
            vt += log_w[rr] - row_ll[rr]
            rest = self._rest_rows(rr, ff, starts, group, log_w)
            top = np.maximum(np.maximum.reduceat(vt, starts, axis=1), rest[None, :])
            vt -= top[:, group]
            np.exp(vt, out=vt)
            summed = np.add.reduceat(vt, starts, axis=1)
            summed += np.exp(rest[None, :] - top)
            value = (top + np.log(summed)).T
            out += gather(jj[starts], len(out)) @ value
            lo = hi

    def _rest_rows(self, rr: I64, ff: I64, starts: I64, group: I64, log_w: F64) -> F64:
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


@dataclass(frozen=True)
class _Scoring:
    """What scoring slow flows' crossings reads: the model, every row's success, and
    for the flows scored, each row's log-likelihood and log posterior weight and each
    flow's expected success (``Model._row_weights``); the rates' factors."""

    model: Model
    s: F64
    row_ll: F64
    log_w: F64
    s_flow: F64
    factors: F64

    def certain(self, out: F64, j: I64, f: I64, c: F64) -> None:
        """Certain crossings of flows ``f`` into ``out``'s rows ``j``, on the flows'
        expected success."""
        n, k, sf, factors = self.model.nf[f], self.model.kf[f], self.s_flow[f], self.factors
        base = log_likelihood(n, k, sf)
        out += _summed(
            j, len(out), len(factors),
            lambda b: grid_log_likelihood(n[b], k[b], sf[b], factors, c[b]) - base[b, None],
        )  # fmt: skip

    def single(self, out: F64, j: I64, r: I64, c: F64) -> None:
        """Crossings of single-row flows' rows ``r`` into ``out``'s rows ``j``."""
        n, k, s, ll, factors = (
            self.model.n[r],
            self.model.k[r],
            self.s[r],
            self.row_ll[r],
            self.factors,
        )
        out += _summed(
            j, len(out), len(factors),
            lambda b: grid_log_likelihood(n[b], k[b], s[b], factors, c[b]) - ll[b, None],
        )  # fmt: skip


_BLOCK_ENTRIES = 1_000_000  # crossings of the elements a gains call scores at a time


def _blocks(ptr: npt.NDArray[np.intp], elements: I64) -> list[slice]:
    """``elements`` cut into runs of about ``_BLOCK_ENTRIES`` crossings (``ptr``: the
    index's per-element offsets), so that no temporary is the length of every crossing."""
    sizes = np.cumsum(ptr[elements + 1] - ptr[elements])
    cuts = np.searchsorted(sizes, np.arange(_BLOCK_ENTRIES, int(sizes[-1]), _BLOCK_ENTRIES))
    bounds = np.unique(np.concatenate([[0], cuts + 1, [len(elements)]])).tolist()
    return [slice(a, b) for a, b in pairwise(bounds) if b > a]


def _whole_numbers(values: F64) -> bool:
    """Whether every value is a whole number, zero or more."""
    return bool(np.all((values >= 0) & (values == np.rint(values))))


def _whole(counts: F64) -> I64:
    """Crossing counts (whole numbers: ``Model.integral``) as integers, for a key."""
    return counts.astype(np.int64)


def _alone(j: I64, flow: I64) -> B:
    """Entries ordered by (element, flow): those alone in their (element, flow) group."""
    new = np.ones(len(j) + 1, bool)
    new[1:-1] = (j[1:] != j[:-1]) | (flow[1:] != flow[:-1])
    return new[:-1] & new[1:]
