"""A job's step-time timeline as a PNG (cwctl.report.png: numpy and zlib, no plotting
library): one dot per step of rank 0, step seconds on a log scale (10 ms to 100 s)
against seconds from the fault, the healthy step time as a grey line, and the marks
(fault, acted, clear) as labelled vertical lines."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from cwctl.report.png import GLYPH_H, draw_text, encode_png
from cwctl.runtime import atomic
from tests.testbed.trainjob import Timeline

W, H, PAD = 900, 300, 40
LOW_S, HIGH_S = 0.01, 100.0  # the y scale
BEFORE_S, AFTER_S = 10.0, 110.0  # the x range, seconds from the fault
INK, GREY, DOT, MARK = (0, 0, 0), (170, 170, 170), (30, 90, 200), (200, 40, 40)


def _x(t: float) -> int:
    return PAD + round((t + BEFORE_S) / (BEFORE_S + AFTER_S) * (W - 2 * PAD))


def _y(s: float) -> int:
    frac = (math.log10(max(LOW_S, min(HIGH_S, s))) - math.log10(LOW_S)) / math.log10(HIGH_S / LOW_S)
    return H - PAD - round(frac * (H - 2 * PAD))


def write_timeline(
    path: Path, timeline: Timeline, marks: list[tuple[float, str]], title: str
) -> None:
    img = np.full((H, W, 3), 255, np.uint8)
    img[PAD : H - PAD, PAD] = INK
    img[H - PAD, PAD : W - PAD] = INK
    for s in (0.01, 0.1, 1.0, 10.0, 100.0):
        draw_text(img, 2, _y(s) - GLYPH_H // 2, f"{s:g}s", INK)
    for t in range(0, int(AFTER_S) + 1, 20):
        draw_text(img, _x(t) - 6, H - PAD + 6, f"{t}", INK)
    img[_y(timeline.healthy_s), PAD : W - PAD] = GREY
    for t, label in marks:
        x = _x(t)
        if PAD <= x < W - PAD:
            img[PAD : H - PAD, x] = MARK
            draw_text(img, x + 3, PAD + 2, label, MARK)
    for t, dt in timeline.steps:
        if -BEFORE_S <= t <= AFTER_S:
            x, y = _x(t), _y(dt)
            img[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2] = DOT
    draw_text(img, PAD, 10, f"{title}: step seconds (rank 0) against seconds from the fault", INK)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(path, encode_png(img))
