"""Fabric telemetry: corrected one-way delays per path, and fault localisation.

Public API: ``build_snapshot(collection, solution, thresholds=THRESHOLDS) ->
FabricSnapshot``. Every threshold is one ``Thresholds`` (``thresholds.py``);
docs/localisation.md explains the algorithm and every knob. The modules, by role:

statistics    ``paths.py`` turns every probe exchange into directed one-way observations
              and their per-path (and per source port) statistics over ``groups.py``'s
              grouped kernels; ``noise.py`` learns the stamps' own noise; ``counts.py``
              counts trials and failures per flow for each signal; ``blockwise.py`` does
              both a block of host pairs at a time; ``busy.py`` takes starved agents'
              exchanges out; ``consistency.py`` finds records that cannot be right.
localisation  ``routes.py`` reads which spine each flow crossed off the discovered
              paths; ``elements.py`` maps flows onto the fabric's elements (with
              alternatives where a path is unknown); ``voting.py`` judges flows and casts
              007's votes; ``explain.py`` is the sparse likelihood explanation (its
              likelihood in ``likelihood.py``, its gains in ``gains.py`` over the
              ``crossings.py`` index); ``signals.py`` localises one signal;
              ``hierarchy.py`` puts a spine in its links' place; ``material.py``,
              ``floors.py`` and ``shifts.py`` weigh delay and slow suspects;
              ``evidence.py`` scores and words them; ``localize.py`` strings it all into
              named stages.
verdicts      ``verdicts.py`` adds dead hosts and says what unlocalised means;
              ``unexplained.py`` lists the bad flows no suspect explains; ``window.py``
              judges the window itself (could it have seen a fault; a queue beyond the
              absolute line); ``reach.py`` finds the host pairs each suspect crosses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cwctl.gpu import assess
from cwctl.records import PathTable, ProbeTable
from cwctl.scan.collection import Collection
from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport, Suspect
from cwctl.sync import ClockSolution
from cwctl.telemetry.blockwise import measure
from cwctl.telemetry.busy import agent_reports
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.elements import Incidence
from cwctl.telemetry.evidence import SignalResult
from cwctl.telemetry.localize import gpu_suspects, localise, unclocked_hosts
from cwctl.telemetry.reach import crossings
from cwctl.telemetry.routes import PathAges
from cwctl.telemetry.signals import signal_rows
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds
from cwctl.telemetry.unexplained import unexplained
from cwctl.telemetry.verdicts import unlocalised
from cwctl.telemetry.window import (
    clock_reasons,
    pairs_per_peer,
    queued_paths,
    thin_elements,
    window_json,
    window_reasons,
)

__all__ = ["THRESHOLDS", "Thresholds", "build_snapshot"]


def _host_reports(collection: Collection, solution: ClockSolution) -> list[HostReport]:
    index = {name: i for i, name in enumerate(solution.hosts)}
    comp = solution.component_reference
    leaf_of = collection.topology.leaf_of if collection.topology is not None else {}
    out = []
    for info in collection.hosts:
        status = collection.status.get(info.name)
        report = HostReport(
            name=info.name,
            status=status.status if status else "ok",
            error=status.error if status else None,
            leaf=info.leaf or leaf_of.get(info.name),
        )
        i = index.get(info.name)
        if i is not None:
            report.offset_ns = float(solution.offset_ns[i])
            report.drift_ppb = float(solution.drift_ppb[i])
            report.uncertainty_ns = float(solution.uncertainty_ns[i])
            if i < len(comp) and comp[i] is not None and comp[i] != solution.reference:
                report.component_reference = comp[i]
        out.append(report)
    return out


def _assess_gpus(collection: Collection, hosts: list[HostReport]) -> None:
    """Fill each host's GPU health from its ``gpu`` records (``cwctl.gpu.assess``)."""
    for report in hosts:
        records = collection.gpu.get(report.name)
        if not records:
            continue
        health = assess(records)
        if health.verdict == "none":
            continue
        report.gpu_verdict = health.verdict
        report.gpu_reason = health.reason
        report.gpus = list(health.gpus)


