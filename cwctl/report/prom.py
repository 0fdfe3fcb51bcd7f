"""Prometheus text exposition of a snapshot (for node_exporter's textfile collector).

Built with ``prometheus_client``'s metric families and its exposition writer; the tests
check it with ``promtool check metrics`` and parse it back. Base units throughout:
seconds, ratios. Every metric is a gauge.

The default output is bounded by the fabric, not by the probe graph: a fixed number of
series per host, one per suspect, and two per probed pair of leaves (at most the number
of probed paths, and at most ``LEAF_PAIRS_MAX``). Every HELP text is fixed (a value of the
scan, as its delay threshold, is a series of its own): node_exporter's textfile collector
refuses a metric whose HELP changes. Per-path series (seven per directed path: 8 500
lines at 64 hosts, millions at 10 000) come only when asked (``paths=True``,
``cwctl scan --format prom --prom-paths``).

Always (labels in braces):

``cwctl_scan_info{source,timestamps,reference}``   1, the scan's identity
``cwctl_build_info{version,python}``               1, what made the series
``cwctl_verdict{verdict}``                         1 for the verdict (healthy, inconclusive,
                                                   problems), 0 for the other two
``cwctl_delay_threshold_seconds``                  the queueing this scan calls delayed
``cwctl_scan_paths``                               directed paths measured
``cwctl_scan_timestamp_seconds``                   when the records were captured (Unix
                                                   time; a replay: the record file's)
``cwctl_scan_duration_seconds``                    how long the scan probed
``cwctl_sim_applied_changes``                      --sim only: changes actions left there
``cwctl_host_up{host}``                            1 reached, 0 unreachable or error
``cwctl_clock_offset_seconds{host}``               clock minus the reference's
``cwctl_clock_drift_ratio{host}``                  rate difference (1e-9 = 1 ppb)
``cwctl_clock_uncertainty_seconds{host}``          the solver's error bar
``cwctl_host_loss_ratio{host,direction}``          lost / sent over the host's paths (out, in)
``cwctl_host_queueing_seconds{host,direction}``    worst p99 over the floor of its paths
``cwctl_leaf_pair_loss_ratio{src_leaf,dst_leaf}``  lost / sent over the paths between leaves
``cwctl_leaf_pair_queueing_seconds{src_leaf,dst_leaf}``  worst p99 over the floor there
``cwctl_leaf_pairs_omitted``                       pairs past ``LEAF_PAIRS_MAX`` (the worst kept)
``cwctl_suspect_score{element,kind}``              0..1, one per suspect
``cwctl_suspects``                                 how many suspects
``cwctl_suspect_jobs{element,kind}``               running jobs the suspect hurts (only
                                                   when a scheduler was read; no job labels)
``cwctl_jobs_running{scheduler}``                  running jobs the scheduler listed
``cwctl_gpu_health{host,gpu,state}``               1 for the verdict's state, 0 the others
``cwctl_gpu_<reading>{host,gpu}``                  every numeric top-level GPU reading

With ``paths=True``, per directed path ``{src,dst}``: ``cwctl_path_owd_min_seconds``,
``cwctl_path_owd_p50_seconds``, ``cwctl_path_owd_p99_seconds``, ``cwctl_path_owd_max_seconds``,
``cwctl_path_loss_ratio``, ``cwctl_path_probes_sent``, ``cwctl_path_jitter_seconds``.
(One gauge per statistic: the ``quantile`` label is reserved for summaries.)
"""

from __future__ import annotations

import math
import platform
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from cwctl import __version__
from cwctl.scan.pathreports import PathReport, PathReports, path_column
from cwctl.scan.snapshot import FabricSnapshot

_OWD = (
    ("min", "owd_min_ns", "the floor"),
    ("p50", "owd_p50_ns", "the median"),
    ("p99", "owd_p99_ns", "the 99th percentile"),
    ("max", "owd_max_ns", "the largest"),
)
GPU_STATES = ("ok", "warn", "fail")  # cwctl_gpu_health's state label (one series each)
VERDICTS = ("healthy", "inconclusive", "problems")  # FabricSnapshot.verdict
_BUILD = ["version", "python"]
# Leaf-pair series per metric: 32 leaves' worth. A fabric of 128 leaves has 16 256 pairs;
# past the cap only the worst (most loss, then most queueing) get series, the count of
# the others is cwctl_leaf_pairs_omitted. docs/scan-json.md says the same.
LEAF_PAIRS_MAX = 1024
_NAME = re.compile(r"[^a-zA-Z0-9_]")


