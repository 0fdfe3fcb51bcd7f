"""The watch's metrics: the latest round's series and the watch's own health, live.

``WatchMetrics`` is a ``prometheus_client`` collector: each scrape yields the latest
snapshot's series, exactly those of ``cwctl scan --format prom`` (``report.prom``, bounded
by the fabric), then the scan's health and the decisions' counts:

``cwctl_watch_rounds_total``                       rounds finished (a failed scan counts)
``cwctl_watch_last_scan_timestamp_seconds``        when the latest scan finished (Unix time)
``cwctl_watch_last_scan_duration_seconds``         how long it took, probing and analysis
``cwctl_watch_hosts{state}``                       hosts reached / not reached in it
``cwctl_watch_records``                            probe records it brought home
``cwctl_watch_suspects{kind}``                     its suspects by kind (every kind, 0 too)
``cwctl_watch_decisions_total{verb,code}``         decisions taken (docs/watch.md)
``cwctl_watch_actions_total{action,outcome}``      actions: acted, failed, restored, ...
``cwctl_watch_errors_total{kind}``                 scan, action, reload, journal errors
``cwctl_watch_acted_on{element,action}``           1 per element an action now steers round
``cwctl_watch_policy_dry_run``                     1 dry run, 0 acting, absent: no policy
``cwctl_uplink_load_bps{link,group}``              per directed leaf-spine link: the load
                                                   the hosts' flows put on it ([rebalance])
``cwctl_uplink_elephants{link,group}``             the elephant flows on it
``cwctl_uplink_queueing_p50_seconds{link,group}``  their sockets' median RTT excess
``cwctl_uplink_probe_queueing_p50_seconds{link,group}``  the probes' through it (a scan's)
``cwctl_uplink_max_over_mean{group}``              a leaf's busiest link over its mean
``process_*``                                      the watch process's CPU, memory, descriptors

Served at ``/metrics`` by ``serve`` (``httpd``: a capped, time-limited server, in a thread)
and written atomically for node_exporter's textfile collector by ``write_textfile``.
Labels are bounded: verbs, codes, kinds, outcomes are fixed words; elements only those
acted on; links the fabric's directed leaf-spine links (never a flow).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import ProcessCollector, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from cwctl.report.prom import SnapshotCollector
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.watch import httpd
from cwctl.watch.decide import Decision
from cwctl.watch.httpd import MetricsServer

SUSPECT_KINDS = ("switch", "link", "nic", "host", "gpu")


class WatchMetrics(Collector):
    """What a scrape reads; ``round_done`` and ``count`` are called by the watch's loop
    (the asyncio thread), ``collect`` by the HTTP server's thread: a lock between them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot: SnapshotCollector | None = None
        self.rounds = 0
        self.last: dict[str, float] = {}
        self.suspects: Counter[str] = Counter()
        self.decisions: Counter[tuple[str, str]] = Counter()
        self.actions: Counter[tuple[str, str]] = Counter()
        self.errors: Counter[str] = Counter()
        self.acted_on: dict[str, str] = {}
        self.dry_run: bool | None = None
        self.uplinks: dict[str, Any] = {}

    def round_done(
        self, snapshot: FabricSnapshot | None, *, finished_s: float, duration_s: float
    ) -> None:
        """A round ended: its snapshot (None when the scan failed) replaces the last."""
        collector = SnapshotCollector(snapshot, paths=False) if snapshot is not None else None
        with self._lock:
            self.rounds += 1
            if snapshot is None:
                return
            self._snapshot = collector
            reached = sum(1 for h in snapshot.hosts if h.status == "ok")
            self.last = {
                "timestamp": finished_s,
                "duration": duration_s,
                "reached": reached,
                "unreached": len(snapshot.hosts) - reached,
                "records": snapshot.records,
            }
            self.suspects = Counter(s.kind for s in snapshot.suspects)
            self.suspects["gpu"] = sum(1 for h in snapshot.hosts if h.gpu_verdict == "fail")

    def count(self, decision: Decision) -> None:
        with self._lock:
            self.decisions[(decision.verb, decision.code)] += 1
            if decision.verb in ("acted", "failed", "restored", "restore-failed"):
                self.actions[(decision.action, decision.verb)] += 1

    def error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] += 1

    def set_state(self, acted_on: dict[str, str], dry_run: bool | None) -> None:
        with self._lock:
            self.acted_on = dict(acted_on)
            self.dry_run = dry_run

    def set_uplinks(self, uplink_load: dict[str, Any]) -> None:
        """The latest measurement of the uplinks (``rebalance``'s ``uplink_load``)."""
        with self._lock:
            self.uplinks = dict(uplink_load)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snapshot = self._snapshot
            rounds, last = self.rounds, dict(self.last)
            suspects, decisions = Counter(self.suspects), Counter(self.decisions)
            actions, errors = Counter(self.actions), Counter(self.errors)
            acted_on, dry_run = dict(self.acted_on), self.dry_run
            uplinks = dict(self.uplinks)
        if snapshot is not None:
            yield from snapshot.collect()
        yield _counter(
            "cwctl_watch_rounds", "Rounds finished (a failed scan counts).", [], [([], rounds)]
        )
        if last:
            yield _gauge(
                "cwctl_watch_last_scan_timestamp_seconds",
                "When the latest scan finished (Unix time).",
                [],
                [([], last["timestamp"])],
            )
            yield _gauge(
                "cwctl_watch_last_scan_duration_seconds",
                "How long the latest scan took, probing and analysis.",
                [],
                [([], last["duration"])],
            )
            yield _gauge(
                "cwctl_watch_hosts",
                "Hosts the latest scan reached (state=reached) or not (state=unreached).",
                ["state"],
                [(["reached"], last["reached"]), (["unreached"], last["unreached"])],
            )
            yield _gauge(
                "cwctl_watch_records",
                "Probe records the latest scan brought home.",
                [],
                [([], last["records"])],
            )
            yield _gauge(
                "cwctl_watch_suspects",
                "Suspects of the latest scan by kind (gpu: hosts whose GPU verdict is fail).",
                ["kind"],
                [([k], suspects.get(k, 0)) for k in SUSPECT_KINDS],
            )
        yield _counter(
            "cwctl_watch_decisions",
            "Decisions the policy took, by verb and reason code.",
            ["verb", "code"],
            [(list(k), v) for k, v in sorted(decisions.items())],
        )
        yield _counter(
            "cwctl_watch_actions",
            "Automatic actions by what came of them (acted, failed, restored, restore-failed).",
            ["action", "outcome"],
            [(list(k), v) for k, v in sorted(actions.items())],
        )
        yield _counter(
            "cwctl_watch_errors",
            "Errors of the watch by kind (scan, action, reload, journal).",
            ["kind"],
            [([k], v) for k, v in sorted(errors.items())],
        )
        yield _gauge(
            "cwctl_watch_acted_on",
            "1 for each element an automatic action now steers round (or drains).",
            ["element", "action"],
            [([str(e), str(a)], 1) for e, a in sorted(acted_on.items(), key=str)],
        )
        if dry_run is not None:
            yield _gauge(
                "cwctl_watch_policy_dry_run",
                "1 when the policy only says what it would do, 0 when it acts.",
                [],
                [([], 1 if dry_run else 0)],
            )
        if uplinks:
            yield from uplink_families(uplinks)


