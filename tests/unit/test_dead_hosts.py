"""dead_hosts: a host none of whose exchanges came back, counted as one suspect."""

from __future__ import annotations

import numpy as np

from cwctl.records import ProbeTable
from cwctl.telemetry.thresholds import THRESHOLDS
from cwctl.telemetry.verdicts import dead_hosts


def _table(hosts: list[str], src: list[int], dst: list[int], back: list[bool]) -> ProbeTable:
    n = len(src)
    t = np.arange(1, n + 1, dtype=np.int64) * 1000
    return ProbeTable(
        hosts=hosts,
        src=np.array(src, np.int32),
        dst=np.array(dst, np.int32),
        sport=np.full(n, 40000, np.int32),
        pair=np.arange(n, dtype=np.int64),
        idx=np.zeros(n, np.int8),
        gap_ns=np.zeros(n, np.int64),
        ts=np.zeros(n, np.int8),
        t1=t,
        t2=np.where(back, t + 1, 0),
        t3=np.where(back, t + 2, 0),
        t4=np.where(back, t + 3, 0),
    )


def test_dead_host_counts_its_exchanges_and_distinct_peers() -> None:
    hosts = ["a", "b", "c", "d", "e"]
    k = THRESHOLDS.min_dead_exchanges
    # c probes a and b, d probes c: nothing of c's comes back; a <-> b and d <-> e fine
    src = [2] * k + [2] * k + [3] * k + [0] * k + [3] * k
    dst = [0] * k + [1] * k + [2] * k + [1] * k + [4] * k
    back = [False] * (3 * k) + [True] * (2 * k)
    suspects, mask = dead_hosts(_table(hosts, src, dst, back), np.ones(len(src), bool), {})
    assert [s.element for s in suspects] == ["c"]
    assert f"none of its {3 * k} exchanges with 3 peers" in suspects[0].evidence
    assert mask.tolist() == [False, False, True, False, False, False]


def test_unusable_rows_and_too_few_tries_and_a_silent_leaf_are_not_dead_hosts() -> None:
    hosts = ["a", "b", "c", "d"]
    k = THRESHOLDS.min_dead_exchanges
    src = [0] * k + [2] * (k - 1) + [1] * k
    dst = [1] * k + [3] * (k - 1) + [0] * k
    back = [False] * (2 * k - 1) + [True] * k
    table = _table(hosts, src, dst, back)
    usable = np.ones(len(src), bool)
    # a's and b's exchanges together: a answered nothing of its own, but b did with a
    suspects, _ = dead_hosts(table, usable, {})
    assert [s.element for s in suspects] == []
    usable[2 * k - 1 :] = False  # b's answered rows left out: a and b look dead
    suspects, _ = dead_hosts(table, usable, {})
    assert [s.element for s in suspects] == ["a", "b"]  # c, d: fewer than k tries
    suspects, mask = dead_hosts(table, usable, {"a": "leaf1", "b": "leaf1", "c": "leaf2"})
    assert suspects == [] and not mask.any()  # the whole leaf is silent: the leaf's doing
