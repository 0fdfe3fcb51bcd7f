"""Steer at the hosts (``cwctl reroute ELEMENT --at hosts --port P``): new connections to
the affected peers leave from source ports whose paths avoid the suspect. Without
``--port``, ``moveflows.py`` moves the flows open now and uses this module's tracing, its
prior read and, for new connections to the services it saw, its SYN rule.

Planning, for a spine or a leaf-spine link of an inventory:

1. the ordered host pairs whose flows may cross it (``steerports.plan_pairs``);
2. ``nft list tables`` on every sender: nftables is there and cwctl may use it (the
   read is the plan's ``prior``, compared again before applying);
3. for each pair and each steered service (``--port``), candidate source ports traced
   both ways at the spine's TTL (``probe/hosttrace.py``: the sender traces ``a:p -> b:P``,
   the peer ``b:P -> a:p``), more rounds until the pool is full or candidates run out;
4. per sender one step: ``nft`` loads a table of its own (``cwctl_steer_<plan id>``)
   whose postrouting NAT chain rewrites the source port of each *new* connection
   ``a -> b:P`` to the next port of the pair's healthy pool (``numgen inc mod N map``);
   the undo deletes that table, so ``nft list ruleset`` reads as before, byte for byte.

Why NAT, and its limits, are in docs/actions.md ("Steering at the hosts"). ``--roce``
computes the per-pair source-port sets for RoCEv2 (UDP to 4791) and plans no step.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cwctl.actions import steerports as sp
from cwctl.actions.executor import Verification
from cwctl.actions.plan import SUDO, ActionPlan, Step
from cwctl.actions.runners import CommandResult, ReadFailed, Runner, read_on_all
from cwctl.actions.steerports import SteerOptions
from cwctl.errors import EXIT_PROBLEMS, CwctlError, InputError
from cwctl.probe import hosttrace

if TYPE_CHECKING:
    from cwctl.inventory import Inventory

LIST_ARGV = ("nft", "list", "tables")
MAX_ROUNDS = 4
TRACE_RATE = 1000  # packets per second a host sends while tracing
TRACE_CHUNK = 1500  # tuples per tracer command (~40 bytes each on its command line)
METHOD = "nftables snat, numgen port map"
SHOWN_PAIRS = 6  # pairs summed up in the plan's notes (the JSON has every one)
# Only a TCP connection's opening SYN is translated. Where nothing tracked connections
# before the table was loaded (a namespace with no conntrack user), conntrack picks an open
# connection up at its next packet as a new one, and the NAT chain would move it to a pool
# port mid-stream: the peer answers the unknown tuple with a RST ("Connection reset by
# peer", measured on the namespace fabric with an iperf3 run open across the apply).
TCP_OPENING = "tcp flags & (syn | ack) == syn "


@dataclass
class HostFabric:
    """What planning needs of the inventory: each host's fabric address, leaf, python."""

    address: dict[str, str]
    leaf_of: dict[str, str | None]
    uplinks: dict[str, list[str]]
    python: dict[str, str]
    switch_of_address: dict[str, str]
    spines: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, inv: Inventory) -> HostFabric:
        return cls(
            address={h.name: h.probe_binds()[0][1] for h in inv.hosts},
            leaf_of={h.name: h.leaf for h in inv.hosts},
            uplinks={s.name: list(s.uplinks) for s in inv.switches if s.role == "leaf"},
            python={h.name: inv.endpoint(h).python for h in inv.hosts},
            switch_of_address=inv.switch_of_address(),
            spines={s.name for s in inv.switches if s.role == "spine"},
        )


def table_name(plan_id: str) -> str:
    return "cwctl_steer_" + re.sub(r"[^A-Za-z0-9]", "_", plan_id)


def reads(argv: Sequence[str], sudo: bool) -> tuple[str, ...]:
    return (*SUDO, *argv) if sudo else tuple(argv)


def trace_argv(python: str, spec: dict[str, Any], sudo: bool) -> tuple[str, ...]:
    source = Path(hosttrace.__file__).read_text()
    return reads((python, "-c", source, json.dumps(spec, separators=(",", ":"))), sudo)


# --- tracing ------------------------------------------------------------------------------

Job = tuple[sp.Key, int, bool]  # (pair and service, candidate port, is the reverse)


