"""Prometheus text exposition of a snapshot (for node_exporter's textfile collector).

Built with ``prometheus_client``'s metric families and its exposition writer, so the
output is valid by construction (the tests parse it back). Base units throughout:
seconds, ratios. Metrics (labels in braces):

``cwctl_scan_info{source,timestamps,reference}``   1, the scan's identity
``cwctl_host_up{host}``                            1 reached, 0 unreachable or error
``cwctl_clock_offset_seconds{host}``               clock minus the reference's
``cwctl_clock_drift_ratio{host}``                  rate difference (1e-9 = 1 ppb)
``cwctl_clock_uncertainty_seconds{host}``          the solver's error bar
``cwctl_path_owd_seconds{src,dst,quantile}``       one-way delay, quantile 0/0.5/0.99/1
``cwctl_path_loss_ratio{src,dst}``                 lost / sent
``cwctl_path_probes_sent{src,dst}``                probes (or replies) sent on the path
``cwctl_path_jitter_seconds{src,dst}``             mean |difference| of consecutive delays
``cwctl_suspect_score{element,kind}``              0..1, one per suspect
``cwctl_suspects``                                 how many suspects
``cwctl_gpu_health{host,gpu}``                     0 ok, 1 warn, 2 fail
``cwctl_gpu_<reading>{host,gpu}``                  every numeric top-level GPU reading
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from cwctl.snapshot import FabricSnapshot

_QUANTILES = (
    ("0", "owd_min_ns"),
    ("0.5", "owd_p50_ns"),
    ("0.99", "owd_p99_ns"),
    ("1", "owd_max_ns"),
)
_GPU_HEALTH = {"ok": 0, "warn": 1, "fail": 2}
_NAME = re.compile(r"[^a-zA-Z0-9_]")


def _ok(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class _SnapshotCollector(Collector):
    def __init__(self, snapshot: FabricSnapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        info = _gauge(
            "cwctl_scan_info",
            "The scan's source and timestamping.",
            ["source", "timestamps", "reference"],
        )
        info.add_metric([snap.source, snap.timestamp_source, snap.reference or ""], 1)
        yield info
        yield from self._hosts()
        yield from self._paths()
        yield from self._suspects()
        yield from self._gpus()

    def _hosts(self) -> Iterator[Metric]:
        up = _gauge(
            "cwctl_host_up", "1 if the host was reached, 0 if unreachable or error.", ["host"]
        )
        off = _gauge("cwctl_clock_offset_seconds", "Clock minus the reference clock.", ["host"])
        drift = _gauge(
            "cwctl_clock_drift_ratio", "Clock rate difference to the reference.", ["host"]
        )
        unc = _gauge("cwctl_clock_uncertainty_seconds", "Error bar of the clock offset.", ["host"])
        for h in self.snapshot.hosts:
            up.add_metric([h.name], 1.0 if h.status == "ok" else 0.0)
            if _ok(h.offset_ns):
                off.add_metric([h.name], h.offset_ns * 1e-9)  # type: ignore[operator]
            if _ok(h.drift_ppb):
                drift.add_metric([h.name], h.drift_ppb * 1e-9)  # type: ignore[operator]
            if _ok(h.uncertainty_ns):
                unc.add_metric([h.name], h.uncertainty_ns * 1e-9)  # type: ignore[operator]
        yield from (up, off, drift, unc)

    def _paths(self) -> Iterator[Metric]:
        owd = _gauge(
            "cwctl_path_owd_seconds",
            "One-way delay quantiles of a directed path.",
            ["src", "dst", "quantile"],
        )
        loss = _gauge(
            "cwctl_path_loss_ratio", "Share of probes lost on a directed path.", ["src", "dst"]
        )
        sent = _gauge("cwctl_path_probes_sent", "Probes sent on a directed path.", ["src", "dst"])
        jit = _gauge(
            "cwctl_path_jitter_seconds", "Mean change between consecutive delays.", ["src", "dst"]
        )
        for p in self.snapshot.paths:
            for q, attr in _QUANTILES:
                v = getattr(p, attr)
                if _ok(v):
                    owd.add_metric([p.src, p.dst, q], v * 1e-9)
            loss.add_metric([p.src, p.dst], p.loss)
            sent.add_metric([p.src, p.dst], p.sent)
            if _ok(p.jitter_ns):
                jit.add_metric([p.src, p.dst], p.jitter_ns * 1e-9)  # type: ignore[operator]
        yield from (owd, loss, sent, jit)

    def _suspects(self) -> Iterator[Metric]:
        score = _gauge(
            "cwctl_suspect_score",
            "How strongly an element explains bad paths (0..1).",
            ["element", "kind"],
        )
        for s in self.snapshot.suspects:
            score.add_metric([s.element, s.kind], s.score)
        count = _gauge("cwctl_suspects", "Number of suspect elements.", [])
        count.add_metric([], len(self.snapshot.suspects))
        yield from (score, count)

    def _gpus(self) -> Iterator[Metric]:
        health = _gauge("cwctl_gpu_health", "GPU verdict: 0 ok, 1 warn, 2 fail.", ["host", "gpu"])
        readings: dict[str, GaugeMetricFamily] = {}
        for h in self.snapshot.hosts:
            for i, gpu in enumerate(h.gpus):
                label = str(gpu.get("index", i))
                if gpu.get("verdict") in _GPU_HEALTH:
                    health.add_metric([h.name, label], _GPU_HEALTH[gpu["verdict"]])
                for key, value in gpu.items():
                    if key == "index" or not _ok(value):
                        continue
                    name = "cwctl_gpu_" + _NAME.sub("_", key).lower()
                    fam = readings.get(name)
                    if fam is None:
                        fam = readings[name] = _gauge(
                            name, f"GPU reading {key!r}.", ["host", "gpu"]
                        )
                    fam.add_metric([h.name, label], float(value))
        if health.samples:
            yield health
        yield from readings.values()


def render_prom(snapshot: FabricSnapshot) -> str:
    """The snapshot in the Prometheus text format (version 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snapshot))
    return generate_latest(registry).decode()
