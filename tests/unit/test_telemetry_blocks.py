"""Telemetry a block of pairs at a time reports what one pass reports: the same paths,
flows, counts, suspects and figures (seeded faulty fabrics; blocks forced small)."""

from __future__ import annotations

from typing import Any

import pytest

import cwctl.telemetry.blockwise as blockwise
from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.session import analyse
from cwctl.transport.sim import simulate

RATE_100 = ProbeOverrides(rate=100.0)

FAULTS = (
    ("link:leaf2-spine3:lossy=0.05", "switch:spine2:congested"),
    ("host:gpu-007:lossy=0.3",),
    (),
)


def _report(faults: tuple[str, ...], block_rows: int | None, monkeypatch: Any) -> dict:
    options = SimOptions(hosts=40, hosts_per_leaf=8, seed=5, faults=faults)
    # rate 100: a second of probing with rows enough for seven blocks
    collection = simulate(duration_s=1.0, request=ScanRequest(sim=options, overrides=RATE_100))
    if block_rows is not None:
        monkeypatch.setattr(blockwise, "BLOCK_ROWS", block_rows)
    report = analyse(collection).to_json()
    report["sync"] = {}  # the clocks are the solver's business (and timed)
    return report


@pytest.mark.parametrize("faults", FAULTS)
def test_blocks_report_what_one_pass_reports(
    faults: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _report(faults, None, monkeypatch)
    blocks = _report(faults, 12_000, monkeypatch)  # about seven blocks of pairs
    assert whole["records"] > 5 * 12_000
    # equal but for the last bits of interpolated quantiles (summed in another layout)
    assert [s["element"] for s in blocks["suspects"]] == [s["element"] for s in whole["suspects"]]
    for key in ("paths", "telemetry", "suspects", "hosts"):
        assert close(blocks[key], whole[key]), key
    assert close(blocks, whole)


def close(a: Any, b: Any, rel: float = 1e-6) -> bool:
    """Equal structures whose floats agree to ``rel`` (NaN/None alike)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=rel, abs=1e-9)
    return bool(a == b)


def test_a_released_collection_reports_the_same_and_gives_up_its_rows_and_paths() -> None:
    options = SimOptions(hosts=32, hosts_per_leaf=8, seed=3, faults=("switch:spine2:congested",))
    kept = simulate(options)
    given = simulate(options)  # the same seed: the same records
    assert len(given.paths) > 0 and len(given.table) > 0
    whole = analyse(kept).to_json()
    released = analyse(given, release=True).to_json()
    for report in (whole, released):
        report["sync"] = {}  # timed
    assert released == whole and whole["suspects"]
    assert len(given.table) == 0 and len(given.paths) == 0  # handed over, gone
    assert len(kept.table) > 0 and len(kept.paths) > 0  # not handed over: kept