async def _trace_on(
    runner: Runner, fabric: HostFabric, host: str, jobs: list[tuple[list[Any], Job]], sudo: bool
) -> tuple[str, CommandResult, list[Job], list[str | None]]:
    spec = {
        "src": fabric.address[host],
        "ttl": sp.SPINE_TTL,
        "rate": TRACE_RATE,
        "wait_s": 0.5,
        "tries": 2,
        "jobs": [j for j, _ in jobs],
    }
    result = await runner.run(host, trace_argv(fabric.python[host], spec, sudo))
    hops: list[str | None] = []
    if result.ok:
        try:
            hops = list(json.loads(result.stdout)["hops"])
        except (ValueError, KeyError, TypeError):
            result = CommandResult(3, result.stdout, "the tracer printed no hops")
    return host, result, [t for _, t in jobs], hops


def _trace_failure(failed: list[tuple[str, CommandResult]]) -> CwctlError:
    names = "; ".join(f"{h}: {r.detail() or f'exit {r.rc}'}" for h, r in failed[:4])
    if any(r.rc == hosttrace.NO_PRIVILEGE for _, r in failed):
        return InputError(f"cannot trace source ports (no privilege): {names} (try --sudo)")
    return CwctlError(
        f"cannot trace source ports on {len(failed)} host(s): {names}", exit_code=EXIT_PROBLEMS
    )


async def trace_ports(
    runner: Runner,
    fabric: HostFabric,
    wanted: dict[sp.Key, list[int]],
    traced: sp.TracedPorts,
    *,
    reply: bool,
    sudo: bool,
) -> None:
    """Trace each key's candidate ports (both ways with ``reply``) into ``traced``."""
    by_host: dict[str, list[tuple[list[Any], Job]]] = {}
    for key, ports in wanted.items():
        a, b, service = key
        for port in ports:
            fwd = [service.proto, fabric.address[b], port, service.port]
            by_host.setdefault(a, []).append((fwd, (key, port, False)))
            if reply:
                rev = [service.proto, fabric.address[a], service.port, port]
                by_host.setdefault(b, []).append((rev, (key, port, True)))
    chunks = [
        (h, jobs[i : i + TRACE_CHUNK])
        for h, jobs in by_host.items()
        for i in range(0, len(jobs), TRACE_CHUNK)
    ]  # one command line holds at most 128 KiB per argument (MAX_ARG_STRLEN)
    results = await asyncio.gather(*(_trace_on(runner, fabric, h, j, sudo) for h, j in chunks))
    failed = [(h, r) for h, r, _, _ in results if not r.ok]
    if failed:
        raise _trace_failure(failed)
    seen: dict[tuple[sp.Key, int, bool], str | None] = {}
    for _, _, jobs, hops in results:
        for job, hop in zip(jobs, hops, strict=False):
            seen[job] = sp.spine_of(hop, fabric.switch_of_address, fabric.spines)
    for key, ports in wanted.items():
        for port in ports:
            traced.record(key, port, seen.get((key, port, False)), seen.get((key, port, True)))


async def trace_answered(
    runner: Runner,
    fabric: HostFabric,
    wanted: dict[sp.Key, list[int]],
    sudo: bool,
    rounds: int = MAX_ROUNDS,
) -> sp.TracedPorts:
    """Each key's ports traced both ways, those left unanswered (an ICMP rate limit, a
    lost answer) asked again, up to ``rounds`` in all."""
    traced = sp.TracedPorts()
    await trace_ports(runner, fabric, wanted, traced, reply=True, sudo=sudo)
    for _ in range(rounds - 1):
        again = {
            key: [p for p in ports if None in (traced.forward[key][p], traced.reverse[key][p])]
            for key, ports in wanted.items()
        }
        again = {k: v for k, v in again.items() if v}
        if not again:
            break
        await trace_ports(runner, fabric, again, traced, reply=True, sudo=sudo)
    return traced


async def find_pools(
    runner: Runner,
    fabric: HostFabric,
    keys: list[sp.Key],
    suspect: sp.Avoided,
    pool: int,
    *,
    reply: bool = True,
    sudo: bool = False,
) -> tuple[dict[sp.Key, list[int]], sp.TracedPorts]:
    """Trace rounds until every key has ``pool`` healthy ports (or candidates run out):
    the healthy pools, and everything traced."""
    traced = sp.TracedPorts()
    for _ in range(MAX_ROUNDS):
        wanted = {}
        for key in keys:
            found = len(sp.healthy(traced, key, suspect, reply=reply))
            n = sp.to_trace(found, pool, traced.traced(key))
            if n > 0:
                wanted[key] = sp.next_candidates(traced, key, n)
        if not wanted:
            break
        await trace_ports(runner, fabric, wanted, traced, reply=reply, sudo=sudo)
    pools = {key: sp.healthy(traced, key, suspect, reply=reply)[:pool] for key in keys}
    return pools, traced


# --- the plan -----------------------------------------------------------------------------


