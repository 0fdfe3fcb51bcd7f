"""Path discovery on the namespace testbed: the hops found are the ones the kernel chose.

The testbed's leaves spread flows over both spines with the kernel's L4 multipath hash
(``fib_multipath_hash_policy=1``); which spine a UDP flow takes is asked of the kernel
itself, independently of cwctl, with ``ip route get ... ipproto udp sport S dport D``
at each hop (``tests.testbed.faults.flow_path``). cwctl runs as an operator runs it:
``cwctl scan --save-records`` over SSH against the inventory the testbed wrote, then the
saved path records are read back. A router that does not answer TTL expiry leaves its
hop unknown (null), never guessed.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cwctl.scan.collection import Collection
from cwctl.scan.recordfile import read_collection
from cwctl.scan.request import ScanRequest
from cwctl.transport.ssh import SSHSource
from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import flow_path
from tests.testbed.inventory import with_icmp_ratelimit
from tests.testbed.shell import run

pytestmark = pytest.mark.netns


def scan_paths(bed: Testbed, tmp_path: Path, inventory: str) -> Collection:
    inv = tmp_path / "inventory.toml"
    inv.write_text(inventory)
    records = tmp_path / "records.jsonl"
    args = ["scan", "-i", str(inv), "--duration", "1.5", "--save-records", str(records)]
    proc = subprocess.run(
        [sys.executable, "-m", "cwctl.cli", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    c = read_collection(records)
    assert {s.status for s in c.status.values()} == {"ok"}, c.status
    return c


def no_ratelimit(text: str) -> str:
    """The testbed's inventory, telling cwctl its switches do not rate-limit ICMP."""
    return with_icmp_ratelimit(text, 0)


@pytest.fixture
def silent_spine2(fabric: Testbed) -> Iterator[Testbed]:
    """spine2 answers no TTL expiry (its ICMP rate limit: one answer in 11 days)."""
    ns = fabric.ns("spine2")
    run(["sysctl", "-qw", "net.ipv4.icmp_ratelimit=1000000000"], ns=ns)
    try:
        yield fabric
    finally:
        run(["sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"], ns=ns)


def spine_of(bed: Testbed, host: str, peer: str, sport: int, dport: int) -> str:
    path = flow_path(bed, host, peer, sport, dport)  # host, leaf, spine, leaf, peer
    assert len(path) == 5, path
    return path[2]


def test_discovered_spine_is_the_one_the_kernel_chose(fabric: Testbed, tmp_path: Path) -> None:
    c = scan_paths(fabric, tmp_path, no_ratelimit(fabric.inventory.read_text()))
    assert c.topology is not None
    switch_of = c.topology.switch_of_address
    checked: dict[str, int] = {}
    for p in c.paths:
        if L.leaf_of(p.host) == L.leaf_of(p.peer):
            # no choice on the way: only the completion check, no router asked
            assert p.hops == (None,) and p.complete, p
            continue
        assert len(p.hops) == 3 and p.complete, p
        assert p.hops[0] is None and p.hops[2] is None  # no choice there: not asked
        assert p.src == L.probe_address(p.host) and p.dst == L.probe_address(p.peer)
        if p.hops[1] is None:
            continue  # an answer lost on a loaded machine stays unknown
        truth = spine_of(fabric, p.host, p.peer, p.sport, p.dport)
        assert switch_of[p.hops[1]] == truth, (p, truth)
        checked[truth] = checked.get(truth, 0) + 1
    # forward and reverse of many tuples, both spines among them
    assert sum(checked.values()) >= 64 and set(checked) == set(L.SPINES), checked


def test_a_silent_router_leaves_its_hop_unknown(silent_spine2: Testbed, tmp_path: Path) -> None:
    """Without leaves in the inventory every TTL is traced; spine2's hop stays null."""
    bed = silent_spine2
    text = re.sub(r'(?m)^leaf = ".*"\n', "", no_ratelimit(bed.inventory.read_text()))
    c = scan_paths(bed, tmp_path, text)
    assert c.topology is None  # nothing told cwctl which way flows go
    owner = {a: node for node in L.NODES for a in L.fabric_addresses(node)}
    named = silent = 0
    for p in c.paths:
        hops = [owner.get(h) if h else None for h in p.hops]
        if L.leaf_of(p.host) == L.leaf_of(p.peer):
            assert p.complete and hops in ([L.leaf_of(p.host)], [None]), p
            continue
        assert p.complete and len(hops) == 3, p
        assert hops[0] in (L.leaf_of(p.host), None) and hops[2] in (L.leaf_of(p.peer), None), p
        truth = spine_of(bed, p.host, p.peer, p.sport, p.dport)
        if truth == "spine2":
            assert hops[1] is None, p  # silent: unknown, not a guess
            silent += 1
        else:
            assert hops[1] in ("spine1", None), p
            named += hops[1] == "spine1"
    assert named >= 8 and silent >= 8, (named, silent)


def test_a_second_scan_traces_only_what_it_revalidates(fabric: Testbed, tmp_path: Path) -> None:
    """One source, two scans: agents get their ports back, so the 5-tuples (and paths)
    are the same; the second scan traces only the revalidated tenth, the rest is cached
    and still names the spine the kernel chooses."""
    inv = tmp_path / "inventory.toml"
    inv.write_text(no_ratelimit(fabric.inventory.read_text()))
    request = ScanRequest(inventory=inv, duration_s=1.5)
    source = SSHSource(request)
    first = asyncio.run(source.scan(request))
    second = asyncio.run(source.scan(request))
    assert {s.status for s in second.status.values()} == {"ok"}, second.status
    for host in first.hello:
        assert first.hello[host]["port"] == second.hello[host]["port"]
        assert first.hello[host]["sports"] == second.hello[host]["sports"]
    traced = [sum(s["trace"]["flows"] for s in c.summaries.values()) for c in (first, second)]
    assert traced[0] == len(first.paths) and 0 < traced[1] <= traced[0] // 5, traced
    cached = [p for p in second.paths if p.cached and len(p.hops) == 3 and p.hops[1]]
    assert len(cached) >= 64, len(cached)
    switch_of = second.topology.switch_of_address  # type: ignore[union-attr]
    for p in cached[::8]:
        assert switch_of[p.hops[1]] == spine_of(fabric, p.host, p.peer, p.sport, p.dport), p
