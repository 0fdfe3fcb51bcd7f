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
import time
from pathlib import Path
from typing import Any

import pytest

from cwctl.actions.journal import FAILPOINT_ENV
from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault, crosses, flow_path
from tests.testbed.shell import run
from tests.testbed.tally import names

pytestmark = pytest.mark.netns
CWCTL = [sys.executable, "-m", "cwctl.cli"]
SCAN_S = "2"


def cwctl(bed: Testbed, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CWCTL_INVENTORY": str(bed.inventory)}
    return subprocess.run([*CWCTL, *args], capture_output=True, text=True, timeout=timeout, env=env)


def scan(bed: Testbed) -> tuple[int, dict[str, Any], str]:
    """Exit code, report, and a line saying why it is not healthy (for failure messages)."""
    proc = cwctl(bed, "scan", "--duration", SCAN_S, "--format", "json")
    assert proc.stdout, f"no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    report = json.loads(proc.stdout)
    why = {
        "stderr": proc.stderr[-500:],
        "not ok": [(h["name"], h["status"]) for h in report["hosts"] if h["status"] != "ok"],
        "suspects": report["suspects"][:3],
        "unlocalised": report.get("unlocalised"),
        "busy_exchanges": report.get("telemetry", {}).get("busy_exchanges"),
    }
    return proc.returncode, report, json.dumps(why)


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
    # and it really looked: every ordered pair measured, flows localised over (not all
    # left out as "busy")
    assert len({(p["src"], p["dst"]) for p in report["paths"]}) == 8 * 7
    assert report["telemetry"]["flows"] > 0, err


# -- switch-side reroute ------------------------------------------------------------------
SWITCHES = (*L.SPINES, *L.LEAVES)


def switch_routes(bed: Testbed) -> dict[str, str]:
    return {s: run(["ip", "route", "show"], ns=bed.ns(s)).stdout for s in SWITCHES}


def sample_flows(bed: Testbed) -> list[tuple[str, str, int, list[str]]]:
    """Cross-leaf flows (both ways) and the nodes the kernel sends each over."""
    pairs = [("gpu-001", "gpu-005"), ("gpu-006", "gpu-002"), ("gpu-003", "gpu-008")]
    return [
        (a, b, sport, flow_path(bed, a, b, sport, 50000))
        for a, b in pairs
        for sport in range(40000, 40012)
    ]


def over(flows: list[tuple[str, str, int, list[str]]], src: str, dst: str) -> list[Any]:
    return [f for f in flows if crosses(f[3], src, dst)]


def test_a_kill_in_the_middle_of_the_apply_leaves_a_journal_rollback_restores(
    fabric: Testbed,
) -> None:
    before = switch_routes(fabric)
    env = {
        **os.environ,
        "CWCTL_INVENTORY": str(fabric.inventory),
        # the plan: on leaf1 then leaf2, the routes kept for the probes and their rule
        # (steps 1-4), then leaf1's and leaf2's routes changed (steps 5, 6). Stop just
        # before the 13th journal line: intent, steps 1-5 started + ok, step 6 started;
        # step 6 has run on leaf2 but its outcome is not written
        FAILPOINT_ENV: "journal:13",
    }
    proc = subprocess.Popen(
        [*CWCTL, "reroute", "spine2", "--apply", "--yes"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while proc.poll() is None and _state(proc.pid) != "T":
            time.sleep(0.02)
        assert proc.poll() is None, "cwctl finished instead of stopping at the failpoint"
        changed = switch_routes(fabric)
        assert changed["leaf1"] != before["leaf1"] and changed["leaf2"] != before["leaf2"]
    finally:
        proc.kill()
        proc.wait()
    journal = Path(os.environ["CWCTL_STATE_DIR"]) / "journal.jsonl"
    events = [json.loads(line).get("event") for line in journal.read_text().splitlines()]
    assert "intent" in events and "end" not in events
    roll = cwctl(fabric, "rollback", "--apply", "--yes")
    assert roll.returncode == 0, roll.stderr
    assert "interrupted" in roll.stderr
    assert switch_routes(fabric) == before


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def test_without_switch_access_reroute_says_so_and_changes_nothing(
    fabric: Testbed, tmp_path: Path
) -> None:
    out, in_switch = [], False
    for line in fabric.inventory.read_text().splitlines():
        if line.startswith("[["):
            in_switch = line == "[[switch]]"
        if in_switch and line.startswith(("kind = ", "address = ")):
            continue  # the switch's access: kind and its management address
        out.append(line)
    blind = tmp_path / "no-switch-access.toml"
    blind.write_text("\n".join(out) + "\n")
    before = switch_routes(fabric)
    proc = cwctl(fabric, "reroute", "spine2", "-i", str(blind), "--apply", "--yes")
    assert proc.returncode == 2, proc.stderr
    assert "no access to leaf1, leaf2" in proc.stderr and "Traceback" not in proc.stderr
    assert switch_routes(fabric) == before


def test_host_routes_never_claim_a_spine_is_avoided(fabric: Testbed) -> None:
    """The defect: `reroute spine2 --prefix default --apply` said "already avoided"."""
    before = switch_routes(fabric)
    for extra in ([], ["--gateway", "spine2=10.201.12.2"]):
        proc = cwctl(fabric, "reroute", "spine2", "--prefix", "default", "--apply", "--yes", *extra)
        assert proc.returncode != 0, proc.stderr
        assert "already avoided" not in proc.stderr + proc.stdout
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert switch_routes(fabric) == before


# -- localisation of a sick leaf-spine link -----------------------------------------------
@pytest.mark.parametrize(
    ("direction", "kind"),
    [("leaf1>spine2", "down"), ("leaf2>spine1", "congested")],  # lossy: the test below
)
@pytest.mark.quiet
def test_a_sick_leaf_spine_link_is_named_top_1(fabric: Testbed, direction: str, kind: str) -> None:
    """Runs alone (``quiet``): the congestion is a real flow and the probes real packets
    on the machine's two cores. Beside two busy processes, three runs each, 5 of its 6
    cases failed on 705aae3 and 6 of 6 on the code after it (the flow and the agents
    starved alike: nothing queued enough to be named); in the parallel phase of a full
    suite it failed in each of the last four; alone it passed every time."""
    src, dst = direction.split(">")
    link, spine = L.link(src, dst).name, (src if src in L.SPINES else dst)
    apply_fault(fabric, direction, kind)
    rc, report, err = scan(fabric)
    top = report["suspects"][:1]
    assert top and names(top[0], link, spine), f"{kind} on {direction}: {report['suspects'][:3]}"
    assert rc == 3, err


def test_lossy_link_named_rerouted_on_the_leaves_verified_clean_then_rolled_back_exactly(
    fabric: Testbed,
) -> None:
    before = switch_routes(fabric)
    flows = sample_flows(fabric)
    assert over(flows, "spine2", "leaf1")  # the kernel hashes some flows down the link
    apply_fault(fabric, "spine2>leaf1", "lossy=0.05")
    rc, report, err = scan(fabric)
    top = report["suspects"][:1]
    window = report.get("telemetry", {}).get("window")
    assert top and names(top[0], "leaf1-spine2", "spine2"), (err, window)
    assert rc == 3, err
    lossy = {(p["src"], p["dst"]) for p in report["paths"] if p["loss"] > 0}
    assert lossy

    proc = cwctl(fabric, "reroute", "leaf1-spine2", "--apply", "--yes", "--verify")
    assert proc.returncode == 0, proc.stderr
    assert "leaf1-spine2 is no longer a suspect" in proc.stderr
    after = switch_routes(fabric)
    assert [s for s in SWITCHES if after[s] != before[s]] == list(L.LEAVES)
    now = sample_flows(fabric)  # the kernel's answer: nothing crosses the link any more
    assert not over(now, "leaf1", "spine2") and not over(now, "spine2", "leaf1")
    rc, report, err = scan(fabric)  # the fault is still on
    loss = {(p["src"], p["dst"]): p["loss"] for p in report["paths"]}
    assert all(loss[p] == 0 for p in lossy), {p: loss[p] for p in lossy}
    assert report["suspects"] == [] and rc == 0, err
    # read, not assumed: all 8 routes of leaf1, and leaf2's one towards leaf1's hosts
    again = cwctl(fabric, "reroute", "leaf1-spine2")
    assert "nothing to change: checked 9 route(s) on leaf1, leaf2" in again.stdout

    proc = cwctl(fabric, "rollback", "--apply", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert switch_routes(fabric) == before  # `ip route` byte for byte


# -- acting on a candidate set, and a verify that does not take a set for gone -----------
SPINE2_SET = "leaf1-spine2|leaf2-spine2|spine2"


def _spine2_lossy(bed: Testbed) -> None:
    """Both of spine2's links lose 5 % on the way down: on two leaves a spine and its
    links are crossed by the same flows, so the scan can only name the set."""
    for leaf in L.LEAVES:
        apply_fault(bed, f"spine2>{leaf}", "lossy=0.05")


def test_a_candidate_set_is_rerouted_around_the_spine_that_covers_it(fabric: Testbed) -> None:
    before = switch_routes(fabric)
    _spine2_lossy(fabric)
    rc, report, err = scan(fabric)
    top = report["suspects"][0]
    assert (top["element"], top["kind"]) == (SPINE2_SET, "set"), err
    assert top["kinds"] == ["link", "link", "switch"] and rc == 3
    # the scan's own top suspect, as the operator copies it
    proc = cwctl(fabric, "reroute", top["element"], "--apply", "--yes", "--verify")
    assert proc.returncode == 0, proc.stderr
    assert f"the candidate set {SPINE2_SET} is covered by spine2" in proc.stdout
    assert "verify: spine2 is no longer a suspect" in proc.stderr
    after = switch_routes(fabric)
    assert [s for s in SWITCHES if after[s] != before[s]] == list(L.LEAVES)
    proc = cwctl(fabric, "rollback", "--apply", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert switch_routes(fabric) == before
    # a set a leaf covers: refused, naming the leaf; nothing changed
    refused = cwctl(fabric, "reroute", "leaf1-spine1|leaf1-spine2", "--apply", "--yes")
    assert refused.returncode == 2 and "is covered by leaf1; leaf1 is a leaf" in refused.stderr
    assert switch_routes(fabric) == before


def test_verify_does_not_call_an_element_gone_while_a_candidate_set_holds_it(
    fabric: Testbed, tmp_path: Path
) -> None:
    """Without path discovery every cross-leaf flow may have taken either spine. Steered
    off spine1 (the wrong spine: spine2 is the lossy one), every cross-leaf flow now
    loses probes, and the rescan can name only a set of both spines and their links, or
    no element at all: neither vouches that spine1 is clean."""
    blind = tmp_path / "no-trace.toml"
    blind.write_text(
        fabric.inventory.read_text().replace("\n[probe]\n", "\n[probe]\ntrace = false\n", 1)
    )
    before = switch_routes(fabric)
    _spine2_lossy(fabric)
    proc = cwctl(fabric, "reroute", "spine1", "-i", str(blind), "--apply", "--yes", "--verify")
    assert proc.returncode == 3, proc.stderr
    assert "no longer a suspect" not in proc.stderr
    assert (
        "verify: spine1 is still a suspect after the change: one of " in proc.stderr
        or "verify: the rescan cannot vouch that spine1 is gone: unlocalised loss" in proc.stderr
    ), proc.stderr
    proc = cwctl(fabric, "rollback", "--apply", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert switch_routes(fabric) == before
