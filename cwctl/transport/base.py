"""The scan orchestrator every agent transport shares (ssh, local, slurm).

A transport only knows how to start an agent on one host and talk to it (an
``AgentSession``, ``hostrun.py``: bytes in, bytes out, exit status). This module does
the rest (``hostrun.HostRun`` follows each agent, ``hostrun.Collector`` gathers):

1. Fan out: start every agent (``launch``), send it the bundle and its params, wait for
   its ``hello`` (bound address and ports). A host that fails here is ``unreachable``
   (no session) or ``error`` (a session, but no working agent).
2. Two-phase start: once every agent has answered or failed, send each the peer table
   (``cwctl.fabric.topology.assign_peers`` over the hosts that answered) and one common start
   time.
3. Stream every agent's stdout through ``cwctl.records.parse_line`` into one
   ``ProbeTableBuilder`` until the agents exit (``probes`` batches, decoded column by
   column, or single ``probe`` records); a malformed line marks its host ``error``
   (naming host and line) and the scan goes on.

Cancellation (Ctrl-C) closes every session; agents exit on stdin EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from typing import Any

from cwctl.fabric.topology import assign_peers
from cwctl.probe.bootstrap import agent_payload
from cwctl.scan.collection import Collection, HostStatusName
from cwctl.scan.pathcache import Rail
from cwctl.scan.request import Progress
from cwctl.transport.hostrun import (
    Collector,
    HostFailure,
    HostRun,
    Launcher,
    last_line,
)
from cwctl.transport.plan import ScanPlan, budget_params
from cwctl.transport.traceplan import probers_of, trace_plan

PROBE_TIMEOUT_S = 0.5  # an exchange unanswered this long is lost (agent's timeout_s)
LINGER_S = PROBE_TIMEOUT_S + 0.2  # agents keep answering this long after their window
# After the expected end, before an agent is given up: its linger and GPU sampler stop
# (up to 10 s), then its last records through a collector that decodes every host's
# stream in this one process, so the wait grows with the fleet (5 ms of records per host).
FINISH_GRACE_BASE_S = 12.0
FINISH_GRACE_PER_HOST_S = 0.005


def finish_grace_s(n_hosts: int) -> float:
    """Seconds past the expected end of probing before an agent is given up."""
    return FINISH_GRACE_BASE_S + FINISH_GRACE_PER_HOST_S * max(0, n_hosts)


def raise_fd_limit(n_hosts: int, per_host: int = 4) -> None:
    """Lift the soft open-files limit towards the hard one: every host holds a session
    (a socket, or three pipes) for the whole scan, and 1024 is a common default."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = n_hosts * per_host + 256
        if soft != resource.RLIM_INFINITY and soft < want:
            ceiling = want if hard == resource.RLIM_INFINITY else min(want, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
    except (ImportError, ValueError, OSError):
        pass  # not Unix, or not allowed: the scan says which hosts it could not reach


async def run_scan(
    plan: ScanPlan, launch: Launcher, progress: Progress | None = None
) -> Collection:
    """Start every agent, run the two-phase start, collect every record: one Collection."""
    raise_fd_limit(len(plan.hosts))
    collector = Collector([h.name for h in plan.hosts], progress)
    runs = [HostRun(info, collector) for info in plan.hosts]
    settings = plan.settings
    try:
        opened = await asyncio.gather(*(_open(run, plan, launch, collector) for run in runs))
        live = [run for run, ok in zip(runs, opened, strict=True) if ok]
        peers = assign_peers(
            [r.name for r in live],
            settings.peers,
            seed=plan.seed,
            leaf_of=plan.topology.leaf_of if plan.topology else None,
        )
        table = {r.name: _peer_entry(r.hello) for r in live if r.hello}
        known = _known_flows(plan, live)
        traces = _trace_plans(plan, live, peers, known)
        start_in_s = 0.3 + 0.002 * len(live)
        start_ns = time.time_ns() + int(start_in_s * 1e9)
        collector.report(
            "started",
            hosts=len(live),
            of=len(runs),
            start_in_s=round(start_in_s, 3),
            duration_s=plan.duration_s,
        )
        await asyncio.gather(
            *(
                _start(run, table, peers[run.name], start_ns, start_in_s, traces.get(run.name))
                for run in live
            )
        )
        loop = asyncio.get_running_loop()
        until = loop.time() + start_in_s + plan.duration_s + finish_grace_s(len(live))
        await asyncio.gather(*(_collect(run, until) for run in live))
    finally:
        await asyncio.shield(_close_all(runs))
    collector.report("records", force=True)
    ok = sum(r.status.status == "ok" for r in runs)
    collector.report("done", ok=ok, of=len(runs), bytes=collector.bytes)
    collection = Collection(
        source=plan.source,
        hosts=list(plan.hosts),
        table=collector.builder.build(),
        duration_s=plan.duration_s,
        status={r.name: r.status for r in runs},
        topology=plan.topology,
        paths=collector.paths,
        hello={r.name: r.hello for r in runs if r.hello is not None},
        gpu=collector.gpu,
        summaries={r.name: r.summary for r in runs if r.summary is not None},
        peers={r.name: peers.get(r.name, []) for r in runs if r.name in peers},
        params={
            "rate": settings.rate,
            "peers": settings.peers,
            "ports": settings.ports,
            "port": settings.port,
            "gap_ns": int(settings.gap_us * 1000),
            "duration_s": plan.duration_s,
            "seed": plan.seed,
            "budget": budget_params(settings, len(plan.hosts)),
        },
    )
    if plan.cache is not None:  # known paths stand in where this scan learnt less
        plan.cache.fill(
            collection, plan.cache.known(time.time_ns(), _addresses(runs), revalidate=False)
        )
        plan.cache.remember(collection)
    return collection


def _known_flows(plan: ScanPlan, live: Sequence[HostRun]) -> set[tuple[str, str, str, int]]:
    """Traces (role, host, peer, port) an earlier scan made that need not be made now."""
    if plan.cache is None or plan.trace is None:
        return set()
    return plan.cache.known(time.time_ns(), _addresses(live))


def _addresses(runs: Sequence[HostRun]) -> dict[str, list[Rail]]:
    """Each agent's bound addresses (a rail each), answering ports and source ports."""
    return {r.name: _rails(r.hello) for r in runs if r.hello}


def _rails(hello: dict[str, Any]) -> list[Rail]:
    """A hello's rails (probe/rails.py), else its one address, port and source ports."""
    rails = hello.get("rails")
    if not (isinstance(rails, list) and rails):
        rails = [{**hello, "sports": hello.get("sports") or []}]
    return [(str(r["address"]), int(r["port"]), [int(s) for s in r["sports"]]) for r in rails]


def _trace_plans(
    plan: ScanPlan,
    live: Sequence[HostRun],
    peers: dict[str, list[str]],
    known: set[tuple[str, str, str, int]],
) -> dict[str, dict[str, Any]]:
    """Each agent's trace plan: its probe flows, and the reply flows of its probers."""
    if plan.trace is None:
        return {}
    sports = {r.name: list((r.hello or {}).get("sports") or []) for r in live}
    probers = probers_of(peers)
    return {
        r.name: trace_plan(
            r.name,
            peers.get(r.name, []),
            {p: sports.get(p, []) for p in probers.get(r.name, [])},
            plan.topology,
            plan.trace,
            [(role, peer, port) for role, host, peer, port in known if host == r.name],
            tracers=len(live),
        )
        for r in live
    }


def _peer_entry(hello: dict[str, Any]) -> list[Any]:
    """A peer table entry: address and answering port, and each rail's address, port
    and source ports on a multi-rail host (probe/rails.py)."""
    entry: list[Any] = [hello["address"], hello["port"]]
    rails = hello.get("rails")
    if isinstance(rails, list) and rails:
        entry.append([[r["address"], r["port"], r["sports"]] for r in rails])
    return entry


def _port_wishes(host: str, plan: ScanPlan) -> dict[str, Any]:
    if plan.cache is None or plan.trace is None:
        return {}
    ports = plan.cache.requested_ports(host)
    # port_wish: each rail's answering port of last time; sports: every source port
    return {"port_wish": ports.get("port"), "sports": ports.get("sports")} if ports else {}


def agent_params(run: HostRun, plan: ScanPlan) -> dict[str, Any]:
    s = plan.settings
    return {
        "host": run.name,
        # the inventory's probe address first (the fabric), else where the session went
        "bind": plan.bind.get(run.name)
        or getattr(run.session, "bind_address", None)
        or run.info.address,
        "port": s.port,
        "ports": s.ports,
        "rate": s.rate,
        "gap_ns": int(s.gap_us * 1000),
        "duration_s": plan.duration_s,
        "timeout_s": PROBE_TIMEOUT_S,
        "linger_s": LINGER_S,
        "trace": plan.trace is not None,
        **({"tos": plan.tos} if plan.tos else {}),
        **({"rails": [list(r) for r in plan.rails[run.name]]} if run.name in plan.rails else {}),
        # the ports of the last scan, so known paths keep their 5-tuples (pathcache.py)
        **_port_wishes(run.name, plan),
        "auth": plan.auth,
        "deadline_s": agent_deadline_s(plan),
    }


def agent_deadline_s(plan: ScanPlan) -> float:
    """The agent's own end, whatever happens to us: hello wait + start + probing + slack."""
    return plan.hello_timeout_s + plan.duration_s + finish_grace_s(len(plan.hosts)) + 10.0


def hard_lifetime_s(plan: ScanPlan) -> float:
    """The hard lifetime every launcher gives its agents (``bootstrap_argv``'s
    ``lifetime_s``: the agent's own alarm, and timeout(1) over SSH): its deadline plus
    slack, so a healthy agent always ends first."""
    return agent_deadline_s(plan) + 10.0


async def _open(run: HostRun, plan: ScanPlan, launch: Launcher, collector: Collector) -> bool:
    """Phase 1 for one host: session, bundle, params, hello. False if the host failed."""
    status: HostStatusName = "error"
    reason: str | None = None
    try:
        run.session = await launch(run.info)
        await run.session.send(agent_payload(agent_params(run, plan)))
        await asyncio.wait_for(_until_hello(run), plan.hello_timeout_s)
    except HostFailure as exc:
        status, reason = exc.status, exc.reason
    except TimeoutError:
        reason = f"{run.name}: no hello from the agent within {plan.hello_timeout_s:g} s"
    except (OSError, ConnectionError) as exc:
        reason = f"{run.name}: session failed: {exc}"
    if reason is None and run.hello is not None and run.status.status == "ok":
        collector.report("connected", host=run.name, pid=run.hello.get("pid"))
        return True
    explained = await _explain_exit(run)
    run.fail(status, explained or reason or f"{run.name}: the agent ended before its hello")
    return False


async def _until_hello(run: HostRun) -> None:
    while run.hello is None:
        lines = await run.read_lines()
        if lines is None:
            return
        for line in lines:
            run.handle(line)
        if run.fatal:
            return


async def _explain_exit(run: HostRun) -> str | None:
    """After an early end: why, from the exit status and the stderr tail (None: unknown)."""
    if run.session is None:
        return None
    try:
        await asyncio.wait_for(run.session.close(), 5.0)
        code, sig, stderr = await asyncio.wait_for(run.session.finish(), 5.0)
    except Exception:
        return None
    tail = last_line(stderr)
    if code == 127 or "not found" in tail or "No such file" in tail:
        return f"{run.name}: no Python to run the agent ({tail or 'exit status 127'})"
    if sig:
        return f"{run.name}: agent killed by signal {sig} before its hello"
    if code not in (None, 0):
        return f"{run.name}: agent exited with status {code}: {tail or 'no message'}"
    return None


async def _start(
    run: HostRun,
    table: dict[str, list[Any]],
    probe: list[str],
    start_ns: int,
    start_in_s: float,
    trace: dict[str, Any] | None = None,
) -> None:
    msg = {"type": "start", "peers": table, "probe": probe, "start_ns": start_ns}
    msg["start_in_s"] = start_in_s
    if trace is not None:
        msg["trace"] = trace
    assert run.session is not None
    try:
        await run.session.send(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    except (OSError, ConnectionError) as exc:
        run.fail("error", f"{run.name}: cannot send the start message: {exc}")


async def _collect(run: HostRun, until: float) -> None:
    """Phase 3 for one host: every record until the agent exits (or is given up)."""
    assert run.session is not None
    try:
        async with asyncio.timeout_at(until):
            while (lines := await run.read_lines()) is not None:
                for line in lines:
                    run.handle(line)
                run.collector.report("records")
            code, sig, stderr = await run.session.finish()
    except TimeoutError:
        run.fail("error", f"{run.name}: agent still running past the end of the scan; stopped")
        return
    except (OSError, ConnectionError) as exc:
        run.fail("error", f"{run.name}: session lost: {exc}")
        return
    tail = last_line(stderr)
    if sig:
        run.fail("error", f"{run.name}: agent killed by signal {sig} after {run.line_no} lines")
    elif code not in (None, 0):
        run.fail("error", f"{run.name}: agent exited with status {code}: {tail or '?'}")
    elif run.summary is None:
        run.fail("error", f"{run.name}: agent ended without a summary: {tail or 'no message'}")


async def _close_all(runs: Sequence[HostRun]) -> None:
    async def close(run: HostRun) -> None:
        if run.session is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(run.session.close(), 5.0)

    await asyncio.gather(*(close(r) for r in runs))
