"""The agent's tracer on its own: plan, pacing, answers matched, records (no network:
sockets on loopback only name the ports; answers are handed in as the kernel would)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from cwctl.probe.stamps import IP_RECVERR
from cwctl.probe.trace import EXTENDED_ERR, SO_EE_ORIGIN_ICMP, Tracer
from cwctl.probe.wire import KIND_TRACE, KIND_TRACE_ACK, encode
from cwctl.records import decode_path

T0 = 1_700_000_000_000_000_000
PEER = ("127.0.0.9", 5000)


class FakeRails:
    def __init__(self, answer: socket.socket) -> None:
        self.answer = answer

    def destination(self, peer: str, sock: socket.socket) -> tuple[str, int]:
        return PEER

    def reply_socket(self, peer: str, sport: int) -> tuple[socket.socket, str]:
        return self.answer, PEER[0]

    def nic_of(self, sock: socket.socket) -> None:
        return None


@pytest.fixture
def agent() -> Iterator[Any]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    records: list[dict[str, Any]] = []
    yield SimpleNamespace(
        host="a",
        targets=["b"],
        peer_addr={"b": PEER},
        sources=[socks[1]],
        answer=socks[0],
        rails=FakeRails(socks[0]),
        out=SimpleNamespace(record=records.append),
        records=records,
        sent=[],
    )
    for s in socks:
        s.close()


def icmp(icmp_type: int, offender: str) -> list[tuple[int, int, bytes]]:
    data = EXTENDED_ERR.pack(113, SO_EE_ORIGIN_ICMP, icmp_type, 0, 0, 0, 0)
    data += struct.pack("=H", socket.AF_INET) + b"\0\0" + socket.inet_aton(offender) + bytes(8)
    return [(socket.IPPROTO_IP, IP_RECVERR, data)]


def tracer(agent: Any, **plan: Any) -> Tracer:
    t = Tracer(agent, {"rate": 1000.0, "burst": 100, **plan}, T0, T0 + 10**9)
    sent: list[tuple[int, int]] = agent.sent

    def capture(sock: socket.socket, data: bytes, addr: Any, ttl: int) -> bool:
        sent.append((ttl, struct.unpack("!Q", data[12:20])[0]))
        return True

    t._send = capture  # type: ignore[method-assign]
    return t


def test_a_leaf_spine_flow_asks_only_the_spine_and_checks_completion(agent: Any) -> None:
    t = tracer(agent, peers={"b": {"hops": 3, "ttls": [2]}})
    t.send_due(T0)
    assert sorted(ttl for ttl, _ in agent.sent) == [2, 4]  # the spine, and the check
    ids = dict(agent.sent)
    assert t.on_error(encode(KIND_TRACE, ids[2], idx=2), icmp(11, "10.0.9.2"))
    t.on_ack((KIND_TRACE_ACK, 0, 4, 0, ids[4], 0, 0))
    (rec,) = agent.records
    path = decode_path(rec)
    assert path.hops == (None, "10.0.9.2", None) and path.complete
    assert (path.role, path.peer, path.dst, path.dport) == ("probe", "b", *PEER)


def test_a_short_quote_is_matched_by_its_tuple(agent: Any) -> None:
    """A router that quotes only the UDP header: the one asking packet of that socket and
    destination is the one it answered."""
    t = tracer(agent, peers={"b": {"hops": 3, "ttls": [2]}})
    t.send_due(T0)
    src = agent.sources[0]
    assert not t.on_error(b"\0" * 8, icmp(11, "10.0.9.2"), src, ("127.0.0.8", 5000))
    assert t.on_error(b"\0" * 8, icmp(11, "10.0.9.2"), src, PEER)
    assert t.answers == 1
    t.finish()
    fwd = [decode_path(r) for r in agent.records if r["role"] == "probe"]
    assert fwd[0].hops[:2] == (None, "10.0.9.2") and not fwd[0].complete


def test_only_an_icmp_error_quoting_a_trace_in_flight_is_an_answer(agent: Any) -> None:
    """A timestamp message, an error quoting a probe, a trace id not in flight or a quote
    that differs from the packet sent (its TTL) are refused (False: the agent counts
    them); the trace still waits for its router."""
    t = tracer(agent, peers={"b": {"hops": 3, "ttls": [2]}})
    t.send_due(T0)
    ids = dict(agent.sent)
    assert not t.on_error(encode(KIND_TRACE, ids[2], idx=2), [(socket.SOL_SOCKET, 37, bytes(48))])
    assert not t.on_error(encode(1, 7), icmp(11, "10.0.9.2"))  # a probe's: not ours
    assert not t.on_error(encode(KIND_TRACE, 999, idx=2), icmp(11, "10.6.6.6"))
    assert not t.on_error(encode(KIND_TRACE, ids[2], idx=3), icmp(11, "10.6.6.6"))
    assert not t.on_error(encode(KIND_TRACE, ids[2], idx=2, a=1), icmp(11, "10.6.6.6"))
    assert t.answers == 0 and len(t.pending) == 2  # still waiting for the router
    assert t.on_error(encode(KIND_TRACE, ids[2], idx=2), icmp(11, "10.0.9.2"))
    assert not t.on_error(encode(KIND_TRACE, ids[2], idx=2), icmp(11, "10.6.6.6"))  # twice
    assert t.answers == 1


def test_silence_is_retried_then_recorded_as_unknown(agent: Any) -> None:
    t = tracer(agent, peers={"b": {"hops": 3, "ttls": [2]}}, tries=2, timeout_s=0.1)
    t.send_due(T0)
    ids = dict(agent.sent)
    t.on_ack((KIND_TRACE_ACK, 0, 4, 0, ids[4], 0, 0))
    t.expire(T0 + 2 * 10**8)  # the spine said nothing: once more
    t.send_due(T0 + 2 * 10**8)
    assert [ttl for ttl, _ in agent.sent].count(2) == 2
    t.expire(T0 + 5 * 10**8)  # and nothing again: unknown, never guessed
    (rec,) = agent.records
    assert rec["hops"] == [None, None, None] and rec["complete"] is True


def test_pacing_sends_a_burst_then_rate_per_second(agent: Any) -> None:
    t = Tracer(
        agent, {"rate": 10.0, "burst": 2, "max_ttl": 6}, T0, T0 + 10**9
    )  # no hint: TTL 1..6, every packet may ask a router
    sent: list[int] = []
    t._send = lambda sock, data, addr, ttl: sent.append(ttl) or True  # type: ignore[method-assign]
    t.send_due(T0)
    assert len(sent) == 2  # the burst
    t.send_due(T0 + 10**8)  # 0.1 s later: one more at 10 a second
    assert len(sent) == 3
    t.send_due(T0 + 3 * 10**8)
    assert len(sent) == 5


def test_a_crowds_plan_starts_at_a_random_phase_of_its_interval(agent: Any) -> None:
    """A burst of one (thousands of agents share each router): the first trace waits a
    random part of the interval, so agents started together do not ask in step."""
    firsts = set()
    for _ in range(20):
        t = Tracer(agent, {"rate": 10.0, "burst": 1, "max_ttl": 2}, T0, T0 + 10**9)
        firsts.add(t.next_due_ns())
    assert all(T0 <= f < T0 + 10**8 for f in firsts) and len(firsts) > 10