# per directed link: (metric, help, the link row's key, its units per the metric's unit)
_LINK_GAUGES = (
    (
        "cwctl_uplink_load_bps",
        "Load the hosts' flows put on each directed leaf-spine link (bits per second).",
        "load_bps",
        1.0,
    ),
    (
        "cwctl_uplink_elephants",
        "Elephant flows on each directed leaf-spine link.",
        "elephants",
        1.0,
    ),
    (
        "cwctl_uplink_queueing_p50_seconds",
        "Median smoothed RTT minus minimum RTT of the flows on each link (their queueing).",
        "queueing_p50_us",
        1e6,
    ),
    (
        "cwctl_uplink_probe_queueing_p50_seconds",
        "Median queueing (p50 minus floor) of the probe flows whose path crosses each link.",
        "probe_queueing_p50_us",
        1e6,
    ),
)


def uplink_families(uplinks: dict[str, Any]) -> Iterator[Metric]:
    """Per directed leaf-spine link (bounded by the fabric, never per flow)."""
    links = uplinks.get("links") or []
    for name, text, key, per in _LINK_GAUGES:
        yield _gauge(
            name,
            text,
            ["link", "group"],
            [
                ([str(r["link"]), str(r["group"])], float(r[key]) / per)
                for r in links
                if r.get(key) is not None
            ],
        )
    yield _gauge(
        "cwctl_uplink_max_over_mean",
        "Per leaf and direction: its busiest link's load over its links' mean.",
        ["group"],
        [([str(g)], float(v)) for g, v in sorted((uplinks.get("max_over_mean") or {}).items())],
    )


Samples = list[tuple[list[str], float]]


def _gauge(name: str, doc: str, labels: list[str], samples: Samples) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def _counter(name: str, doc: str, labels: list[str], samples: Samples) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def registry_of(metrics: WatchMetrics) -> CollectorRegistry:
    """The watch's series and the process's own (``process_*``: CPU, resident memory,
    descriptors and their limit, start time), as every exporter serves them."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    ProcessCollector(registry=registry)
    return registry


def serve(metrics: WatchMetrics, listen: str) -> MetricsServer:
    """Serve ``/metrics`` at ``listen`` (``httpd``: bounded, loopback by default)."""
    return httpd.serve(registry_of(metrics), listen)


def write_textfile(metrics: WatchMetrics, path: Path) -> None:
    """The metrics into ``path`` for node_exporter's textfile collector: written to a
    temporary file beside it, then renamed over it (a reader never sees half a file)."""
    write_to_textfile(str(path), registry_of(metrics))