def build_snapshot(
    collection: Collection,
    solution: ClockSolution,
    *,
    release: bool = False,
    thresholds: Thresholds = THRESHOLDS,
) -> FabricSnapshot:
    """Measure every path and localise faults: the scan's ``FabricSnapshot``.

    With ``release`` the caller hands the collection over: once the paths are measured
    its probe rows are dropped (``collection.table`` becomes an empty table of the same
    hosts), so localisation does not run beside them (a 10 000-host scan's rows are a
    quarter of a gigabyte); its path records go once the localiser's rows are made
    (``collection.paths`` becomes empty). Rows kept for a replay are written before this. Every
    threshold is ``thresholds``' (``thresholds.py``)."""
    t = thresholds
    n_records, timestamp_source = len(collection.table), collection.table.timestamp_source
    hosts = _host_reports(collection, solution)
    _assess_gpus(collection, hosts)
    pairs = pairs_per_peer(collection.table)
    found = _Localised()
    if n_records:
        found = _localised(collection, solution, hosts, release=release, thresholds=t)
    telemetry, thin = found.telemetry, found.thin
    budget = collection.params.get("budget")
    if isinstance(budget, dict):  # what the probing cost (cwctl.scan.budgets), for the header
        telemetry["budget"] = dict(budget)
    if collection.captured_ns is not None:  # a replay: when its record file was written
        telemetry["captured_ns"] = collection.captured_ns
    few = _few_probes(collection, t)
    if few is not None:
        telemetry["few_probes"] = few
    reasons = window_reasons(pairs, thin, t) if n_records else ["no probe records"]
    # the healthy figures are the budgets' own: not a rate or window given by hand
    own = isinstance(budget, dict) and budget.get("own") and not budget.get("fleet_capped")
    name = budget.get("name") if own and isinstance(budget, dict) else None
    reasons += clock_reasons(name, timestamp_source, solution.uncertainty_ns, t)
    telemetry["window"] = window_json(pairs, thin, reasons, t)
    agents = agent_reports(collection, found.busy_counts)
    for report in hosts:
        report.agent = agents.get(report.name)
    suspects = _with_gpu_suspects(hosts, found.suspects)
    crossed = None
    if found.reach is not None and suspects:
        leaf_of = {h.name: h.leaf for h in hosts if h.leaf is not None}
        crossed = crossings(*found.reach, suspects, leaf_of)
    return FabricSnapshot(
        source=collection.source,
        reference=solution.reference,
        duration_s=collection.duration_s,
        hosts=hosts,
        paths=found.paths,
        suspects=suspects,
        unlocalised=found.lost,
        timestamp_source=timestamp_source,
        sync=dict(solution.quality),
        truth=collection.truth,
        consistency=list(collection.consistency or ()),
        records=n_records,
        telemetry=telemetry,
        t_ref_ns=solution.t_ref_ns if solution.reference is not None else None,
        crossings=crossed,
        inconclusive=reasons,
    )


@dataclass
class _Localised:
    """What measuring and localising a scan's rows found (nothing, without rows)."""

    paths: Sequence[PathReport] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)
    telemetry: dict[str, Any] = field(default_factory=dict)
    busy_counts: dict[str, int] = field(default_factory=dict)  # per starved host: rows
    lost: dict[str, Any] | None = None  # the snapshot's ``unlocalised``
    reach: tuple[Any, Any] | None = None  # the loss rows and their exchanges
    thin: dict[str, float] = field(default_factory=dict)  # elements crossed too little


