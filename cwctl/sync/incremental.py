"""``SlidingSolver``: the clock solve over a sliding window, for the TUI's ticks.

Each ``update(new_rows)`` appends the new probes, forgets those older than the window
and solves again, reusing what did not change:

* the pair fits are recomputed (one vectorised pass over the window, cheap);
* the probe graph (components, references, BFS trees, incidence) is reused when the
  set of pairs is the same as last tick;
* the network solve starts from the previous tick's offsets and drifts moved to the new
  ``t_ref`` (warm start), so conjugate gradients computes a small correction;
* for graphs up to ``FACTOR_MAX_HOSTS`` free hosts, a sparse LU factorisation of the
  Laplacian is kept while the graph is unchanged and serves as the CG preconditioner:
  the weights move a little from tick to tick, so a few iterations suffice;
* the Huber weights of the robust offset solve carry over too, so one reweighting
  round per tick continues the iteration instead of restarting it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.sparse.linalg import splu

from cwctl.records import ProbeTable, concat_tables
from cwctl.sync.floors import weigh_floors
from cwctl.sync.network import ProbeGraph, build_graph
from cwctl.sync.solution import ClockSolution
from cwctl.sync.solve import (
    Method,
    assemble,
    empty_solution,
    fit_table,
    host_window_middle,
    network_solve,
    rebase,
    reference_index,
)

FACTOR_MAX_HOSTS = 2_000
_COLUMNS = ("src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4", "nic")
WARM_ROBUST_ROUNDS = 1  # the Huber weights carry over from tick to tick


class SlidingSolver:
    """Keeps the last ``window_s`` seconds of probes and solves them incrementally."""

    def __init__(
        self, window_s: float = 2.0, *, reference: str | None = None, method: Method = "hybrid"
    ) -> None:
        self.window_ns = int(window_s * 1e9)
        self.reference = reference
        self.method: Method = method
        self._table: ProbeTable | None = None
        self._graph: ProbeGraph | None = None
        self._graph_key: tuple[Any, ...] | None = None
        self._factor: Any = None
        self._previous: ClockSolution | None = None
        self._robust_factor: np.ndarray | None = None
        self.last_info: dict[str, Any] = {}

    def table(self) -> ProbeTable:
        """The probes currently in the window."""
        return self._table if self._table is not None else ProbeTable.empty()

    def _append(self, new: ProbeTable) -> ProbeTable:
        old = self._table
        if old is None or not len(old):
            table = new
        else:
            newest = max(int(old.t1.max()), int(new.t1.max()) if len(new) else 0)
            old = old.select(old.t1 >= newest - self.window_ns)  # forget first, then join
            if old.hosts == new.hosts and old.nics == new.nics:  # the usual tick: no remap
                table = ProbeTable(
                    hosts=old.hosts,
                    nics=old.nics,
                    **{c: np.concatenate([getattr(old, c), getattr(new, c)]) for c in _COLUMNS},
                )
            else:
                table = concat_tables([old, new])
        if len(table):
            newest = int(table.t1.max())
            table = table.select(table.t1 >= newest - self.window_ns)
        self._table = table
        return table

    def _warm(self, names: list[str], t_ref: int) -> tuple[Any, Any]:
        prev = self._previous
        if prev is None:
            return None, None
        index = {h: i for i, h in enumerate(prev.hosts)}
        where = np.array([index.get(h, -1) for h in names])
        if (where < 0).any():
            return None, None
        dt_s = (t_ref - prev.t_ref_ns) * 1e-9
        offset = prev.offset_ns[where] + prev.drift_ppb[where] * dt_s
        return offset, prev.drift_ppb[where]

    def update(self, new: ProbeTable) -> ClockSolution:
        """Add ``new`` probes, slide the window, and solve."""
        started = time.perf_counter()
        table = self._append(new)
        if not table.complete.any():
            return empty_solution(table, self.reference, "no complete probe exchange")
        filt, fits, t_prov = fit_table(table, self.method)
        if len(fits.lo) == 0:
            return empty_solution(table, self.reference, "no pair with probes in both directions")
        names = list(table.hosts)
        weigh_floors(fits, len(names))
        ref_idx = reference_index(table, self.reference)
        key = (tuple(names), fits.lo.tobytes(), fits.hi.tobytes(), ref_idx)
        reused = key == self._graph_key and self._graph is not None
        if not reused:
            self._graph = build_graph(len(names), fits.lo, fits.hi, names, ref_idx)
            self._graph_key = key
            self._factor = None
        graph = self._graph
        assert graph is not None
        t_ref = host_window_middle(table, int(graph.references[0]))
        rebase(fits, t_ref - t_prov)
        x0_offset, x0_drift = self._warm(names, t_ref)

        preconditioner = None
        if 0 < graph.n_free <= FACTOR_MAX_HOSTS:
            if self._factor is None:
                lap = graph.laplacian(1.0 / fits.sigma_offset_ns**2).tocsc()
                self._factor = splu(lap)
            preconditioner = self._factor.solve
        warm_factor = self._robust_factor if reused else None
        result = network_solve(
            graph,
            fits,
            x0_offset=x0_offset,
            x0_drift=x0_drift,
            preconditioner=preconditioner,
            robust_factor=warm_factor,
            robust_rounds=WARM_ROBUST_ROUNDS if warm_factor is not None else None,
        )
        self._robust_factor = result.robust_factor
        self.last_info = {
            "warm": x0_offset is not None,
            "graph_reused": reused,
            "cg_iterations": result.iterations,
            "rows": len(table),
        }
        extra = {
            "method": f"{self.method}, sliding {self.window_ns / 1e9:g} s",
            "solve_s": round(time.perf_counter() - started, 4),
            **self.last_info,
        }
        solution = assemble(
            table, t_ref, names, graph, fits, result, filt.quality(), self.reference, extra
        )
        self._previous = solution
        return solution
