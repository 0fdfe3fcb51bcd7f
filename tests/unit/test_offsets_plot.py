"""The offsets-against-time plot: each window solved on its own; a clock that steps in
the middle of a scan is the host whose line strays, by the size of the step."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.report.offsets import offset_series, render_offsets, stray_notes, windows_for
from cwctl.report.png import decode_png_size
from cwctl.session import analyse
from tests.unit.telemetry_synth import Synth, make

STEP_NS = 40_000.0


def _stepped(host: str) -> tuple[object, object]:
    collection, _ = make(Synth(n_hosts=16, per_leaf=4, spines=2, peers=5, pairs=80))
    t = collection.table
    x = t.hosts.index(host)
    late = t.t1 >= np.median(t.t1)
    shift = np.int64(STEP_NS)
    t1, t2, t3, t4 = t.t1.copy(), t.t2.copy(), t.t3.copy(), t.t4.copy()
    mine, theirs = late & (t.src == x), late & (t.dst == x)
    t1[mine] += shift  # host x's clock reads STEP_NS later from the middle of the scan on
    t4[mine & (t4 != 0)] += shift
    t2[theirs & (t2 != 0)] += shift
    t3[theirs & (t3 != 0)] += shift
    collection.table = replace(t, t1=t1, t2=t2, t3=t3, t4=t4)
    return collection, analyse(collection, reference="gpu-001")


def test_a_stepped_clock_strays_by_its_step() -> None:
    collection, snapshot = _stepped("gpu-007")
    series = offset_series(collection.table, snapshot, 4)  # type: ignore[attr-defined]
    assert series.residual_ns.shape == (4, 16)
    stray = np.nanmax(np.abs(series.residual_ns), axis=0)
    assert series.hosts[int(np.argmax(stray))] == "gpu-007"
    x = series.hosts.index("gpu-007")
    # the whole scan's line absorbs part of the step as drift (a straight slope, the same
    # change between any two windows); across the step the line jumps by the step on top
    d = np.diff(series.residual_ns[:, x])
    assert d[1] - (d[0] + d[2]) / 2 == pytest.approx(STEP_NS, rel=0.25)
    others = np.delete(series.residual_ns, x, axis=1)
    assert np.nanmax(np.abs(others)) < 0.2 * STEP_NS  # the rest stay near their fit
    assert series.uncertainty_ns.shape == (4, 16) and np.isfinite(series.uncertainty_ns).all()
    # the stepped host is named first and said to lie beyond its error bars; no host
    # within its bars is called a stray
    (first, stray, why), *rest = stray_notes(series)
    assert series.hosts[first] == "gpu-007" and why.startswith("beyond")
    assert all(note.startswith("within") for _, s, note in rest if s < 0.2 * STEP_NS)
    png = render_offsets(series)
    assert decode_png_size(png) == (960, 360)


def test_windows_hold_what_the_rate_supports() -> None:
    assert windows_for(100.0, 2.0) == 10  # quick: 0.2 s windows of 20 pairs per peer
    assert windows_for(2.0, 5.0) == 0 and windows_for(2.0, 40.0) == 4  # watch: 10 s each
    assert windows_for(100.0, 600.0) == 20 and windows_for(None, 3.0) == 3


def test_cli_offsets_plot(tmp_path: Path) -> None:
    short = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "8", "--rate", "10",
                                     "--offsets-plot", str(tmp_path / "o.png")])  # fmt: skip
    assert short.exit_code == 2
    assert short.stderr == (
        "cwctl: --offsets-plot needs two windows of 20 coded pairs per peer: at 10 coded "
        "pairs/s per peer a scan of 4 s or more (this one probes 2 s; raise --duration or "
        "--rate)\n"
    )
    assert not (tmp_path / "o.png").exists()
    ok = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "8", "--duration", "3",
                                  "--offsets-plot", str(tmp_path / "o.png")])  # fmt: skip
    assert ok.exit_code in (0, 3), ok.output
    assert (tmp_path / "o.png").read_bytes().startswith(b"\x89PNG")
