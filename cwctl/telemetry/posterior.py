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
        """The whole matrix (for a sum over every element)."""
        return sp.csc_matrix(self.rows.certain_crossing().maximum(self.rows.by_flow(self.weight)))
