"""The simulator's truth stated at the report's own instant and reference (issue 27):
``hosts[].offset_ns`` compares with ``truth.offset_ns`` directly."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.scan.request import SimOptions
from cwctl.sim.truth import truth_at
from cwctl.transport.sim import simulate


def test_a_scan_s_offsets_compare_with_its_truth_directly() -> None:
    argv = ["scan", "--sim", "--hosts", "32", "--seed", "7", "--no-discovery", "--format", "json"]
    report = json.loads(CliRunner().invoke(app, argv).stdout)
    truth = report["truth"]
    assert truth["t_ref_ns"] == report["t_ref_ns"] and truth["reference"] == report["reference"]
    err = np.array([abs(h["offset_ns"] - truth["offset_ns"][h["name"]]) for h in report["hosts"]])
    assert np.percentile(err, 99) < 40.0  # quick, hw stamps: tens of ns, not microseconds
    assert truth["offset_ns"][report["reference"]] == 0.0


def test_restating_moves_each_clock_along_its_drift_and_rereferences() -> None:
    truth = simulate(SimOptions(hosts=8, discovery=False), 1.0).truth
    assert truth is not None
    same = truth_at(truth, truth["reference"], truth["t_ref_ns"])
    for host, offset in truth["offset_ns"].items():
        assert same["offset_ns"][host] == pytest.approx(offset, abs=0.01)
    later = truth_at(truth, "gpu-003", truth["t_ref_ns"] + 50_000_000)  # 50 ms on
    e, d = truth["clock_error_ns"], truth["clock_drift_ppb"]
    dt_ns = later["t_true_ns"] - truth["t_mid_ns"]
    assert abs(dt_ns - 50_000_000) < 3e6  # clocks differ by up to 1 ms, run within 100 ppm
    for host in truth["offset_ns"]:
        moved = (e[host] - e["gpu-003"]) + (d[host] - d["gpu-003"]) * 1e-9 * dt_ns
        assert later["offset_ns"][host] == pytest.approx(moved, abs=0.5)
        assert later["drift_ppb"][host] == pytest.approx(d[host] - d["gpu-003"], abs=0.01)
