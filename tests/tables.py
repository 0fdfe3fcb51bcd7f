"""Probe tables the unit tests build by hand: only who probed whom matters."""

from __future__ import annotations

import numpy as np

from cwctl.records import ProbeTable


def edge_table(src: list[int], dst: list[int], hosts: int = 12) -> ProbeTable:
    """One probe row per (src, dst) given, in that order, among ``hosts`` hosts h0..;
    every row sent at a time of its own (t1 = 1, 2, ...), nothing received."""
    n = len(src)
    zeros = np.zeros(n, np.int64)
    return ProbeTable(
        hosts=[f"h{i}" for i in range(hosts)],
        src=np.asarray(src, np.int32),
        dst=np.asarray(dst, np.int32),
        sport=np.zeros(n, np.int32),
        pair=np.arange(n, dtype=np.int64),
        idx=np.zeros(n, np.int8),
        gap_ns=zeros,
        ts=np.zeros(n, np.int8),
        t1=np.arange(1, n + 1, dtype=np.int64),
        t2=zeros,
        t3=zeros,
        t4=zeros,
    )