def nft_script(table: str, src: str, rules: list[tuple[str, sp.Service, list[int]]]) -> str:
    """One ``nft`` transaction: the table, its NAT chain, a rule per (peer, service)."""
    out = [
        f"add table ip {table}",
        f"add chain ip {table} post {{ type nat hook postrouting priority srcnat ; "
        "policy accept ; }",
    ]
    for dst, service, ports in rules:
        entries = ", ".join(f"{i} : {p}" for i, p in enumerate(ports))
        opening = TCP_OPENING if service.proto == "tcp" else ""
        out.append(
            f"add rule ip {table} post ip saddr {src} ip daddr {dst} meta l4proto "
            f"{service.proto} th dport {service.port} {opening}counter snat ip to {src} : "
            f"numgen inc mod {len(ports)} map {{ {entries} }}"
        )
    return " ; ".join(out)


def undo_script(table: str) -> str:
    """Delete the table, whether or not the step ran (an apply killed before it): the
    ``add`` is a no-op when the table is there and makes an empty one when not, in the
    same transaction as the delete, so the undo always ends with no such table."""
    return f"add table ip {table} ; delete table ip {table}"


def steer_steps(fabric: HostFabric, table: str, pools: dict[sp.Key, list[int]]) -> list[Step]:
    by_sender: dict[str, list[tuple[str, sp.Service, list[int]]]] = {}
    for (a, b, service), ports in sorted(pools.items()):
        by_sender.setdefault(a, []).append((fabric.address[b], service, ports))
    steps = []
    for host, rules in by_sender.items():
        peers = len({dst for dst, _, _ in rules})
        n = min(len(p) for _, _, p in rules)
        steps.append(
            Step(
                host=host,
                description=(
                    f"{host}: new connections to {peers} peer(s) leave from healthy source "
                    f"ports (nft table {table}, {n}+ ports per peer and service)"
                ),
                argv=("nft", nft_script(table, fabric.address[host], rules)),
                undo_argv=("nft", undo_script(table)),
                undo_description=f"{host}: delete nft table {table}",
            )
        )
    return steps


def _refuse_small(pools: dict[sp.Key, list[int]], traced: sp.TracedPorts, suspect: str) -> None:
    short = [
        f"{a} -> {b} {s}: {len(p)} of {traced.traced((a, b, s))} traced"
        for (a, b, s), p in sorted(pools.items())
        if len(p) < sp.MIN_PORTS
    ]
    if short:
        raise CwctlError(
            f"too few healthy source ports avoid {suspect} (need {sp.MIN_PORTS}): "
            + "; ".join(short[:4])
            + (f" (and {len(short) - 4} more)" if len(short) > 4 else ""),
            exit_code=EXIT_PROBLEMS,
        )


def fabric_pairs(inv: Inventory, suspect: sp.Avoided) -> tuple[HostFabric, list[tuple[str, str]]]:
    """The inventory's fabric and the ordered host pairs whose flows may cross the
    suspect; ``InputError`` where there are none to steer."""
    fabric = HostFabric.of(inv)
    if not any(fabric.leaf_of.values()):
        raise InputError(
            f"cannot steer around {suspect.name} at the hosts: the inventory gives no host "
            "a leaf (give each [[host]] a leaf and each leaf switch its uplinks)"
        )
    pairs = sp.plan_pairs(fabric.leaf_of, fabric.uplinks, suspect)
    if not pairs:
        raise InputError(
            f"no two hosts on different leaves reach {suspect.spine}: nothing to steer"
        )
    return fabric, pairs


NFT_TABLES = "nft tables"  # the prior's read, by name (``read_on_all``, ``read_together``)


async def read_prior(runner: Runner, hosts: list[str], sudo: bool, plan: ActionPlan) -> None:
    """``nft list tables`` on every host a step will change: the plan's prior (read
    again, and compared, before applying)."""
    read = reads(LIST_ARGV, sudo)
    try:
        seen = await read_on_all(runner, hosts, lambda h: read, NFT_TABLES)
    except ReadFailed as exc:
        raise cannot_steer(exc) from None
    record_prior(plan, seen, sudo)


def cannot_steer(exc: ReadFailed) -> InputError:
    return InputError(f"cannot steer at the hosts (needs nftables and root, or --sudo): {exc}")


def record_prior(plan: ActionPlan, seen: dict[str, str], sudo: bool) -> None:
    """Each host's ``nft list tables`` (``seen``) as the plan's prior."""
    read = list(reads(LIST_ARGV, sudo))
    for host, text in seen.items():
        plan.prior[f"nft:{host}"] = {"host": host, "read": read, "seen": text}


