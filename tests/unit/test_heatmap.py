"""The heatmap PNG: a fixed, documented colour scale (pictures compare across runs), the
--heatmap-max override, and the suspects with the bad paths that can cross them marked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.report.heatmap import MARK, Picture, could_cross, draw_heatmap
from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport, Suspect

HOSTS = [f"gpu-00{i}" for i in range(1, 9)]
LEAF = {h: ("leaf1" if i < 4 else "leaf2") for i, h in enumerate(HOSTS)}


def _snap(
    excess: dict[tuple[str, str], float] | None = None,
    loss: dict[tuple[str, str], float] | None = None,
    suspects: list[Suspect] | None = None,
    floor: dict[tuple[str, str], float] | None = None,
) -> FabricSnapshot:
    excess, loss, floor = excess or {}, loss or {}, floor or {}
    paths = []
    for a in HOSTS:
        for b in HOSTS:
            if a == b:
                continue
            q = excess.get((a, b), 100.0)
            got = round(100 * (1 - loss.get((a, b), 0.0)))
            lo = floor.get((a, b), 5_000.0)
            paths.append(PathReport(a, b, 100, got, lo, lo + q, lo + q))
    return FabricSnapshot(
        source="ssh",
        reference="gpu-001",
        duration_s=1.0,
        hosts=[HostReport(h, leaf=LEAF[h]) for h in HOSTS],
        paths=paths,
        suspects=suspects or [],
        telemetry={"delay_threshold_ns": 2_000.0},
    )


def _cell(pic: Picture, src: str, dst: str, dx: int = -1, dy: int = -1) -> tuple[int, ...]:
    """A pixel of the cell of src -> dst: its centre unless told (dx, dy from its corner)."""
    i, j = pic.order.index(src), pic.order.index(dst)
    x = pic.x0 + j * pic.cell + (pic.cell // 2 if dx < 0 else dx)
    y = pic.y0 + i * pic.cell + (pic.cell // 2 if dy < 0 else dy)
    return tuple(int(v) for v in pic.rgb[y, x])


def test_the_scale_is_fixed_not_set_by_each_run() -> None:
    one = _snap(excess={("gpu-001", "gpu-005"): 1_000.0})
    other = _snap(excess={("gpu-001", "gpu-005"): 1_000.0, ("gpu-002", "gpu-006"): 50_000.0})
    a, b = draw_heatmap(one), draw_heatmap(other)
    assert _cell(a, "gpu-001", "gpu-005") == _cell(b, "gpu-001", "gpu-005")
    # documented scale: log from 10 ns to 100 us over four stops; 1 us sits halfway up,
    # i.e. halfway between the 2nd (33,145,140) and 3rd (94,201,98) stops
    assert _cell(a, "gpu-001", "gpu-005") == (63, 173, 119)
    assert _cell(b, "gpu-002", "gpu-006") != _cell(a, "gpu-002", "gpu-006")


def test_the_ends_of_the_scale_and_the_override() -> None:
    snap = _snap(excess={("gpu-001", "gpu-005"): 5.0, ("gpu-002", "gpu-006"): 1e6})
    pic = draw_heatmap(snap)
    assert _cell(pic, "gpu-001", "gpu-005") == (13, 8, 135)  # at or below 10 ns: the bottom
    assert _cell(pic, "gpu-002", "gpu-006") == (253, 231, 37)  # beyond 100 us: the top
    wider = draw_heatmap(snap, max_ns=1e7)  # --heatmap-max 10ms: 1 ms is no longer the top
    assert _cell(wider, "gpu-002", "gpu-006") != (253, 231, 37)
    assert _cell(wider, "gpu-001", "gpu-005") == (13, 8, 135)


def test_suspects_and_the_bad_paths_through_them_are_marked() -> None:
    snap = _snap(
        loss={("gpu-001", "gpu-005"): 0.5, ("gpu-001", "gpu-002"): 0.5},
        excess={("gpu-003", "gpu-007"): 9_000.0},  # queueing above the 2 us threshold
        suspects=[Suspect("spine1", "switch", 0.9, "loses probes")],
    )
    pic = draw_heatmap(snap)
    assert _cell(pic, "gpu-001", "gpu-005", 0, 0) == MARK  # inter-leaf and lossy: framed
    assert _cell(pic, "gpu-003", "gpu-007", 0, 0) == MARK  # inter-leaf and delayed: framed
    assert _cell(pic, "gpu-001", "gpu-002", 0, 0) != MARK  # lossy but within a leaf
    assert _cell(pic, "gpu-004", "gpu-008", 0, 0) != MARK  # crosses leaves but healthy
    ticks = {h: tuple(int(v) for v in pic.rgb[pic.y0 + k * pic.cell + 1, pic.x0 - 3])
             for k, h in enumerate(pic.order)}  # fmt: skip
    assert ticks["gpu-001"] == MARK and ticks["gpu-003"] == MARK
    assert ticks["gpu-002"] != MARK  # an end of no marked path
    healthy = draw_heatmap(_snap(loss={("gpu-001", "gpu-005"): 0.5}))
    assert not (healthy.rgb == np.array(MARK, np.uint8)).all(axis=2).any()  # no suspects


def test_slow_paths_through_a_suspect_are_marked_too() -> None:
    """A slow element raises floors without queueing or loss: framed all the same."""
    snap = _snap(
        floor={("gpu-001", "gpu-005"): 9_000.0, ("gpu-002", "gpu-001"): 9_000.0},
        suspects=[Suspect("leaf1-spine1", "link", 0.9, "slow: raised floors")],
    )
    pic = draw_heatmap(snap)
    assert _cell(pic, "gpu-001", "gpu-005", 0, 0) == MARK  # 4 us above the typical floor
    assert _cell(pic, "gpu-002", "gpu-001", 0, 0) != MARK  # slow, but cannot cross the link
    assert _cell(pic, "gpu-003", "gpu-006", 0, 0) != MARK  # crosses it, floor normal


@pytest.mark.parametrize(
    ("element", "kind", "src", "dst", "expected"),
    [
        ("gpu-001", "host", "gpu-001", "gpu-002", True),
        ("gpu-001/mlx5_0", "nic", "gpu-003", "gpu-001", True),
        ("gpu-001", "host", "gpu-002", "gpu-003", False),
        ("leaf1", "switch", "gpu-002", "gpu-003", True),
        ("leaf1", "switch", "gpu-005", "gpu-006", False),
        ("spine1", "switch", "gpu-001", "gpu-005", True),
        ("spine1", "switch", "gpu-001", "gpu-002", False),
        ("leaf2-spine1", "link", "gpu-001", "gpu-005", True),
        ("leaf2-spine1", "link", "gpu-005", "gpu-006", False),
        ("leaf3-spine1", "link", "gpu-001", "gpu-005", False),
    ],
)
def test_which_paths_can_cross_an_element(
    element: str, kind: str, src: str, dst: str, expected: bool
) -> None:
    leaves = {"leaf1", "leaf2", "leaf3"}
    assert could_cross(element, kind, LEAF[src], LEAF[dst], src, dst, leaves) is expected


def test_cli_heatmap_max(tmp_path: Path) -> None:
    base = ["scan", "--sim", "--hosts", "8", "--duration", "0.2"]
    bad = CliRunner().invoke(app, [*base, "--heatmap", str(tmp_path / "a.png"),
                                   "--heatmap-max", "10 parsecs"])  # fmt: skip
    assert bad.exit_code == 2 and "--heatmap-max" in bad.output
    assert not (tmp_path / "a.png").exists()
    good = CliRunner().invoke(app, [*base, "--heatmap", str(tmp_path / "b.png"),
                                    "--heatmap-max", "2ms"])  # fmt: skip
    assert good.exit_code in (0, 3), good.output
    assert (tmp_path / "b.png").read_bytes().startswith(b"\x89PNG")


def test_a_fabric_wider_than_the_picture_gets_one_pixel_a_path() -> None:
    """Past 720 hosts a cell is one pixel, coloured in place (no n x n matrices): each
    probed path its colour, unprobed grey, the diagonal light grey."""
    from cwctl.report.heatmap import DIAGONAL, UNPROBED

    hosts = [f"h{i:04d}" for i in range(800)]
    paths = [PathReport(a, b, 100, 100, 1_000.0, 2_000.0, 2_000.0)  # 1 us: mid-scale
             for k, a in enumerate(hosts) for b in hosts[k + 1 : k + 3]]  # fmt: skip
    paths.append(PathReport(hosts[5], hosts[0], 100, 50, 1_000.0, 1_000.0, 1_000.0))  # lossy
    snap = FabricSnapshot("ssh", hosts[0], 1.0, [HostReport(h) for h in hosts], paths)
    pic = draw_heatmap(snap)
    assert pic.cell == 1 and pic.rgb.shape[0] >= 800
    assert _cell(pic, hosts[10], hosts[11]) == (63, 173, 119)  # as test_the_scale_is_fixed
    assert _cell(pic, hosts[11], hosts[10]) == UNPROBED
    assert _cell(pic, hosts[7], hosts[7]) == DIAGONAL
    red = _cell(pic, hosts[5], hosts[0])
    assert red[0] > 150 and red[1] < 100  # 50 % loss: a dark red


def test_png_rows_compressed_in_blocks_are_one_deflate_stream() -> None:
    import zlib

    from cwctl.report.png import encode_png

    rgb = np.random.default_rng(1).integers(0, 256, (2500, 700, 3), np.uint8)  # two blocks
    raw = np.zeros((2500, 1 + 3 * 700), np.uint8)
    raw[:, 1:] = rgb.reshape(2500, -1)
    data = encode_png(rgb)
    assert zlib.compress(raw.tobytes(), 6) in data  # the one-shot stream, byte for byte


def test_512_hosts_draw_leaf_cells_mostly_probed_and_a_lossy_link_shows() -> None:
    """Host cells at 512 hosts were 1 px, 98 % never probed: now a leaf pair per 11 px
    cell holds its worst path, and a 5 % lossy leaf1-spine2 paints leaf1's row and column."""
    import asyncio

    from cwctl.report.heatmap import UNPROBED
    from cwctl.scan.request import ScanRequest, SimOptions
    from cwctl.session import scan

    faults = ("link:leaf1-spine2:lossy=0.05",)
    snap = asyncio.run(scan(ScanRequest(sim=SimOptions(hosts=512, faults=faults), duration_s=0.5)))
    pic = draw_heatmap(snap)
    n, c = len(pic.order), pic.cell
    assert pic.order[:2] == ["leaf1", "leaf2"] and n == 64 and c >= 10
    centres = pic.rgb[pic.y0 + c // 2 : pic.y0 + n * c : c, pic.x0 + c // 2 : pic.x0 + n * c : c]
    grey = (centres == np.array(UNPROBED)).all(axis=2)
    assert grey.mean() < 0.4, grey.mean()
    red = (centres[..., 0] > 150) & (centres[..., 1] < 190) & (centres[..., 2] < 160)
    leaf1 = red[0, :].sum() + red[:, 0].sum()
    others = red[1:, 1:].sum()
    assert leaf1 >= 20 and others <= leaf1 / 4, (leaf1, others)
