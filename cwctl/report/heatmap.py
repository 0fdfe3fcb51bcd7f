"""The host x host heatmap as a PNG: queueing p50 (p50 - floor) per path, loss in red.

Rows are sources, columns destinations, both ordered by leaf (then name), with a grey
line between leaves and the leaf names along the left edge. A path that lost probes is
drawn in reds (darker = more loss, log scale from 0.1 % to 100 %); the others on a
blue-to-yellow scale of median queueing (p50 over the path's floor: steadier than p99,
which bursts dominate); a path never probed is dark grey.

The queueing scale is fixed, so two pictures compare: logarithmic from ``SCALE_MIN_NS``
(10 ns, dark blue) to ``SCALE_MAX_NS`` (100 us, yellow) by default; anything beyond
either end takes the end's colour. ``max_ns`` (``--heatmap-max``) moves the top end.

Suspects are marked in magenta: their names in the legend, a tick beside the rows and
above the columns of the hosts they can be on the path of, and a frame around every bad
path (lossy, queueing above the scan's delay threshold, or slow: a floor that much
above the typical floor of its kind of path) that can cross them. "Can
cross" is judged from the hosts' leaves only (a host or NIC: its own paths; a leaf: paths
from or to its hosts; a spine: paths between leaves; a link leaf-spine: paths between
that leaf and another). Written with ``cwctl.report.png`` (numpy + zlib).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cwctl.errors import InputError
from cwctl.report.png import GLYPH_H, draw_text, encode_png, text_width
from cwctl.runtime import atomic
from cwctl.runtime.arrays import F64, U8
from cwctl.scan.pathreports import QUEUEING, PathReport
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.units import fmt_ns

IP = npt.NDArray[np.intp]

BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)
UNPROBED = (70, 70, 70)
DIAGONAL = (200, 200, 200)
LEAF_LINE = (150, 150, 150)
MARK = (230, 0, 200)  # suspects and the bad paths through them
LOSS_MIN = 0.001  # below this a path counts as lossless
SCALE_MIN_NS = 10.0  # the queueing scale's bottom (log scale)
SCALE_MAX_NS = 100_000.0  # its top by default: 100 us
# the queueing scale: dark blue -> teal -> green -> yellow
_STOPS = np.array([[13, 8, 135], [33, 145, 140], [94, 201, 98], [253, 231, 37]], np.float64)


def _natural(name: str) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def host_order(snapshot: FabricSnapshot) -> list[tuple[str, str]]:
    """(host, leaf) ordered by leaf then name; hosts without a leaf last."""
    hosts = [(h.name, h.leaf or "") for h in snapshot.hosts]
    return sorted(hosts, key=lambda hl: (hl[1] == "", _natural(hl[1]), _natural(hl[0])))


def cells(snapshot: FabricSnapshot, order: list[str]) -> tuple[IP, IP, F64, F64]:
    """The probed paths as cells: (row, column) in ``order``, median queueing ns (NaN
    unknown) and loss ratio, one entry per path (no n x n matrix: 10 000 hosts would
    make 800 MB of one)."""
    index = {h: i for i, h in enumerate(order)}
    rows, cols, excess, loss = [], [], [], []
    for p in snapshot.paths:
        i, j = index.get(p.src), index.get(p.dst)
        if i is None or j is None or not p.sent:
            continue
        rows.append(i)
        cols.append(j)
        loss.append(p.loss)
        lo, mid = p.owd_min_ns, p.owd_p50_ns
        ok = lo is not None and mid is not None and math.isfinite(lo) and math.isfinite(mid)
        excess.append(mid - lo if ok else math.nan)  # type: ignore[operator]
    return (
        np.array(rows, np.intp),
        np.array(cols, np.intp),
        np.array(excess, np.float64),
        np.array(loss, np.float64),
    )


def matrices(snapshot: FabricSnapshot, order: list[str]) -> tuple[F64, F64]:
    """(median queueing ns, loss ratio) per (src, dst) in ``order``; NaN: never probed."""
    n = len(order)
    excess, loss = np.full((n, n), np.nan), np.full((n, n), np.nan)
    i, j, queueing, lost = cells(snapshot, order)
    excess[i, j], loss[i, j] = queueing, lost
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


def scale_position(excess_ns: F64, max_ns: float = SCALE_MAX_NS) -> F64:
    """Where a queueing value sits on the fixed log scale: 0 at SCALE_MIN_NS (or below),
    1 at ``max_ns`` (or above)."""
    lo, hi = math.log10(SCALE_MIN_NS), math.log10(max(max_ns, SCALE_MIN_NS * 10))
    return np.clip((np.log10(np.maximum(excess_ns, SCALE_MIN_NS)) - lo) / (hi - lo), 0.0, 1.0)


def could_cross(
    element: str,
    kind: str,
    src_leaf: str | None,
    dst_leaf: str | None,
    src: str,
    dst: str,
    leaves: set[str],
) -> bool:
    """Can the path src -> dst cross ``element``, judging by the ends' leaves alone?"""
    if kind in ("host", "nic"):
        return element.split("/", 1)[0] in (src, dst)
    if element in leaves:  # a leaf switch
        return element in (src_leaf, dst_leaf)
    between = src_leaf is not None and dst_leaf is not None and src_leaf != dst_leaf
    if kind == "link":
        return between and bool({src_leaf, dst_leaf} & set(element.split("-")))
    return between  # a spine (or any switch above the leaves)


