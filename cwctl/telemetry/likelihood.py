"""The likelihood the explanation (``explain.py``) maximises, and the rows it is over.

A trial on a flow succeeds with probability ``(1 - b) * prod(1 - r_e)`` over the elements
its path crosses; a flow with several alternatives (``Rows``) is the prior-weighted
mixture of its rows' binomials (``mixture_ll``). ``Explanation`` is a fit: the background
``b``, the chosen elements' rates, and each row's log success from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from cwctl.runtime.arrays import F64, I64

_EPS = 1e-12


def log_likelihood(n: F64, k: F64, success: F64) -> F64:
    """Binomial log-likelihood (without the constant) of k failures in n trials, per flow."""
    s = np.clip(success, _EPS, 1.0 - _EPS)
    return (n - k) * np.log(s) + k * np.log1p(-s)


def grid_log_likelihood(
    n: F64,
    k: F64,
    s: F64,
    factors: F64,
    power: F64 | None = None,
    *,
    distinct: tuple[F64, npt.NDArray[np.intp]] | None = None,
) -> F64:
    """``log_likelihood(n, k, s * factors ** power)`` per row and factor (columns).

    Rows share few distinct (trials, failures, success, power) tuples, so the logs are
    taken once per distinct tuple and gathered back per row. ``distinct``: those tuples
    already found (``unique_rows`` of the same columns), for a caller that asks of the
    same rows again with other factors.
    """
    if not len(n):
        return np.zeros((0, len(factors)))
    if distinct is None and len(factors) <= 2:  # too few columns to repay the sort
        exponent = 1.0 if power is None else power[:, None]
        return log_likelihood(n[:, None], k[:, None], s[:, None] * factors[None, :] ** exponent)
    unique, inverse = distinct or unique_rows([n, k, s] if power is None else [n, k, s, power])
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

    def by_flow(
        self, weights: F64 | None = None, columns: npt.NDArray[np.intp] | None = None
    ) -> sp.csr_matrix:
        """(flows x elements): per flow, the summed ``weights`` (default 1 each) of its
        rows that cross each element: ``flow_matrix() @ diag(weights) @ (matrix > 0)``,
        merged in place when a flow's rows are contiguous and in flow order (they are
        as built) instead of through two sparse products. ``columns``: those elements
        only (flows x len(columns)), without a pass over the others' entries."""
        crossing = self.crossing(weights, columns)
        flow = self.flow
        first = self.flow_starts()
        as_built = len(first) == self.n_flows and (
            not len(flow)
            or (flow[0] == 0 and flow[-1] == self.n_flows - 1 and bool(np.all(np.diff(flow) >= 0)))
        )
        if not as_built:
            return sp.csr_matrix(self.flow_matrix() @ crossing)
        indptr = np.append(crossing.indptr[first], crossing.nnz)
        out = sp.csr_matrix(  # its own indices: summing duplicates sorts them in place
            (crossing.data, crossing.indices.copy(), indptr),
            shape=(self.n_flows, crossing.shape[1]),
        )
        out.sum_duplicates()
        return out

    def crossing(
        self, weights: F64 | None = None, columns: npt.NDArray[np.intp] | None = None
    ) -> sp.csr_matrix:
        """(rows x elements): ``weights[r]`` (default 1) where alternative r crosses the
        element, ``(matrix > 0) * weights`` without its copies: the index arrays are the
        matrix's own (read-only use: sums and products, nothing that sorts in place).
        ``columns``: those elements only."""
        return _structure(self.matrix if columns is None else self.matrix[:, columns], weights)

    def crossings_per_row(self) -> F64:
        """Per row, how many elements it crosses (``crossing().sum(axis=1)``)."""
        indptr, _ = _pattern(self.matrix)
        return np.diff(indptr).astype(np.float64)

    def crossed_sums(self, weights: F64) -> F64:
        """Per element, the summed ``weights`` of the rows that cross it: what
        ``crossing().T @ weights`` sums, in the same order (row by row, so the same
        bits), without a float per crossing (11 M of them in a 10 000-host scan's loss
        rows: 88 MB), ``_SUMMED`` crossings at a time."""
        indptr, indices = _pattern(self.matrix)
        out = np.zeros(self.matrix.shape[1])
        per_row = np.diff(indptr)
        cuts = np.searchsorted(indptr, np.arange(_SUMMED, int(indptr[-1]), _SUMMED))
        bounds = [0, *np.unique(np.clip(cuts, 1, len(per_row))).tolist(), len(per_row)]
        for a, b in pairwise(bounds):
            if b > a:
                lo, hi = int(indptr[a]), int(indptr[b])
                np.add.at(out, indices[lo:hi], np.repeat(weights[a:b], per_row[a:b]))
        return out

    def certain_crossing(self) -> sp.csr_matrix:
        """(flows x elements): 1 where a flow certainly crosses the element."""
        return _structure(self.certain, None)

    def flow_starts(self) -> npt.NDArray[np.intp]:
        """The rows where a new flow begins (a flow's rows are contiguous)."""
        return np.flatnonzero(np.diff(self.flow, prepend=-1) != 0)

    def flow_matrix(self) -> sp.csr_matrix:
        """(flows x rows) 0/1: which rows are a flow's."""
        r = len(self.flow)
        return sp.csr_matrix((np.ones(r), (self.flow, np.arange(r))), shape=(self.n_flows, r))


