"""The host x host heatmap as a PNG: median queueing (p50 - min) per path, loss in red.

Rows are sources, columns destinations, both ordered by leaf (then name), with a grey
line between leaves and the leaf names along the left edge. A path that lost probes is
drawn in reds (darker = more loss); the others on a blue-to-yellow scale of median
queueing (p50 over the path's floor: steadier than p99, which bursts dominate) from 0 to
the fabric's 99th percentile; a path never probed is dark grey. A legend on
the right gives both scales. Written with ``cwctl.report.png`` (numpy + zlib).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cwctl import atomic
from cwctl.errors import InputError
from cwctl.report.png import GLYPH_H, draw_text, encode_png, text_width
from cwctl.report.units import fmt_ns
from cwctl.snapshot import FabricSnapshot

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]

BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)
UNPROBED = (70, 70, 70)
DIAGONAL = (200, 200, 200)
LEAF_LINE = (150, 150, 150)
LOSS_MIN = 0.001  # below this a path counts as lossless
# the queueing scale: dark blue -> teal -> green -> yellow
_STOPS = np.array([[13, 8, 135], [33, 145, 140], [94, 201, 98], [253, 231, 37]], np.float64)


def _natural(name: str) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def host_order(snapshot: FabricSnapshot) -> list[tuple[str, str]]:
    """(host, leaf) ordered by leaf then name; hosts without a leaf last."""
    hosts = [(h.name, h.leaf or "") for h in snapshot.hosts]
    return sorted(hosts, key=lambda hl: (hl[1] == "", _natural(hl[1]), _natural(hl[0])))


def matrices(snapshot: FabricSnapshot, order: list[str]) -> tuple[F64, F64]:
    """(median queueing ns, loss ratio) per (src, dst) in ``order``; NaN: never probed."""
    index = {h: i for i, h in enumerate(order)}
    n = len(order)
    excess = np.full((n, n), np.nan)
    loss = np.full((n, n), np.nan)
    for p in snapshot.paths:
        i, j = index.get(p.src), index.get(p.dst)
        if i is None or j is None or not p.sent:
            continue
        loss[i, j] = p.loss
        lo, mid = p.owd_min_ns, p.owd_p50_ns
        ok = lo is not None and mid is not None and math.isfinite(lo) and math.isfinite(mid)
        excess[i, j] = mid - lo if ok else np.nan  # type: ignore[operator]
    return excess, loss


def _colormap(t: F64) -> U8:
    """Values in [0, 1] to RGB on the queueing scale."""
    t = np.clip(t, 0.0, 1.0) * (len(_STOPS) - 1)
    lo = np.minimum(np.floor(t).astype(int), len(_STOPS) - 2)
    frac = (t - lo)[..., None]
    return (_STOPS[lo] * (1 - frac) + _STOPS[lo + 1] * frac).astype(np.uint8)


def _lossmap(loss: F64) -> U8:
    """Loss in (0, 1] to reds: light at 0.1 %, dark at 100 % (log scale)."""
    t = np.clip((np.log10(np.maximum(loss, LOSS_MIN)) + 3) / 3, 0, 1)[..., None]
    light, dark = np.array([252, 174, 145]), np.array([165, 15, 21])
    return (light * (1 - t) + dark * t).astype(np.uint8)


def render_heatmap(snapshot: FabricSnapshot, *, max_side_px: int = 720) -> bytes:
    """The heatmap PNG of a snapshot (see the module docstring)."""
    placed = host_order(snapshot)
    order = [h for h, _ in placed]
    n = max(len(order), 1)
    cell = int(max(1, min(16, max_side_px // n)))
    excess, loss = matrices(snapshot, order)
    finite = excess[np.isfinite(excess)]
    vmax = float(np.percentile(finite, 99)) if len(finite) else 1.0
    vmax = max(vmax, 1.0)

    colors = np.empty((n, n, 3), np.uint8)
    colors[:] = UNPROBED
    probed = np.isfinite(excess)
    colors[probed] = _colormap(excess[probed] / vmax)
    lossy = np.isfinite(loss) & (loss >= LOSS_MIN)
    colors[lossy] = _lossmap(loss[lossy])
    colors[np.eye(n, dtype=bool)] = DIAGONAL

    leaves = [leaf for _, leaf in placed]
    label_w = max((text_width(leaf) for leaf in set(leaves) if leaf), default=0) + 8
    top, side = 34, 10
    grid = n * cell
    legend_w = 150
    width = label_w + grid + side + legend_w
    height = max(top + grid + side, top + 190)
    img = np.empty((height, width, 3), np.uint8)
    img[:] = BACKGROUND
    big = np.repeat(np.repeat(colors, cell, axis=0), cell, axis=1)
    img[top : top + grid, label_w : label_w + grid] = big

    # leaf boundaries and names
    for k in range(1, len(leaves)):
        if leaves[k] != leaves[k - 1]:
            img[top + k * cell, label_w : label_w + grid] = LEAF_LINE
            img[top : top + grid, label_w + k * cell] = LEAF_LINE
    start = 0
    for k in range(1, len(leaves) + 1):
        if k == len(leaves) or leaves[k] != leaves[start]:
            if leaves[start]:
                mid = top + (start + k) * cell // 2 - GLYPH_H // 2
                draw_text(img, 2, mid, leaves[start], INK)
            start = k

    title = "median queueing (p50 - min) per path: rows send, columns receive"
    if snapshot.source == "sim" or snapshot.source.endswith(":sim"):
        title += " (simulated)"
    draw_text(img, 4, 4, title, INK)
    draw_text(img, 4, 16, f"{len(order)} hosts by leaf, red: lost probes", INK)
    _legend(img, label_w + grid + side, top, vmax)
    return encode_png(img)


def _legend(img: U8, x: int, y: int, vmax: float) -> None:
    bar_h, bar_w = 100, 14
    ramp = np.linspace(1, 0, bar_h)
    img[y : y + bar_h, x : x + bar_w] = _colormap(ramp)[:, None, :]
    draw_text(img, x + bar_w + 4, y, fmt_ns(vmax), INK)
    draw_text(img, x + bar_w + 4, y + bar_h - GLYPH_H, "0 ns", INK)
    draw_text(img, x + bar_w + 4, y + bar_h // 2 - 4, "queueing", INK)
    y2 = y + bar_h + 12
    loss_ramp = 10 ** np.linspace(0, -3, 40)
    img[y2 : y2 + 40, x : x + bar_w] = _lossmap(loss_ramp)[:, None, :]
    draw_text(img, x + bar_w + 4, y2, "100% loss", INK)
    draw_text(img, x + bar_w + 4, y2 + 40 - GLYPH_H, "0.1%", INK)
    y3 = y2 + 50
    img[y3 : y3 + 10, x : x + bar_w] = UNPROBED
    draw_text(img, x + bar_w + 4, y3 + 1, "not probed", INK)


def write_heatmap(snapshot: FabricSnapshot, path: Path) -> None:
    """Render and write the PNG atomically (a sibling file, then a rename over ``path``)."""
    data = render_heatmap(snapshot)
    try:
        atomic.write_bytes(path, data)
    except OSError as exc:
        raise InputError(f"--heatmap: cannot write {path}: {exc.strerror}") from None
