"""The explanation's model: how much each element would raise the log-likelihood.

``Model`` holds one signal's rows with their trials and failures; ``Model.gains`` is the
log-likelihood each candidate element would add at each candidate rate, the fit as it
stands. Flows no chosen element touches are scored from the ``CrossingIndex`` (once per
distinct key), the rest row by row; the background refit and the prune read only the
flows that matter (``background_ll``, ``drop_gain``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

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
        rows = self.rows_of(touched)
        if not len(rows):
            return np.asarray(plain, np.float64)
        n, k, other = self.n[rows], self.k[rows], np.exp(fit.log_success[rows])
        distinct = unique_rows([n, k, other])  # once, not once per chunk of columns
        step = max(1, _CHUNK * 10 // max(len(rows), 1))  # columns at a time: bounded memory
        parts = []
        for c in np.array_split(candidates, max(1, -(-len(candidates) // step))):
            grid = grid_log_likelihood(n, k, other, 1 - c, distinct=distinct)
            parts.append(self.subset_flow_ll(rows, grid)[0].sum(0))
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
            n, k, sf = self.nf[f], self.kf[f], s_flow[f]
            base = log_likelihood(n, k, sf)
            out += _summed(
                j, len(out), len(factors),
                lambda b: grid_log_likelihood(n[b], k[b], sf[b], factors, c[b]) - base[b, None],
            )  # fmt: skip
        hard = simple & slow[sub_flow]
        if hard.any():
            r, j, c = sub.row[hard], sub.col[hard], sub.data[hard]
            n, k, sr, ll = self.n[r], self.k[r], s[r], row_ll[r]
            out += _summed(
                j, len(out), len(factors),
                lambda b: grid_log_likelihood(n[b], k[b], sr[b], factors, c[b]) - ll[b, None],
            )  # fmt: skip
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
        if not grouped(j, flow):
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
