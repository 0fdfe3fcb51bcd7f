"""Flows alike under a fit, scored once (``FlowStates``).

Two flows of the same (trials, failures) class whose rows carry the same priors and
successes, in the same order, have the same likelihood under any change the explanation
weighs. The gains and the background refit (``gains.py``) score one flow per state and
weigh it by how many flows share it. A 10 000-host scan's delay signal has 20 classes;
with a congested spine chosen, its 269 007 touched flows fall in 29 states, and a
greedy step's gains over 4.5 M crossings are a few hundred evaluations. Where states are
nearly as many as flows (records whose flows carry any number of trials), finding them
would not repay itself and ``flow_states`` says so (``None``): the row-by-row scoring
stands; so it does for a few flows (``MIN_FLOWS``), and for an uneven mixture (its rows
cross the element unequally often), which no (state, crossing) key describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from cwctl.runtime.arrays import F64, I64, B
from cwctl.telemetry.groups import group_ids
from cwctl.telemetry.likelihood import unique_rows

WORTH = 0.5  # states per flow above which the row-by-row scoring stands
MIN_FLOWS = 4_096  # fewer touched flows are scored row by row: cheaper than their states
_DENSE_CELLS = 4_000_000  # (targets x keys) counted in one bincount up to this many


@dataclass(frozen=True)
class FlowStates:
    """A set of flows grouped by state: ``of_flow[f]`` is flow f's state (-1 for flows
    outside the set), ``flow[s]`` one flow in state s, ``size[s]`` how many."""

    of_flow: I64
    flow: I64
    size: I64

    def keys(self, flow: I64, *columns: I64) -> tuple[I64, I64, list[I64]]:
        """Entries on ``flow`` with small integer ``columns``, keyed by (state, columns)
        (``groups.group_ids``): each entry's key, and each key's state and columns."""
        key, tuples = group_ids(self.of_flow[flow], *columns)
        return key, tuples[:, 0], [tuples[:, i] for i in range(1, tuples.shape[1])]


def too_few(flows: B) -> bool:
    """Whether the flows marked are too few for their states to repay (``MIN_FLOWS``)."""
    return int(np.count_nonzero(flows)) < MIN_FLOWS


def flow_states(
    log_prior: F64,
    log_success: F64,
    count_class: I64,
    first_row: I64,
    rows_per_flow: I64,
    flows: B,
) -> FlowStates | None:
    """The states of the flows marked (module doc); ``None`` where they are more than
    ``WORTH`` of the flows. A flow's rows are contiguous from ``first_row``."""
    members = np.flatnonzero(flows)
    if not len(members):
        return None
    sizes = rows_per_flow[members]
    offset = np.cumsum(sizes) - sizes  # each member's first place among ``rows``
    owner = np.repeat(np.arange(len(members)), sizes)
    rows = first_row[members][owner] + np.arange(len(owner)) - offset[owner]
    _, row_code = unique_rows([log_prior[rows], log_success[rows]])
    of_flow = np.full(len(flows), -1, np.int64)
    first, count = [], []
    at = 0
    for m in np.unique(sizes).tolist():
        group = np.flatnonzero(sizes == m)
        codes = row_code[offset[group][:, None] + np.arange(m)]
        key, one, per = _grouped(count_class[members[group]], codes)
        of_flow[members[group]] = at + key
        first.append(members[group][one])
        count.append(per)
        at += len(one)
        if at > WORTH * len(members):
            return None
    return FlowStates(of_flow, np.concatenate(first), np.concatenate(count))


def _grouped(classes: I64, codes: npt.NDArray[np.intp]) -> tuple[I64, I64, I64]:
    """Flows of one size grouped by (class, row codes) (``groups.group_ids``): each
    flow's group, one flow per group, and each group's size."""
    key, _ = group_ids(classes, *codes.T)
    per = np.bincount(key)
    one = np.empty(len(per), np.intp)
    one[key] = np.arange(len(key))  # any flow of a group will do: they are alike
    return key, one, per


def counted(target: I64, key: I64, n_targets: int, values: F64) -> F64:
    """(targets x columns): per target, the sum of ``values[key]`` over its entries:
    ``counts(target, key) @ values``, the counts dense or sparse by their size."""
    n_keys = len(values)
    if n_targets * n_keys <= _DENSE_CELLS:
        counts = np.bincount(target * n_keys + key, minlength=n_targets * n_keys)
        return counts.reshape(n_targets, n_keys).astype(np.float64) @ values
    matrix = sp.csr_matrix(
        (np.ones(len(key)), (target, key)), shape=(n_targets, n_keys)
    )  # duplicates summed
    return np.asarray(matrix @ values)
