"""The network effect: one consistent set of clocks from many pairwise estimates.

Pairwise offsets must sum to zero around every loop of the probe graph; measured ones
do not, because each carries its own error. The weighted least-squares solution of
``x_hi - x_lo = v_e`` (weights ``1/sigma_e^2``) is the consistent set closest to the
measurements; with the reference pinned at 0 its normal equations are the grounded
graph Laplacian ``L x = B^T W v``, sparse, symmetric positive definite.

Solved with conjugate gradients (Jacobi preconditioner) from a good first guess: the
spanning-tree solution (BFS from the reference, what an NTP hierarchy would give) or the
previous tick's answer, so CG only computes a small correction. The probe graph is
ring plus random chords, an expander, so CG converges in tens of iterations at any
size, where a sparse Cholesky would fill in. ``SlidingSolver`` may pass a factorisation
of an earlier Laplacian as the preconditioner instead.

Every connected component is solved with its own reference (the operator's, where it
lies in that component, else its best-connected host: most probed peers, then the
smallest name). Hosts with no usable pair are NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.sparse.linalg import LinearOperator, cg

from cwctl.runtime.arrays import F64, IntP

CG_RTOL = 1e-8
CG_FLOOR = 1e-14
CG_MAXITER = 2_000


@dataclass
class ProbeGraph:
    """The graph of pairs with an estimate, its components, references and incidence."""

    n_hosts: int
    lo: IntP
    hi: IntP
    component: IntP  # per host, -1 for a host with no edge
    references: IntP  # per component, the pinned host
    free: IntP  # grounded index per host, -1 for references and hosts with no edge
    incidence: sp.csr_matrix  # edges x free hosts: +1 at hi, -1 at lo
    tree_order: list[IntP] = field(default_factory=list)  # BFS order per component
    tree_pred: IntP = field(default_factory=lambda: np.zeros(0, np.intp))

    @property
    def n_free(self) -> int:
        return self.incidence.shape[1]

    def signature(self) -> tuple[int, bytes, bytes, bytes]:
        """Equal for two graphs with the same edges and references (factorisation reuse)."""
        return (self.n_hosts, self.lo.tobytes(), self.hi.tobytes(), self.references.tobytes())

    def laplacian(self, weights: F64) -> sp.csr_matrix:
        b = self.incidence
        return (b.T @ sp.diags(weights) @ b).tocsr()


def build_graph(
    n_hosts: int, lo: IntP, hi: IntP, names: Sequence[str], reference: int | None = None
) -> ProbeGraph:
    """Components, one reference per component, the grounded incidence matrix."""
    m = len(lo)
    adj = sp.coo_matrix((np.ones(m), (lo, hi)), shape=(n_hosts, n_hosts)).tocsr()
    adj = adj + adj.T
    _, labels = csgraph.connected_components(adj, directed=False)
    degree = np.bincount(np.concatenate([lo, hi]), minlength=n_hosts)
    has_edge = degree > 0
    # renumber components of hosts with edges 0..c-1, largest first, then by best name
    comps, comp_of = np.unique(labels[has_edge], return_inverse=True)
    component = np.full(n_hosts, -1, np.intp)
    component[has_edge] = comp_of
    hosts_with = np.flatnonzero(has_edge)
    # best-connected per component: max degree, then smallest name (order-independent)
    name_rank = np.empty(n_hosts, np.intp)
    name_rank[np.argsort(np.asarray(names, dtype=object), kind="stable")] = np.arange(n_hosts)
    order = np.lexsort((name_rank[hosts_with], -degree[hosts_with], comp_of))
    first = np.unique(comp_of[order], return_index=True)[1]
    refs = hosts_with[order[first]]
    if reference is not None and has_edge[reference]:
        refs[component[reference]] = reference
    # largest component first, ties by its reference's name: stable across host orders
    sizes = np.bincount(comp_of, minlength=len(comps))
    comp_order = np.lexsort((name_rank[refs], -sizes))
    if reference is not None and has_edge[reference]:
        main = component[reference]
        comp_order = np.concatenate([[main], comp_order[comp_order != main]])
    remap = np.empty(len(comps), np.intp)
    remap[comp_order] = np.arange(len(comps))
    component[has_edge] = remap[component[has_edge]]
    refs = refs[comp_order]

    free = np.full(n_hosts, -1, np.intp)
    is_free = has_edge.copy()
    is_free[refs] = False
    free[is_free] = np.arange(int(is_free.sum()))
    n_free = int(is_free.sum())
    rows = np.concatenate([np.arange(m), np.arange(m)])
    cols = np.concatenate([free[hi], free[lo]])
    vals = np.concatenate([np.ones(m), -np.ones(m)])
    keep = cols >= 0
    incidence = sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(m, n_free))

    pred = np.full(n_hosts, -9999, np.intp)
    orders = []
    for r in refs:
        o, p = csgraph.breadth_first_order(adj, int(r), directed=False, return_predecessors=True)
        orders.append(o)
        pred[o] = p[o]
    return ProbeGraph(n_hosts, lo, hi, component, refs, free, incidence, orders, pred)


def tree_solve(graph: ProbeGraph, values: F64) -> F64:
    """Offsets along the BFS spanning tree from each reference (no loop correction)."""
    n = graph.n_hosts
    x = np.full(n, np.nan)
    step_mat = sp.coo_matrix(
        (
            np.concatenate([values, -values]),
            (np.concatenate([graph.lo, graph.hi]), np.concatenate([graph.hi, graph.lo])),
        ),
        shape=(n, n),
    ).tocsr()
    for order in graph.tree_order:
        x[order[0]] = 0.0
        child = order[1:]
        if len(child) == 0:
            continue
        parent = graph.tree_pred[child]
        step = np.asarray(step_mat[parent, child]).ravel()
        xs = x.tolist()
        for c, p, s in zip(child.tolist(), parent.tolist(), step.tolist(), strict=True):
            xs[c] = xs[p] + s
        x = np.asarray(xs)
    return x


@dataclass
class SolveInfo:
    iterations: int = 0
    converged: bool = True


Preconditioner = Callable[[F64], F64]


def ls_solve(
    graph: ProbeGraph,
    values: F64,
    weights: F64,
    *,
    x0: F64 | None = None,
    laplacian: sp.csr_matrix | None = None,
    preconditioner: Preconditioner | None = None,
) -> tuple[F64, SolveInfo]:
    """Weighted least squares on the grounded Laplacian; per host, NaN where no edge."""
    n = graph.n_hosts
    free = graph.free
    out = np.full(n, np.nan)
    out[graph.references] = 0.0
    info = SolveInfo()
    if graph.n_free == 0:
        return out, info
    if x0 is None or not np.all(np.isfinite(x0[free >= 0])):
        x0 = tree_solve(graph, values)
    lap = laplacian if laplacian is not None else graph.laplacian(weights)
    rhs = graph.incidence.T @ (weights * values)
    start = x0[free >= 0][np.argsort(free[free >= 0])]
    resid = rhs - lap @ start
    if preconditioner is None:
        inv_diag = 1.0 / lap.diagonal()

        def preconditioner(r: F64) -> F64:
            return inv_diag * r

    m_op = LinearOperator(lap.shape, matvec=preconditioner, dtype=np.float64)
    count = [0]

    def tick(_: F64) -> None:
        count[0] += 1

    # CG solves for the correction to the first guess; converged when the residual is
    # CG_RTOL of the first guess's (a good guess asks for a small, precise correction),
    # or negligible against the right-hand side itself
    scale = float(np.linalg.norm(rhs)) or 1.0
    first = float(np.linalg.norm(resid))
    atol = max(CG_RTOL * first, CG_FLOOR * scale)
    if first <= atol:
        delta = np.zeros_like(start)
    else:
        delta, status = cg(
            lap, resid, rtol=0.0, atol=atol, maxiter=CG_MAXITER, M=m_op, callback=tick
        )
        info.converged = status == 0
    info.iterations = count[0]
    solved = start + delta
    idx = np.flatnonzero(free >= 0)
    out[idx] = solved[free[idx]]
    return out, info
