"""``pairs_per_peer``: the median directed edge's coded pairs, whether the table's rows
come in one run per edge (read off the runs) or interleaved (counted by a sort)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.telemetry.window import pairs_per_peer
from tests.tables import edge_table


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=80))
def test_runs_or_not_the_median_of_the_plain_counts(edges: list[tuple[int, int]]) -> None:
    src, dst = [a for a, _ in edges], [b for _, b in edges]
    key = np.array(src) * 6 + np.array(dst)
    _, counts = np.unique(key, return_counts=True)
    assert pairs_per_peer(edge_table(src, dst)) == float(np.median(counts)) / 2.0


def test_an_edge_in_two_runs_is_counted_once() -> None:
    """h0->h1 twice, h0->h2 once, h0->h1 again: runs of 2, 1, 2; counts 4 and 1."""
    table = edge_table([0, 0, 0, 0, 0], [1, 1, 2, 1, 1])
    assert pairs_per_peer(table) == float(np.median([4, 1])) / 2.0
