"""The report is as wide as the terminal: an SSH error on one line, not folded into a
24-character column; titles whole; the hosts table says which hosts it shows and why; a
replay says when its records were captured; Prometheus gets the scan's time and length."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.report import render
from cwctl.scan.snapshot import FabricSnapshot, HostReport

REFUSED = "dead1 (127.0.0.1:2299): connection refused"
UNKNOWN_KEY = (
    "gpu-002 (127.0.0.2:22): unknown host key ssh-ed25519 SHA256:Xq3mIuKl5p0hC1Tn8dF0w2ZbV"
    "c4sRkq7yLmNoPqRsTu (not in /root/.ssh/known_hosts); check it and add it, or rerun "
    "with --accept-new-host-keys"
)


def broken_fleet() -> FabricSnapshot:
    hosts = [HostReport(name=f"gpu-{i:03d}", leaf="leaf1", offset_ns=0.0) for i in range(1, 4)]
    hosts.append(HostReport(name="dead1", status="unreachable", error=REFUSED))
    hosts.append(HostReport(name="gpu-002x", status="unreachable", error=UNKNOWN_KEY))
    return FabricSnapshot(source="ssh", reference="gpu-001", duration_s=1.0, hosts=hosts)


def test_an_ssh_error_is_one_line_in_a_wide_terminal() -> None:
    text = render(broken_fleet(), "table", color=False, width=160)
    assert f"unreachable: {REFUSED}" in text  # whole, on one line
    key_lines = [line for line in text.splitlines() if "gpu-002x" in line or "SHA256" in line]
    assert len(key_lines) <= 2  # a host-key error in a line or two, not thirteen
    assert max(len(line) for line in text.splitlines()) <= 160


def test_at_80_columns_it_still_fits() -> None:
    text = render(broken_fleet(), "table", color=False, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "hosts: all 5" in text


def test_the_cli_uses_the_terminals_width() -> None:
    args = ["scan", "--sim", "--hosts", "16", "--duration", "0.5", "--fault",
            "switch:spine2:congested"]  # fmt: skip
    wide = CliRunner().invoke(app, args, env={"COLUMNS": "160", "NO_COLOR": "1"})
    narrow = CliRunner().invoke(app, args, env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert wide.exit_code == narrow.exit_code == 3, wide.output
    widths = [max(len(line) for line in r.stdout.splitlines()) for r in (wide, narrow)]
    assert widths[0] > 80 >= widths[1], widths
    title = "worst paths (sorted ▼ by loss, then queueing p50, then queueing p99)"
    assert title in wide.stdout.splitlines() and title in narrow.stdout.splitlines()


def test_a_replay_says_when_its_records_were_captured(tmp_path: Path) -> None:
    import datetime as dt
    import gzip
    import json

    records = tmp_path / "scan.jsonl.gz"
    saved = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "4", "--duration", "0.3",
                                     "--save-records", str(records)])  # fmt: skip
    assert saved.exit_code in (0, 3), saved.output
    with gzip.open(records, "rt") as f:
        created = json.loads(f.readline())["created_ns"]
    when = dt.datetime.fromtimestamp(created / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    table = CliRunner().invoke(app, ["scan", "--replay", str(records)])
    assert f"replay of records captured {when} UTC" in table.stdout
    prom = CliRunner().invoke(app, ["scan", "--replay", str(records), "--format", "prom"])
    series = dict(
        line.split(" ", 1) for line in prom.stdout.splitlines() if line.startswith("cwctl_scan_")
    )
    assert float(series["cwctl_scan_timestamp_seconds"]) == pytest.approx(created / 1e9)
    assert float(series["cwctl_scan_duration_seconds"]) == pytest.approx(0.3)


def test_a_live_scan_exports_its_time_and_duration() -> None:
    import time

    before = time.time()
    prom = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "4", "--duration", "0.3",
                                    "--format", "prom"])  # fmt: skip
    series = dict(
        line.split(" ", 1) for line in prom.stdout.splitlines() if line.startswith("cwctl_scan_")
    )
    assert before <= float(series["cwctl_scan_timestamp_seconds"]) <= time.time()
    assert float(series["cwctl_scan_duration_seconds"]) == pytest.approx(0.3)
