"""The operator's trace plan, and reading an ICMP answer off the error queue."""

from __future__ import annotations

import socket
import struct

from cwctl.fabric.topology import leaf_spine
from cwctl.probe.stamps import IP_RECVERR
from cwctl.probe.trace import EXTENDED_ERR, SO_EE_ORIGIN_ICMP, icmp_error
from cwctl.transport.traceplan import TraceSettings, peer_hint, probers_of, trace_plan


def test_hints_ask_only_for_the_hop_that_chooses() -> None:
    names, topo = leaf_spine(8, hosts_per_leaf=4, n_spines=3)
    assert peer_hint(topo, names[0], names[1]) == {"hops": 1, "ttls": []}  # same leaf
    assert peer_hint(topo, names[0], names[5]) == {"hops": 3, "ttls": [2]}  # via a spine
    assert peer_hint(None, names[0], names[5]) is None  # unknown: every TTL
    assert peer_hint(topo, names[0], "elsewhere") is None


def test_plan_paces_to_the_routers_that_answer() -> None:
    names, topo = leaf_spine(8, hosts_per_leaf=4, n_spines=3)
    plan = trace_plan(
        names[0],
        [names[1], names[5]],
        {names[6]: {41000, 41001}},
        topo,
        TraceSettings(),
        known=[("probe", names[1], 40000)],
    )
    assert plan["rate"] == 3.0 and plan["burst"] == 18  # three spines, 1/s each, burst 6
    assert plan["probed_by"] == {names[6]: [41000, 41001]}
    assert set(plan["peers"]) == {names[1], names[5], names[6]}
    assert plan["known"] == [["probe", names[1], 40000]]
    fast = TraceSettings.for_ratelimit(0)
    assert fast.rate_per_router > 100 and TraceSettings.for_ratelimit(250).rate_per_router == 4.0
    assert trace_plan(names[0], [], {}, None, TraceSettings())["rate"] == 1.0
    # 4 000 hosts tracing at once: a router's 1 000 answers a second are shared
    crowd = trace_plan(names[0], [names[5]], {}, topo, TraceSettings(), tracers=4000)
    assert crowd["rate"] == 3 * 0.25
    # ... and so is a router's burst of 50: one trace at once, not six per router
    assert crowd["burst"] == 1
    assert trace_plan(names[0], [names[5]], {}, topo, TraceSettings(), tracers=10)["burst"] == 15


def test_probers_are_the_inverse_of_the_peer_assignment() -> None:
    assert probers_of({"a": ["b", "c"], "b": ["c"]}) == {"b": ["a"], "c": ["a", "b"]}


def _cmsg(origin: int, icmp_type: int, offender: str | None) -> list[tuple[int, int, bytes]]:
    data = EXTENDED_ERR.pack(113, origin, icmp_type, 0, 0, 0, 0)
    if offender is not None:
        data += struct.pack("=H", socket.AF_INET) + struct.pack("!H", 0)
        data += socket.inet_aton(offender) + bytes(8)
    return [(socket.IPPROTO_IP, IP_RECVERR, data)]


def test_icmp_answers_are_read_from_the_extended_error() -> None:
    assert icmp_error(_cmsg(SO_EE_ORIGIN_ICMP, 11, "10.0.9.3")) == (11, "10.0.9.3")
    assert icmp_error(_cmsg(SO_EE_ORIGIN_ICMP, 3, None)) == (3, None)
    assert icmp_error(_cmsg(4, 0, None)) is None  # a TX timestamp, not an ICMP answer
    assert icmp_error([(socket.SOL_SOCKET, 37, bytes(48))]) is None


def test_a_large_simulated_fleet_learns_its_share_of_the_spines_budget() -> None:
    """10 000 agents tracing at once share each spine's 1 000 answers a second: paced
    from random phases with a burst of one, a 10 s window learns close to 4 spines x
    1 000/s x 10 s of cross-leaf paths (in step, with the old bursts of 24 each, the
    spines' buckets were spent in the first milliseconds and 3 120 were learnt)."""
    from cwctl.scan.request import ScanRequest, SimOptions
    from cwctl.transport.sim import simulate

    sparse = ScanRequest(budget="watch")  # 2 pairs/s per peer: the traces, not the probes
    paths = simulate(SimOptions(hosts=10_000), 10.0, request=sparse).paths
    cross = [r for r in paths if len(r.hops) > 2]
    learnt = sum(r.hops[1] is not None for r in cross)
    assert learnt > 0.8 * 4 * 1000 * 10