def _bad(p: PathReport, threshold_ns: float | None, typical_floor_ns: float | None) -> bool:
    """Lossy, queueing above the threshold, or slow: a floor raised above the typical
    floor of its kind of path by more than the threshold (a slow element adds delay
    without queueing, so neither loss nor queueing shows it)."""
    if p.sent and p.loss >= LOSS_MIN:
        return True
    if threshold_ns is None:
        return False
    excess = p.excess_ns
    if excess is not None and excess > threshold_ns:
        return True
    floor = p.owd_min_ns
    return (
        typical_floor_ns is not None
        and floor is not None
        and (floor > typical_floor_ns + threshold_ns)
    )


def _typical_floors(snapshot: FabricSnapshot, leaf: dict[str, str | None]) -> dict[bool, float]:
    """The median floor of paths within a leaf (True) and between leaves (False)."""
    floors: dict[bool, list[float]] = {True: [], False: []}
    for p in snapshot.paths:
        if p.owd_min_ns is not None and math.isfinite(p.owd_min_ns):
            floors[leaf.get(p.src) == leaf.get(p.dst)].append(p.owd_min_ns)
    return {k: float(np.median(v)) for k, v in floors.items() if v}


def suspect_paths(snapshot: FabricSnapshot) -> set[tuple[str, str]]:
    """The bad paths (lossy, queueing above the scan's threshold, or slow: ``_bad``) that
    can cross a suspect."""
    if not snapshot.suspects:
        return set()
    leaf = {h.name: h.leaf for h in snapshot.hosts}
    leaves = {x for x in leaf.values() if x}
    threshold = snapshot.telemetry.get("delay_threshold_ns")
    limit = float(threshold) if isinstance(threshold, int | float) else None
    typical = _typical_floors(snapshot, leaf)
    marked = set()
    for p in snapshot.paths:
        a, b = leaf.get(p.src), leaf.get(p.dst)
        if not _bad(p, limit, typical.get(a == b)):
            continue
        if any(could_cross(s.element, s.kind, a, b, p.src, p.dst, leaves)
               for s in snapshot.suspects):  # fmt: skip
            marked.add((p.src, p.dst))
    return marked


def suspect_hosts(snapshot: FabricSnapshot) -> set[str]:
    """Hosts at an end of a marked path, or named by a host/NIC suspect."""
    named = {s.element.split("/", 1)[0] for s in snapshot.suspects if s.kind in ("host", "nic")}
    ends = {h for pair in suspect_paths(snapshot) for h in pair}
    return (named | ends) & {h.name for h in snapshot.hosts}


@dataclass
class Picture:
    """The heatmap's pixels and where the grid sits: path (i, j) in ``order`` is the
    ``cell`` x ``cell`` square at (x0 + j * cell, y0 + i * cell)."""

    rgb: U8
    order: list[str]
    x0: int
    y0: int
    cell: int


def render_heatmap(
    snapshot: FabricSnapshot, *, max_side_px: int = 720, max_ns: float = SCALE_MAX_NS
) -> bytes:
    """The heatmap PNG of a snapshot (see the module docstring)."""
    return encode_png(draw_heatmap(snapshot, max_side_px=max_side_px, max_ns=max_ns).rgb)


LEAF_CELLS_BELOW = 6  # px: host cells smaller than this are unreadable; cells become leaves
HOST_CELL_MAX, LEAF_CELL_MAX = 16, 24  # px


