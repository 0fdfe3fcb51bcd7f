"""Record decoding at home: one ``probe`` line per exchange vs ``probes`` batches.

``python -m bench decode`` (30 to 60 s on 2 cores): the same exchanges (default 200 000,
``CWCTL_BENCH_EXCHANGES`` to change) written the way an agent prints them, then fed
line by line through the orchestrator's own path (``HostRun.handle``: ``parse_line``,
decode, ``ProbeTableBuilder``) and built into one table, side by side:

- ``probe``: one JSON record per exchange (the agent with ``batch`` 0);
- ``probes lists``: batches with list columns (``pack`` false), as record files hold them;
- ``probes packed``: batches with base64 int64 columns, what the agent sends by default.

Batches hold 200 rows, what an agent at the default rate (K = 10 peers, 100 coded pairs
per second each: 2 000 exchanges/s) fills in its 0.1 s flush interval; the cap of 512
rows is shown too. Also the agent's own cost of encoding an exchange, and what the
decode rate means in hosts per orchestrator core at the default rate.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import numpy as np

from cwctl.probe.batch import Batch
from cwctl.records import TS_SOURCES, ProbeTable
from cwctl.scan.collection import HostInfo
from cwctl.transport.hostrun import Collector, HostRun

EXCHANGES = int(os.environ.get("CWCTL_BENCH_EXCHANGES", "200000"))
REPEAT = 2  # each decode timed this many times, the best kept (a shared machine)
HOSTS = 64
PEERS = 10
DEFAULT_RATE = 2 * 100 * PEERS  # exchanges/s an agent prints at the defaults
T0 = 1_700_000_000_000_000_000


def synthetic_table(n: int, seed: int = 1) -> ProbeTable:
    """``n`` exchanges as agents would record them: real-looking stamps, 1 % lost."""
    rng = np.random.default_rng(seed)
    hosts = [f"gpu-{i + 1:03d}" for i in range(HOSTS)]
    src = np.sort(rng.integers(0, HOSTS, n)).astype(np.int32)  # each host's rows together
    dst = ((src + rng.integers(1, PEERS + 1, n)) % HOSTS).astype(np.int32)
    row = np.arange(n)
    t1 = T0 + row * 7_000 + rng.integers(0, 1_000, n)
    offset = rng.integers(-(10**6), 10**6, HOSTS)
    t2 = t1 + 8_000 + rng.exponential(2_000, n).astype(np.int64) + offset[dst] - offset[src]
    t3 = t2 + 15_000
    t4 = t3 + 8_000 + rng.exponential(2_000, n).astype(np.int64) - offset[dst] + offset[src]
    lost = rng.random(n) < 0.01
    ts = np.where(rng.random(n) < 0.002, 2, 1).astype(np.int8)  # a few user-space stamps
    return ProbeTable(
        hosts=hosts,
        src=src,
        dst=dst,
        sport=(40_000 + row % 4).astype(np.int32),
        pair=(row // 2).astype(np.int64),
        idx=(row % 2).astype(np.int8),
        gap_ns=np.full(n, 20_000, np.int64),
        ts=ts,
        t1=t1.astype(np.int64),
        t2=np.where(lost, 0, t2),
        t3=np.where(lost, 0, t3),
        t4=np.where(lost, 0, t4),
    )


Lines = list[tuple[str, bytes]]  # (host, line)


def probe_lines(table: ProbeTable) -> tuple[Lines, float]:
    """One ``probe`` line per exchange, encoded as the agent's Output does."""
    records = list(table.iter_records())
    out: Lines = []
    started = time.perf_counter()
    for rec in records:  # dict(rec): the agent builds each record's dict
        out.append((rec["src"], (json.dumps(dict(rec), separators=(",", ":")) + "\n").encode()))
    return out, time.perf_counter() - started


