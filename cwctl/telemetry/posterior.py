"""Which elements each flow crossed, under a signal's fit: read a few columns at a time.

Where a flow's path is known it crossed its elements (1) and no others (0); where it has
alternatives (``likelihood.Rows``), it crossed an element with the summed probability of
its alternatives through it, each weighed by how well it explains the flow's trials under
the fit. The stages read this for the elements they judge: the chosen ones (evidence,
materiality, spines over links, queued flows) and the named suspects (unexplained flows).
So it is kept as each row's weight and computed for the columns asked, never whole: at
10 000 hosts the three signals' matrices were 170 MB of a scan's peak. Each column is the
same to the bit as the whole matrix's (the same rows summed by the same code).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from cwctl.runtime.arrays import F64
from cwctl.telemetry.likelihood import Rows

_SUM_FLOWS = 50_000  # flows a block in ``weighted_sums``


class Posterior:
    """(flows x elements): P(flow crossed element) under a fit; columns on demand."""

    def __init__(self, rows: Rows, weight: F64) -> None:
        self.rows = rows
        self.weight = weight  # per row: its share of its flow's likelihood (a flow's sum to 1)
        self._columns: dict[int, F64] = {}

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows.n_flows, int(self.rows.certain.shape[1]))

    def sparse(self, elements: Sequence[int]) -> sp.csc_matrix:
        """(flows x len(elements)) of those elements, as a sparse matrix."""
        idx = np.asarray(elements, np.intp)
        certain = sp.csr_matrix(self.rows.certain[:, idx])
        certain.data = (certain.data > 0).astype(np.float64)
        tier = self.rows.by_flow(self.weight, idx)
        return sp.csc_matrix(certain.maximum(tier))

    def columns(self, elements: Sequence[int]) -> F64:
        """(flows x len(elements)) dense; each element's column kept once computed (the
        stages ask for a fit's few chosen elements again and again)."""
        missing = [int(e) for e in dict.fromkeys(elements) if int(e) not in self._columns]
        if missing:
            block = self.sparse(missing).toarray()
            for j, e in enumerate(missing):
                self._columns[e] = block[:, j]
        out = np.empty((self.shape[0], len(elements)))
        for j, e in enumerate(elements):
            out[:, j] = self._columns[int(e)]
        return out

    def column(self, e: int) -> F64:
        """One element's column (flows)."""
        return self.columns([e])[:, 0]

    def summed(self, elements: Sequence[int]) -> F64:
        """Per flow, the sum over ``elements`` (none kept: a suspect set may be wide)."""
        if not len(elements):
            return np.zeros(self.shape[0])
        return np.asarray(self.sparse(elements).sum(axis=1)).ravel()

    def full(self) -> sp.csc_matrix:
        """The whole matrix."""
        return sp.csc_matrix(self.rows.certain_crossing().maximum(self.rows.by_flow(self.weight)))

    def weighted_sums(self, per_flow: F64) -> F64:
        """``full().T @ per_flow`` (per element), a block of flows at a time: each block's
        rows are the whole matrix's rows, summed alike, and never the whole at once (at
        10 000 hosts the loss signal's was the scan's peak)."""
        rows = self.rows
        starts = np.append(rows.flow_starts(), len(rows.flow))
        n_flows = rows.n_flows
        if len(starts) - 1 != n_flows or np.any(np.diff(rows.flow) < 0):  # not as built
            return np.asarray(self.full().T @ per_flow).ravel()
        out = np.zeros(self.shape[1])
        for f0 in range(0, n_flows, _SUM_FLOWS):
            f1 = min(n_flows, f0 + _SUM_FLOWS)
            r0, r1 = int(starts[f0]), int(starts[f1])
            block = Rows(
                rows.certain[f0:f1], rows.matrix[r0:r1], rows.flow[r0:r1] - f0,
                rows.log_prior[r0:r1],
            )  # fmt: skip
            crossed = block.certain_crossing().maximum(block.by_flow(self.weight[r0:r1]))
            out += np.asarray(crossed.T @ per_flow[f0:f1]).ravel()
        return out