def draw_heatmap(
    snapshot: FabricSnapshot, *, max_side_px: int = 720, max_ns: float = SCALE_MAX_NS
) -> Picture:
    """The heatmap's pixels (``render_heatmap`` encodes them). A cell is a host, or, when
    host cells would be under ``LEAF_CELLS_BELOW`` pixels (a fleet of hundreds), a leaf
    pair holding its worst path: 512 hosts are 64 x 64 leaves of 11 px, most of them
    probed, instead of 512 x 512 pixels mostly never probed."""
    placed = host_order(snapshot)
    hosts = [h for h, _ in placed]
    leaf_of = [leaf for _, leaf in placed]
    by_leaf = max_side_px // max(len(hosts), 1) < LEAF_CELLS_BELOW and len(set(leaf_of)) > 1
    if by_leaf:
        labels = list(dict.fromkeys(leaf_of))
        cell_of = {h: labels.index(leaf) for h, leaf in placed}
        leaves = labels
    else:
        labels, cell_of, leaves = hosts, {h: k for k, h in enumerate(hosts)}, leaf_of
    n = max(len(labels), 1)
    cell = int(max(1, min(LEAF_CELL_MAX if by_leaf else HOST_CELL_MAX, max_side_px // n)))
    label_w = max((text_width(leaf) for leaf in set(leaves) if leaf), default=0) + 8
    top, side = 34, 10
    grid = n * cell
    names = [f"{s.element} ({s.kind} {s.score:.2f})" for s in snapshot.suspects[:12]]
    legend_w = max(150, 24 + max((text_width(t) for t in names), default=0))
    width = label_w + grid + side + legend_w
    height = max(top + grid + side, top + 250 + 10 * len(names))
    img = np.empty((height, width, 3), np.uint8)
    img[:] = BACKGROUND
    _draw_cells(
        img[top : top + grid, label_w : label_w + grid], snapshot, hosts, cell_of, n, cell, max_ns
    )

    # leaf boundaries (between hosts of two leaves; every line when cells are leaves)
    for k in range(1, len(leaves)):
        if leaves[k] != leaves[k - 1] and not by_leaf:
            img[top + k * cell, label_w : label_w + grid] = LEAF_LINE
            img[top : top + grid, label_w + k * cell] = LEAF_LINE
    start = 0
    for k in range(1, len(leaves) + 1):
        if k == len(leaves) or leaves[k] != leaves[start]:
            if leaves[start]:
                mid = top + (start + k) * cell // 2 - GLYPH_H // 2
                draw_text(img, 2, mid, leaves[start], INK)
            start = k
    _mark_suspects(img, snapshot, cell_of, label_w, top, cell)

    per = "leaf pair (its worst path)" if by_leaf else "path"
    title = f"{QUEUEING} per {per}: rows send, columns receive"
    if snapshot.source == "sim" or snapshot.source.endswith(":sim"):
        title += " (simulated)"
    draw_text(img, 4, 4, title, INK)
    where = f"{len(hosts)} hosts on {len(labels)} leaves" if by_leaf else f"{len(hosts)} hosts"
    draw_text(img, 4, 16, f"{where} by leaf, red: lost probes", INK)
    _legend(img, label_w + grid + side, top, max_ns, names)
    return Picture(img, labels, label_w, top, cell)


def _draw_cells(
    grid: U8,
    snapshot: FabricSnapshot,
    hosts: list[str],
    cell_of: dict[str, int],
    n: int,
    cell: int,
    max_ns: float,
) -> None:
    """Each cell's colour into ``grid`` (its ``cell`` x ``cell`` squares), in place: the
    worst queueing and the worst loss of the paths it holds (one path per host cell)."""
    i, j, excess, loss = cells(snapshot, hosts)
    to_cell = np.array([cell_of[h] for h in hosts], np.intp)
    ci, cj = (to_cell[i], to_cell[j]) if i.size else (i, j)
    worst = np.full((n, n), -np.inf)
    np.maximum.at(worst, (ci, cj), np.where(np.isfinite(excess), excess, -np.inf))
    lost = np.full((n, n), -1.0)
    np.maximum.at(lost, (ci, cj), np.where(np.isfinite(loss), loss, -1.0))
    colors = grid if cell == 1 else np.empty((n, n, 3), np.uint8)  # at scale: no copy
    colors[:] = UNPROBED
    probed = np.isfinite(worst)
    colors[probed] = _colormap(scale_position(worst[probed], max_ns))
    lossy = lost >= LOSS_MIN
    colors[lossy] = _lossmap(lost[lossy])
    if n == len(hosts):  # host cells: a host to itself is not a path
        colors[np.arange(n), np.arange(n)] = DIAGONAL
    if cell > 1:
        grid[:] = np.repeat(np.repeat(colors, cell, axis=0), cell, axis=1)


def _mark_suspects(
    img: U8, snapshot: FabricSnapshot, index: dict[str, int], x0: int, y0: int, cell: int
) -> None:
    """Ticks beside the rows and above the columns of the suspects' hosts (their cells);
    a frame around each cell holding a bad path that can cross a suspect (a dot when
    cells are tiny)."""
    for host in suspect_hosts(snapshot):
        k = index[host]
        img[y0 + k * cell : y0 + (k + 1) * cell, x0 - 5 : x0 - 1] = MARK  # row tick
        img[y0 - 5 : y0 - 1, x0 + k * cell : x0 + (k + 1) * cell] = MARK  # column tick
    for src, dst in suspect_paths(snapshot):
        i, j = index.get(src), index.get(dst)
        if i is None or j is None:
            continue
        y, x = y0 + i * cell, x0 + j * cell
        if cell >= 4:
            img[y, x : x + cell] = MARK
            img[y + cell - 1, x : x + cell] = MARK
            img[y : y + cell, x] = MARK
            img[y : y + cell, x + cell - 1] = MARK
        else:
            img[y + cell // 2, x + cell // 2] = MARK


def _legend(img: U8, x: int, y: int, max_ns: float, suspects: list[str]) -> None:
    bar_h, bar_w = 100, 14
    ramp = np.linspace(1, 0, bar_h)
    img[y : y + bar_h, x : x + bar_w] = _colormap(ramp)[:, None, :]
    # a tick per decade on the fixed log scale, the ends labelled with their values
    lo, hi = math.log10(SCALE_MIN_NS), math.log10(max(max_ns, SCALE_MIN_NS * 10))
    ticks = [SCALE_MIN_NS * 10**k for k in range(int(hi - lo) + 1)]
    if ticks[-1] < max_ns * 0.999:
        ticks.append(max_ns)
    for value in ticks:
        ty = y + round((1 - (math.log10(value) - lo) / (hi - lo)) * (bar_h - 1))
        img[ty, x + bar_w : x + bar_w + 3] = INK
        draw_text(img, x + bar_w + 5, min(max(ty - GLYPH_H // 2, y), y + bar_h - GLYPH_H),
                  (">" if value == ticks[-1] else "<" if value == ticks[0] else "") + fmt_ns(value),
                  INK)  # fmt: skip
    draw_text(img, x, y + bar_h + 3, "queueing p50, log scale", INK)
    y2 = y + bar_h + 16
    loss_ramp = 10 ** np.linspace(0, -3, 40)
    img[y2 : y2 + 40, x : x + bar_w] = _lossmap(loss_ramp)[:, None, :]
    draw_text(img, x + bar_w + 4, y2, "100% loss", INK)
    draw_text(img, x + bar_w + 4, y2 + 40 - GLYPH_H, "0.1%", INK)
    y3 = y2 + 50
    img[y3 : y3 + 10, x : x + bar_w] = UNPROBED
    draw_text(img, x + bar_w + 4, y3 + 1, "not probed", INK)
    y4 = y3 + 20
    if not suspects:
        draw_text(img, x, y4, "no suspects", INK)
        return
    img[y4 : y4 + 10, x : x + 2] = MARK
    img[y4 : y4 + 10, x + bar_w - 2 : x + bar_w] = MARK
    img[y4, x : x + bar_w] = MARK
    img[y4 + 9, x : x + bar_w] = MARK
    draw_text(img, x + bar_w + 4, y4 + 1, "suspect paths", MARK)
    for k, name in enumerate(suspects):
        draw_text(img, x, y4 + 16 + 10 * k, name, MARK)


def write_heatmap(snapshot: FabricSnapshot, path: Path, *, max_ns: float = SCALE_MAX_NS) -> None:
    """Render and write the PNG safely (``cwctl.runtime.atomic``: new files 0644)."""
    data = render_heatmap(snapshot, max_ns=max_ns)
    try:
        atomic.write_bytes(path, data, option="--heatmap")
    except OSError as exc:
        raise InputError(f"--heatmap: cannot write {path}: {exc.strerror}") from None
