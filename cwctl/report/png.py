"""A minimal PNG writer (RGB, 8 bit) and a 5x7 bitmap font: numpy and zlib, nothing else.

Enough for the heatmap: ``encode_png(rgb)`` turns an (h, w, 3) uint8 array into PNG
bytes; ``draw_text(img, x, y, text, color)`` stamps text in a tiny fixed font (digits,
lowercase letters and the few symbols the legends use; anything else draws as a box).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import U8


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(rgb: U8) -> bytes:
    """PNG bytes of an (h, w, 3) uint8 image (filter type 0 on every row)."""
    img = np.ascontiguousarray(rgb, np.uint8)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError("encode_png wants an (h, w, 3) uint8 array")
    h, w, _ = img.shape
    # compressed a block of rows at a time (deflate's output does not depend on how its
    # input is cut): a 10 000-host heatmap is 300 MB of pixels, not to be copied twice
    deflate = zlib.compressobj(6)
    rows = max(1, (4 << 20) // (1 + 3 * w))
    idat = []
    for top in range(0, h, rows):
        block = img[top : top + rows]
        raw = np.zeros((len(block), 1 + 3 * w), np.uint8)  # a leading 0 (no filter) per row
        raw[:, 1:] = block.reshape(len(block), 3 * w)
        idat.append(deflate.compress(raw.data))
    idat.append(deflate.flush())
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", b"".join(idat))
        + _chunk(b"IEND", b"")
    )


def decode_png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header (for tests and sanity checks)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    w, h = struct.unpack(">II", data[16:24])
    return int(w), int(h)


# 5x7 glyphs, one string of 7 rows of 5 bits each ("#" on)
_FONT_ROWS = {
    "0": ".###.#...##..###.#.###..##...#.###.",
    "1": "..#...##....#....#....#....#...###.",
    "2": ".###.#...#....#...#...#...#...#####",
    "3": "#####...#...#.....#.....##...#.###.",
    "4": "...#...##..#.#.#..#.#####...#....#.",
    "5": "#####.....####.....#....##...#.###.",
    "6": "..##..#...#....####.#...##...#.###.",
    "7": "#####....#...#...#...#....#....#...",
    "8": ".###.#...##...#.###.#...##...#.###.",
    "9": ".###.#...##...#.####....#...#..##..",
    "a": "...........###.....#.#####...#.####",
    "b": "#....#....#.##.##..##...##...#####.",
    "c": "...........###.#....#....#...#.###.",
    "d": "....#....#.##.##..###...##...#.####",
    "e": "...........###.#...#######.....###.",
    "f": "..##..#..#.#...###...#....#....#...",
    "g": "......#####...##...#.####....#.###.",
    "h": "#....#....#.##.##..##...##...##...#",
    "i": "..#........##....#....#....#...###.",
    "j": "...#.......##....#....#.#..#..##...",
    "k": "#....#....#..#.#.#..##...#.#..#..#.",
    "l": ".##....#....#....#....#....#...###.",
    "m": "..........##.#.#.#.##.#.##...##...#",
    "n": "..........#.##.##..##...##...##...#",
    "o": "...........###.#...##...##...#.###.",
    "p": "..........####.#...#####.#....#....",
    "q": "......#####...##...#.####....#....#",
    "r": "..........#.##.##...#....#....#....",
    "s": "...........###.#.....###......####.",
    "t": ".#....#...###...#....#....#..#..##.",
    "u": "..........#...##...##...##..##.##.#",
    "v": "..........#...##...##...#.#.#...#..",
    "w": "..........#...##...##.#.##.#.#.#.#.",
    "x": "..........#...#.#.#...#...#.#.#...#",
    "y": "..........#...##...#.####....#.###.",
    "z": "..........#####...#...#...#...#####",
    ".": "..............................##...",
    ",": ".........................##...#..#.",
    ":": ".....##...##.........##...##.......",
    "-": "...............#####...............",
    "+": ".......#....#..#####..#....#.......",
    "%": "##...##..#...#...#...#...#..##...##",
    "/": ".........#...#...#...#...#.........",
    "(": "...#...#...#....#....#.....#.....#.",
    ")": ".#.....#.....#....#....#...#...#...",
    ">": ".#.....#.....#.....#...#...#...#...",
    "<": "...#...#...#...#.....#.....#.....#.",
    "=": "..........#####.....#####..........",
    "µ": "..........#...##...##...###..##.#..",
    " ": "...................................",
}
GLYPH_W, GLYPH_H = 5, 7


def _glyph(ch: str) -> npt.NDArray[np.bool_]:
    rows = _FONT_ROWS.get(ch.lower())
    if rows is None or len(rows) < 35:
        box = np.ones((GLYPH_H, GLYPH_W), bool)
        box[1:-1, 1:-1] = False
        return box
    return np.array([c == "#" for c in rows[:35]]).reshape(GLYPH_H, GLYPH_W)


def draw_text(img: U8, x: int, y: int, text: str, color: tuple[int, int, int]) -> int:
    """Stamp ``text`` with its top-left at (x, y); clipped at the edges. Returns the end x."""
    h, w, _ = img.shape
    for ch in text:
        g = _glyph(ch)
        ys, xs = np.nonzero(g)
        ys, xs = ys + y, xs + x
        ok = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
        img[ys[ok], xs[ok]] = color
        x += GLYPH_W + 1
    return x


def text_width(text: str) -> int:
    return len(text) * (GLYPH_W + 1)
