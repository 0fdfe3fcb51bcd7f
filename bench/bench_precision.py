"""Precision and recall of localisation over many scans, as 007 and NetBouncer report them.

``CWCTL_BENCH_PRECISION_SCANS`` scans (default 200), half on the simulator's hidden hash
(``FabricModel``: per-switch secret seeds; paths only from simulated discovery) and half
on an independent record model (``tests/unit/telemetry_synth.py``: its own per-leaf hash,
its own traceroute answers with 30 % of hops silent, its own clocks and kernel-stamp
noise (issue 21's: Gaussian 150 ns, on 30 % of stamps a lognormal tail of median 800 ns
times a per-host factor, ``SW_EARLY_SHARE`` of them the short way), no code shared with
``cwctl/sim`` or ``cwctl/telemetry``). Scan ``i`` draws, from
its own seed: the model (alternating), the stamps (hw, sw), a load in 0.1-0.6, and a
third each of healthy fabrics, single faults and double faults (faults of different
elements, kinds drawn from ``SIM_KINDS`` / ``SYNTH_KINDS``). 64 hosts, 8 per leaf, 4
spines, the default window (``settings.PROBE_DURATION_S`` at ``settings.PROBE_RATE``),
the real solver, then ``build_snapshot``.

Per scan a suspect is a *hit* when it is a true element, or a candidate set holding one.
Printed per model and stamps: precision (hits / suspects), recall (true elements named,
outright or in a set / true elements), top-1 (faulty scans whose top suspect is a true
element named outright), faulty scans that exited 0 (target 0), healthy scans that
exited 0 (target >= 99 %), and the slow spines named outright among the first
suspects (as many as the scan's faults: of two faults the other may lead). Each scan's
records are localised a second time without their path records (discovery off, or every
trace failed): of faulty scans, the true elements in its suspects, outright or in a
candidate set (target 100 %), and the scans that exited 0 so; of every scan, the
suspects holding a true element (precision: a set wide enough to hold anything is no
answer); of healthy scans, those that exited 0. Then per fault kind: faults, named
outright among the first suspects with paths, and in the suspects without.
``CWCTL_BENCH_PRECISION_FIRST`` (default 0) starts at another scan index: seeds held out
from the ones thresholds were set on.

``CWCTL_BENCH_SENSITIVITY=1`` adds a sensitivity table: each main threshold of
``cwctl.telemetry.Thresholds`` (``SENSITIVITY_KNOBS``) alone at x0.8 and x1.25 of its
default (``CWCTL_BENCH_SENSITIVITY_FACTORS``), over the same scans, beside x1 (the table
above): precision, recall, top-1, healthy scans exiting 0, and the same without path
records. ``CWCTL_BENCH_SENSITIVITY=hot_link_ratio,min_gain_nats`` sweeps only those.
Each variant is one more pair of snapshots per scan (about 2 s on the 2-core CI
machine): the full sweep, 14 knobs x 2 factors over 200 scans, takes about four hours
there, which is why it is off by default; ``CWCTL_BENCH_PRECISION_SCANS=24`` and a few
knobs take minutes (docs/localisation.md has such runs). A variant is nothing but
``dataclasses.replace(THRESHOLDS, knob=value)`` handed to ``build_snapshot``.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace

import numpy as np

from cwctl import settings
from cwctl.fabric.topology import leaf_spine
from cwctl.records.path import PathTable
from cwctl.scan.collection import Collection
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sim.faults import DEFAULT_VALUE
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import ClockSolution, solve
from cwctl.telemetry import THRESHOLDS, Thresholds, build_snapshot
from cwctl.transport.sim import run_model
from tests.unit.telemetry_synth import Synth, make

SCANS = int(os.environ.get("CWCTL_BENCH_PRECISION_SCANS", "200"))
# the first scan's index: another range of seeds, held out from the one thresholds met
FIRST = int(os.environ.get("CWCTL_BENCH_PRECISION_FIRST", "0"))
HOSTS, PER_LEAF, SPINES = 64, 8, 4
LOADS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
# of the independent model's kernel-stamp tails, the share that errs the short way (a
# send stamp taken after the packet left): what made 9 of 9 healthy scans exit 3 (issue 21)
SW_EARLY_SHARE = 0.2
# the thresholds the sensitivity table sweeps by default (docs/localisation.md, "Knobs")
SENSITIVITY_KNOBS = (
    "min_gain_nats", "min_loss_rate", "min_delay_rate", "delay_factor", "bad_flow_p",
    "hot_link_ratio", "hot_spine_ratio", "delay_shift_of_floor", "spread_factor",
    "floor_sigmas", "floor_min_rate", "min_shift_of_floor", "shift_sigmas", "min_score",
)  # fmt: skip

# (what, pool, simulator fault spec | the independent model's fault as Synth fields)
SIM_KINDS = [
    ("spine down", "spine", "switch:{}:down"),
    ("spine congested", "spine", "switch:{}:congested={level:.2f}"),
    ("link lossy 2%", "link", "link:{}:lossy=0.02"),
    ("link congested", "link", "link:{}:congested={level:.2f}"),
    ("host slow 3 us", "host", "host:{}:slow=3000"),
    ("spine slow 5 us", "spine", "switch:{}:slow"),
]
SYNTH_KINDS = [
    ("spine down", "spine", ("loss", 1.0)),
    ("spine queue 6 us", "spine", ("delay_ns", 6000.0)),
    ("link lossy 2%", "link", ("loss", 0.02)),
    ("link queue 6 us", "link", ("delay_ns", 6000.0)),
    ("host slow 3 us", "host", ("slow_ns", 3000.0)),
    ("spine slow 5 us", "spine", ("slow_ns", 5000.0)),
]


# A congested element's queues run hotter than any healthy queue at the scan's load: the
# simulator's healthy queues run at load x (1 +- load_spread), 0.9 at load 0.6, the level
# of its default `congested`, so at 0.6 a healthy scan and a congested one held the same
# queue (docs/localisation.md names the scans: no estimator can tell them apart).
# Where the load reaches it, the fault runs CONGESTED_MARGIN above the hottest healthy queue.
CONGESTED_MARGIN = 0.05


def congested_level(load: float) -> float:
    """The utilisation of a bench `congested` fault's queues at ``load``."""
    p = SimParams(load=load)
    hottest = load * (1.0 + p.load_spread)
    return min(p.rho_max, max(float(DEFAULT_VALUE["congested"] or 0.0), hottest + CONGESTED_MARGIN))


