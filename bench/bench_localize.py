"""Localisation accuracy on the simulator's hidden hash (issue 17's targets).

Every scenario is a fresh seeded ``FabricModel`` (leaf-spine, 8 hosts per leaf, 4 spines,
two NICs per host so a NIC is not its host), the simulator's default hidden ECMP hash
(per-switch secret seeds over the 5-tuple: localisation learns paths only from the
simulated path records), one default probing window (``settings.PROBE_DURATION_S`` at
``settings.PROBE_RATE``), the real solver, then
``build_snapshot``. The faulty element is drawn per seed. Printed as one table:

- per fault kind (spine down, spine congested, leaf-spine link lossy 2 % and congested,
  NIC down, host slow 3 us, switch slow 5 us): how often the true element is the top
  suspect, named outright (target >= 98 %);
- healthy fabric: scans with any suspect (target <= 1 %), and scans not healthy (exit 3);
- a leaf-spine link losing 0.5 %: named top-1 in one default scan;
- two faults at once (a spine congested and a link lossy, or a NIC down and a host
  slow): both are the top two suspects;
- path discovery off, spine down: the top suspect's candidates contain the truth and
  the scan is not healthy (exit 3), never 0.

``CWCTL_BENCH_LOCALIZE_SEEDS`` (default 3) seeds per row and
``CWCTL_BENCH_LOCALIZE_HOSTS`` (default "96,512") the fabric sizes. The figures in
docs/simulator.md ("Localisation accuracy") come from
``CWCTL_BENCH_LOCALIZE_SEEDS=20 CWCTL_BENCH_LOCALIZE_HOSTS=96 .venv/bin/python -m bench
localize`` and ``CWCTL_BENCH_LOCALIZE_SEEDS=3 CWCTL_BENCH_LOCALIZE_HOSTS=512 ...``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cwctl import settings
from cwctl.fabric.topology import leaf_spine
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from cwctl.transport.sim import run_model

SEEDS = int(os.environ.get("CWCTL_BENCH_LOCALIZE_SEEDS", "3"))
SIZES = [int(x) for x in os.environ.get("CWCTL_BENCH_LOCALIZE_HOSTS", "96,512").split(",")]
DURATION_S = settings.PROBE_DURATION_S
PER_LEAF, SPINES = 8, 4
NICS = ("mlx5_0", "mlx5_1")
MISSES: list[str] = []


def scan(hosts: int, faults: list[str], seed: int, **params: object) -> FabricSnapshot:
    names, topo = leaf_spine(hosts, PER_LEAF, SPINES)
    model = FabricModel(
        names,
        topo,
        params=SimParams(**params),  # type: ignore[arg-type]
        seed=seed,
        faults=faults,
        nics={h: NICS for h in names},
    )
    collection = run_model(model, DURATION_S)
    return build_snapshot(collection, solve(collection.table))


def _pick(pool: list[str], rng: np.random.Generator) -> str:
    return pool[int(rng.integers(len(pool)))]


def _pools(hosts: int) -> dict[str, list[str]]:
    names, topo = leaf_spine(hosts, PER_LEAF, SPINES)
    return {
        "spine": topo.spines,
        "switch": topo.leaves + topo.spines,
        "link": [f"{leaf}-{s}" for leaf in topo.leaves for s in topo.spines],
        "nic": [f"{h}/{n}" for h in names for n in NICS],
        "host": names,
    }


# what is injected (KIND:{pool}:MODE): the true element is the drawn name
KINDS: list[tuple[str, str, str]] = [
    ("spine down", "spine", "switch:{}:down"),
    ("spine congested", "spine", "switch:{}:congested"),
    ("leaf-spine lossy 2%", "link", "link:{}:lossy=0.02"),
    ("leaf-spine congested", "link", "link:{}:congested"),
    ("NIC down", "nic", "nic:{}:down"),
    ("host slow 3 us", "host", "host:{}:slow=3000"),
    ("switch slow 5 us", "switch", "switch:{}:slow"),
]


@dataclass
class Row:
    what: str
    hosts: int
    hits: int
    total: int
    target: str
    seconds: float

    def line(self) -> str:
        rate = 100 * self.hits / self.total if self.total else float("nan")
        return (
            f"{self.what:<34} {self.hosts:>5} {self.hits:>4}/{self.total:<4} {rate:6.1f}%  "
            f"{self.target:<9} {self.seconds / max(self.total, 1):6.2f} s"
        )


def _rows(what: str, hosts: int, target: str, trial: Callable[[int], tuple[bool, str]]) -> Row:
    hits = 0
    started = time.perf_counter()
    for seed in range(SEEDS):
        ok, miss = trial(seed)
        hits += ok
        if not ok:
            MISSES.append(f"{hosts} hosts, seed {seed}, {what}: {miss}")
    return Row(what, hosts, hits, SEEDS, target, time.perf_counter() - started)


def fault_row(hosts: int, what: str, pool: str, spec: str) -> Row:
    def trial(seed: int) -> tuple[bool, str]:
        rng = np.random.default_rng([hosts, seed, KINDS.index((what, pool, spec))])
        element = _pick(_pools(hosts)[pool], rng)
        snap = scan(hosts, [spec.format(element)], seed)
        top = snap.suspects[0] if snap.suspects else None
        named = top is not None and top.element == element and not top.candidates
        return named, f"{spec.format(element)}: top {top.element if top else None}"

    return _rows(what, hosts, ">= 98%", trial)


def healthy_rows(hosts: int) -> list[Row]:
    flagged: list[str] = []

    def quiet(seed: int) -> tuple[bool, str]:
        snap = scan(hosts, [], 70_000 + seed, load=0.4)
        if not snap.healthy:
            flagged.append(f"seed {70_000 + seed}")
        return not snap.suspects, f"suspects {[s.element for s in snap.suspects]}"

    row = _rows("healthy (load 0.4): no suspect", hosts, ">= 99%", quiet)
    unhealthy = len(flagged)
    return [row, Row("healthy: exit 0", hosts, SEEDS - unhealthy, SEEDS, "", 0.0)]


def small_loss_row(hosts: int) -> Row:
    def trial(seed: int) -> tuple[bool, str]:
        element = _pick(_pools(hosts)["link"], np.random.default_rng([hosts, seed, 99]))
        snap = scan(hosts, [f"link:{element}:lossy=0.005"], seed)
        top = snap.suspects[0].element if snap.suspects else None
        return top == element, f"{element} lossy 0.5%: top {top}"

    return _rows("leaf-spine lossy 0.5%", hosts, "named", trial)


def two_faults_row(hosts: int) -> Row:
    def trial(seed: int) -> tuple[bool, str]:
        rng = np.random.default_rng([hosts, seed, 55])
        pools = _pools(hosts)
        spine, nic = _pick(pools["spine"], rng), _pick(pools["nic"], rng)
        link = _pick([x for x in pools["link"] if not x.endswith(spine)], rng)
        host = _pick([h for h in pools["host"] if not nic.startswith(h)], rng)
        specs = [f"switch:{spine}:congested", f"link:{link}:lossy=0.02"]
        if seed % 2:
            specs = [f"nic:{nic}:down", f"host:{host}:slow=3000"]
        snap = scan(hosts, specs, seed)
        want = {spec.split(":")[1] for spec in specs}
        top = {s.element for s in snap.suspects[:2]}
        return top == want, f"{' + '.join(specs)}: top 2 {sorted(top)}"

    return _rows("two faults: both top 2", hosts, ">= 95%", trial)


def blind_row(hosts: int) -> Row:
    def trial(seed: int) -> tuple[bool, str]:
        spine = _pick(_pools(hosts)["spine"], np.random.default_rng([hosts, seed, 7]))
        snap = scan(hosts, [f"switch:{spine}:down"], seed, discovery=False)
        top = snap.suspects[0] if snap.suspects else None
        within = top is not None and spine in (top.candidates or [top.element])
        return within and not snap.healthy, f"{spine} down: top {top.element if top else None}"

    return _rows("no discovery, spine down: in set", hosts, "exit 3", trial)


def main() -> None:
    print(
        f"hidden ECMP hash, paths from simulated discovery; {PER_LEAF} hosts/leaf, {SPINES} "
        f"spines, 2 NICs/host, {DURATION_S:g} s per scan, {SEEDS} seeds per row "
        "(CWCTL_BENCH_LOCALIZE_SEEDS)"
    )
    print(f"{'scenario':<34} {'hosts':>5} {'hits':>9} {'rate':>7}  {'target':<9} {'per scan':>8}")
    for hosts in SIZES:
        for what, pool, spec in KINDS:
            print(fault_row(hosts, what, pool, spec).line(), flush=True)
        for row in healthy_rows(hosts):
            print(row.line(), flush=True)
        print(small_loss_row(hosts).line(), flush=True)
        print(two_faults_row(hosts).line(), flush=True)
        print(blind_row(hosts).line(), flush=True)
    for miss in MISSES[:30]:
        print(f"miss: {miss}")


if __name__ == "__main__":
    main()
