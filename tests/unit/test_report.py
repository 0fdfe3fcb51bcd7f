"""The renderers: the Rich table fits 80 columns, Prometheus text parses, the heatmap is a PNG,
and `cwctl scan --sim` exits 3 with suspects, 0 when healthy."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.report import render
from cwctl.report.heatmap import host_order, matrices, render_heatmap
from cwctl.report.png import decode_png_size, encode_png
from cwctl.scan.collection import HostStatus
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.telemetry import build_snapshot
from tests.unit.telemetry_synth import Synth, make


@pytest.fixture(scope="module")
def faulty() -> FabricSnapshot:
    collection, solution = make(Synth(loss={"spine2": 1.0}, delay_ns={"leaf1-spine3": 6000}))
    collection.source = "sim"
    collection.status["gpu-007"] = HostStatus("unreachable", "ssh: connection refused on port 22")
    return build_snapshot(collection, solution)


@pytest.fixture(scope="module")
def healthy() -> FabricSnapshot:
    collection, solution = make(Synth(n_hosts=8, per_leaf=4, spines=2, peers=3))
    return build_snapshot(collection, solution)


def test_table_fits_80_columns_and_says_what_it_is(faulty: FabricSnapshot) -> None:
    text = render(faulty, "table", color=False)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("verdict: problems (exit 3): 2 suspects, first spine2")
    assert lines[2].startswith("SIMULATED fabric")  # the verdict folds to two lines
    assert "timestamps hw" in text
    assert "hosts ok 31/32" in text
    assert "top suspect spine2 (switch" in text
    assert "hosts: 12 of 32, the least certain clocks" in text  # which, and why
    assert "--format json lists every host" in text
    assert "unreachable" in text and "gpu-007" in text  # the unreachable host is shown
    assert "leaf1-spine3" in text  # both suspects, with evidence
    assert "worst paths" in text


def test_table_of_a_healthy_real_fabric(healthy: FabricSnapshot) -> None:
    text = render(healthy, "table", color=False)
    assert "SIMULATED" not in text
    assert "No suspects" in text and "no suspects" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "hosts: all 8" in text  # 8 hosts: all shown
    assert sum(line.lstrip().startswith("gpu-") for line in text.splitlines()) >= 8


def test_colour_table_still_fits(faulty: FabricSnapshot) -> None:
    import re

    text = render(faulty, "table", color=True)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "\x1b[" in text
    assert max(len(line) for line in plain.splitlines()) <= 80


def test_gpu_column_when_gpu_data_is_present() -> None:
    hosts = [
        HostReport("gpu-001", offset_ns=0.0, gpu_verdict="ok", gpus=[{"index": 0}]),
        HostReport("gpu-002", offset_ns=12.0, gpu_verdict="fail", gpu_reason="GPU lost",
                   gpus=[{"index": 0, "verdict": "fail", "temperature_c": 91}]),
    ]  # fmt: skip
    snap = FabricSnapshot(source="ssh", reference="gpu-001", duration_s=1.0, hosts=hosts)
    text = render(snap, "table", color=False)
    assert "GPU" in text and "fail" in text
    prom = render(snap, "prom")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(prom)
        for s in fam.samples
    }
    health = {  # a state set, not a numeric enum
        state: samples[("cwctl_gpu_health", (("gpu", "0"), ("host", "gpu-002"), ("state", state)))]
        for state in ("ok", "warn", "fail")
    }
    assert health == {"ok": 0, "warn": 0, "fail": 1}
    assert samples[("cwctl_gpu_temperature_c", (("gpu", "0"), ("host", "gpu-002")))] == 91


def test_png_encoder_round_trips_through_zlib() -> None:
    img = np.zeros((3, 4, 3), np.uint8)
    img[1, 2] = (255, 0, 7)
    data = encode_png(img)
    assert decode_png_size(data) == (4, 3)
    idat = data[data.index(b"IDAT") + 4 :]
    raw = zlib.decompressobj().decompress(idat)
    rows = np.frombuffer(raw[: 3 * 13], np.uint8).reshape(3, 13)
    assert rows[:, 0].tolist() == [0, 0, 0]  # filter byte per row
    assert rows[1, 1 + 3 * 2 : 1 + 3 * 3].tolist() == [255, 0, 7]


def test_heatmap_orders_by_leaf_and_marks_lossy_paths(faulty: FabricSnapshot) -> None:
    order = host_order(faulty)
    leaves = [leaf for _, leaf in order]
    assert leaves == sorted(leaves, key=lambda x: int(x[4:]))
    excess, loss = matrices(faulty, [h for h, _ in order])
    assert np.nanmax(loss) == 1.0 and np.isnan(excess).any()
    data = render_heatmap(faulty)
    w, h = decode_png_size(data)
    assert w > 32 * 2 and h > 32 * 2


def _scan(*args: str) -> tuple[int, str]:
    argv = ["scan", "--sim", "--hosts", "24", "--duration", "0.5", "--rate", "100", *args]
    result = CliRunner().invoke(app, argv)
    return result.exit_code, result.stdout


def test_scan_exits_3_with_suspects_and_writes_the_heatmap(tmp_path: Path) -> None:
    png = tmp_path / "fabric.png"
    code, out = _scan("--fault", "switch:spine2:congested", "--heatmap", str(png))
    assert code == 3, out
    assert "top suspect spine2" in out
    assert png.read_bytes().startswith(b"\x89PNG")


def test_scan_exits_0_when_healthy_and_prom_goes_to_out(tmp_path: Path) -> None:
    out_file = tmp_path / "cwctl.prom"
    code, out = _scan("--format", "prom", "--out", str(out_file))
    assert code == 0, out
    families = {f.name for f in text_string_to_metric_families(out_file.read_text())}
    assert "cwctl_suspects" in families


def test_heatmap_to_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["scan", "--sim", "--hosts", "8", "--duration", "0.2",
         "--heatmap", str(tmp_path / "missing" / "x.png")],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--heatmap" in result.output and "no directory" in result.output
    assert "Traceback" not in result.output


def test_worst_paths_are_sorted_by_columns_the_table_shows() -> None:
    from cwctl.scan.pathreports import PathReport

    # b has the larger p99 and the larger p99 queueing; a the larger median queueing:
    # a comes first, and the column that says why is on screen
    a = PathReport("gpu-001", "gpu-002", 100, 100, 1_000.0, 9_000.0, 10_000.0)
    b = PathReport("gpu-003", "gpu-004", 100, 100, 1_000.0, 2_000.0, 40_000.0)
    c = PathReport("gpu-005", "gpu-006", 100, 90, 1_000.0, 1_100.0, 1_200.0)  # lossy: first
    snap = FabricSnapshot(
        source="ssh", reference="gpu-001", duration_s=1.0,
        hosts=[HostReport(f"gpu-00{i}") for i in range(1, 7)], paths=[a, b, c],
    )  # fmt: skip
    text = render(snap, "table", color=False)
    head = next(line for line in text.splitlines() if line.lstrip().startswith("path"))
    assert "loss▼" in head and "queue p50▼" in head and "queue p99▼" in head
    rows = [line.split() for line in text.splitlines() if "→" in line and "worst" not in line]
    assert [r[0] for r in rows] == ["gpu-005", "gpu-001", "gpu-003"]
    assert rows[1][4:6] == ["8.00", "us"] and rows[2][4:6] == ["1.00", "us"]  # queue p50


def test_a_host_silent_on_the_fabric_is_not_shown_as_ok() -> None:
    from cwctl.report.summary import silent_hosts
    from cwctl.scan.pathreports import PathReport

    names = ["gpu-001", "gpu-002", "gpu-003"]
    paths = [
        PathReport(a, b, 100, 0 if "gpu-003" in (a, b) else 100, 1e3, 1e3, 1e3)
        for a in names
        for b in names
        if a != b
    ]
    snap = FabricSnapshot(source="ssh", reference="gpu-001", duration_s=1.0,
                          hosts=[HostReport(n) for n in names], paths=paths)  # fmt: skip
    assert silent_hosts(snap) == ["gpu-003"]
    text = render(snap, "table", color=False)
    assert "hosts ok 3/3 · 1 silent on the fabric: gpu-003" in text
    row = next(line for line in text.splitlines() if line.lstrip().startswith("gpu-003"))
    assert "no fabric" in row
    paths[0] = PathReport("gpu-001", "gpu-003", 100, 1, 1e3, 1e3, 1e3)  # one answer: not silent
    snap.paths = paths
    assert silent_hosts(snap) == []
