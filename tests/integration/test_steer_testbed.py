"""Host-side steering on the namespace fabric, judged by real TCP that no cwctl code makes.

The leaves hash each packet's 5-tuple, as hardware does (``workload.header_hashing``).
With leaf1-spine2 lossy (5 %), ``cwctl reroute leaf1-spine2 --at hosts`` over SSH:
iperf3 connections opened before the action, and one held open across it, go on unbroken
(the NAT rule translates a TCP connection's opening SYN only); a new iperf3 run whose
client ports would cross spine2 has every connection's source port rewritten by the
hosts' NAT rule (its counter) and sends (next to) nothing over the faulty link, both
ways (the link's counters); rollback leaves every host's
``nft list ruleset`` exactly as before. Then 500 concurrent connections from one host to
its four peers all connect, and the kernel's own multipath hash on both leaves puts none
of their translated tuples on spine2.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testbed import layout as L
from tests.testbed.faults import apply_fault
from tests.testbed.traffic import link_tx_packets
from tests.testbed.workload import (
    IPERF_PORT,
    HeldConnection,
    cwctl,
    header_hashing,
    hold_servers,
    iperf_client,
    iperf_result,
    iperf_server,
    many_connections,
    ports_on,
    ruleset,
    spines_of,
)

LINK = "leaf1-spine2"
SENDER, RECEIVER = "gpu-001", "gpu-005"


@pytest.fixture(autouse=True, scope="module")
def _hashing(testbed) -> Iterator[None]:
    with header_hashing(testbed):
        yield


def faulty_link_packets(bed) -> int:
    return link_tx_packets(bed, "leaf1", "spine2") + link_tx_packets(bed, "spine2", "leaf1")


def test_steering_moves_new_iperf3_runs_off_the_lossy_link(fabric, tmp_path: Path) -> None:
    bed = fabric
    apply_fault(bed, LINK, "lossy=0.05")
    before = {h: ruleset(bed, h) for h in L.HOSTS}
    cport, later, hport = ports_on(bed, SENDER, RECEIVER, "spine2", 4, 50000, count=3)
    # a connection surely open across the action, whatever its length (the early iperf3
    # run may end before the table is loaded on a slow machine)
    held = HeldConnection(bed, SENDER, RECEIVER, IPERF_PORT, hport)
    server = iperf_server(bed, RECEIVER)
    try:
        assert held.exchange(16) == "ok"
        time.sleep(0.3)
        early = iperf_client(bed, SENDER, RECEIVER, cport=cport, streams=2, seconds=6)
        time.sleep(1.0)
        inv = str(bed.inventory)
        applied = cwctl(
            tmp_path, "reroute", LINK, "-i", inv, "--at", "hosts", "--port",
            str(IPERF_PORT), "--pool", "16", "--apply", "--yes", "--verify", "--format", "json",
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr[-2000:]
        report = json.loads(applied.stdout)
        assert report["verify"]["gone"] and report["verify"]["ports"] == 32 * 16
        # connections opened before the action: unbroken, and still on their old path (the
        # held one's port is the one it opened with, which the leaves hash onto spine2)
        assert held.exchange(16) == "ok"
        assert held.peer_port == hport
        assert iperf_result(early)["end"]["sum_received"]["bytes"] > 0

        counted = faulty_link_packets(bed)
        steered = iperf_client(bed, SENDER, RECEIVER, cport=later, streams=4, seconds=2)
        carried = faulty_link_packets(bed) - counted
        report = iperf_result(steered)
        assert report["end"]["sum_received"]["bytes"] > 10_000_000
        assert carried < 50, f"{carried} packets crossed {LINK} during the steered run"
        rules = ruleset(bed, SENDER)
        # every new connection took the NAT rule: 4 streams + control, and any that iperf3
        # opened again on a loaded machine (the NAT chain sees a connection's first packet)
        counters = [int(n) for n in re.findall(r"counter packets (\d+) ", rules)]
        assert "cwctl_steer_" in rules and max(counters) >= 5, rules

        undone = cwctl(tmp_path, "rollback", "--apply", "--yes")
        assert undone.returncode == 0, undone.stderr[-2000:]
        assert {h: ruleset(bed, h) for h in L.HOSTS} == before
        assert held.exchange(16) == "ok" and held.close() == 48 * 65536
    finally:
        held.kill()
        server.kill()
        server.wait()


def test_500_connections_all_connect_and_none_crosses_the_spine(fabric, tmp_path: Path) -> None:
    bed, port, per_peer = fabric, 7000, 125
    peers = list(L.hosts_of("leaf2"))
    applied = cwctl(
        tmp_path, "reroute", LINK, "-i", str(bed.inventory), "--at", "hosts",
        "--port", str(port), "--pool", "128", "--apply", "--yes",
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr[-2000:]
    servers = hold_servers(bed, peers, port)
    client = many_connections(bed, SENDER, peers, port, per_peer)
    try:
        assert client.stdout is not None
        counts = json.loads(client.stdout.readline())
        assert counts == {"opened": 500, "connected": 500}
        seen: dict[str, list[int]] = {}
        for peer, server in zip(peers, servers, strict=True):
            out, _ = server.communicate("stop\n", timeout=30)
            seen[peer] = [int(p) for _, p in json.loads(out)]
        assert sum(len(p) for p in seen.values()) == 500
        for peer, sports in seen.items():
            assert len(set(sports)) == len(sports) == per_peer
            forward = spines_of(bed, SENDER, peer, [(p, port) for p in sports])
            reverse = spines_of(bed, peer, SENDER, [(port, p) for p in sports])
            assert set(forward) == {"spine1"} and set(reverse) == {"spine1"}, peer
    finally:
        client.kill()
        for server in servers:
            server.kill()
        undone = cwctl(tmp_path, "rollback", "--apply", "--yes")
        assert undone.returncode == 0, undone.stderr[-2000:]


def test_roce_sets_are_udp_4791_tuples_off_the_spine(fabric, tmp_path: Path) -> None:
    """``--roce`` plans nothing and prints, per ordered pair, source ports whose UDP
    tuple to 4791 the sender's leaf hashes off spine2 (asked of the leaf itself)."""
    bed = fabric
    before = {h: ruleset(bed, h) for h in L.HOSTS}
    out = cwctl(
        tmp_path, "reroute", LINK, "-i", str(bed.inventory), "--at", "hosts",
        "--roce", "--pool", "8", "--format", "json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    plan = json.loads(out.stdout)["plan"]
    assert plan["steps"] == [] and len(plan["steering"]["roce"]) == 32
    for entry in plan["steering"]["roce"]:
        assert entry["dport"] == 4791 and len(entry["ports"]) == 8
        tuples = [(p, 4791) for p in entry["ports"]]
        assert set(spines_of(bed, entry["host"], entry["peer"], tuples, "udp")) == {"spine1"}
    assert {h: ruleset(bed, h) for h in L.HOSTS} == before


pytestmark = pytest.mark.skipif(
    not all(Path(f"/usr/{d}/{b}").exists() for d, b in (("sbin", "nft"), ("bin", "iperf3"))),
    reason="host-side steering needs nftables and iperf3 (apt install nftables iperf3)",
)
