"""Every (element, flow) crossing of a signal's rows, coded once (``CrossingIndex``).

The explanation's gains (``gains.py``) score the flows no chosen element touches from
this index: one evaluation per distinct key, not one per flow and row.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from cwctl.telemetry.likelihood import F64, I64, Rows, log_likelihood, log_rest, unique_rows


class Source(Protocol):
    """What the index reads of a model (``gains.Model``)."""

    rows: Rows
    cc: sp.csc_matrix
    mc: sp.csc_matrix
    multi: npt.NDArray[np.bool_]
    rows_per_flow: npt.NDArray[np.intp]
    count_class: npt.NDArray[np.intp]
    class_n: F64
    class_k: F64


class CrossingIndex:
    """Every (element, flow) crossing of a model, coded once, to score untouched flows.

    A flow no chosen element touches has the background's success ``1 - b`` on every
    row, so what crossing element e at rate r adds depends only on a key: the flow's
    (trials, failures) class, how often it crosses e (``c``) and, for a mixture, the
    prior weight ``W`` of its rows that cross e: ``delta`` for a single row (or a
    certain crossing), ``log((1 - W) + W exp(delta))`` for a mixture, with ``delta`` the
    log-likelihood at ``(1 - b)(1 - r)^c`` less that at ``1 - b`` (as ``Model.gains``
    computes it row by row). The crossings are kept sorted by element with their flow
    and key; a gains call counts, per element asked, the keys of its untouched flows and
    evaluates each key once. Mixture groups whose rows cross e unequally often have no
    such key: their flows (``uneven``) are always scored row by row."""

    def __init__(self, model: Source) -> None:
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
        del singles, mixtures
        parts: list[tuple[Any, Any, Any, Any]] = [  # certain, single-row, mixtures
            (np.repeat(elements, np.diff(cc.indptr)), cc.indices, cc.data, None),
            (s_el, s_flow, s_c, None),
            (g_el, g_flow, g_c, g_w),
        ]
        self.keys, key = _key_codes(model.count_class, parts)
        placed = [(el, flow) for el, flow, _, _ in parts]
        del parts, s_el, s_flow, s_c, g_el, g_flow, g_c, g_w  # the weights: keys now
        self._place(placed, key, n_el)

    def _place(self, parts: list[tuple[Any, Any]], key: npt.NDArray[np.int32], n_el: int) -> None:
        """Every part's (element, flow) and key at its place in the index: an element's
        certain crossings, then single rows, then mixtures. Each part is in element
        order as built, so its entries go straight there, ``_PLACE`` at a time, not
        through a sort of every crossing."""
        counts = [np.bincount(el, minlength=n_el) for el, _ in parts]
        self.ptr = np.concatenate([[0], np.cumsum(sum(counts))])
        self.flow = np.empty(int(self.ptr[-1]), np.int32)
        self.key = np.empty(int(self.ptr[-1]), np.int32)
        before, at = np.zeros(n_el, np.int64), 0
        for (el, flow), count in zip(parts, counts, strict=True):
            mine = key[at : at + len(el)]
            if len(el) > 1 and not bool(np.all(el[1:] >= el[:-1])):  # as built, never
                order = np.argsort(el, kind="stable")
                el, flow, mine = el[order], flow[order], mine[order]
            # entry i of the part, on element e: ptr[e] + before[e] + (i - e's first i)
            offset = self.ptr[:-1] + before - (np.cumsum(count) - count)
            for lo in range(0, len(el), _PLACE):
                hi = min(len(el), lo + _PLACE)
                dest = offset[el[lo:hi]]
                dest += np.arange(lo, hi)
                self.flow[dest] = flow[lo:hi]
                self.key[dest] = mine[lo:hi]
            before += count
            at += len(el)

    def _groups(
        self, model: Source, j: I64, flow: I64, row: I64, c: F64
    ) -> tuple[I64, I64, F64, F64]:
        """Mixture rows grouped per (element, flow): element, flow, crossings, weight."""
        if not len(j):
            return j, flow, c, np.zeros(0)
        if not grouped(j, flow):
            order = np.lexsort((flow, j))
            j, flow, row, c = j[order], flow[order], row[order], c[order]
        new = np.ones(len(j), bool)
        new[1:] = (j[1:] != j[:-1]) | (flow[1:] != flow[:-1])
        starts = np.flatnonzero(new)
        weight = np.add.reduceat(np.exp(model.rows.log_prior[row]), starts)
        every = np.diff(np.append(starts, len(j))) == model.rows_per_flow[flow[starts]]
        weight[every] = 1.0  # every row crosses it: no rest (see log_rest)
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
        counts = np.bincount(cell, minlength=len(elements) * n_keys).reshape(len(elements), n_keys)
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
        rest = log_rest(weight[mixture], weight[mixture] == 1.0)
        delta[mixture] = np.logaddexp(
            rest[:, None], np.log(weight[mixture])[:, None] + delta[mixture]
        )
        return delta


_INDEX_SLICE = 2_000_000  # alternatives' crossings the index takes at a time
_PLACE = 1_000_000  # crossings placed in the index at a time


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


def grouped(j: I64, flow: I64) -> bool:
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
    the entries, found by ``np.unique``), ``_PLACE`` entries at a time. Non-integral
    crossings fall back to rows."""
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

    def codes_of(part: tuple[Any, Any, Any, Any], lo: int, hi: int) -> npt.NDArray[np.int64]:
        _, flow, c, w = part
        code = count_class[flow[lo:hi]] * n_c
        code += np.asarray(c[lo:hi]).astype(np.int64)
        code *= n_w
        code += one if w is None else np.searchsorted(weights, w[lo:hi])
        code *= 2
        code += 0 if w is None else 1
        return np.asarray(code, np.int64)

    slices = [
        (p, lo, min(len(p[2]), lo + _PLACE)) for p in parts for lo in range(0, len(p[2]), _PLACE)
    ]
    size = (int(count_class.max()) + 1) * n_c * n_w * 2
    if size <= 2 * n:  # a table no bigger than the entries: two passes, a slice at a time
        present = np.zeros(size, bool)
        for part, lo, hi in slices:
            present[codes_of(part, lo, hi)] = True
        codes = np.flatnonzero(present)
        table = np.cumsum(present, dtype=np.int32) - 1
        inverse = np.empty(n, np.int32)
        at = 0
        for part, lo, hi in slices:
            inverse[at : at + hi - lo] = table[codes_of(part, lo, hi)]
            at += hi - lo
    else:
        every = np.concatenate([codes_of(part, lo, hi) for part, lo, hi in slices])
        codes, wide = np.unique(every, return_inverse=True)
        inverse = wide.ravel().astype(np.int32)
    mixture, rest = codes % 2, codes // 2
    keys = np.stack(
        [rest // n_w // n_c, rest // n_w % n_c, weights[rest % n_w], mixture], axis=1
    ).astype(np.float64)
    return keys, inverse


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
    keys, inverse = unique_rows([np.concatenate(x) for x in cols])
    return keys, inverse.astype(np.int32)
