"""Localisation accuracy over seeded simulator scenarios (the targets of issue #5).

Every scenario is a fresh seeded ``FabricModel`` (the default leaf-spine fabric, two
NICs per host so that NIC faults are distinguishable from host faults), one probing
window, the real solver, then ``build_snapshot``. Printed as one table:

- single fault per kind (switch, link, nic, host), modes cycling down / lossy=0.02 /
  congested: how often the true element is the top suspect (target >= 95%);
- two simultaneous faults (distinct, non-overlapping elements): both in the top 3 (>= 90%);
- healthy fabric at load 0.4: scenarios with any suspect (target <= 2%);
- 1% injected loss on a link: the localiser's loss-rate estimate vs 1% (+-0.2 pp);
- OWD p50 per path vs the simulator's true network delay (sw and hw timestamps).

``CWCTL_BENCH_LOCALIZE_SEEDS`` (default 10) sets the seeds per row; 100 is the issue's
full run. ``CWCTL_BENCH_LOCALIZE_HOSTS`` (default 64) and ``..._DURATION`` (default 1 s)
size each scenario.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cwctl.collection import Collection
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.snapshot import FabricSnapshot
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from cwctl.topology import leaf_spine
from cwctl.transport.sim import run_model

SEEDS = int(os.environ.get("CWCTL_BENCH_LOCALIZE_SEEDS", "10"))
HOSTS = int(os.environ.get("CWCTL_BENCH_LOCALIZE_HOSTS", "64"))
DURATION_S = float(os.environ.get("CWCTL_BENCH_LOCALIZE_DURATION", "1.0"))
PER_LEAF, SPINES = 8, 4
NICS = ("mlx5_0", "mlx5_1")
MODES = ("down", "lossy=0.02", "congested")
KINDS = ("switch", "link", "nic", "host")
MISSES: list[str] = []  # what went wrong, printed after the table


def scenario(
    faults: Sequence[str], seed: int, *, load: float = 0.2, timestamps: str = "hw"
) -> tuple[FabricSnapshot, Collection]:
    names, topo = leaf_spine(HOSTS, PER_LEAF, SPINES)
    model = FabricModel(
        names,
        topo,
        params=SimParams(load=load, timestamps=timestamps),
        seed=seed,
        faults=faults,
        nics={h: NICS for h in names},
    )
    collection = run_model(model, DURATION_S)
    return build_snapshot(collection, solve(collection.table)), collection


def _elements(kind: str) -> list[str]:
    names, topo = leaf_spine(HOSTS, PER_LEAF, SPINES)
    if kind == "switch":
        return topo.leaves + topo.spines
    if kind == "link":
        return [f"{leaf}-{s}" for leaf in topo.leaves for s in topo.spines]
    if kind == "nic":
        return [f"{h}/{n}" for h in names for n in NICS]
    return names


def _scope(element: str) -> set[str]:
    """What an element's fault touches, for keeping two faults apart."""
    _, topo = leaf_spine(HOSTS, PER_LEAF, SPINES)
    host = element.split("/")[0]
    out = {element, host}
    if host in topo.leaf_of:
        out.add(topo.leaf_of[host])
    out.update(element.split("-") if element.startswith("leaf") else ())
    return out


@dataclass
class Row:
    what: str
    hits: int
    total: int
    target: str
    seconds: float

    def line(self) -> str:
        rate = 100 * self.hits / self.total if self.total else float("nan")
        return (
            f"{self.what:<34} {self.hits:>4}/{self.total:<4} {rate:6.1f}%  "
            f"{self.target:<10} {self.seconds / max(self.total, 1):5.2f} s"
        )


def single_fault(kind: str) -> list[Row]:
    rows = []
    per_mode = {m: [0, 0] for m in MODES}
    started = time.perf_counter()
    pool = _elements(kind)
    for seed in range(SEEDS):
        rng = np.random.default_rng(10_000 * (KINDS.index(kind) + 1) + seed)
        element = pool[int(rng.integers(len(pool)))]
        mode = MODES[seed % len(MODES)]
        snap, _ = scenario([f"{kind}:{element}:{mode}"], seed)
        top = snap.suspects[0].element if snap.suspects else None
        per_mode[mode][0] += top == element
        if top != element:
            MISSES.append(f"seed {seed} {kind}:{element}:{mode}: top {top}")
        per_mode[mode][1] += 1
    elapsed = time.perf_counter() - started
    hits = sum(v[0] for v in per_mode.values())
    rows.append(Row(f"single {kind}: top suspect", hits, SEEDS, ">= 95%", elapsed))
    for mode, (h, t) in per_mode.items():
        rows.append(Row(f"  {kind} {mode}", h, t, "", elapsed * t / max(SEEDS, 1)))
    return rows


