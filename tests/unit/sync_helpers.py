"""Small synthetic probe tables for the sync tests (known offsets, drifts and delays)."""

from __future__ import annotations

import numpy as np

from cwctl.records import ProbeTable
from cwctl.sync import ClockSolution
from tests.unit.sync_synthetic import (
    SyntheticClocks,
    random_clocks,
    ring_chord_edges,
    synthetic_table,
)


def names(n: int) -> list[str]:
    return [f"h{i:03d}" for i in range(n)]


def make(
    n: int = 16,
    k: int = 4,
    *,
    seed: int = 0,
    edges: np.ndarray | None = None,
    clocks: SyntheticClocks | None = None,
    **kwargs: object,
) -> tuple[ProbeTable, SyntheticClocks, np.ndarray]:
    """A table of ``n`` hosts probing ``k`` peers each (ring + chords), and its truth."""
    clocks = clocks or random_clocks(n, seed=seed)
    edges = ring_chord_edges(n, k, seed=seed) if edges is None else edges
    kwargs.setdefault("pairs_per_edge", 30)
    table = synthetic_table(names(n), edges, clocks, seed=seed, **kwargs)  # type: ignore[arg-type]
    return table, clocks, edges


def errors(sol: ClockSolution, clocks: SyntheticClocks) -> tuple[np.ndarray, np.ndarray]:
    """Offset and drift errors of a solution against the truth, re-referenced."""
    ref = sol.hosts.index(sol.reference)  # type: ignore[arg-type]
    order = [int(h[1:]) for h in sol.hosts]
    offset, drift = clocks.relative_to(order[ref], sol.t_ref_ns)
    return sol.offset_ns - offset[order], sol.drift_ppb - drift[order]


def shift_host(table: ProbeTable, host: int, shift_ns: int) -> ProbeTable:
    """The same exchanges with ``host``'s clock reading ``shift_ns`` later."""
    out = table.select(np.arange(len(table)))
    a = out.src == host
    b = out.dst == host
    out.t1 = np.where(a, out.t1 + shift_ns, out.t1)
    out.t4 = np.where(a, out.t4 + shift_ns, out.t4)
    out.t2 = np.where(b, out.t2 + shift_ns, out.t2)
    out.t3 = np.where(b, out.t3 + shift_ns, out.t3)
    return out


def permute_hosts(table: ProbeTable, perm: np.ndarray) -> ProbeTable:
    """The same table with host ``i`` renumbered ``perm[i]`` and the rows reversed."""
    hosts = [""] * len(table.hosts)
    for i, p in enumerate(perm):
        hosts[p] = table.hosts[i]
    out = table.select(np.arange(len(table))[::-1])
    out.hosts = hosts
    out.src = perm[out.src].astype(np.int32)
    out.dst = perm[out.dst].astype(np.int32)
    return out
