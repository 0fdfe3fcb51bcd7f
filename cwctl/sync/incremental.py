"""``SlidingSolver``: the clock solve over a sliding window, for the TUI's ticks.

Each ``update(new_rows)`` appends the new probes, forgets those older than the window
and solves again, reusing what did not change. The window is how the clock model is
carried across scans: each pair's offset and drift are fitted over every probe still in
it, so a sparse budget's accuracy builds up scan after scan instead of starting afresh
(``history_for`` sizes it: enough scans for ``settings.SLIDING_HISTORY_PAIRS`` coded
pairs per peer, at most ``SLIDING_HISTORY_MAX_S``, beyond which the clocks' wander bends
a straight line). Reused from tick to tick:

* the window's probes stay in columns allocated once, at the first tick, for the whole
  window (``history.ProbeHistory``): memory reaches its size at once, not as the window
  fills;
* the pair fits are recomputed (vectorised, a block of ``BLOCK_ROWS`` rows of pairs at a
  time, so the fit's temporaries are a block's, whatever the window's length);
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

from cwctl import settings
from cwctl.records import ProbeTable
from cwctl.sync.floors import weigh_floors
from cwctl.sync.history import ProbeHistory
from cwctl.sync.network import Preconditioner, ProbeGraph, build_graph
from cwctl.sync.pairfit import PairFits
from cwctl.sync.solution import ClockSolution
from cwctl.sync.solve import (
    Method,
    assemble,
    empty_solution,
    fit_blocks,
    fit_table,
    host_window_middle,
    network_solve,
    rebase,
    reference_index,
)

FACTOR_MAX_HOSTS = 2_000
# rows of pairs fitted at a time: a window of 1 024 hosts' 120 pairs per peer (2.5 M rows)
# in ten blocks, whose temporaries (~40 MB) are at their size from the first few ticks
BLOCK_ROWS = 1 << 18


def history_for(rate: float | None, duration_s: float) -> float:
    """Seconds of probes a sliding solve keeps for scans of ``duration_s`` at ``rate``
    coded pairs per second per peer: ``SLIDING_HISTORY_PAIRS`` pairs per peer's worth
    (60 s at the watch budget; one scan at quick), within ``SLIDING_HISTORY_MAX_S``."""
    if not rate or rate <= 0:
        return duration_s
    wanted = settings.SLIDING_HISTORY_PAIRS / rate
    return max(duration_s, min(wanted, settings.SLIDING_HISTORY_MAX_S))


WARM_ROBUST_ROUNDS = 1  # the Huber weights carry over from tick to tick
IDLE_NS = 1_000_000_000  # a longer pause between two updates' probes is idle, not probing


class SlidingSolver:
    """Keeps the last ``window_s`` seconds of probing and solves them incrementally.

    Seconds of probing, not of the clock: the idle time between two updates (a watch's
    rounds every 30 s, each probing 5 s) does not count, so the window holds as many
    probes whatever the scans' spacing, within ``max_span_s`` of the newest probe."""

    def __init__(
        self,
        window_s: float = 2.0,
        *,
        reference: str | None = None,
        method: Method = "hybrid",
        max_span_s: float = settings.SLIDING_HISTORY_MAX_S,
        scan_s: float | None = None,
        block_rows: int = BLOCK_ROWS,
    ) -> None:
        """``scan_s``: the probing of one update (a scan's duration), which sizes the
        history's columns (else the first update's own span does); ``block_rows``: a
        window longer than this is fitted a block of pairs at a time."""
        self.window_ns = int(window_s * 1e9)
        self.max_span_ns = int(max(max_span_s, window_s) * 1e9)
        self._spans: list[tuple[int, int]] = []  # (first, last) probe stamp of each update
        self.reference = reference
        self.method: Method = method
        self.scan_s = scan_s
        self.block_rows = block_rows
        self.history: ProbeHistory | None = None
        self._graph: ProbeGraph | None = None
        self._graph_key: tuple[Any, ...] | None = None
        self._factor: Any = None
        self._previous: ClockSolution | None = None
        self._robust_factor: np.ndarray | None = None
        self.last_info: dict[str, Any] = {}

    def table(self) -> ProbeTable:
        """The probes currently in the window."""
        return self.history.table() if self.history is not None else ProbeTable.empty()

    def _cutoff(self, new: ProbeTable) -> int | None:
        """The oldest probe stamp the window keeps once ``new`` is in: ``window_ns`` of
        probing counted back from the newest update, idle gaps between updates skipped,
        never older than ``max_span_ns`` before the newest probe."""
        if len(new):
            self._spans.append((int(new.t1.min()), int(new.t1.max())))
        if not self._spans:
            return None
        newest = max(end for _, end in self._spans)
        cutoff, probed = self._spans[0][0], 0
        following = None  # the start of the next (newer) update
        for start, end in reversed(self._spans):
            # a short pause before the next update is the probing's own spacing
            if following is not None and following - end <= IDLE_NS:
                end = following
            if probed + (end - start) >= self.window_ns:
                cutoff = end - (self.window_ns - probed)
                break
            probed += end - start
            following = start
        cutoff = max(cutoff, newest - self.max_span_ns)
        self._spans = [(max(s, cutoff), e) for s, e in self._spans if e >= cutoff]
        return cutoff

    def _append(self, new: ProbeTable) -> ProbeTable:
        cutoff = self._cutoff(new)
        if self.history is None:
            self.history = ProbeHistory(self.window_ns / self._scan_ns(new))
        return self.history.append(new, cutoff)

    def _scan_ns(self, first: ProbeTable) -> float:
        """One update's probing, in ns: ``scan_s``, else the first update's span."""
        if self.scan_s:
            return self.scan_s * 1e9
        span = int(first.t1.max() - first.t1.min()) if len(first) else 0
        return float(max(span, 1_000_000))

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
        carried = len(self._spans) > 1
        quality, fits, t_prov = self._fit(table, carried)
        if len(fits.lo) == 0:
            return empty_solution(table, self.reference, "no pair with probes in both directions")
        names = list(table.hosts)
        weigh_floors(fits, len(names))
        graph, reused = self._graph_of(names, fits, reference_index(table, self.reference))
        t_ref = host_window_middle(table, int(graph.references[0]))
        rebase(fits, t_ref - t_prov)
        x0_offset, x0_drift = self._warm(names, t_ref)
        warm_factor = self._robust_factor if reused else None
        result = network_solve(
            graph,
            fits,
            x0_offset=x0_offset,
            x0_drift=x0_drift,
            preconditioner=self._preconditioner(graph, fits),
            robust_factor=warm_factor,
            robust_rounds=WARM_ROBUST_ROUNDS if warm_factor is not None else None,
            # where the slopes were searched for the widest gap (kernel or user-space
            # stamps over several scans) each pair's offset stays at its own slope, whose
            # gap it is (sw after 60 s: 192.8 ns at the graph's slope, 162.6 at their own;
            # hw, whose slopes are not searched, 33.3 at the graph's, 35.9 at their own)
            graph_slope=not (carried and table.timestamp_source != "hw"),
            redescend=table.timestamp_source == "hw",
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
            table, t_ref, names, graph, fits, result, quality, self.reference, extra
        )
        self._previous = solution
        return solution

    def _fit(self, table: ProbeTable, carried: bool) -> tuple[dict[str, Any], PairFits, int]:
        """The window's pair fits, a block of pairs at a time past ``block_rows`` rows."""
        # over several scans (``carried``), kernel stamps' slopes are searched for the
        # widest gap: the envelope's line through noisy window minima tilts, and a long
        # window magnifies it; and keep the pair's envelope slope: the flows' (a slow
        # flow's step kept out of the line, what a sparse first window needs) lose to it
        # over a minute of points (256 hosts, load 0.4, hw, after 60 s: p99 38.6 ns with
        # the flows', 33.3 with the pair's; beside a slow spine2 48.1 and 48.4; the first
        # window 131 and 320)
        slopes = not carried
        if len(table) > self.block_rows:  # temporaries of a block, not of the whole window
            return fit_blocks(
                table,
                self.method,
                search_noisy=carried,
                block_rows=self.block_rows,
                flow_slopes=slopes,
            )
        filt, fits, t_prov = fit_table(table, self.method, search_noisy=carried, flow_slopes=slopes)
        return filt.quality(), fits, t_prov

    def _graph_of(
        self, names: list[str], fits: PairFits, ref_idx: int | None
    ) -> tuple[ProbeGraph, bool]:
        """The pairs' probe graph, and whether it is last tick's (same pairs and reference)."""
        key = (tuple(names), fits.lo.tobytes(), fits.hi.tobytes(), ref_idx)
        reused = key == self._graph_key and self._graph is not None
        if not reused:
            self._graph = build_graph(len(names), fits.lo, fits.hi, names, ref_idx)
            self._graph_key = key
            self._factor = None
        graph = self._graph
        assert graph is not None
        return graph, reused

    def _preconditioner(self, graph: ProbeGraph, fits: PairFits) -> Preconditioner | None:
        """CG's preconditioner: the Laplacian's LU, once per graph (its weights move little)."""
        if not 0 < graph.n_free <= FACTOR_MAX_HOSTS:
            return None
        if self._factor is None:
            lap = graph.laplacian(1.0 / fits.sigma_offset_ns**2).tocsc()
            self._factor = splu(lap)
        return self._factor.solve
