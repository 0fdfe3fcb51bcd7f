"""The solver's output and what follows from it (corrected one-way delays)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.runtime.arrays import F64


@dataclass
class ClockSolution:
    """Every host's clock relative to the reference, at instant ``t_ref_ns``.

    ``offset_ns[i]`` is host i's clock minus the reference's clock at ``t_ref_ns`` (the
    middle of the probing window, in the reference's time); ``drift_ppb[i]`` its rate
    difference. NaN where a host could not be solved (no usable probes). Hosts in
    another connected component of the probe graph are relative to that component's
    reference (``component_reference``).
    """

    hosts: list[str]
    offset_ns: F64
    drift_ppb: F64
    uncertainty_ns: F64
    reference: str | None
    t_ref_ns: int
    component_reference: list[str | None] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)  # per probed pair: fit, residual
    quality: dict[str, Any] = field(default_factory=dict)  # filter tolerance, counts, ...
    # the same per-pair facts as ``edges``, column by column (numpy arrays; "src"/"dst"
    # are host indices); always filled, while ``edges`` is left empty above
    # ``EDGE_DICTS_MAX`` pairs, where building the dicts would cost more than the solve
    edge_table: dict[str, Any] = field(default_factory=dict)

    def edge_records(self) -> list[dict[str, Any]]:
        """``edges``, built from ``edge_table`` when the solve left it empty."""
        if self.edges or not self.edge_table:
            return self.edges
        cols = {k: v.tolist() for k, v in self.edge_table.items()}
        src = [self.hosts[i] for i in cols.pop("src")]
        dst = [self.hosts[i] for i in cols.pop("dst")]
        keys = list(cols)
        rows = zip(src, dst, *cols.values(), strict=True)
        return [{"src": r[0], "dst": r[1], **dict(zip(keys, r[2:], strict=True))} for r in rows]

    def offset_at(self, host_index: npt.NDArray[np.intp], t_ns: npt.NDArray[np.int64]) -> F64:
        """Offset of each host at each instant: ``offset + drift * (t - t_ref)``."""
        dt_s = (t_ns - self.t_ref_ns).astype(np.float64) * 1e-9
        return self.offset_ns[host_index] + self.drift_ppb[host_index] * dt_s

    def offset_at_local(self, host_index: npt.NDArray[np.intp], t_ns: npt.NDArray[np.int64]) -> F64:
        """Offset of each host when its own clock reads ``t_ns`` (a stamp it took).

        ``offset_at`` wants reference time; a host's stamp is ``offset`` away from it,
        which at a drift of 20 ppm and an offset of 1 ms is 20 ns: one fixed-point step
        converts the stamp to reference time first.
        """
        rel_s = (t_ns - self.t_ref_ns).astype(np.float64) * 1e-9
        off = self.offset_ns[host_index]
        drift = self.drift_ppb[host_index]
        first = off + drift * rel_s
        return off + drift * (rel_s - first * 1e-9)


def one_way_delays(
    table: ProbeTable, solution: ClockSolution, block_rows: int = 1 << 20
) -> tuple[F64, F64]:
    """Forward (src->dst) and reverse one-way delays in ns, clocks corrected; NaN if unknown.

    Computed ``block_rows`` at a time into the two result arrays: the temporaries (a
    dozen per row) are a block's, not the table's."""
    index = {name: i for i, name in enumerate(solution.hosts)}
    remap = np.array([index.get(h, -1) for h in table.hosts] + [-1], np.intp)
    n = len(table)
    fwd = np.empty(n)
    rev = np.empty(n)
    at = solution.offset_at_local
    for lo in range(0, n, block_rows):
        part = slice(lo, min(n, lo + block_rows))
        t1, t2, t3, t4 = table.t1[part], table.t2[part], table.t3[part], table.t4[part]
        a = remap[table.src[part]]
        b = remap[table.dst[part]]
        known = (a >= 0) & (b >= 0)
        a_safe, b_safe = np.where(known, a, 0), np.where(known, b, 0)
        theta_fwd = at(b_safe, t2) - at(a_safe, t1)
        theta_rev = at(b_safe, t3) - at(a_safe, t4)
        f = (t2 - t1).astype(np.float64) - theta_fwd
        r = (t4 - t3).astype(np.float64) + theta_rev
        f[~(known & (t2 != 0))] = np.nan
        r[~(known & (t4 != 0))] = np.nan
        fwd[part], rev[part] = f, r
    return fwd, rev
