"""Path discovery between real agents on loopback: every flow traced, nothing counted.

On loopback a trace packet with TTL 1 already reaches the far agent, so every path is
complete with no hop; what this checks is the machinery around it: trace packets leave
from the probes' own sockets (the record's ports are the probe flow's), the far agent
acknowledges them and counts them as nothing (no probe rows, no answers, no errors),
and both the forward and the reverse path of every probe flow come back as records.
"""

from __future__ import annotations

import asyncio

from cwctl.inventory import ProbeSettings
from cwctl.scan.pathcache import PathCache
from cwctl.session import analyse
from cwctl.transport.base import run_scan
from cwctl.transport.local import launch_local, local_hosts
from cwctl.transport.plan import ScanPlan
from cwctl.transport.traceplan import TraceSettings


def test_every_probe_flow_gets_its_forward_and_reverse_path() -> None:
    plan = ScanPlan(
        hosts=local_hosts(4),
        settings=ProbeSettings(peers=2, ports=2, rate=20.0),
        duration_s=0.6,
        source="local",
        trace=TraceSettings.for_ratelimit(0),
    )
    c = asyncio.run(run_scan(plan, launch_local))
    assert {s.status for s in c.status.values()} == {"ok"}, c.status
    t = c.table
    flows = {
        (t.hosts[s], t.hosts[d], int(p)) for s, d, p in zip(t.src, t.dst, t.sport, strict=True)
    }
    assert len(flows) == 4 * 2 * 2
    for prober, answerer, sport in flows:
        fwd = c.paths.forward(prober, answerer, sport)
        rev = c.paths.reverse(prober, answerer, sport)
        assert fwd is not None and rev is not None, (prober, answerer, sport)
        port = c.hello[answerer]["port"]
        assert (fwd.sport, fwd.dport, rev.sport, rev.dport) == (sport, port, port, sport)
        assert fwd.src == c.hello[prober]["address"] == rev.dst
        assert fwd.hops == () and fwd.complete and rev.hops == () and rev.complete
    assert len(c.paths) == 2 * len(flows)
    assert sum(s["trace"]["flows"] for s in c.summaries.values()) == 2 * len(flows)
    # trace packets are nobody's probes: every answer an agent counts is a probe it got
    for host, summary in c.summaries.items():
        assert summary["trace"]["paths"] == summary["trace"]["flows"]
        got = sum(c.summaries[p]["sent"].get(host, 0) for p in c.summaries)
        assert sum(summary["rx"].values()) == got
        assert summary["send_errors"] == {}
    assert int(t.complete.sum()) == len(t)  # and no probe was lost to tracing
    report = analyse(c).to_json()
    for h in report["hosts"]:  # what tracing cost each agent, in the scan's report
        assert h["agent"]["trace"] == c.summaries[h["name"]]["trace"]


def test_without_a_plan_nothing_is_traced() -> None:
    plan = ScanPlan(
        hosts=local_hosts(2),
        settings=ProbeSettings(peers=1, ports=1, rate=20.0),
        duration_s=0.3,
        source="local",
    )
    c = asyncio.run(run_scan(plan, launch_local))
    assert len(c.paths) == 0
    assert all(s["trace"] is None for s in c.summaries.values())


def test_a_second_scan_keeps_its_tuples_and_traces_nothing_known() -> None:
    cache = PathCache(revalidate=0.0)
    plan = ScanPlan(
        hosts=local_hosts(3),
        settings=ProbeSettings(peers=2, ports=2, rate=20.0),
        duration_s=0.5,
        source="local",
        trace=TraceSettings.for_ratelimit(0),
        cache=cache,
    )
    first = asyncio.run(run_scan(plan, launch_local))
    second = asyncio.run(run_scan(plan, launch_local))
    for host in first.hello:  # the same ports, so the same 5-tuples
        assert first.hello[host]["port"] == second.hello[host]["port"]
        assert first.hello[host]["sports"] == second.hello[host]["sports"]
    assert all(s["trace"]["flows"] == 0 for s in second.summaries.values())
    assert len(second.paths) == len(first.paths) > 0
    assert all(p.cached for p in second.paths) and not any(p.cached for p in first.paths)


def test_multi_rail_hosts_probe_and_trace_each_nic_on_its_own_address() -> None:
    """Two rails per host (127.0.0.x and 127.0.1.x): probes leave from each rail's own
    sockets to the peer's same rail, name their NIC, and are traced rail by rail."""
    hosts = local_hosts(3)
    rails = {
        h.name: [("rail0", h.address), ("rail1", h.address.replace("127.0.0.", "127.0.1."))]
        for h in hosts
    }
    plan = ScanPlan(
        hosts=hosts,
        settings=ProbeSettings(peers=2, ports=2, rate=20.0),
        duration_s=0.5,
        source="local",
        trace=TraceSettings.for_ratelimit(0),
        rails=rails,
        cache=PathCache(revalidate=0.0),
    )
    c = asyncio.run(run_scan(plan, launch_local))
    assert {s.status for s in c.status.values()} == {"ok"}, c.status
    for h in hosts:
        got = [(r["nic"], r["address"]) for r in c.hello[h.name]["rails"]]
        assert got == [tuple(r) for r in rails[h.name]]
        assert len(c.hello[h.name]["sports"]) == 4  # two source ports per rail
    t = c.table
    nics = {t.nics[i] for i in t.nic.tolist()}
    assert nics == {"rail0", "rail1"} and (t.nic >= 0).all()
    assert int(t.complete.sum()) == len(t)
    for p in c.paths:
        assert p.nic in ("rail0", "rail1"), p
        mine, theirs = dict(rails[p.host])[p.nic], dict(rails[p.peer])[p.nic]
        assert (p.src, p.dst) == (mine, theirs), p  # each rail to the peer's same rail
        assert p.complete
    assert {p.nic for p in c.paths if p.role == "reply"} == {"rail0", "rail1"}
    again = asyncio.run(run_scan(plan, launch_local))  # every rail's tuples kept: all known
    assert all(s["trace"]["flows"] == 0 for s in again.summaries.values())
    assert len(again.paths) == len(c.paths) and all(p.cached for p in again.paths)