def _pools() -> dict[str, list[str]]:
    names, topo = leaf_spine(HOSTS, PER_LEAF, SPINES)
    links = [f"{leaf}-{s}" for leaf in topo.leaves for s in topo.spines]
    return {"spine": list(topo.spines), "link": links, "host": list(names)}


POOLS = _pools()


def _draw(i: int) -> tuple[str, str, float, list[tuple[str, str]]]:
    """Scan i: model, stamps, load, and its faults as (kind index, element)."""
    rng = np.random.default_rng([21, i])
    model = ("sim", "synth")[i % 2]
    stamps = ("hw", "sw")[(i // 2) % 2]
    load = LOADS[int(rng.integers(len(LOADS)))]
    n_faults = (i // 4) % 3  # 0, 1, 2
    kinds = SIM_KINDS if model == "sim" else SYNTH_KINDS
    faults: list[tuple[str, str]] = []
    while len(faults) < n_faults:
        k = int(rng.integers(len(kinds)))
        pool = POOLS[kinds[k][1]]
        element = pool[int(rng.integers(len(pool)))]
        taken = {e for _, e in faults}
        # two faults of different elements, neither a part of the other
        if all(element not in e and e not in element for e in taken):
            faults.append((kinds[k][0], element))
    return model, stamps, load, faults


def _sim_scan(i: int, stamps: str, load: float, faults: list[tuple[str, str]]) -> Collection:
    names, topo = leaf_spine(HOSTS, PER_LEAF, SPINES)
    spec = {what: s for what, _, s in SIM_KINDS}
    model = FabricModel(
        names,
        topo,
        params=SimParams(timestamps=stamps, load=load),
        seed=i,
        faults=[
            spec[what].format(element, level=congested_level(load)) for what, element in faults
        ],
    )
    return run_model(model, settings.PROBE_DURATION_S)


def _synth_scan(i: int, stamps: str, load: float, faults: list[tuple[str, str]]) -> Collection:
    fields: dict[str, dict[str, float]] = {"loss": {}, "delay_ns": {}, "slow_ns": {}}
    spec = {what: s for what, _, s in SYNTH_KINDS}
    for what, element in faults:
        key, value = spec[what]
        fields[key][element] = value
    pairs = int(settings.PROBE_RATE * settings.PROBE_DURATION_S)
    synth = Synth(n_hosts=HOSTS, per_leaf=PER_LEAF, spines=SPINES, peers=settings.PROBE_PEERS,
                  pairs=pairs, rate=settings.PROBE_RATE, queue_ns=1500.0 * load, seed=i,
                  discovered=0.7, stamps=stamps, clock_ns=1e6, drift_ppb=2e4,
                  sw_early_share=SW_EARLY_SHARE, **fields)  # type: ignore[arg-type]  # fmt: skip
    collection, _ = make(synth)
    return collection


def _snapshots(
    collection: Collection, solution: ClockSolution, thresholds: Thresholds = THRESHOLDS
) -> tuple[FabricSnapshot, FabricSnapshot]:
    """The scan's snapshot, and the same records' without path records (as a scan with
    discovery off, or all of whose traces failed, reads them)."""
    snap = build_snapshot(collection, solution, thresholds=thresholds)
    blind = replace(collection, paths=PathTable())
    return snap, build_snapshot(blind, solution, thresholds=thresholds)


def _variants() -> dict[tuple[str, float], Thresholds]:
    """The sensitivity table's thresholds: each knob alone at each factor (module doc)."""
    wanted = os.environ.get("CWCTL_BENCH_SENSITIVITY", "")
    if wanted in ("", "0"):
        return {}
    knobs = SENSITIVITY_KNOBS if wanted == "1" else tuple(k for k in wanted.split(",") if k)
    known = {f.name for f in fields(Thresholds)}
    unknown = sorted(set(knobs) - known)
    if unknown:
        raise SystemExit(f"bench precision: no such threshold: {', '.join(unknown)}")
    factors = os.environ.get("CWCTL_BENCH_SENSITIVITY_FACTORS", "0.8,1.25")
    out = {}
    for knob in knobs:
        default = getattr(THRESHOLDS, knob)
        for factor in (float(x) for x in factors.split(",")):
            value = round(default * factor) if isinstance(default, int) else default * factor
            out[(knob, factor)] = replace(THRESHOLDS, **{knob: value})
    return out


@dataclass
class Tally:
    scans: int = 0
    suspects: int = 0
    hits: int = 0
    truths: int = 0
    recalled: int = 0
    faulty: int = 0
    top1: int = 0
    faulty_exit0: int = 0
    healthy: int = 0
    healthy_exit0: int = 0
    slow_spines: int = 0
    slow_top1: int = 0
    blind_truths: int = 0  # the same faulty scans without path records: true elements...
    blind_in_set: int = 0  # ...named outright or in a candidate set
    blind_exit0: int = 0  # ...and scans exiting 0
    blind_suspects: int = 0  # every scan without path records: suspects...
    blind_hits: int = 0  # ...holding a true element (outright or in the set)
    blind_healthy_exit0: int = 0  # healthy scans without path records exiting 0
    misses: list[str] = field(default_factory=list)

    def add(
        self,
        snap: FabricSnapshot,
        faults: list[tuple[str, str]],
        label: str,
        blind: FabricSnapshot,
    ) -> None:
        truth = {e for _, e in faults}
        self.scans += 1
        named = [set(s.candidates or [s.element]) for s in snap.suspects]
        self.suspects += len(named)
        self.hits += sum(bool(n & truth) for n in named)
        self.truths += len(truth)
        self.recalled += sum(any(e in n for n in named) for e in truth)
        top = snap.suspects[0] if snap.suspects else None
        exact = top is not None and not top.candidates and top.element in truth
        if truth:
            self.faulty += 1
            self.top1 += exact
            self.faulty_exit0 += snap.healthy
            if not exact or snap.healthy:
                self.misses.append(f"{label}: top {top.element if top else None}, {snap.verdict}")
        else:
            self.healthy += 1
            self.healthy_exit0 += snap.healthy
            if not snap.healthy:
                self.misses.append(f"{label}: {snap.verdict}: {snap.verdict_reasons()[:1]}")
        # a slow spine named outright among the first suspects, one per fault (of two
        # faults the other may lead)
        first = {s.element for s in snap.suspects[: len(faults)] if not s.candidates}
        for what, element in faults:
            if what.startswith("spine slow"):
                self.slow_spines += 1
                self.slow_top1 += element in first
        members = {m for s in blind.suspects for m in s.members}
        self.blind_suspects += len(blind.suspects)
        self.blind_hits += sum(bool(truth & set(s.members)) for s in blind.suspects)
        lead = blind.suspects[0].element if blind.suspects else None
        if not truth:
            self.blind_healthy_exit0 += blind.healthy
            if not blind.healthy:
                self.misses.append(f"{label} without paths: top {lead}, {blind.verdict}")
            return
        self.blind_truths += len(truth)
        self.blind_in_set += len(truth & members)
        self.blind_exit0 += blind.healthy
        if not truth <= members or blind.healthy:
            self.misses.append(f"{label} without paths: top {lead}, {blind.verdict}")


@dataclass
class KindTally:
    """Per fault kind: faults, named outright among a scan's first suspects (as many as
    its faults) with path records, and in the suspects (or a set) without."""

    faults: int = 0
    named: int = 0
    in_set_blind: int = 0

    def add(self, element: str, snap: FabricSnapshot, n_faults: int, blind: FabricSnapshot) -> None:
        self.faults += 1
        self.named += element in {s.element for s in snap.suspects[:n_faults] if not s.candidates}
        self.in_set_blind += any(s.covers(element) for s in blind.suspects)


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:6.1f}%" if b else "     -"


def main() -> None:
    print(
        f"{SCANS} scans (CWCTL_BENCH_PRECISION_SCANS) from #{FIRST}: {HOSTS} hosts, "
        f"{PER_LEAF}/leaf, {SPINES} spines, {settings.PROBE_DURATION_S:g} s at "
        f"{settings.PROBE_RATE:g} pairs/s; loads 0.1-0.6; a third each healthy, one fault, "
        "two faults"
    )
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    kinds: dict[tuple[str, str], KindTally] = defaultdict(KindTally)
    variants = _variants()
    swept: dict[tuple[str, float], Tally] = defaultdict(Tally)
    started = time.perf_counter()
    for i in range(FIRST, FIRST + SCANS):
        model, stamps, load, faults = _draw(i)
        scan = _sim_scan if model == "sim" else _synth_scan
        collection = scan(i, stamps, load, faults)
        solution = solve(collection.table)
        snap, blind = _snapshots(collection, solution)
        label = f"#{i} {model} {stamps} load {load}: {faults or 'healthy'}"
        tallies[(model, stamps)].add(snap, faults, label, blind)
        for what, element in faults:
            kinds[(model, what)].add(element, snap, len(faults), blind)
        for key, thresholds in variants.items():
            varied, varied_blind = _snapshots(collection, solution, thresholds)
            swept[key].add(varied, faults, label, varied_blind)
    head = (
        f"{'model':<8} {'stamps':<6} {'scans':>5} {'precision':>9} {'recall':>7} "
        f"{'top-1':>7} {'faulty exit 0':>13} {'healthy exit 0':>14} {'slow spine named':>16} "
        f"{'no paths: in set':>16} {'exit 0':>7} {'precision':>9} {'healthy exit 0':>14}"
    )
    print(head)
    total = Tally()
    for (model, stamps), t in sorted(tallies.items()):
        print(_line(model, stamps, t))
        for f in fields(Tally):
            setattr(total, f.name, getattr(total, f.name) + getattr(t, f.name))
    print(_line("all", "", total))
    print(f"({(time.perf_counter() - started) / max(SCANS, 1):.2f} s per scan)")
    print(f"{'model':<8} {'fault kind':<18} {'faults':>6} {'named':>7} {'no paths: in set':>16}")
    for (model, what), k in sorted(kinds.items()):
        print(
            f"{model:<8} {what:<18} {k.faults:>6} {k.named:>7} {_pct(k.in_set_blind, k.faults):>16}"
        )
    for miss in total.misses[:60]:
        print(f"miss: {miss}")
    if variants:
        _sensitivity(total, swept, variants)


def _sensitivity(
    base: Tally,
    swept: dict[tuple[str, float], Tally],
    variants: dict[tuple[str, float], Thresholds],
) -> None:
    """The sensitivity table: each swept knob's rows beside x1 (``base``)."""
    print("sensitivity (CWCTL_BENCH_SENSITIVITY): one threshold changed at a time, same scans")
    print(
        f"{'threshold':<22} {'factor':>6} {'value':>9} {'precision':>9} {'recall':>7} "
        f"{'top-1':>7} {'healthy exit 0':>14} {'no paths: in set':>16} {'precision':>9}"
    )
    for knob in dict.fromkeys(k for k, _ in swept):
        rows = [(1.0, base)] + [(f, t) for (k, f), t in swept.items() if k == knob]
        rows.sort(key=lambda row: row[0])
        for factor, t in rows:
            value = getattr(variants.get((knob, factor), THRESHOLDS), knob)
            print(
                f"{knob:<22} {'x' + format(factor, 'g'):>6} {value:>9.4g} "
                f"{_pct(t.hits, t.suspects):>9} {_pct(t.recalled, t.truths):>7} "
                f"{_pct(t.top1, t.faulty):>7} {_pct(t.healthy_exit0, t.healthy):>14} "
                f"{_pct(t.blind_in_set, t.blind_truths):>16} "
                f"{_pct(t.blind_hits, t.blind_suspects):>9}"
            )


def _line(model: str, stamps: str, t: Tally) -> str:
    return (
        f"{model:<8} {stamps:<6} {t.scans:>5} {_pct(t.hits, t.suspects):>9} "
        f"{_pct(t.recalled, t.truths):>7} {_pct(t.top1, t.faulty):>7} "
        f"{t.faulty_exit0:>7}/{t.faulty:<5} {_pct(t.healthy_exit0, t.healthy):>14} "
        f"{t.slow_top1:>9}/{t.slow_spines:<6} {_pct(t.blind_in_set, t.blind_truths):>16} "
        f"{t.blind_exit0:>3}/{t.faulty:<3} {_pct(t.blind_hits, t.blind_suspects):>9} "
        f"{_pct(t.blind_healthy_exit0, t.healthy):>14}"
    )


if __name__ == "__main__":
    main()