def two_faults() -> Row:
    hits = 0
    started = time.perf_counter()
    for seed in range(SEEDS):
        rng = np.random.default_rng(50_000 + seed)
        chosen: list[tuple[str, str]] = []
        while len(chosen) < 2:
            kind = KINDS[int(rng.integers(len(KINDS)))]
            pool = _elements(kind)
            element = pool[int(rng.integers(len(pool)))]
            if chosen and _scope(element) & _scope(chosen[0][1]):
                continue
            chosen.append((kind, element))
        specs = [f"{k}:{e}:{MODES[int(rng.integers(len(MODES)))]}" for k, e in chosen]
        snap, _ = scenario(specs, seed)
        top3 = [s.element for s in snap.suspects[:3]]
        hits += all(e in top3 for _, e in chosen)
        if not all(e in top3 for _, e in chosen):
            MISSES.append(f"seed {seed} {' + '.join(specs)}: top 3 {top3}")
    return Row("two faults: both in top 3", hits, SEEDS, ">= 90%", time.perf_counter() - started)


def healthy() -> Row:
    flagged = 0
    started = time.perf_counter()
    for seed in range(SEEDS):
        snap, _ = scenario([], 70_000 + seed, load=0.4)
        flagged += bool(snap.suspects)
        if snap.suspects:
            MISSES.append(f"seed {70_000 + seed} healthy: {[s.element for s in snap.suspects]}")
    return Row(
        "healthy load 0.4: any suspect", flagged, SEEDS, "<= 2%", time.perf_counter() - started
    )


def loss_estimate() -> str:
    errors = []
    pool = _elements("link")
    for seed in range(max(2, SEEDS // 2)):
        rng = np.random.default_rng(90_000 + seed)
        element = pool[int(rng.integers(len(pool)))]
        snap, _ = scenario([f"link:{element}:lossy=0.01"], seed)
        rate = snap.telemetry.get("rates", {}).get(element, {}).get("loss", 0.0)
        errors.append(100 * abs(rate - 0.01))
    e = np.array(errors)
    within = int((e <= 0.2).sum())
    return (
        f"loss estimate at 1% injected (link): |error| mean {e.mean():.3f} pp, "
        f"max {e.max():.3f} pp, {within}/{len(e)} within 0.2 pp (target +-0.2 pp)"
    )


def owd_error(timestamps: str) -> str:
    raw, centred = [], []
    for seed in range(max(2, SEEDS // 4)):
        snap, col = scenario([], 80_000 + seed, timestamps=timestamps)
        truth = {(p["src"], p["dst"]): p["owd_p50_ns"] for p in (col.truth or {}).get("paths", [])}
        hosts = col.table.hosts
        diffs = []
        for p in snap.paths:
            t = truth.get((p.src, p.dst))
            if t is None:
                t = truth.get((hosts.index(p.src), hosts.index(p.dst)))
            if t is not None and p.owd_p50_ns is not None:
                diffs.append(p.owd_p50_ns - t)
        d = np.array(diffs)
        raw.append(np.abs(d))
        centred.append(np.abs(d - np.median(d)))
    r, c = np.concatenate(raw), np.concatenate(centred)
    return (
        f"OWD p50 error vs truth ({timestamps}): median {np.median(r):.0f} ns, "
        f"p95 {np.percentile(r, 95):.0f} ns; less the fabric-wide stamp bias: "
        f"median {np.median(c):.0f} ns, p95 {np.percentile(c, 95):.0f} ns (target 1 µs)"
    )


def main() -> None:
    print(
        f"fabric: {HOSTS} hosts, {PER_LEAF}/leaf, {SPINES} spines, 2 NICs/host, "
        f"{DURATION_S:g} s per scan, {SEEDS} seeds per row "
        f"(CWCTL_BENCH_LOCALIZE_SEEDS=100 for the full run)"
    )
    print(f"{'scenario':<34} {'hits':>9} {'rate':>7}  {'target':<10} {'per scan':>7}")
    for kind in KINDS:
        for row in single_fault(kind):
            print(row.line(), flush=True)
    print(two_faults().line(), flush=True)
    print(healthy().line(), flush=True)
    print(loss_estimate(), flush=True)
    print(owd_error("sw"), flush=True)
    print(owd_error("hw"), flush=True)
    for miss in MISSES[:20]:
        print(f"miss: {miss}")


if __name__ == "__main__":
    main()
