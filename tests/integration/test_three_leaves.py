"""On three leaves a broken leaf-spine link direction is named by itself.

With two leaves every flow up leaf1>spineS comes down spineS>leaf2, so a one-way fault
there disturbs the same flows as one on spineS or its other link, and the localiser can
only answer with that candidate set (docs/testbed.md). A third leaf breaks the tie: the
tally on 3 leaves named the link top-1 in 30 of 30 faulty scans. This test breaks one
direction of one link on the real namespace fabric, scans once with cwctl as an
operator would, and asserts the top suspect is that link (or a set holding it).

Accuracy under load: every namespace shares the one kernel clock, so every host's true
offset is 0. A congested leaf-spine direction (a standing ~15 ms queue) must move no
clock: every host has clean paths over the other spine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault

pytestmark = pytest.mark.netns
TESTBED_LEAVES = 3


def _scan(
    fabric: Testbed, state: Path, *extra: str
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """One scan as an operator runs it (the inventory's rate 100 pairs/s, 2 s)."""
    env = {**os.environ, "CWCTL_INVENTORY": str(fabric.inventory), "CWCTL_STATE_DIR": str(state)}
    proc = subprocess.run(
        [sys.executable, "-m", "cwctl.cli", "scan", "--duration", "2", "--format", "json", *extra],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert proc.stdout, f"no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout), proc


def test_a_one_way_down_leaf_spine_link_is_the_top_suspect(fabric: Testbed, tmp_path: Path) -> None:
    assert len(L.LEAVES) == 3 and len(L.HOSTS) == 12
    apply_fault(fabric, "spine2>leaf1", "down")
    report, proc = _scan(fabric, tmp_path)
    assert sorted(h["name"] for h in report["hosts"]) == list(L.HOSTS)
    assert report["suspects"], proc.stderr[-2000:]
    top = report["suspects"][0]
    named = top["element"] == "leaf1-spine2" or "leaf1-spine2" in (top.get("candidates") or ())
    assert named, report["suspects"][:3]
    assert proc.returncode == 3, proc.stderr[-500:]


@pytest.mark.quiet
def test_a_congested_leaf_spine_direction_moves_no_clock(fabric: Testbed, tmp_path: Path) -> None:
    """Before the floor weighing (sync/floors.py) one scan in about ten had a pair whose
    every leg up leaf1>spine2 queued: hosts 38 us to 1.8 ms off, error bars of ms. Then,
    on kernel stamps beside the saturating flow, 33 scans on a 2-core machine: p99 error
    41-234 ns, a third over 100 ns: a sparse tail of legs faster than the dense edge on
    one direction of a pair. Measured at the dense edge (sync/margin.py, FAST_TAIL_RATIO):
    41 saved scans replayed, p99 10-98 ns (the worst beside two busy test workers).

    What is left is mostly a leaf's hosts off together. A leg's delay here is CPU time
    (a veth hands the packet on within the sender's CPU, through every namespace on the
    way), and in the worst scans one spine's path took 50-140 ns longer one way between
    two leaves than the other, on one clock: any two-way exchange reads that as an
    offset. Beside three test workers on 2 cores this test read 157 ns once, so it runs
    alone (`quiet`), and on failure says how much of the error is per leaf."""
    apply_fault(fabric, "leaf1>spine2", "congested")
    records = tmp_path / "congested.records.gz"
    report, proc = _scan(fabric, tmp_path, "--save-records", str(records))
    assert sorted(h["name"] for h in report["hosts"]) == list(L.HOSTS)
    # the queue was there: some flows up leaf1>spine2 waited milliseconds
    assert max(p["owd_p99_ns"] for p in report["paths"]) > 5e6, proc.stderr[-500:]
    offsets = {h["name"]: h["offset_ns"] for h in report["hosts"]}
    assert all(o is not None for o in offsets.values()), offsets
    error = np.abs(np.array(list(offsets.values())))  # the truth is 0 on one kernel clock
    by_leaf = {
        leaf: round(float(np.mean([offsets[h] for h in L.hosts_of(leaf)]))) for leaf in L.LEAVES
    }
    why = f"offsets {offsets}; mean per leaf {by_leaf}; records {records}"
    assert error.max() <= 1_000.0, why
    # 2026-12-06, this test alone on this machine: 023aea3 (before this round's changes)
    # and main each passed twice and failed twice at p99 ~200 ns (leaf means 0/71/162 ns:
    # the per-leaf path asymmetry above), where 7-60 ns had been read alone before. The
    # bound is where one kernel's CPU-time asymmetry leaves it, not the solver's figure
    # (bench faultclocks, docs/sync.md, holds that)
    assert np.percentile(error, 99) <= 250.0, why
