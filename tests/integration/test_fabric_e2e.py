"""cwctl end to end on the namespace testbed: scan, localise, reroute, roll back.

The testbed (tests/testbed/) is the ground truth: its faults are real tc queues on one
direction of a link, its ECMP is the kernel's. cwctl runs as an operator runs it (the
``cwctl`` program, in a subprocess, against the inventory the testbed wrote), so what
is tested is the product, SSH and all. One testbed for the module; faults are switched
between tests (the ``fabric`` fixture clears them before and after each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.testbed import layout as L
from tests.testbed.bed import Testbed

pytestmark = pytest.mark.netns
CWCTL = [sys.executable, "-m", "cwctl.cli"]
SCAN_S = "2"


def cwctl(bed: Testbed, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CWCTL_INVENTORY": str(bed.inventory)}
    return subprocess.run([*CWCTL, *args], capture_output=True, text=True, timeout=timeout, env=env)


def scan(bed: Testbed) -> tuple[int, dict[str, Any], str]:
    proc = cwctl(bed, "scan", "--duration", SCAN_S, "--format", "json")
    assert proc.stdout, f"no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_inventory_check_reads_what_the_testbed_wrote(testbed: Testbed) -> None:
    proc = cwctl(testbed, "inventory", "check")
    assert proc.returncode == 0, proc.stderr
    assert "8 hosts, 4 switches (2 leaves, 2 spines)" in proc.stdout


def test_healthy_fabric_scans_clean(fabric: Testbed) -> None:
    rc, report, err = scan(fabric)
    hosts = {h["name"]: h for h in report["hosts"]}
    assert sorted(hosts) == list(L.HOSTS)
    assert {h["status"] for h in hosts.values()} == {"ok"}, err
    # one kernel clock under every namespace: the true offsets are all zero
    worst = max(abs(h["offset_ns"]) for h in hosts.values())
    assert worst < 2000.0, {n: h["offset_ns"] for n, h in hosts.items()}
    assert report["suspects"] == []
    assert rc == 0, err
