"""Offsets against time, one line per host, for long scans (``--offsets-plot FILE.png``).

The scan's probes are cut into ``windows`` consecutive time windows (by send time) and
each window is solved on its own (``cwctl.sync.solve``, the same reference). A host's
point in a window is its offset there minus what the whole scan's solution predicts for
that instant (``offset + drift * (t - t_ref)``): a flat line at zero is a clock that
kept the rate the scan measured; a bend is wander, a jump is a step, and a host whose
line strays from all others is the one to look at. The y scale is symmetric and labelled
with the duration formatter; the legend names the hosts that stray most.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cwctl import atomic
from cwctl.errors import InputError
from cwctl.records import ProbeTable
from cwctl.report.png import GLYPH_H, draw_text, encode_png, text_width
from cwctl.snapshot import FabricSnapshot
from cwctl.units import fmt_ns

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]
MIN_WINDOW_S = 1.0  # a window shorter than this holds too few pairs to solve
BACKGROUND, INK, GRID = (255, 255, 255), (20, 20, 20), (225, 225, 225)
_PALETTE = np.array(
    [[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189],
     [140, 86, 75], [227, 119, 194], [127, 127, 127], [188, 189, 34], [23, 190, 207]],
    np.uint8,
)  # fmt: skip


@dataclass
class OffsetSeries:
    t_s: F64  # window midpoints, seconds from the first probe
    hosts: list[str]
    residual_ns: F64  # (windows, hosts): window offset minus the scan's linear prediction


def window_count(duration_s: float) -> int:
    """How many windows a scan this long is cut into (at least 1 s each, at most 20)."""
    return max(0, min(20, int(duration_s // MIN_WINDOW_S)))


def offset_series(table: ProbeTable, snapshot: FabricSnapshot, windows: int) -> OffsetSeries:
    """Solve each of ``windows`` time windows of ``table`` (see the module docstring)."""
    from cwctl.sync import solve

    hosts = list(table.hosts)
    t1 = table.t1.astype(np.float64)
    start, stop = float(t1.min()), float(t1.max())
    edges = np.linspace(start, stop, windows + 1)
    which = np.clip(np.searchsorted(edges, t1, side="right") - 1, 0, windows - 1)
    # the whole scan's offset and drift per host of the table (NaN: none, no points)
    by_name = {h.name: h for h in snapshot.hosts}
    fit = [by_name.get(name) for name in hosts]
    offset = np.array([np.nan if h is None or h.offset_ns is None else h.offset_ns for h in fit])
    drift = np.array([np.nan if h is None or h.drift_ppb is None else h.drift_ppb for h in fit])
    t_ref = snapshot.t_ref_ns
    residual = np.full((windows, len(hosts)), np.nan)
    for w in range(windows):
        part = table.select(which == w)
        if not len(part):
            continue
        try:
            sol = solve(part, reference=snapshot.reference)
        except Exception:  # a window the solver cannot use stays empty (NaN)
            continue
        dt_ns = float(sol.t_ref_ns - t_ref) if t_ref is not None else 0.0
        residual[w] = sol.offset_ns - (offset + drift * 1e-9 * dt_ns)
    mids = ((edges[:-1] + edges[1:]) / 2 - start) * 1e-9
    return OffsetSeries(mids, hosts, residual)


def render_offsets(series: OffsetSeries, *, width: int = 720, height: int = 360) -> bytes:
    """The plot as PNG bytes."""
    left, right, top, bottom = 70, 190, 30, 30
    img = np.empty((height, width, 3), np.uint8)
    img[:] = BACKGROUND
    plot_w, plot_h = width - left - right, height - top - bottom
    finite = series.residual_ns[np.isfinite(series.residual_ns)]
    span = float(np.max(np.abs(finite))) if len(finite) else 1.0
    span = max(span, 1.0) * 1.1
    t_max = float(series.t_s[-1]) if len(series.t_s) else 1.0
    t_max = max(t_max, 1e-9)

    def y_of(v: float) -> int:
        return top + round((1 - (v + span) / (2 * span)) * (plot_h - 1))

    def x_of(t: float) -> int:
        return left + round(t / t_max * (plot_w - 1))

    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):  # y grid and labels
        v = span * (1 - 2 * frac)
        y = y_of(v)
        img[y, left : left + plot_w] = GRID if v else INK
        label = fmt_ns(v, signed=True)
        draw_text(img, left - 4 - text_width(label), y - GLYPH_H // 2, label, INK)
    img[top : top + plot_h, left] = INK
    for t in np.linspace(0, t_max, 5):  # x labels
        label = f"{float(t):.3g} s"
        draw_text(img, x_of(float(t)) - text_width(label) // 2, top + plot_h + 6, label, INK)
    stray = np.nanmax(np.abs(np.nan_to_num(series.residual_ns)), axis=0, initial=0.0)
    order = np.argsort(-stray).tolist()  # most stray first: rank k gets colour k
    for rank in range(len(order) - 1, -1, -1):  # the strays drawn last, on top
        i = order[rank]
        colour = tuple(int(c) for c in _PALETTE[rank % len(_PALETTE)])
        ys = series.residual_ns[:, i]
        pts = [(x_of(float(t)), y_of(float(v))) for t, v in zip(series.t_s, ys, strict=True)
               if math.isfinite(v)]  # fmt: skip
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            n = max(abs(x1 - x0), abs(y1 - y0), 1) + 1
            xs = np.linspace(x0, x1, n).round().astype(int)
            yv = np.linspace(y0, y1, n).round().astype(int)
            img[yv, xs] = colour
        for x, y in pts:
            img[max(y - 1, 0) : y + 2, max(x - 1, 0) : x + 2] = colour
    draw_text(img, 4, 4, "clock offset minus the whole scan linear fit, per time window", INK)
    lx = left + plot_w + 12
    draw_text(img, lx, top, "strays most:", INK)
    for k, i in enumerate(order[:10]):
        colour = tuple(int(c) for c in _PALETTE[k % len(_PALETTE)])
        y = top + 14 + 11 * k
        img[y + 2 : y + 5, lx : lx + 10] = colour
        draw_text(img, lx + 14, y, f"{series.hosts[i]} {fmt_ns(float(stray[i]))}", INK)
    return encode_png(img)


def write_offsets_plot(table: ProbeTable, snapshot: FabricSnapshot, path: Path) -> None:
    """Solve the windows, render, write atomically."""
    windows = window_count(snapshot.duration_s)
    if windows < 2:
        raise InputError(
            f"--offsets-plot needs a scan of at least {2 * MIN_WINDOW_S:g} s "
            f"(this one is {snapshot.duration_s:g} s)"
        )
    data = render_offsets(offset_series(table, snapshot, windows))
    try:
        atomic.write_bytes(path, data)
    except OSError as exc:
        raise InputError(f"--offsets-plot: cannot write {path}: {exc.strerror}") from None