async def plan_host_steering(
    fabric: HostFabric,
    suspect: sp.Avoided,
    pairs: list[tuple[str, str]],
    runner: Runner,
    options: SteerOptions,
    plan: ActionPlan,
) -> list[Step]:
    """New connections to the named services (``--port``), or the RoCE sets: fill
    ``plan`` (prior, notes, steering) and return its steps."""
    services = (sp.ROCE,) if options.roce else options.services
    pool = options.pool or sp.DEFAULT_POOL
    keys = [(a, b, s) for a, b in pairs for s in services]
    if not options.roce:
        await read_prior(runner, sorted({a for a, _ in pairs}), options.sudo, plan)
    pools, traced = await find_pools(
        runner, fabric, keys, suspect, pool, reply=not options.roce, sudo=options.sudo
    )
    _refuse_small(pools, traced, suspect.name)
    table = table_name(plan.id)
    sets = [
        {"host": a, "peer": b, "proto": s.proto, "dport": s.port, "ports": pools[(a, b, s)],
         "traced": traced.traced((a, b, s))}
        for a, b, s in keys
    ]  # fmt: skip
    plan.steering = {
        "method": "none: computed for a RoCE plugin" if options.roce else METHOD,
        "suspect": suspect.name,
        "spine": suspect.spine,
        "table": None if options.roce else table,
        "roce" if options.roce else "pools": sets,
    }
    lines = sp.summary(pools)
    plan.notes += lines[:SHOWN_PAIRS]
    if len(lines) > SHOWN_PAIRS:
        plan.notes.append(
            f"... and {len(lines) - SHOWN_PAIRS} more pair(s): --format json lists all"
        )
    if options.roce:
        plan.notes.append(
            f"RoCEv2 source ports (UDP to {sp.ROCE_PORT}) whose path avoids {suspect.name}: "
            "nothing applied; a NIC sets them per queue pair (docs/actions.md)"
        )
        return []
    thin = [k for k, p in pools.items() if len(p) < pool]
    if thin:
        plan.notes.append(
            f"{len(thin)} pair(s) have fewer than {pool} healthy ports: more "
            "concurrent connections than that to one peer and port may wait for a retry"
        )
    plan.notes.append("connections already open keep their path; only new ones are steered")
    return steer_steps(fabric, table, pools)


# --- verification -------------------------------------------------------------------------


@dataclass
class SteerVerification(Verification):
    """Every installed port traced again both ways: those still crossing the suspect."""

    ports: int = 0
    crossing: list[str] = field(default_factory=list)
    unanswered: int = 0  # ports a direction of which no hop answered for (never "gone")

    def to_json(self) -> dict[str, Any]:
        extra = {"ports": self.ports, "crossing": self.crossing, "unanswered": self.unanswered}
        return {**super().to_json(), **extra}

    def message(self) -> str:
        if self.gone:
            silent = f" ({self.unanswered} unanswered)" if self.unanswered else ""
            return (
                f"verify: the {self.ports} steered source ports, traced again both ways "
                f"from those ports, avoid {self.element}{silent}"
            )
        shown = "; ".join(self.crossing[:3])
        n = len(self.crossing)
        return f"verify: {n} of {self.ports} steered ports cross {self.element}: {shown}"


async def verify_steering(plan: ActionPlan, inv: Inventory, runner: Runner) -> SteerVerification:
    """Trace every installed port again, both ways, from the steered ports themselves."""
    sudo = any(v.get("read", [None])[0] == SUDO[0] for v in plan.prior.values())
    fabric = HostFabric.of(inv)
    wanted: dict[sp.Key, list[int]] = {}
    for entry in plan.steering.get("pools", []):
        key = (entry["host"], entry["peer"], sp.Service(entry["proto"], int(entry["dport"])))
        wanted[key] = [int(p) for p in entry["ports"]]
    for move in plan.steering.get("moves", []):  # moved flows: their wire ports
        key = (move["host"], move["peer"], sp.Service(move["proto"], int(move["dport"])))
        wanted.setdefault(key, []).append(int(move["wire"]))
    traced = await trace_answered(runner, fabric, wanted, sudo)
    spine = str(plan.steering.get("spine"))
    bad, unknown = [], 0
    for key, ports in wanted.items():
        for port in ports:
            fwd, rev = traced.forward[key][port], traced.reverse[key][port]
            if spine in (fwd, rev):
                bad.append(f"{key[0]}:{port} -> {key[1]} {key[2]} ({fwd}, back {rev})")
            unknown += fwd is None or rev is None
    n = sum(len(p) for p in wanted.values())
    gone = not bad and not unknown
    return SteerVerification(plan.element, gone, [], ports=n, crossing=bad, unanswered=unknown)
