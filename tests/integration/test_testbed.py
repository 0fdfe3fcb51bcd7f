"""The namespace testbed itself: routed ECMP fabric, sshd per node, faults, teardown.

Ground truth here is the kernel: which spine a 5-tuple takes is asked with
``ip route get ... ipproto udp sport S dport D`` and confirmed on interface counters,
and what a fault does is counted on packets that really crossed (or did not).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import (
    apply_fault,
    clear,
    flow_across,
    flow_path,
    qdisc_counters,
)
from tests.testbed.fixture import skip_without_namespaces, unique_prefix
from tests.testbed.shell import TestbedError, alive, netns_list, root_links, run
from tests.testbed.traffic import delivered, link_tx_packets

pytestmark = pytest.mark.netns


def routes(bed: Testbed, node: str) -> str:
    return run(["ip", "route", "show"], ns=bed.ns(node)).stdout


def test_leaves_hash_over_both_spines_as_the_kernel_says(fabric: Testbed) -> None:
    for leaf in L.LEAVES:
        text = routes(fabric, leaf)
        assert text.count("nexthop via") == 2, text
        policy = run(["cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy"], ns=fabric.ns(leaf))
        assert policy.stdout.strip() == "1"
    spines = {
        sport: flow_path(fabric, "gpu-001", "gpu-005", sport, 9)[2] for sport in range(40000, 40016)
    }
    assert set(spines.values()) == set(L.SPINES), spines  # L4 hashing spreads source ports
    # The packets go where the kernel said: count them on leaf1's uplink to that spine.
    sport, spine = next(iter(spines.items()))
    before = link_tx_packets(fabric, "leaf1", spine)
    assert delivered(fabric, "gpu-001", "gpu-005", sport, 9, count=100) == 100
    assert link_tx_packets(fabric, "leaf1", spine) - before >= 100


def test_every_node_runs_its_own_sshd_with_the_written_host_key(fabric: Testbed) -> None:
    known = dict(line.split(" ", 1) for line in fabric.known_hosts.read_text().splitlines())
    assert sorted(known) == sorted(fabric.mgmt(n) for n in L.NODES)
    assert len(set(known.values())) == len(L.NODES)  # a host key of its own each
    for node in ("spine2", "leaf1", "gpu-008"):
        out = subprocess.run(
            [
                "ssh",
                "-i",
                str(fabric.identity),
                "-o",
                f"UserKnownHostsFile={fabric.known_hosts}",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=5",
                f"root@{fabric.mgmt(node)}",
                "ip",
                "-o",
                "-4",
                "addr",
                "show",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        for address in L.fabric_addresses(node):  # the session runs inside that node
            assert f"inet {address}/" in out.stdout


def test_inventory_describes_the_fabric(fabric: Testbed) -> None:
    doc = tomllib.loads(fabric.inventory.read_text())
    switches = {s["name"]: s for s in doc["switch"]}
    assert switches["leaf1"]["uplinks"] == list(L.SPINES)
    assert switches["spine2"]["kind"] == "linux"
    assert switches["spine2"]["address"] == fabric.mgmt("spine2")
    # every fabric address each switch answers from, and nothing else's
    assert sorted(switches["spine2"]["addresses"]) == ["10.201.12.2", "10.201.22.2"]
    hosts = {h["name"]: h for h in doc["host"]}
    assert sorted(hosts) == list(L.HOSTS)
    assert hosts["gpu-006"]["probe_address"] == "10.201.102.6"
    assert hosts["gpu-006"]["address"] == fabric.mgmt("gpu-006")
    assert hosts["gpu-006"]["leaf"] == "leaf2"


def test_down_drops_one_way_and_routing_does_not_notice(fabric: Testbed) -> None:
    sender, receiver, sport, dport = flow_across(fabric, "leaf1", "spine2")
    back = flow_across(fabric, "spine2", "leaf1")
    other = next(
        s for s in range(40000, 40064) if "spine1" in flow_path(fabric, sender, receiver, s, dport)
    )
    before = {n: routes(fabric, n) for n in (*L.LEAVES, *L.SPINES)}
    apply_fault(fabric, "leaf1>spine2", "down")
    assert delivered(fabric, sender, receiver, sport, dport) == 0
    assert delivered(fabric, sender, receiver, other, dport) == 200  # the other spine
    assert delivered(fabric, *back) == 200  # the reverse direction still works
    assert {n: routes(fabric, n) for n in before} == before
    clear(fabric, "leaf1-spine2")
    assert delivered(fabric, sender, receiver, sport, dport) == 200


def test_lossy_drops_about_the_share_asked(fabric: Testbed) -> None:
    flow = flow_across(fabric, "spine1", "leaf2")
    apply_fault(fabric, "spine1>leaf2", "lossy=0.25")
    got = delivered(fabric, *flow, count=400)
    # 400 tries at 25 %: mean 300 kept, sd 8.7; 6 sd either side
    assert 248 <= got <= 352, got


def test_congested_link_carries_a_background_flow_the_kernel_hashes_onto_it(
    fabric: Testbed,
) -> None:
    apply_fault(fabric, "leaf2>spine1", "congested=10")
    pids = list(fabric.flows["leaf2>spine1"])
    first = qdisc_counters(fabric, "leaf2", "spine1")
    # the flow sends when the machine lets it: read until it has (a loaded machine may
    # not run it within any fixed sleep), 10 s at most
    deadline = time.monotonic() + 10.0
    while True:
        time.sleep(0.2)
        now = qdisc_counters(fabric, "leaf2", "spine1")
        grew = now["bytes"] > first["bytes"] and now["drops"] > first["drops"]
        if grew or time.monotonic() > deadline:
            break
    assert grew, (first, now)
    qdisc = run(["tc", "qdisc", "show", "dev", "spine1"], ns=fabric.ns("leaf2")).stdout
    assert "tbf" in qdisc and "rate 10Mbit" in qdisc
    clear(fabric)
    assert not any(alive(p) for p in pids)
    assert "tbf" not in run(["tc", "qdisc", "show", "dev", "spine1"], ns=fabric.ns("leaf2")).stdout


def test_bad_fault_names_are_refused(fabric: Testbed) -> None:
    with pytest.raises(TestbedError, match="no link between leaf1 and leaf2"):
        apply_fault(fabric, "leaf1-leaf2", "down")
    with pytest.raises(TestbedError, match="share must be"):
        apply_fault(fabric, "leaf1>spine1", "lossy=2")
    with pytest.raises(TestbedError, match="faults are"):
        apply_fault(fabric, "leaf1>spine1", "flaky")


def _nothing_left(bed: Testbed) -> None:
    names = [bed.ns(n) for n in L.NODES]
    assert not set(names) & netns_list()
    assert not {bed.bridge, *(bed.mgmt_veth(n) for n in L.NODES)} & root_links()
    # the slot is free once down, so a testbed of a parallel test may hold its
    # gateway address already: only an address on an interface of ours is a leftover
    gateway = f"{L.mgmt_gateway(bed.slot)}/"
    holders = [
        line.split()[1].split("@")[0]
        for line in run(["ip", "-4", "-o", "addr"]).stdout.splitlines()
        if gateway in line
    ]
    assert not [name for name in holders if name.startswith(bed.prefix)], holders
    assert bed.leftovers() == []


def test_a_second_testbed_beside_the_first_then_nothing_of_it_remains(
    fabric: Testbed, tmp_path: Path
) -> None:
    bed = Testbed(unique_prefix(), tmp_path)
    try:
        bed.up()
        assert bed.slot != fabric.slot  # its own management subnet
        apply_fault(bed, "leaf1>spine1", "congested")
        sshd_pids = [int((tmp_path / "run" / f"sshd-{n}.pid").read_text()) for n in L.NODES]
        flow_pids = list(bed.flows["leaf1>spine1"])
    finally:
        assert bed.down() == []
    _nothing_left(bed)
    assert not any(alive(p) for p in sshd_pids + flow_pids)
    # the first testbed was not touched
    assert "nexthop" in routes(fabric, "leaf1")
    with socket.create_connection((fabric.mgmt("leaf1"), 22), 5):
        pass


def test_down_works_from_any_state(tmp_path: Path) -> None:
    skip_without_namespaces()
    bed = Testbed(unique_prefix(), tmp_path)
    bed.slot = 15
    run(["ip", "netns", "add", bed.ns("leaf1")])  # half-built: some of it exists
    run(["ip", "link", "add", bed.bridge, "type", "bridge"])
    run(
        [
            "ip",
            "link",
            "add",
            bed.mgmt_veth("leaf1"),
            "type",
            "veth",
            "peer",
            "name",
            "x",
            "netns",
            bed.ns("leaf1"),
        ]
    )
    assert bed.down() == []
    _nothing_left(bed)
    assert bed.down() == []  # and again, with nothing there


@pytest.mark.parametrize("how", ["failure", "signal"])
def test_a_failed_or_interrupted_bring_up_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    skip_without_namespaces()
    bed = Testbed(unique_prefix(), tmp_path)

    def broken_sshd(self: Testbed) -> None:
        assert self.exists()  # namespaces and links were made before this step
        if how == "signal":
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or Ctrl-C would
        raise TestbedError("sshd exploded")

    monkeypatch.setattr(Testbed, "_start_sshds", broken_sshd)
    with pytest.raises((TestbedError, KeyboardInterrupt)):
        bed.up()
    _nothing_left(bed)


def test_operator_script_up_status_down(tmp_path: Path) -> None:
    skip_without_namespaces()
    prefix = unique_prefix()
    base = ["python3", "-m", "tests.testbed", "--prefix", prefix, "--dir", str(tmp_path)]
    root = Path(__file__).resolve().parents[2]
    try:
        up = subprocess.run([*base, "up"], cwd=root, capture_output=True, text=True, timeout=60)
        assert up.returncode == 0, up.stderr
        assert str(tmp_path / "inventory.toml") in up.stdout
        bad = subprocess.run(
            [*base, "fault", "leaf1>gpu-009", "down"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode != 0 and "gpu-009" in bad.stderr and "Traceback" not in bad.stderr
        st = subprocess.run([*base, "status"], cwd=root, capture_output=True, text=True)
        assert "faults: none" in st.stdout
    finally:
        down = subprocess.run([*base, "down"], cwd=root, capture_output=True, text=True)
    assert down.returncode == 0, down.stderr
    _nothing_left(Testbed(prefix, tmp_path))
