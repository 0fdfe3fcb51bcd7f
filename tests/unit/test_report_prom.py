"""Prometheus output: Prometheus's own linter (promtool) and prometheus_client's parser
accept it, no gauge carries the summaries' reserved ``quantile`` label, and the default
output grows with hosts, not with probed paths (per-path series only with --prom-paths)."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.report.prom import render_prom
from cwctl.scan.collection import HostStatus
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.telemetry import build_snapshot
from tests.unit.telemetry_synth import Synth, make

PROMTOOL = shutil.which("promtool")


def _snapshot(n_hosts: int, peers: int, **faults: dict[str, float]) -> FabricSnapshot:
    collection, solution = make(
        Synth(n_hosts=n_hosts, peers=peers, pairs=20, loss=faults.get("loss", {}))
    )
    collection.source = "sim"
    collection.status["gpu-007"] = HostStatus("unreachable", "ssh: connection refused")
    return build_snapshot(collection, solution)


@pytest.fixture(scope="module")
def faulty() -> FabricSnapshot:
    return _snapshot(32, 6, loss={"spine2": 1.0})


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value)
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def _promtool(text: str) -> subprocess.CompletedProcess[str]:
    if PROMTOOL is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("paths", [False, True], ids=["default", "prom-paths"])
def test_promtool_accepts_it(faulty: FabricSnapshot, paths: bool) -> None:
    proc = _promtool(render_prom(faulty, paths=paths))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""  # not one lint complaint


def test_promtool_does_reject_the_reserved_label() -> None:
    """The check above can fail: promtool does catch a gauge with a quantile label."""
    bad = '# HELP x_seconds A gauge.\n# TYPE x_seconds gauge\nx_seconds{quantile="0.5"} 1\n'
    proc = _promtool(bad)
    assert proc.returncode != 0 and "quantile" in proc.stdout + proc.stderr


def test_no_gauge_has_a_quantile_label(faulty: FabricSnapshot) -> None:
    for paths in (False, True):
        families = list(text_string_to_metric_families(render_prom(faulty, paths=paths)))
        assert families and all(f.type == "gauge" for f in families)
        assert not any("quantile" in s.labels for f in families for s in f.samples)


def test_default_is_per_host_leaf_pair_and_suspect(faulty: FabricSnapshot) -> None:
    samples = _samples(render_prom(faulty))
    names = {name for name, _, _ in samples}
    assert not any(n.startswith("cwctl_path_") for n in names)  # no per-path series
    up = {lab["host"]: v for n, lab, v in samples if n == "cwctl_host_up"}
    assert up["gpu-007"] == 0 and up["gpu-001"] == 1 and len(up) == 32
    scores = {lab["element"]: v for n, lab, v in samples if n == "cwctl_suspect_score"}
    assert scores["spine2"] > 0.5
    # the leaf-pair and host loss, recomputed here from the snapshot's paths
    leaf = {h.name: h.leaf for h in faulty.hosts}
    sent: dict[tuple[str, str], int] = defaultdict(int)
    got: dict[tuple[str, str], int] = defaultdict(int)
    out_sent: dict[str, int] = defaultdict(int)
    out_got: dict[str, int] = defaultdict(int)
    for p in faulty.paths:
        key = (leaf[p.src] or "", leaf[p.dst] or "")
        sent[key] += p.sent
        got[key] += p.received
        out_sent[p.src] += p.sent
        out_got[p.src] += p.received
    pair_loss = {
        (lab["src_leaf"], lab["dst_leaf"]): v
        for n, lab, v in samples
        if n == "cwctl_leaf_pair_loss_ratio"
    }
    assert set(pair_loss) == set(sent)
    for key, v in pair_loss.items():
        assert v == pytest.approx(1 - got[key] / sent[key])
    assert max(pair_loss.values()) > 0.3  # spine2 down loses a share of inter-leaf probes
    host_loss = {
        lab["host"]: v
        for n, lab, v in samples
        if n == "cwctl_host_loss_ratio" and lab["direction"] == "out"
    }
    for host, v in host_loss.items():
        assert v == pytest.approx(1 - out_got[host] / out_sent[host])


def test_default_grows_with_hosts_not_with_peers() -> None:
    """Three times the peers triples the per-path output, not the default output."""
    few, many = _snapshot(32, 3), _snapshot(32, 9)
    default = [len(_samples(render_prom(s))) for s in (few, many)]
    per_path = [
        len(_samples(render_prom(s, paths=True))) - d
        for s, d in zip((few, many), default, strict=True)
    ]
    assert len(many.paths) > 2.5 * len(few.paths)
    assert per_path[1] > 2.5 * per_path[0]
    leaves = 4
    bound = 12 * 32 + 2 * leaves * leaves + len(many.suspects) + 4
    assert default[0] <= bound and default[1] <= bound, (default, bound)


def test_per_path_series_only_when_asked(faulty: FabricSnapshot) -> None:
    samples = _samples(render_prom(faulty, paths=True))
    p = next(p for p in faulty.paths if p.owd_p50_ns is not None)
    p50 = {
        (lab["src"], lab["dst"]): v for n, lab, v in samples if n == "cwctl_path_owd_p50_seconds"
    }
    assert p50[(p.src, p.dst)] == pytest.approx(p.owd_p50_ns * 1e-9)
    assert len(p50) == sum(q.owd_p50_ns is not None for q in faulty.paths)


def _helps(text: str) -> dict[str, str]:
    return {x.split()[2]: x.split(None, 3)[3] for x in text.splitlines() if x.startswith("# HELP ")}


def test_help_texts_are_the_same_whatever_the_scan(faulty: FabricSnapshot) -> None:
    """node_exporter's textfile collector refuses a metric whose HELP changes: the delay
    threshold is a series of its own, not words in a HELP text."""
    healthy = _snapshot(32, 6)
    one, other = _helps(render_prom(faulty)), _helps(render_prom(healthy))
    assert {k: v for k, v in one.items() if k in other} == {
        k: v for k, v in other.items() if k in one
    }
    assert "above" not in one["cwctl_host_queueing_seconds"]
    thresholds = {
        float(v)
        for text in (render_prom(faulty), render_prom(healthy))
        for name, _, v in _samples(text)
        if name == "cwctl_delay_threshold_seconds"
    }
    assert thresholds and all(0 < t < 1 for t in thresholds)


def test_the_verdict_is_a_state_set(faulty: FabricSnapshot) -> None:
    verdicts = {
        labels["verdict"]: v for name, labels, v in _samples(render_prom(faulty))
        if name == "cwctl_verdict"
    }  # fmt: skip
    assert verdicts == {"healthy": 0, "inconclusive": 0, "problems": 1}
    build = [labels for name, labels, _ in _samples(render_prom(faulty))
             if name == "cwctl_build_info"]  # fmt: skip
    assert len(build) == 1 and build[0]["version"]


def test_leaf_pair_series_are_capped_at_the_worst(monkeypatch: pytest.MonkeyPatch) -> None:
    import cwctl.report.prom as prom

    snap = _snapshot(32, 6, loss={"spine2": 1.0})
    pairs = [s for s in _samples(render_prom(snap)) if s[0] == "cwctl_leaf_pair_loss_ratio"]
    assert len(pairs) > 2
    monkeypatch.setattr(prom, "LEAF_PAIRS_MAX", 2)
    capped = _samples(render_prom(snap))
    kept = [s for s in capped if s[0] == "cwctl_leaf_pair_loss_ratio"]
    assert sorted(v for *_, v in kept) == sorted(v for *_, v in pairs)[-2:]  # the worst
    (omitted,) = [v for name, _, v in capped if name == "cwctl_leaf_pairs_omitted"]
    assert omitted == len(pairs) - 2


def test_host_and_leaf_pair_tallies_are_defined_alike(faulty: FabricSnapshot) -> None:
    helps = {
        x.split()[2]: x.split(None, 3)[3]
        for x in render_prom(faulty).splitlines()
        if x.startswith("# HELP cwctl_")
    }
    for scope in ("host", "leaf_pair"):
        assert helps[f"cwctl_{scope}_loss_ratio"].startswith("Share of probes lost over the ")
        queueing = helps[f"cwctl_{scope}_queueing_seconds"]
        assert queueing.startswith("Worst queueing (p99 one-way delay over the path's floor) ")


def test_cli_prom_paths_flag(tmp_path: Path) -> None:
    base = ["scan", "--sim", "--hosts", "16", "--duration", "0.3", "--format", "prom"]
    plain = CliRunner().invoke(app, base)
    full = CliRunner().invoke(app, [*base, "--prom-paths"])
    assert plain.exit_code in (0, 3) and full.exit_code in (0, 3), plain.output + full.output
    assert "cwctl_path_owd_p99_seconds" not in plain.stdout
    assert "cwctl_path_owd_p99_seconds" in full.stdout
    assert len(full.stdout.splitlines()) > 2 * len(plain.stdout.splitlines())
