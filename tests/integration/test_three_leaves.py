"""On three leaves a broken leaf-spine link direction is named by itself.

With two leaves every flow up leaf1>spineS comes down spineS>leaf2, so a one-way fault
there disturbs the same flows as one on spineS or its other link, and the localiser can
only answer with that candidate set (docs/testbed.md). A third leaf breaks the tie: the
tally on 3 leaves named the link top-1 in 30 of 30 faulty scans. This test breaks one
direction of one link on the real namespace fabric, scans once with cwctl as an
operator would, and asserts the top suspect is that link (or a set holding it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault

pytestmark = pytest.mark.netns
TESTBED_LEAVES = 3


def test_a_one_way_down_leaf_spine_link_is_the_top_suspect(fabric: Testbed) -> None:
    assert len(L.LEAVES) == 3 and len(L.HOSTS) == 12
    apply_fault(fabric, "spine2>leaf1", "down")
    env = {**os.environ, "CWCTL_INVENTORY": str(fabric.inventory)}
    proc = subprocess.run(
        [sys.executable, "-m", "cwctl.cli", "scan", "--duration", "2", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert proc.stdout, f"no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    report = json.loads(proc.stdout)
    assert sorted(h["name"] for h in report["hosts"]) == list(L.HOSTS)
    assert report["suspects"], proc.stderr[-2000:]
    top = report["suspects"][0]
    named = top["element"] == "leaf1-spine2" or "leaf1-spine2" in (top.get("candidates") or ())
    assert named, report["suspects"][:3]
    assert proc.returncode == 3, proc.stderr[-500:]
