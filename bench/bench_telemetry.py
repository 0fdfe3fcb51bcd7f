"""Telemetry speed: ``build_snapshot`` time vs fabric size, against a per-path loop.

``python -m bench telemetry`` (about half a minute): for the default simulated leaf-spine
fabric at 64, 256 and 1024 hosts (seed 1, spine2 congested, the simulator's defaults), the
time of ``build_snapshot`` (clocks solved beforehand, not timed; best of 2 or 3 runs after
a first) and its time per million probe records; and, on the 64-host scan, the per-path
statistics computed the plain way (one Python iteration per directed path, numpy within
it) next to ``path_table``, with the ratio. ``CWCTL_BENCH_TELEMETRY_HOSTS=64,256`` picks
the sizes.

``per_path_loop`` is also the reference the tests hold ``path_table`` to.

``python -m bench.bench_telemetry --compare REV`` checks that the telemetry code of git
revision REV and the working tree give the same snapshot JSON (every path, statistic,
suspect and score) on seeded simulator scenarios with faults: the check behind a
"no result changed" speed-up.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cwctl.scan.collection import Collection
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.session import ScanSession
from cwctl.sync import ClockSolution, one_way_delays, solve
from cwctl.telemetry import build_snapshot
from cwctl.telemetry.paths import Observations, observations, path_table

SIZES = tuple(
    int(x) for x in os.environ.get("CWCTL_BENCH_TELEMETRY_HOSTS", "64,256,1024").split(",")
)
FAULTS = ("switch:spine2:congested",)


@dataclass
class LoopStats:
    """One directed path's statistics, computed on its own."""

    sent: int
    received: int
    owd_ns: tuple[float, ...]  # min, p50, p90, p99, max (NaN: none)
    jitter_ns: float


def per_path_loop(obs: Observations) -> dict[tuple[int, int], LoopStats]:
    """Per-path statistics the plain way: rows split by path once, then one Python
    iteration per path (np.quantile, a stable sort by send time, np.mean)."""
    order = np.lexsort((obs.dst, obs.src))
    src, dst = obs.src[order], obs.dst[order]
    cut = np.flatnonzero((src[1:] != src[:-1]) | (dst[1:] != dst[:-1])) + 1
    out = {}
    for rows in np.split(order, cut):
        if not len(rows):
            continue
        owd = obs.owd_ns[rows]
        known = ~np.isnan(owd)
        qs = np.quantile(owd[known], (0.0, 0.5, 0.9, 0.99, 1.0)) if known.any() else [np.nan] * 5
        by_time = np.sort(rows[known])  # row order, then stable by send time
        by_time = by_time[np.argsort(obs.t_ns[by_time], kind="stable")]
        steps = np.abs(np.diff(obs.owd_ns[by_time]))
        jitter = float(np.mean(steps)) if len(steps) else float("nan")
        key = (int(obs.src[rows[0]]), int(obs.dst[rows[0]]))
        out[key] = LoopStats(
            len(rows),
            int(obs.received[rows].sum()),
            tuple(map(float, qs)),
            jitter,  # type: ignore[arg-type]
        )
    return out


def scan(hosts: int) -> tuple[Collection, ClockSolution]:
    request = ScanRequest(sim=SimOptions(hosts=hosts, seed=1, faults=FAULTS))
    collection = asyncio.run(ScanSession(request).collect())
    return collection, solve(collection.table)


def _best_of(fn: object, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    print(f"build_snapshot, default sim fabric, seed 1, faults {', '.join(FAULTS)}")
    print(f"{'hosts':>6} {'records':>10} {'obs':>10} {'paths':>7} {'build s':>8} {'s/M rec':>8}")
    loop_case = None
    for hosts in SIZES:
        collection, solution = scan(hosts)
        repeat = 3 if hosts <= 256 else 2
        snap = build_snapshot(collection, solution)
        took = _best_of(lambda c=collection, s=solution: build_snapshot(c, s), repeat)
        n = len(collection.table)
        fwd, rev = one_way_delays(collection.table, solution)
        obs = observations(collection.table, fwd, rev)
        print(
            f"{hosts:>6} {n:>10} {len(obs):>10} {len(snap.paths):>7} {took:>8.3f} "
            f"{took / (n / 1e6):>8.3f}",
            flush=True,
        )
        if loop_case is None:
            loop_case = obs
    if loop_case is None:
        return
    obs = loop_case
    vectorised = _best_of(lambda: path_table(obs), 3)
    loop = _best_of(lambda: per_path_loop(obs), 1)
    n_paths = len(per_path_loop(obs))
    print(
        f"per-path stats at {SIZES[0]} hosts ({len(obs)} observations, {n_paths} paths): "
        f"path_table {vectorised:.3f} s, per-path loop {loop:.3f} s, "
        f"ratio {loop / vectorised:.1f}x"
    )


COMPARE_SCENARIOS: tuple[tuple[int, int, tuple[str, ...]], ...] = (
    (32, 5, ()),
    (64, 1, ("switch:spine2:congested",)),
    (64, 2, ("link:leaf2-spine1:lossy=0.05",)),
    (64, 3, ("host:gpu-003:down",)),
    (128, 4, ("switch:spine1:lossy=0.02", "nic:gpu-010/mlx5_0:down")),
)


def _old_build_snapshot(rev: str, into: Path) -> Any:
    """``build_snapshot`` of revision ``rev``, imported as package ``telemetry_<rev>``."""
    name = "telemetry_" + "".join(ch for ch in rev if ch.isalnum())
    root = into / name
    root.mkdir()
    listing = subprocess.run(
        ["git", "ls-tree", "--name-only", rev, "cwctl/telemetry/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for path in listing:
        if path.endswith(".py"):
            text = subprocess.run(
                ["git", "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
            ).stdout
            (root / Path(path).name).write_text(text.replace("cwctl.telemetry.", f"{name}."))
    sys.path.insert(0, str(into))
    return importlib.import_module(name).build_snapshot


def compare(rev: str) -> int:
    """Snapshot JSON of ``rev``'s telemetry vs the working tree's; the number of scenarios
    that differ (each difference printed)."""
    differing = 0
    with tempfile.TemporaryDirectory() as tmp:
        old = _old_build_snapshot(rev, Path(tmp))
        for hosts, seed, faults in COMPARE_SCENARIOS:
            request = ScanRequest(sim=SimOptions(hosts=hosts, seed=seed, faults=faults))
            collection = asyncio.run(ScanSession(request).collect())
            solution = solve(collection.table)
            before = json.dumps(old(collection, solution).to_json(), sort_keys=True)
            after = json.dumps(build_snapshot(collection, solution).to_json(), sort_keys=True)
            same = before == after
            differing += not same
            print(
                f"{hosts:>4} hosts seed {seed} {', '.join(faults) or 'healthy':<52} "
                f"{'same' if same else 'DIFFERENT'}"
            )
            if not same:
                a, b = json.loads(before), json.loads(after)
                for key in sorted(set(a) | set(b)):
                    if a.get(key) != b.get(key):
                        print(f"  differs in {key!r}")
    return differing


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        sys.exit(1 if compare(sys.argv[2]) else 0)
    main()
