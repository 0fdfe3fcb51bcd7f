"""Forged and replayed datagrams at running agents (real UDP on loopback, the local
transport) change neither offsets nor loss: every one is dropped and counted by reason.

The attacker (``attacker.py``) sniffs the scan's datagrams on ``lo`` and sends, with the
same spoofed 5-tuple, a replay of each, a forged reply to each probe and a forged
follow-up to each reply moving ``t3`` by 5 ms. Before probes were signed the same attack
moved two of three loopback clocks by 0.77 and 1.77 ms (their truth: 0, one clock).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
from typing import Any

import pytest

from cwctl.inventory import ProbeSettings
from cwctl.probe.exchanges import Agent
from cwctl.probe.params import AgentParams
from cwctl.scan.request import ProbeOverrides, ScanRequest
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import analyse, scan
from cwctl.transport import plan
from cwctl.transport.base import run_scan
from cwctl.transport.local import launch_local, local_hosts
from cwctl.transport.plan import ScanPlan
from cwctl.transport.traceplan import TraceSettings
from tests.integration.attacker import Attacker, port_unreachable, udp_packet

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")

BOUND_NS = 50_000  # the truth is 0 (one clock); unattacked loopback scans are within ~µs


async def test_forged_and_replayed_datagrams_change_neither_offsets_nor_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the nonce is public (it travels in the clear): fixing it lets the attacker pick this
    # scan's datagrams out of other tests' on the same loopback; the key stays secret
    nonce = secrets.token_bytes(8)
    monkeypatch.setattr(
        plan, "scan_auth", lambda: {"key": secrets.token_hex(32), "nonce": nonce.hex()}
    )
    with Attacker(skew_ns=5_000_000, nonce=nonce) as attacker:
        # rate 100: over a hundred datagrams of each forgery in 1.5 s
        snapshot = await scan(
            ScanRequest(local=3, duration_s=1.5, overrides=ProbeOverrides(rate=100.0))
        )
    assert attacker.sent.get("forged_follow", 0) > 100, attacker.sent
    assert attacker.sent.get("forged_reply", 0) > 100 and attacker.sent.get("replay", 0) > 100
    offsets = {h.name: h.offset_ns for h in snapshot.hosts}
    assert all(o is not None and abs(o) < BOUND_NS for o in offsets.values()), offsets
    assert snapshot.paths and all(p.loss == 0 for p in snapshot.paths)
    assert all(p.sent == p.received for p in snapshot.paths)
    for host in snapshot.hosts:
        dropped = (host.agent or {}).get("dropped") or {}
        assert dropped.get("bad_mac", 0) > 0 and dropped.get("replay", 0) > 0, (host.name, dropped)
    report = snapshot.to_json()
    assert all("dropped" in h["agent"] for h in report["hosts"])


# Loopback agents share one clock: the truth is 0. Unattacked scans with kernel stamps come
# out within a few ns of it on a busy 2-core machine (-1.9 ns in one run beside this test;
# the issue measured <= 1.3 ns on an idle one), attacked ones the same (0.01 to 3.8 ns over
# two runs). What shows that the attack moved nothing is the count: every forged datagram
# refused, none taken (the deterministic test below: t1 unchanged to the nanosecond). The
# offsets' bound is the machine's noise with room, far below the attack's effect before
# (-39.6 us); a tighter one fails on CPU contention, not on cwctl.
MOVED_NS = 25.0


def _traced_scan(nonce: bytes) -> tuple[FabricSnapshot, dict[str, dict[str, Any]]]:
    """Three loopback agents with path discovery on, so every socket has IP_RECVERR and
    ICMP errors reach its error queue, as on any fabric whose switches have addresses."""
    plan = ScanPlan(
        hosts=local_hosts(3),
        settings=ProbeSettings(peers=2, ports=2, rate=100.0),
        duration_s=1.5,
        source="local",
        trace=TraceSettings.for_ratelimit(0),
        auth={"key": secrets.token_hex(32), "nonce": nonce.hex()},
    )
    collection = asyncio.run(run_scan(plan, launch_local))
    return analyse(collection), collection.summaries


def _dropped(snapshot: FabricSnapshot, reason: str) -> dict[str, int]:
    return {h.name: ((h.agent or {}).get("dropped") or {}).get(reason, 0) for h in snapshot.hosts}


def test_forged_icmp_errors_quoting_sniffed_probes_and_replies_move_no_clock() -> None:
    """Port-unreachable errors quoting each probe (to its prober) and each reply (to its
    answerer), MAC and all: on the error queue they are no TX stamp and answer no trace,
    so no t1 is overwritten and no follow-up is sent with a wrong t3. Before: -39.6 µs."""
    nonce = secrets.token_bytes(8)
    with Attacker(nonce=nonce, attacks=frozenset({"icmp"}), process=True) as attacker:
        snapshot, _ = _traced_scan(nonce)
    assert attacker.sent.get("icmp", 0) > 500, attacker.sent
    offsets = {h.name: h.offset_ns for h in snapshot.hosts}
    assert all(o is not None and abs(o) <= MOVED_NS for o in offsets.values()), offsets
    assert snapshot.paths and all(p.sent == p.received for p in snapshot.paths)
    counted = _dropped(snapshot, "icmp_unasked")
    assert all(n > 100 for n in counted.values()), counted
    # each refused and counted (the last few may find their agent gone at the scan's end)
    assert sum(counted.values()) >= 0.98 * attacker.sent["icmp"], (counted, attacker.sent)


def test_probes_replayed_from_the_peers_address_on_another_port_are_not_answered() -> None:
    nonce = secrets.token_bytes(8)
    with Attacker(nonce=nonce, attacks=frozenset({"port_replay"})) as attacker:
        snapshot, summaries = _traced_scan(nonce)
    assert attacker.sent.get("port_replay", 0) > 500, attacker.sent
    offsets = {h.name: h.offset_ns for h in snapshot.hosts}
    assert all(o is not None and abs(o) <= MOVED_NS for o in offsets.values()), offsets
    assert snapshot.paths and all(p.sent == p.received for p in snapshot.paths)
    replays = _dropped(snapshot, "replay")
    assert sum(replays.values()) >= attacker.sent["port_replay"] * 0.95, (replays, attacker.sent)
    # each answerer counted exactly the probes its peers sent it, no replayed one
    for name, summary in summaries.items():
        sent_to = {p: s["sent"][name] for p, s in summaries.items() if name in s["sent"]}
        assert summary["rx"] == sent_to, (name, summary["rx"], sent_to)


class _Out:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def record(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)

    def error(self, message: str, fatal: bool = False) -> None:
        raise AssertionError(message)


def test_an_icmp_error_quoting_a_probe_in_flight_is_no_tx_stamp() -> None:
    """Deterministic, whatever the loopback's speed: a real agent (path discovery on, so
    IP_RECVERR) sends a coded pair to a peer that never answers; a forged port-unreachable
    quoting each probe whole (MAC included) lands on its error queue after the kernel's
    TX stamp. Before: the error's arrival stamp overwrote t1. Now: t1 stays, counted."""
    auth = {"key": secrets.token_hex(32), "nonce": secrets.token_hex(8)}
    params = {"host": "a", "bind": "127.0.0.2", "ports": 1, "trace": True, "auth": auth}
    agent = Agent(AgentParams(params), _Out())
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.3", 0))
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        assert agent.tracing and agent.tx_kernel
        start = {"peers": {"b": list(peer.getsockname())}, "probe": ["b"], "start_ns": 0}
        agent.start(start)
        agent.send_pair("b", 0)
        agent.drain_stamped()
        sent = {seq: (ex.t1, ex.t1k, ex.wire) for seq, ex in agent.pending.items()}
        assert len(sent) == 2 and all(k for _t1, k, _w in sent.values())
        src = agent.sources[0].getsockname()
        time.sleep(0.002)
        for _t1, _k, wire in sent.values():
            quoted = udp_packet(src, peer.getsockname(), wire)
            raw.sendto(port_unreachable("127.0.0.3", "127.0.0.2", quoted), ("127.0.0.2", 0))
        # each error is on the queue once loopback delivers it: read until both are
        # counted (a loaded machine may defer the delivery past any fixed sleep)
        deadline = time.monotonic() + 10.0
        while agent.guard.dropped.get("icmp_unasked", 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
            agent.drain_errqueue(agent.sources[0])
        assert {seq: (ex.t1, ex.t1k, ex.wire) for seq, ex in agent.pending.items()} == sent
        assert agent.guard.dropped == {"icmp_unasked": 2}
    finally:
        agent.close()
        peer.close()
        raw.close()