def batch_lines(table: ProbeTable, rows: int, pack: bool) -> tuple[Lines, float]:
    """``probes`` lines made by the agent's own ``Batch``, ``rows`` exchanges each."""
    cols = {name: getattr(table, name).tolist() for name in ("src", "dst", "sport", "pair")}
    cols.update({name: getattr(table, name).tolist() for name in ("idx", "ts", "t1", "t2")})
    cols.update({name: getattr(table, name).tolist() for name in ("t3", "t4")})
    out: Lines = []
    elapsed = 0.0
    for code, name in enumerate(table.hosts):
        where = np.flatnonzero(table.src == code).tolist()
        peers = sorted({table.hosts[cols["dst"][i]] for i in where})
        batch = Batch(name, peers, 20_000, pack)
        rows_in = [
            (
                table.hosts[cols["dst"][i]],
                *(cols[k][i] for k in ("sport", "pair", "idx")),
                TS_SOURCES[cols["ts"][i]],
                *(cols[k][i] for k in ("t1", "t2", "t3", "t4")),
            )
            for i in where
        ]
        started = time.perf_counter()
        for row in rows_in:
            batch.add(*row)
            if len(batch) >= rows:
                out.append(
                    (name, (json.dumps(batch.take(), separators=(",", ":")) + "\n").encode())
                )
        if len(batch):
            out.append((name, (json.dumps(batch.take(), separators=(",", ":")) + "\n").encode()))
        elapsed += time.perf_counter() - started
    return out, elapsed


def decode(table: ProbeTable, lines: Lines) -> tuple[float, ProbeTable]:
    """Seconds for the orchestrator to take every line in and build the table."""
    collector = Collector(table.hosts, None)
    runs = {name: HostRun(HostInfo(name, "127.0.0.1"), collector) for name in table.hosts}
    started = time.perf_counter()
    for host, line in lines:
        runs[host].handle(line)
    built = collector.builder.build()
    elapsed = time.perf_counter() - started
    bad = [r.status.error for r in runs.values() if r.status.status != "ok"]
    assert not bad, bad[0]
    return elapsed, built


def same_rows(a: ProbeTable, b: ProbeTable) -> bool:
    """Both tables hold the same rows (order aside: batches go host by host)."""
    order_a, order_b = (np.lexsort((t.idx, t.pair, t.dst, t.src)) for t in (a, b))
    names = ("src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4")
    return all(np.array_equal(getattr(a, n)[order_a], getattr(b, n)[order_b]) for n in names)


def main() -> None:
    table = synthetic_table(EXCHANGES)
    forms: list[tuple[str, Callable[[], tuple[Lines, float]]]] = [
        ("probe (one per exchange)", lambda: probe_lines(table)),
        ("probes lists, 200 rows", lambda: batch_lines(table, 200, pack=False)),
        ("probes packed, 200 rows", lambda: batch_lines(table, 200, pack=True)),
        ("probes packed, 512 rows", lambda: batch_lines(table, 512, pack=True)),
    ]
    encoded = [(name, *make()) for name, make in forms]
    best = {name: float("inf") for name, _, _ in encoded}
    for _ in range(REPEAT):  # rounds over every form: a busy neighbour slows them alike
        for name, lines, _ in encoded:
            seconds, built = decode(table, lines)
            assert len(built) == len(table) and same_rows(built, table), name
            best[name] = min(best[name], seconds)
    print(
        f"{len(table):,} exchanges from {HOSTS} hosts, decoded through HostRun.handle "
        f"(best of {REPEAT} rounds)"
    )
    print(
        f"{'form':26} {'lines':>8} {'B/exch':>7} {'decoded/s':>11} {'x':>6} "
        f"{'hosts/core':>10} {'agent us/exch':>13}"
    )
    base_rate = len(table) / best[encoded[0][0]]
    for name, lines, encode_s in encoded:
        rate = len(table) / best[name]
        size = sum(len(line) for _, line in lines) / len(table)
        print(
            f"{name:26} {len(lines):>8,} {size:>7.1f} {rate:>11,.0f} {rate / base_rate:>6.1f} "
            f"{rate / DEFAULT_RATE:>10,.0f} {encode_s / len(table) * 1e6:>13.2f}"
        )
    print(
        f"hosts/core: decoded/s over {DEFAULT_RATE:,} exchanges/s per host "
        f"(K={PEERS}, 100 pairs/s), decoding only (SSH and asyncio cost extra)"
    )


if __name__ == "__main__":
    main()
