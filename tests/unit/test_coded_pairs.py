"""Which rows are the two probes of a coded pair, and how far apart they left: what the
coded filter judges, and what ``bench fanout`` and the local integration test measure
the agent's pacing with (``send_spacing_ns``)."""

from __future__ import annotations

import numpy as np

from cwctl.records import ProbeTable
from cwctl.sync.coded import complete_pairs, send_spacing_ns

T0 = 1_700_000_000_000_000_000

# (src, dst, sport, pair, idx, t1 offset ns, complete): rows in no particular order,
# flows interleaved, the way several agents' batches may arrive.
ROWS = [
    (0, 1, 5000, 7, 0, 0, True),  # pair A: 0->1 pair 7, spacing 1_000
    (1, 0, 5000, 7, 0, 50, True),  # pair B: 1->0, same pair number, other direction
    (0, 1, 5000, 7, 1, 1_000, True),
    (0, 1, 5001, 7, 1, 2_500, True),  # pair C (other source port): probe 1 before 0
    (0, 1, 5001, 7, 0, 2_000, True),
    (1, 0, 5000, 7, 1, 1_250, True),  # pair B: spacing 1_200
    (0, 1, 5000, 8, 0, 9_000, True),  # pair D: its probe 1 was lost (incomplete)
    (0, 1, 5000, 8, 1, 10_000, False),
    (1, 0, 5000, 9, 1, 12_000, True),  # a lone probe 1: no partner
]


def table(rows: list[tuple[int, int, int, int, int, int, bool]]) -> ProbeTable:
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    t1 = T0 + np.array(cols[5], np.int64)
    done = np.array(cols[6], np.bool_)
    return ProbeTable(
        hosts=["a", "b"],
        src=np.array(cols[0], np.int32),
        dst=np.array(cols[1], np.int32),
        sport=np.array(cols[2], np.int32),
        pair=np.array(cols[3], np.int64),
        idx=np.array(cols[4], np.int8),
        gap_ns=np.full(n, 1_000, np.int64),
        ts=np.zeros(n, np.int8),
        t1=t1,
        t2=t1 + 10_000,
        t3=np.where(done, t1 + 11_000, 0),
        t4=np.where(done, t1 + 20_000, 0),
        nic=np.full(n, -1, np.int16),
    )


def test_pairs_are_found_across_interleaving_and_order() -> None:
    first, second = complete_pairs(table(ROWS))
    assert sorted(zip(first.tolist(), second.tolist(), strict=True)) == [(0, 2), (1, 5), (4, 3)]


def test_send_spacing_of_complete_pairs_only() -> None:
    assert sorted(send_spacing_ns(table(ROWS)).tolist()) == [500, 1_000, 1_200]


def test_adjacent_rows_pair_without_a_sort() -> None:
    rows = [ROWS[0], ROWS[2], ROWS[4], ROWS[3]]  # as one agent writes them: 0 then 1
    first, second = complete_pairs(table(rows))
    assert sorted(zip(first.tolist(), second.tolist(), strict=True)) == [(0, 1), (2, 3)]
    assert sorted(send_spacing_ns(table(rows)).tolist()) == [500, 1_000]


def test_no_pairs_in_a_single_row_table() -> None:
    assert len(send_spacing_ns(table(ROWS[:1]))) == 0