def _localised(
    collection: Collection,
    solution: ClockSolution,
    hosts: list[HostReport],
    *,
    release: bool,
    thresholds: Thresholds,
) -> _Localised:
    """Every path measured, the faults localised, the flows no suspect explains
    (``build_snapshot``, whose docstring says what ``release`` does)."""
    t = thresholds
    table = collection.table
    scan_start = int(table.t1.min())
    measured = measure(collection, solution, hosts, thresholds=t)
    counts = measured.counts
    if release:
        collection.table = ProbeTable.empty(table.hosts)
    del table
    host_nics = {h.name: h.nics for h in collection.hosts if h.nics}
    if collection.topology is not None:
        host_nics = {**dict(collection.topology.nics), **host_nics}
    doubt = unclocked_hosts(solution.hosts, solution.uncertainty_ns, t)
    ages = PathAges()
    rows = signal_rows(counts, collection.topology, host_nics, collection.paths, scan_start, ages)
    discovered = len(collection.paths) > 0
    if release:  # the path records are in the rows now (266 000 objects at 10 000 hosts)
        collection.paths = PathTable()
    suspects, inc, results = localise(
        counts, collection.topology, host_nics, (), doubt,
        now_ns=scan_start, ages=ages, thresholds=t, rows=rows,
    )  # fmt: skip
    suspects = measured.dead + suspects
    flows = unexplained(counts, results, suspects, thresholds=t)
    if not suspects:  # a queue beyond the absolute line is named whatever the tests say
        flows += queued_paths(measured.paths, t)
    telemetry = _fit_json(counts, inc, results, suspects)
    if measured.busy_exchanges:
        telemetry["busy_exchanges"] = measured.busy_exchanges
    if ages.records:
        telemetry["path_records"] = ages.to_json()
    return _Localised(
        paths=measured.paths,
        suspects=suspects,
        telemetry=telemetry,
        busy_counts=measured.busy_counts,
        lost=unlocalised(flows, discovered=discovered),
        reach=(inc, counts.exchanges),
        thin=thin_elements(results[0], t),
    )


def _fit_json(
    counts: FlowCounts, inc: Incidence, results: list[SignalResult], suspects: list[Suspect]
) -> dict[str, Any]:
    """The snapshot's ``telemetry`` figures of the fit: flows, thresholds, backgrounds,
    and each named suspect's rate per signal."""
    named = {s.element for s in suspects}
    rates: dict[str, dict[str, float]] = {}
    for res in results:
        for e, rate in res.fit.rates.items():
            if inc.names[e] in named:
                rates.setdefault(inc.names[e], {})[res.signal] = round(rate, 6)
    telemetry = {
        "flows": len(counts.flows),
        "exchanges": len(counts.exchanges),
        "delay_threshold_ns": _finite(counts.threshold_ns),
        "background_loss": round(results[0].fit.background, 8),
        "rates": rates,
    }
    if len(results) > 1:
        telemetry["background_delayed"] = round(results[1].fit.background, 8)
    return telemetry


def _with_gpu_suspects(hosts: list[HostReport], suspects: list[Suspect]) -> list[Suspect]:
    """Hosts whose GPUs fail join the suspects first (merged with a network suspect of the
    same host, whose evidence follows)."""
    gpu_bad = gpu_suspects({h.name: (h.gpu_verdict, h.gpu_reason) for h in hosts})
    network = {s.element: s for s in suspects}
    for s in gpu_bad:
        also = network.pop(s.element, None)
        if also is not None:
            s.evidence = f"{s.evidence}; {also.evidence}"
    return gpu_bad + [s for s in suspects if s.element in network]


def _few_probes(collection: Collection, t: Thresholds) -> dict[str, Any] | None:
    """The window was too short for its rate: what the report says instead of a quiet
    "no suspects" (None when it was long enough, or the rate is unknown)."""
    rate = collection.params.get("rate")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate <= 0:
        return None
    pairs = float(rate) * collection.duration_s
    if pairs >= t.few_pairs_per_peer:
        return None
    return {
        "pairs_per_peer": round(pairs, 2),
        "rate": float(rate),
        "duration_s": collection.duration_s,
        "needed": t.few_pairs_per_peer,
    }


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None
