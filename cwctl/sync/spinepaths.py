"""Pair offsets on a leaf's spines' mean path, from the flows' traced paths (issue 36).

A pair's offset is the midline of its fastest legs each way. Across leaves those legs
cross one spine each way: the fastest, i.e. mostly a leaf's shortest uplinks, so a static
asymmetry of that uplink (up slower than down) moves the leaf's hosts together, and
where the two ways cross different spines the pair is off by half their paths'
difference (the ECMP mixture the Cauchy rounds of ``solve`` weigh down). A leg's spine
is what a path record names (``telemetry.routes``; a first quick scan traces about a
fifth of the flow directions under the spines' ICMP limits); with them:

1. the first solve's clocks give every flow direction its one-way delay floor;
2. the traced floors fit ``host out + leaf-to-spine up + spine-to-leaf down + host in``
   (least squares, trimmed): a spine's path between two leaves, less the hosts' parts,
   whatever the first clocks' errors (a host's error is one of its own terms);
3. a flow direction with no record takes the spine whose path fits its floor, where one
   fits within ``MATCH_TOL_NS`` and the next stands ``MATCH_MARGIN_NS`` further
   (``LABEL_ROUNDS`` rounds, the model refitted on what was labelled: 29 % -> 75-80 %
   of the cross-leaf directions, 96-98 % of the new labels right on the simulator);
4. each labelled leg is moved from its spine's path to the mean of the leaf pair's
   spines' paths (the model's difference, which no clock error enters), the cross-leaf
   exchanges with a direction still unknown are left out, and the clocks solved again;
5. the second solve stands where the moved legs close the loops (``CLOSED_LOOPS_SHARE``),
   else the first (beside a congested spine, or in a watch window's sparse floors).

Every labelled pair then stands on the same mean path each way: no mixture, and a leaf
moves by half its uplinks' mean asymmetry instead of its shortest one's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsqr

from cwctl.records import ProbeTable
from cwctl.runtime.arrays import F64, I64, IntP
from cwctl.sync.coded import coded_filter
from cwctl.sync.robust import MAD_TO_SIGMA
from cwctl.sync.solution import ClockSolution
from cwctl.sync.solve import solve

LABEL_ROUNDS: Final = 3
MATCH_TOL_NS: Final = 15.0
MATCH_MARGIN_NS: Final = 15.0
FIT_ROUNDS: Final = 3  # least-squares fits, each trimming the floors beyond TRIM_K
TRIM_K: Final = 4.0
TRIM_FLOOR_NS: Final = 5.0
# the moved legs must close the loops: the second solve's residual rms at most this share
# of the first's, else the first stands (256 hosts, quick, load 0.2, seed 1: healthy 103
# -> 3.0 ns, a dead spine2 107 -> 8.0; a congested spine2 113 -> 161, whose queued floors
# the path model cannot fit, p99 27.2 -> 103.9 ns had it been kept)
CLOSED_LOOPS_SHARE: Final = 0.25
# the second solve is a second clock solve and the labelling: about twice the first's time
# (1 024 hosts at the quick budget: 4.0 -> 8.8 s). Past this many rows (about 600 hosts
# at the quick budget's full rate, 6 000 at the fleet's 400 rows a host) the scan's time
# goes first and the first solve stands (10 000 hosts: 12.5 s instead of 19.8, where the
# guard above kept the first solve anyway)
SPINE_PATHS_MAX_ROWS: Final = 2_500_000


@dataclass
class SpineLegs:
    """What the path records say of a table's legs: per row, the index of the spine its
    probe (``fwd``) and its reply (``rev``) crossed, -1 unknown; per host its leaf's
    index, -1 unknown; how many spines."""

    fwd: I64
    rev: I64
    leaf: IntP
    n_spines: int


@dataclass
class _Directions:
    """Every flow direction (sender ``a``, receiver ``b``): its delay floor, its spine."""

    a: IntP
    b: IntP
    floor_ns: F64
    spine: I64
    row_dir: IntP  # per row: its probe's direction; its reply's is ``row_dir + half``
    half: int


def _directions(table: ProbeTable, first: ClockSolution, legs: SpineLegs) -> _Directions:
    """Per flow (prober, answerer, source port) and way, the least one-way delay under
    ``first``'s clocks (each leg at its own time, along the drifts), and its spine."""
    filt = coded_filter(table)
    x = np.nan_to_num(first.offset_ns)
    drift = np.nan_to_num(first.drift_ppb)
    s, d = table.src.astype(np.intp), table.dst.astype(np.intp)
    ok = table.complete

    def delay(t_send: I64, t_recv: I64, a: IntP, b: IntP, good: np.ndarray) -> F64:
        at = (t_send - first.t_ref_ns).astype(np.float64)
        theta = x[b] - x[a] + (drift[b] - drift[a]) * 1e-9 * at
        return np.where(ok & good, (t_recv - t_send) - theta, np.inf)

    n = len(table.hosts)
    key = (s.astype(np.int64) * n + d) * 65536 + (table.sport.astype(np.int64) & 0xFFFF)
    flows, row_flow = np.unique(key, return_inverse=True)
    m = len(flows)
    floor = np.full(2 * m, np.inf)
    np.minimum.at(floor, row_flow, delay(table.t1, table.t2, s, d, filt.fwd_ok))
    np.minimum.at(floor, row_flow + m, delay(table.t3, table.t4, d, s, filt.rev_ok))
    spine = np.full(2 * m, -1, np.int64)
    np.maximum.at(spine, row_flow, legs.fwd)
    np.maximum.at(spine, row_flow + m, legs.rev)
    prober = (flows // 65536 // n).astype(np.intp)
    answerer = (flows // 65536 % n).astype(np.intp)
    a = np.concatenate([prober, answerer])
    b = np.concatenate([answerer, prober])
    return _Directions(a, b, floor, spine, row_flow, m)


class _PathModel:
    """``host out + up(leaf, spine) + down(spine, leaf) + host in``, fitted to floors."""

    def __init__(self, n_hosts: int, leaf: IntP, n_spines: int) -> None:
        self.n, self.leaf, self.k = n_hosts, leaf, n_spines
        self.n_leaves = int(leaf.max()) + 1 if len(leaf) else 0
        self.coef = np.zeros(2 * n_hosts + 2 * self.n_leaves * n_spines)

    def _columns(self, a: IntP, b: IntP, spine: I64) -> list[IntP]:
        n, k, up = self.n, self.k, 2 * self.n
        down = up + self.n_leaves * self.k
        return [a, n + b, up + self.leaf[a] * k + spine, down + self.leaf[b] * k + spine]

    def fit(self, a: IntP, b: IntP, spine: I64, floor: F64) -> None:
        keep = np.ones(len(a), bool)
        for _ in range(FIT_ROUNDS):
            cols = np.stack(self._columns(a[keep], b[keep], spine[keep]), axis=1)
            rows = np.repeat(np.arange(len(cols)), 4)
            shape = (len(cols), len(self.coef))
            design = sp.csr_matrix((np.ones(cols.size), (rows, cols.ravel())), shape=shape)
            self.coef = lsqr(design, floor[keep], damp=1e-3, atol=1e-10, btol=1e-10)[0]
            resid = np.abs(floor - self.path(a, b, spine))
            spread = MAD_TO_SIGMA * float(np.median(resid[keep]))
            keep = resid <= max(TRIM_K * spread, TRIM_FLOOR_NS)

    def path(self, a: IntP, b: IntP, spine: I64) -> F64:
        return np.asarray(sum(self.coef[c] for c in self._columns(a, b, spine)), np.float64)

    def paths(self, a: IntP, b: IntP) -> F64:
        """(directions x spines): each spine's path."""
        return np.stack([self.path(a, b, np.full(len(a), s)) for s in range(self.k)], axis=1)


def _label(dirs: _Directions, model: _PathModel, cross: np.ndarray) -> None:
    """Give each unlabelled cross-leaf direction the spine whose path fits its floor
    alone (in place): within ``MATCH_TOL_NS``, the next ``MATCH_MARGIN_NS`` further."""
    todo = np.flatnonzero(cross & (dirs.spine < 0))
    if not len(todo):
        return
    miss = np.abs(model.paths(dirs.a[todo], dirs.b[todo]) - dirs.floor_ns[todo, None])
    order = np.argsort(miss, axis=1)
    at = np.arange(len(todo))
    best, second = miss[at, order[:, 0]], miss[at, order[:, 1]]
    fits = (best < MATCH_TOL_NS) & (second - best > MATCH_MARGIN_NS)
    dirs.spine[todo[fits]] = order[fits, 0]


def on_mean_paths(table: ProbeTable, first: ClockSolution, legs: SpineLegs) -> ProbeTable | None:
    """``table`` with each labelled cross-leaf leg moved onto the mean of its leaf
    pair's spines' paths and the cross-leaf exchanges with a way still unknown left
    out (steps 1-4 of the module docstring); None where nothing was traced."""
    dirs = _directions(table, first, legs)
    leaf = legs.leaf
    cross = (leaf[dirs.a] >= 0) & (leaf[dirs.b] >= 0) & (leaf[dirs.a] != leaf[dirs.b])
    cross &= np.isfinite(dirs.floor_ns)
    dirs.spine[~cross] = -1
    if legs.n_spines < 2 or not (dirs.spine >= 0).any():
        return None
    model = _PathModel(len(table.hosts), np.maximum(leaf, 0), legs.n_spines)
    for _ in range(LABEL_ROUNDS):
        known = dirs.spine >= 0
        model.fit(dirs.a[known], dirs.b[known], dirs.spine[known], dirs.floor_ns[known])
        _label(dirs, model, cross)
    known = dirs.spine >= 0
    excess = np.zeros(len(dirs.a))
    paths = model.paths(dirs.a[known], dirs.b[known])
    excess[known] = paths[np.arange(int(known.sum())), dirs.spine[known]] - paths.mean(axis=1)
    shift = np.rint(excess).astype(np.int64)
    fwd, rev = dirs.row_dir, dirs.row_dir + dirs.half
    moved = replace(
        table,
        t2=np.where(table.t2 != 0, table.t2 - shift[fwd], 0),
        t4=np.where(table.t4 != 0, table.t4 - shift[rev], 0),
    )
    unknown = (cross[fwd] & ~known[fwd]) | (cross[rev] & ~known[rev])
    return moved.select(~unknown)


def wants_legs(table: ProbeTable) -> bool:
    """Whether ``solve_on_spines`` would read ``table``'s legs (worth reading them)."""
    return len(table) <= SPINE_PATHS_MAX_ROWS and table.timestamp_source == "hw"


def solve_on_spines(
    table: ProbeTable, legs: SpineLegs | None, *, reference: str | None = None
) -> ClockSolution:
    """``solve``, then, with NIC stamps and traced spines, ``solve`` again on the legs
    moved onto their leaf pairs' mean paths (``on_mean_paths``), kept where it closes
    the loops (``CLOSED_LOOPS_SHARE``). Kernel stamps' floors scatter by tens of ns,
    beyond what tells two spines' paths apart: one solve. Past ``SPINE_PATHS_MAX_ROWS``
    rows, one solve (``quality.spine_paths.skipped``); ``wants_legs`` says so first."""
    first = solve(table, reference=reference)
    if len(table) > SPINE_PATHS_MAX_ROWS:
        first.quality["spine_paths"] = {"used": False, "rows": len(table), "skipped": "rows"}
        return first
    if legs is None or table.timestamp_source != "hw" or first.reference is None:
        return first
    moved = on_mean_paths(table, first, legs)
    if moved is None or not moved.complete.any():
        return first
    second = solve(moved, reference=first.reference)
    rms = (first.quality["residual_rms_ns"], second.quality["residual_rms_ns"])
    kept = rms[1] <= CLOSED_LOOPS_SHARE * rms[0]
    chosen = second if kept else first
    chosen.quality["spine_paths"] = {
        "used": bool(kept),
        "rows_kept": len(moved),
        "rows": len(table),
        "residual_rms_ns": rms[1],
    }
    return chosen
