"""Offsets against time, one line per host (``--offsets-plot FILE.png``).

The scan's probes are cut into consecutive time windows (by send time) and each window
is solved on its own (``cwctl.sync.solve``, the same reference). A host's point in a
window is its offset there minus what the whole scan's solution predicts for that
instant (``offset + drift * (t - t_ref)``): a flat line at zero is a clock that kept the
rate the scan measured; a bend is wander, a jump is a step.

The windows are sized to what the probe rate supports (``windows_for``): each holds at
least ``MIN_PAIRS_PER_WINDOW`` coded pairs per peer, or the plot is refused, as a window
of two or three probes solves to noise microseconds wide. Each window's own error bar
is drawn: a grey band of its median host's ``uncertainty_ns``, and a bar on each point of
the hosts the legend names. The legend names the hosts that stray most and says, for
each, whether the stray lies within its error bars (noise the report's ``±`` already
counts) or beyond them (wander or a step the scan's straight line does not hold: the
report's one offset and drift average over it).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cwctl.errors import InputError
from cwctl.records import ProbeTable
from cwctl.report.png import GLYPH_H, draw_text, encode_png, text_width
from cwctl.runtime import atomic
from cwctl.runtime.arrays import F64
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.units import fmt_ns

MIN_PAIRS_PER_WINDOW = 20  # coded pairs per peer a window needs to be worth solving
MAX_WINDOWS = 20
BARS = 3  # the most stray hosts get their error bars drawn
BAND = (236, 236, 236)
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
    uncertainty_ns: F64  # (windows, hosts): each window's own error bar
    scan_uncertainty_ns: F64  # (hosts,): the whole scan's error bar (the report's ±)


def windows_for(rate: float | None, duration_s: float) -> int:
    """How many windows a scan of ``duration_s`` at ``rate`` coded pairs per second per
    peer is cut into: each at least ``MIN_PAIRS_PER_WINDOW`` pairs per peer, at most
    ``MAX_WINDOWS`` (0 or 1: too few for a plot; without a rate, one a second)."""
    per_window_s = MIN_PAIRS_PER_WINDOW / rate if rate and rate > 0 else 1.0
    return max(0, min(MAX_WINDOWS, int(duration_s / per_window_s + 1e-9)))


def too_few_windows(rate: float | None, duration_s: float) -> str | None:
    """Why a scan of ``duration_s`` at ``rate`` cannot be plotted, or None if it can."""
    if windows_for(rate, duration_s) >= 2:
        return None
    need = 2 * MIN_PAIRS_PER_WINDOW / rate if rate and rate > 0 else 2.0
    at = f"at {rate:g} coded pairs/s per peer " if rate else ""
    return (
        f"--offsets-plot needs two windows of {MIN_PAIRS_PER_WINDOW} coded pairs per peer: "
        f"{at}a scan of {need:g} s or more (this one probes {duration_s:g} s; "
        "raise --duration or --rate)"
    )


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
    bars = np.full((windows, len(hosts)), np.nan)
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
        bars[w] = sol.uncertainty_ns
    mids = ((edges[:-1] + edges[1:]) / 2 - start) * 1e-9
    scan_bar = np.array([np.nan if h is None or h.uncertainty_ns is None else h.uncertainty_ns
                         for h in fit])  # fmt: skip
    return OffsetSeries(mids, hosts, residual, bars, scan_bar)


def stray_notes(series: OffsetSeries) -> list[tuple[int, float, str]]:
    """(host index, stray, why) of every host, most stray first: its largest distance
    from its own fit, and whether that lies within the window's and the scan's error
    bars together or beyond them."""
    res = np.nan_to_num(np.abs(series.residual_ns), nan=0.0)
    stray = res.max(axis=0, initial=0.0)
    worst = res.argmax(axis=0) if len(res) else np.zeros(len(series.hosts), np.intp)
    out = []
    for i in np.argsort(-stray).tolist():
        bar = float(np.nan_to_num(series.uncertainty_ns[worst[i], i], nan=np.inf))
        bar += float(np.nan_to_num(series.scan_uncertainty_ns[i], nan=0.0))
        why = (
            f"within its +-{fmt_ns(bar)}"
            if stray[i] <= bar
            else f"beyond +-{fmt_ns(bar)}: wander or step"
        )
        out.append((i, float(stray[i]), why))
    return out


def render_offsets(series: OffsetSeries, *, width: int = 960, height: int = 360) -> bytes:
    """The plot as PNG bytes."""
    left, right, top, bottom = 70, 300, 30, 30
    img = np.empty((height, width, 3), np.uint8)
    img[:] = BACKGROUND
    plot_w, plot_h = width - left - right, height - top - bottom
    finite = series.residual_ns[np.isfinite(series.residual_ns)]
    span = float(np.max(np.abs(finite))) if len(finite) else 1.0
    band: F64 = np.zeros(len(series.t_s))
    if series.uncertainty_ns.size and np.isfinite(series.uncertainty_ns).any():
        with np.errstate(all="ignore"):
            band = np.nan_to_num(np.nanmedian(series.uncertainty_ns, axis=1), nan=0.0)
    span = max(span, float(np.max(band, initial=0.0)), 1.0) * 1.1
    t_max = float(series.t_s[-1]) if len(series.t_s) else 1.0
    t_max = max(t_max, 1e-9)

    def y_of(v: float) -> int:
        return top + round((1 - (v + span) / (2 * span)) * (plot_h - 1))

    def x_of(t: float) -> int:
        return left + round(t / t_max * (plot_w - 1))

    for w, t in enumerate(series.t_s):  # each window's median error bar, a grey band
        half = 0.5 * float(t_max) / max(len(series.t_s) - 1, 1)
        x0, x1 = x_of(max(float(t) - half, 0.0)), x_of(min(float(t) + half, t_max))
        img[y_of(float(band[w])) : y_of(-float(band[w])) + 1, x0 : x1 + 1] = BAND
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
    notes = stray_notes(series)
    order = [i for i, _, _ in notes]  # most stray first: rank k gets colour k
    for rank in range(len(order) - 1, -1, -1):  # the strays drawn last, on top
        i = order[rank]
        colour = tuple(int(c) for c in _PALETTE[rank % len(_PALETTE)])
        ys = series.residual_ns[:, i]
        pts = [(x_of(float(t)), y_of(float(v))) for t, v in zip(series.t_s, ys, strict=True)
               if math.isfinite(v)]  # fmt: skip
        if rank < BARS:  # the strays: each window's own error bar on each point, side by side
            for t, v, u in zip(series.t_s, ys, series.uncertainty_ns[:, i], strict=True):
                if math.isfinite(v) and math.isfinite(u):
                    lo, hi = max(v - u, -span), min(v + u, span)
                    x = min(max(x_of(float(t)) + 3 * rank - 3, left), left + plot_w - 1)
                    img[y_of(hi) : y_of(lo) + 1, x] = colour
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            n = max(abs(x1 - x0), abs(y1 - y0), 1) + 1
            xs = np.linspace(x0, x1, n).round().astype(int)
            yv = np.linspace(y0, y1, n).round().astype(int)
            img[yv, xs] = colour
        for x, y in pts:
            img[max(y - 1, 0) : y + 2, max(x - 1, 0) : x + 2] = colour
    n_windows = len(series.t_s)
    title = (
        f"clock offset minus the whole scan linear fit, {n_windows} windows of "
        f"{float(series.t_s[1] - series.t_s[0]) if n_windows > 1 else 0.0:.3g} s. grey: "
        f"median error bar of each window, bars: the {BARS} most stray hosts"
    )
    draw_text(img, 4, 4, title, INK)
    lx = left + plot_w + 12
    draw_text(img, lx, top, "strays most (bar: window + scan)", INK)
    for k, (i, stray, why) in enumerate(notes[:10]):
        colour = tuple(int(c) for c in _PALETTE[k % len(_PALETTE)])
        y = top + 14 + 11 * k
        img[y + 2 : y + 5, lx : lx + 10] = colour
        draw_text(img, lx + 14, y, f"{series.hosts[i]} {fmt_ns(stray)} {why}", INK)
    return encode_png(img)


def write_offsets_plot(
    table: ProbeTable, snapshot: FabricSnapshot, path: Path, rate: float | None
) -> None:
    """Solve the windows ``rate`` supports, render, write atomically."""
    why = too_few_windows(rate, snapshot.duration_s)
    if why is not None:
        raise InputError(why)
    windows = windows_for(rate, snapshot.duration_s)
    data = render_offsets(offset_series(table, snapshot, windows))
    try:
        atomic.write_bytes(path, data)
    except OSError as exc:
        raise InputError(f"--offsets-plot: cannot write {path}: {exc.strerror}") from None