def _ok(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


Tally = tuple[tuple[str, str], int, int, float]  # labels, sent, received, worst queueing_ns


class _PathColumns:
    """What the tallies read of every path, as arrays made once (a scan has 200 000
    paths at 10 000 hosts: no Python object per path and tally)."""

    def __init__(self, paths: Sequence[PathReport]) -> None:
        n = len(paths)
        if isinstance(paths, PathReports):
            self.sent, self.received = paths.ints[:, 2], paths.ints[:, 3]
        else:
            self.sent = np.fromiter((p.sent for p in paths), np.int64, n)
            self.received = np.fromiter((p.received for p in paths), np.int64, n)
        excess = path_column(paths, "owd_p99_ns") - path_column(paths, "owd_min_ns")  # NaN: None
        excess[~np.isfinite(excess)] = np.nan
        self.excess = excess

    def tally(self, labels: list[tuple[str, str]], *groups: npt.NDArray[np.int64]) -> list[Tally]:
        """Sums per label that has paths (sent, received, the worst finite queueing, -inf
        for none): ``groups`` give each path's label (an index into ``labels``, -1 for
        none), a path counting once per grouping."""
        n = len(labels)
        paths, sent, received = np.zeros(n, np.int64), np.zeros(n), np.zeros(n)
        worst = np.full(n, -np.inf)
        for group in groups:
            ok = group >= 0
            g = group[ok]
            paths += np.bincount(g, minlength=n)
            sent += np.bincount(g, weights=self.sent[ok], minlength=n)  # exact below 2**53
            received += np.bincount(g, weights=self.received[ok], minlength=n)
            np.fmax.at(worst, g, self.excess[ok])
        rows = zip(
            labels,
            sent.astype(np.int64).tolist(),
            received.astype(np.int64).tolist(),
            worst.tolist(),
            strict=True,
        )
        return [row for row, here in zip(rows, paths.tolist(), strict=True) if here]


class SnapshotCollector(Collector):
    """The series of one snapshot, for any registry (``prom_bytes``; ``cwctl watch``'s
    ``/metrics`` holds the latest round's)."""

    def __init__(
        self, snapshot: FabricSnapshot, *, paths: bool, now: Callable[[], float] = time.time
    ) -> None:
        self.snapshot = snapshot
        self.now = now  # the scan just ended when its report is written
        self.paths = paths
        self.columns = _PathColumns(snapshot.paths)
        threshold = snapshot.telemetry.get("delay_threshold_ns")
        self.threshold_ns = float(threshold) if threshold is not None and _ok(threshold) else None

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        info = _gauge(
            "cwctl_scan_info",
            "The scan's source and timestamping.",
            ["source", "timestamps", "reference"],
        )
        info.add_metric([snap.source, snap.timestamp_source, snap.reference or ""], 1)
        yield info
        build = _gauge("cwctl_build_info", "1, with the version of cwctl and of Python.", _BUILD)
        build.add_metric([__version__, platform.python_version()], 1)
        yield build
        verdict = _gauge(
            "cwctl_verdict",
            "1 for the scan's verdict (healthy, inconclusive: the window could not tell, "
            "problems), 0 for the others.",
            ["verdict"],
        )
        for v in VERDICTS:
            verdict.add_metric([v], 1 if v == snap.verdict else 0)
        yield verdict
        if self.threshold_ns is not None:  # its own series: a HELP text never changes
            threshold = _gauge(
                "cwctl_delay_threshold_seconds",
                "Queueing above which this scan calls a path delayed (derived per scan).",
                [],
            )
            threshold.add_metric([], self.threshold_ns * 1e-9)
            yield threshold
        count = _gauge("cwctl_scan_paths", "Directed host-to-host paths measured.", [])
        count.add_metric([], len(snap.paths))
        yield count
        when = _gauge(
            "cwctl_scan_timestamp_seconds",
            "When the scan's records were captured (Unix time; a replay: its record file's).",
            [],
        )
        captured = snap.telemetry.get("captured_ns")
        when.add_metric([], captured / 1e9 if isinstance(captured, int) else self.now())
        yield when
        took = _gauge("cwctl_scan_duration_seconds", "How long the scan probed.", [])
        took.add_metric([], float(snap.duration_s))
        yield took
        applied = (snap.truth or {}).get("applied")
        if applied is not None:  # a simulated fabric: say whether actions changed it
            changes = _gauge(
                "cwctl_sim_applied_changes",
                "Changes earlier actions left in the simulated fabric (cwctl sim status).",
                [],
            )
            changes.add_metric([], len(applied))
            yield changes
        yield from self._hosts()
        yield from self._host_paths()
        yield from self._leaf_pairs()
        if self.paths:
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

    def _host_paths(self) -> Iterator[Metric]:
        index: dict[str, int] = {}
        paths = self.snapshot.paths
        src = np.fromiter((index.setdefault(p.src, len(index)) for p in paths), np.int64)
        dst = np.fromiter((index.setdefault(p.dst, len(index)) for p in paths), np.int64)
        labels = [(h, "out") for h in index] + [(h, "in") for h in index]
        yield from self._tallied(
            "host",
            ["host", "direction"],
            self.columns.tally(labels, src, dst + len(index)),
            over="the paths a host sends on (out) or receives on (in)",
            among="among the host's paths",
        )

    def _leaf_pairs(self) -> Iterator[Metric]:
        leaf = {h.name: h.leaf for h in self.snapshot.hosts if h.leaf}
        pairs: dict[tuple[str, str], int] = {}
        group = np.fromiter(
            (
                pairs.setdefault((a, b), len(pairs)) if a and b else -1
                for a, b in ((leaf.get(p.src), leaf.get(p.dst)) for p in self.snapshot.paths)
            ),
            np.int64,
        )
        if not pairs:
            return
        tallies = self.columns.tally(list(pairs), group)
        kept = worst(tallies, LEAF_PAIRS_MAX)
        yield from self._tallied(
            "leaf_pair",
            ["src_leaf", "dst_leaf"],
            kept,
            over="the paths from hosts on one leaf to hosts on another",
            among="between two leaves",
        )
        omitted = _gauge(
            "cwctl_leaf_pairs_omitted",
            f"Leaf pairs measured but given no series: past {LEAF_PAIRS_MAX} only the worst.",
            [],
        )
        omitted.add_metric([], len(tallies) - len(kept))
        yield omitted

    def _tallied(
        self,
        name: str,
        labels: list[str],
        tallies: list[Tally],
        *,
        over: str,
        among: str,
    ) -> Iterator[Metric]:
        """The loss and queueing gauges of ``cwctl_<name>_...``, one series per tally."""
        loss = _gauge(f"cwctl_{name}_loss_ratio", f"Share of probes lost over {over}.", labels)
        queue = _gauge(
            f"cwctl_{name}_queueing_seconds",
            f"Worst queueing (p99 one-way delay over the path's floor) {among}.",
            labels,
        )
        yield from _fill(tallies, loss, queue)

    def _paths(self) -> Iterator[Metric]:
        owd = {
            stat: _gauge(
                f"cwctl_path_owd_{stat}_seconds",
                f"One-way delay of a directed path: {what}.",
                ["src", "dst"],
            )
            for stat, _, what in _OWD
        }
        loss = _gauge(
            "cwctl_path_loss_ratio", "Share of probes lost on a directed path.", ["src", "dst"]
        )
        sent = _gauge("cwctl_path_probes_sent", "Probes sent on a directed path.", ["src", "dst"])
        jit = _gauge(
            "cwctl_path_jitter_seconds", "Mean change between consecutive delays.", ["src", "dst"]
        )
        for p in self.snapshot.paths:
            labels = [p.src, p.dst]
            for stat, attr, _ in _OWD:
                v = getattr(p, attr)
                if _ok(v):
                    owd[stat].add_metric(labels, v * 1e-9)
            loss.add_metric(labels, p.loss)
            sent.add_metric(labels, p.sent)
            if _ok(p.jitter_ns):
                jit.add_metric(labels, p.jitter_ns * 1e-9)  # type: ignore[operator]
        yield from owd.values()
        yield from (loss, sent, jit)

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
        read = self.snapshot.jobs
        if read is None:  # no scheduler: no job series at all
            return
        hurt = _gauge(
            "cwctl_suspect_jobs",
            "Running jobs with node pairs whose paths cross the suspect (or on its host).",
            ["element", "kind"],
        )
        for s in self.snapshot.suspects:
            hurt.add_metric([s.element, s.kind], len(s.jobs or ()))
        running = _gauge("cwctl_jobs_running", "Running jobs the scheduler listed.", ["scheduler"])
        if read.get("error") is None:
            running.add_metric([str(read.get("scheduler"))], int(read.get("running", 0)))
        yield from (hurt, running)

    def _gpus(self) -> Iterator[Metric]:
        health = _gauge(
            "cwctl_gpu_health",
            "1 for the GPU's verdict (state: ok, warn, fail), 0 for the others.",
            ["host", "gpu", "state"],
        )
        readings: dict[str, GaugeMetricFamily] = {}
        for h in self.snapshot.hosts:
            for i, gpu in enumerate(h.gpus):
                label = str(gpu.get("index", i))
                if gpu.get("verdict") in GPU_STATES:
                    for state in GPU_STATES:
                        health.add_metric([h.name, label, state], int(gpu["verdict"] == state))
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


def worst(tallies: list[Tally], most: int) -> list[Tally]:
    """At most ``most`` tallies: the most loss first, then the most queueing."""
    if len(tallies) <= most:
        return tallies

    def badness(t: Tally) -> tuple[float, float]:
        _, sent, received, queueing_ns = t
        loss = 1.0 - received / sent if sent else 0.0
        return (loss, queueing_ns if math.isfinite(queueing_ns) else 0.0)

    return sorted(tallies, key=badness, reverse=True)[:most]


def _fill(
    tallies: list[Tally], loss: GaugeMetricFamily, queue: GaugeMetricFamily
) -> Iterator[Metric]:
    for labels, sent, received, queueing_ns in sorted(tallies, key=lambda t: t[0]):
        if sent:
            loss.add_metric(list(labels), 1.0 - received / sent)
        if math.isfinite(queueing_ns):
            queue.add_metric(list(labels), queueing_ns * 1e-9)
    yield from (loss, queue)


def prom_bytes(snapshot: FabricSnapshot, *, paths: bool = False) -> bytes:
    """The snapshot in the Prometheus text format (version 0.0.4), UTF-8; per-path series
    only with ``paths``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot, paths=paths))
    return generate_latest(registry)


def render_prom(snapshot: FabricSnapshot, *, paths: bool = False) -> str:
    """``prom_bytes`` as text."""
    return prom_bytes(snapshot, paths=paths).decode()