_SUMMED = 1_000_000  # crossings ``Rows.crossed_sums`` adds up at a time


def _pattern(matrix: sp.csr_matrix) -> tuple[npt.NDArray[np.integer], npt.NDArray[np.integer]]:
    """Where ``matrix`` is positive, row by row (indptr, indices): its own index arrays
    where its stored entries are all positive and canonical."""
    matrix = sp.csr_matrix(matrix)
    if not (matrix.has_canonical_format and bool(np.all(matrix.data > 0))):
        matrix = (matrix > 0).tocsr()
    return matrix.indptr, matrix.indices


def _structure(matrix: sp.csr_matrix, weights: F64 | None) -> sp.csr_matrix:
    """``(matrix > 0)`` as float64, each row times ``weights`` (default 1), sharing
    ``matrix``'s index arrays where its stored entries are all positive and canonical."""
    indptr, indices = _pattern(matrix)
    data = np.ones(len(indices)) if weights is None else np.repeat(weights, np.diff(indptr))
    return sp.csr_matrix((data, indices, indptr), shape=matrix.shape, copy=False)


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


def log_rest(weight: F64, every: npt.NDArray[np.bool_]) -> F64:
    """``log(1 - W)``: the weight of a flow's rows that do not cross the element; none
    (-inf) where ``every`` row crosses it (``1 - W`` is then a rounding error, not a
    weight: taken as one it would floor the gain of a deadly rate at about -37 nats)."""
    rest = np.log(np.clip(1.0 - weight, 0.0, 1.0) + 1e-300)
    rest[every] = -np.inf
    return rest


def unique_rows(cols: list[F64]) -> tuple[F64, npt.NDArray[np.intp]]:
    """The distinct rows of the columns (as a (rows x columns) array) and each row's
    index among them: a lexsort, not ``np.unique(axis=0)``'s slow byte-wise sort."""
    order = np.lexsort(cols[::-1])
    key = np.stack(cols, axis=1)[order]
    new = np.ones(len(order), bool)
    new[1:] = np.any(key[1:] != key[:-1], axis=1)
    inverse = np.empty(len(order), np.intp)
    inverse[order] = np.cumsum(new) - 1
    return key[new], inverse


def gather(j: npt.NDArray[np.integer], n: int) -> sp.csr_matrix:
    """(n x len(j)) 0/1: sums entries into their element's row."""
    return sp.csr_matrix((np.ones(len(j)), (j, np.arange(len(j)))), shape=(n, len(j)))
