"""Move running flows off a suspect at the hosts: paired stateless port translation.

``cwctl reroute ELEMENT --at hosts`` with no ``--port``: the flows the hosts' socket
tables show between pairs whose paths may cross ELEMENT (``flowtable.py``), established
ones included, are moved to wire ports whose 5-tuple hashes onto a healthy path both
ways. For a flow ``A:p -> B:P`` given the wire port ``p'`` (REAL-PARTS.md, "Moving an
established TCP connection"):

    A egress   ip daddr B, sport p,  dport P   -> sport p'     (rewrite)
    B ingress  ip saddr A, sport p', dport P   -> sport p      (restore)
    B egress   ip daddr A, sport P,  dport p   -> dport p'     (rewrite)
    A ingress  ip saddr B, sport P,  dport p'  -> dport p      (restore)

Both sockets keep seeing ``p``; the wire carries ``p'``. The chains hook ``netdev``
ingress and egress of the host's fabric interface, below conntrack, so no connection
tracking entry is made or changed. Each host gets two tables of its own, each an nft map
keyed on (address . source port . destination port), one rule per map, not one rule per
flow: ``<table>_in`` (restoring, ingress) and ``<table>_out`` (rewriting, egress).

Order is the whole trick. The plan installs every host's restoring table before any
rewriting one: a packet carrying ``p'`` never reaches a host that cannot translate it
back (the other order made the receiver answer with a reset). Rollback runs the steps
last first, so rewriting tables go before restoring ones. A kill at any point leaves a
prefix of that order in place, which carries every flow correctly; ``cwctl rollback``
(and a restarted ``watch``) takes the rest away. Each undo is ``add table; delete
table`` in one transaction, so ``nft list ruleset`` reads as before, byte for byte.

Flows whose current port already avoids the suspect both ways (traced, as any port is)
stay where they are. New connections to the services seen are covered by the SYN rule
of ``steer.py``, on healthy ports that no moved flow uses.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cwctl.actions import steer
from cwctl.actions import steerports as sp
from cwctl.actions.flowtable import (
    ADDRESSES_ARGV,
    SOCKETS_ARGV,
    Flow,
    fabric_devices,
    find_flows,
    parse_sockets,
)
from cwctl.actions.plan import ActionPlan, Step
from cwctl.actions.runners import ReadFailed, Runner, read_together
from cwctl.errors import EXIT_PROBLEMS, CwctlError

METHOD = "nftables netdev paired port translation (established flows) + snat (new ones)"
RESTORE_PRIORITY = -300  # before anything else on ingress: the socket must see its port
REWRITE_PRIORITY = 300  # after anything else on egress
_MAP_TYPE = "type ipv4_addr . inet_service . inet_service : inet_service ;"
# one nft command line per step: an element is ~40 bytes, MAX_ARG_STRLEN is 128 KiB
MAX_MOVES_PER_HOST = 2500


@dataclass(frozen=True)
class Move:
    flow: Flow
    wire: int

    def to_json(self) -> dict[str, Any]:
        f = self.flow
        return {"host": f.host, "port": f.port, "peer": f.peer, "proto": f.proto,
                "dport": f.peer_port, "wire": self.wire}  # fmt: skip


# Per host and hook: map name -> entries (address, sport, dport, new port)
Maps = dict[str, list[tuple[str, int, int, int]]]


def host_maps(moves: Sequence[Move], address: dict[str, str]) -> dict[str, dict[str, Maps]]:
    """host -> {"in": maps, "out": maps}: what each host translates, by hook."""
    out: dict[str, dict[str, Maps]] = defaultdict(lambda: {"in": {}, "out": {}})
    for m in moves:
        f, a, b = m.flow, address[m.flow.host], address[m.flow.peer]
        client, server = out[f.host], out[f.peer]
        client["out"].setdefault(f"sport_{f.proto}", []).append((b, f.port, f.peer_port, m.wire))
        server["in"].setdefault(f"sport_{f.proto}", []).append((a, m.wire, f.peer_port, f.port))
        server["out"].setdefault(f"dport_{f.proto}", []).append((a, f.peer_port, f.port, m.wire))
        client["in"].setdefault(f"dport_{f.proto}", []).append((b, f.peer_port, m.wire, f.port))
    return dict(out)


def chain_script(table: str, hook: str, device: str, maps: Maps) -> str:
    """One nft transaction: a netdev table, its chain on ``hook`` of ``device``, and per
    map the map, its elements and the rule that sets the port from it."""
    chain, priority = ("in", RESTORE_PRIORITY) if hook == "ingress" else ("out", REWRITE_PRIORITY)
    addr = "ip saddr" if hook == "ingress" else "ip daddr"
    out = [
        f"add table netdev {table}",
        f'add chain netdev {table} {chain} {{ type filter hook {hook} device "{device}" '
        f"priority {priority} ; policy accept ; }}",
    ]
    for name, entries in sorted(maps.items()):
        field, proto = name.split("_")
        elements = ", ".join(f"{ad} . {s} . {d} : {new}" for ad, s, d, new in entries)
        out.append(f"add map netdev {table} {name} {{ {_MAP_TYPE} }}")
        out.append(f"add element netdev {table} {name} {{ {elements} }}")
        out.append(
            f"add rule netdev {table} {chain} {proto} {field} set "
            f"{addr} . {proto} sport . {proto} dport map @{name} counter"
        )
    return " ; ".join(out)


def move_steps(
    moves: Sequence[Move],
    fabric: steer.HostFabric,
    device: dict[str, str],
    table: str,
    syn_pools: dict[sp.Key, list[int]],
) -> list[Step]:
    """Every host's restoring table, then every host's rewriting table (with, in the same
    transaction, the SYN rule for its new connections)."""
    per_host = host_maps(moves, fabric.address)
    syn: dict[str, list[tuple[str, sp.Service, list[int]]]] = defaultdict(list)
    for (a, b, service), ports in sorted(syn_pools.items()):
        syn[a].append((fabric.address[b], service, ports))
    steps: list[Step] = []
    name = f"{table}_in"
    for host, maps in sorted(per_host.items()):
        n = sum(len(e) for e in maps["in"].values())
        steps.append(
            Step(
                host=host,
                description=(
                    f"{host}: restore the ports of {n} moved flow end(s) arriving on "
                    f"{device[host]} (nft netdev table {name})"
                ),
                argv=("nft", chain_script(name, "ingress", device[host], maps["in"])),
                undo_argv=("nft", _drop("netdev", name)),
                undo_description=f"{host}: delete nft netdev table {name}",
            )
        )
    name = f"{table}_out"
    for host in sorted(set(per_host) | set(syn)):
        out: Maps = per_host[host]["out"] if host in per_host else {}
        n = sum(len(e) for e in out.values())
        script, undo, what = [], [], []
        if n:
            script.append(chain_script(name, "egress", device[host], out))
            undo.append(_drop("netdev", name))
            what.append(f"rewrite the ports of {n} moved flow end(s) leaving {device[host]}")
        if syn[host]:
            script.append(steer.nft_script(table, fabric.address[host], syn[host]))
            undo.append(_drop("ip", table))
            what.append(f"new connections to {len(syn[host])} service(s) from healthy ports")
        steps.append(
            Step(
                host=host,
                description=f"{host}: " + "; ".join(what) + f" (nft tables {table}*)",
                argv=("nft", " ; ".join(script)),
                undo_argv=("nft", " ; ".join(undo)),
                undo_description=f"{host}: delete nft tables {table}*",
            )
        )
    return steps


def _drop(family: str, table: str) -> str:
    """Delete ``table`` whether or not it is there (the ``add`` makes it when not)."""
    return f"add table {family} {table} ; delete table {family} {table}"


@dataclass
class Seen:
    """What planning read off the hosts."""

    flows: list[Flow]
    devices: dict[str, str]  # host -> its fabric interface
    used: dict[str, set[int]]  # host -> local ports its sockets hold


async def read_flows(
    runner: Runner,
    fabric: steer.HostFabric,
    pairs: list[tuple[str, str]],
    sudo: bool,
    plan: ActionPlan,
) -> Seen:
    """Every host of the pairs read at once, in one session each: its nft tables (the
    plan's prior), its sockets and its addresses."""
    hosts = sorted({h for pair in pairs for h in pair})
    reads = {steer.NFT_TABLES: steer.LIST_ARGV, "socket tables": SOCKETS_ARGV,
             "addresses": ADDRESSES_ARGV}  # fmt: skip
    try:
        seen = await read_together(runner, hosts, reads, lambda a: steer.reads(a, sudo))
    except ReadFailed as exc:
        raise steer.cannot_steer(exc) if exc.what == steer.NFT_TABLES else exc from None
    steer.record_prior(plan, seen[steer.NFT_TABLES], sudo)
    tables, addrs = seen["socket tables"], seen["addresses"]
    devices = fabric_devices(addrs, fabric.address, hosts)
    flows = find_flows(tables, fabric.address, pairs)
    used = {h: {s.local[1] for s in parse_sockets(tables[h])} for h in hosts}
    for f in flows:  # a port the wire carries for a socket of another (a NAT's)
        used[f.host].add(f.port)
    return Seen(flows, devices, used)


async def plan_moves(
    fabric: steer.HostFabric,
    suspect: sp.Avoided,
    pairs: list[tuple[str, str]],
    runner: Runner,
    options: steer.SteerOptions,
    plan: ActionPlan,
) -> list[Step]:
    """Fill ``plan`` and return its steps: the flows that may cross the suspect moved,
    then new connections to the same services steered."""
    seen = await read_flows(runner, fabric, pairs, options.sudo, plan)
    if not seen.flows:
        raise CwctlError(
            f"no TCP or UDP flow between hosts whose paths may cross {suspect.name} is open "
            "(socket tables read on "
            f"{len(seen.devices)} host(s)); to steer connections yet to open, name their "
            "port (--port)",
            exit_code=EXIT_PROBLEMS,
        )
    current: dict[sp.Key, list[int]] = defaultdict(list)
    for f in seen.flows:
        current[f.key].append(f.port)
    # the flows' own ports and the candidates traced at once, enough candidates for every
    # flow of a key to move (what the moves leave over serves new connections)
    spare = options.pool or sp.MOVE_POOL
    wanted = {key: len(ports) + spare for key, ports in current.items()}
    # the flows' own ports in one round (the tracer's own two tries): a port that never
    # answers is most often one behind the dead element itself, and it moves anyway,
    # where asking again cost a second a round while the flows wait in backoff
    traced, (pools, candidates) = await asyncio.gather(
        steer.trace_answered(runner, fabric, dict(current), options.sudo, rounds=1),
        find_pools(runner, fabric, wanted, suspect, seen.used, options.sudo),
    )
    # a flow whose own path is not known both ways moves too: its wire port's path is known
    crossing = [f for f in seen.flows if f.port not in sp.healthy(traced, f.key, suspect)]
    unknown = sum(
        None in (traced.forward[f.key][f.port], traced.reverse[f.key][f.port]) for f in crossing
    )
    keys = sorted(current)
    moves = _assign(crossing, pools)
    check_room(moves)
    table = steer.table_name(plan.id)
    syn_pools = {k: p[:spare] for k, p in pools.items() if len(p) >= sp.MIN_PORTS}
    plan.steering = {
        "method": METHOD,
        "suspect": suspect.name,
        "spine": suspect.spine,
        "table": table,
        "flows": len(seen.flows),
        "kept": len(seen.flows) - len(moves),
        "unknown": unknown,  # moved because a trace of their own port got no answer
        "moves": [m.to_json() for m in moves],
        "pools": [
            {"host": a, "peer": b, "proto": s.proto, "dport": s.port, "ports": ports,
             "traced": candidates.traced((a, b, s))}
            for (a, b, s), ports in sorted(syn_pools.items())
        ],
    }  # fmt: skip
    plan.notes.append(
        f"{len(seen.flows)} open flow(s) between pairs that may cross {suspect.name}: "
        f"{len(moves)} move to healthy wire ports, {len(seen.flows) - len(moves)} already "
        "avoid it both ways"
    )
    plan.notes += [f"move {m.flow} via wire port {m.wire}" for m in moves[: steer.SHOWN_PAIRS]]
    if len(moves) > steer.SHOWN_PAIRS:
        plan.notes.append(f"... and {len(moves) - steer.SHOWN_PAIRS} more: --format json lists all")
    short = sorted(k for k in keys if k not in syn_pools)
    if short:
        plan.notes.append(
            f"{len(short)} service(s) keep no pool for new connections (fewer than "
            f"{sp.MIN_PORTS} healthy ports left): new connections there are not steered"
        )
    return move_steps(moves, fabric, seen.devices, table, syn_pools)


async def find_pools(
    runner: Runner,
    fabric: steer.HostFabric,
    wanted: dict[sp.Key, int],
    suspect: sp.Avoided,
    used: dict[str, set[int]],
    sudo: bool,
) -> tuple[dict[sp.Key, list[int]], sp.TracedPorts]:
    """Per key, up to ``wanted[key]`` healthy candidate ports that no socket of the
    sender holds; refused (exit 3) where a key cannot get the ports its moves need."""
    by_size: dict[int, list[sp.Key]] = defaultdict(list)
    for key, n in wanted.items():
        by_size[n].append(key)
    pools: dict[sp.Key, list[int]] = {}
    traced = sp.TracedPorts()
    for n, keys in by_size.items():
        found, t = await steer.find_pools(runner, fabric, keys, suspect, n, sudo=sudo)
        for key in keys:
            pools[key] = [p for p in found[key] if p not in used.get(key[0], set())]
            traced.forward[key], traced.reverse[key] = t.forward[key], t.reverse[key]
    return pools, traced


def _assign(crossing: list[Flow], pools: dict[sp.Key, list[int]]) -> list[Move]:
    """Each crossing flow the next healthy port of its key's pool, taken out of the pool
    (what stays serves new connections)."""
    moves, short = [], []
    for f in crossing:
        pool = pools[f.key]
        if not pool:
            short.append(str(f))
            continue
        moves.append(Move(f, pool.pop(0)))
    if short:
        raise CwctlError(
            f"no healthy wire port left for {len(short)} flow(s): " + "; ".join(short[:4]),
            exit_code=EXIT_PROBLEMS,
        )
    return moves


def check_room(moves: list[Move]) -> None:
    count: dict[str, int] = defaultdict(int)
    for m in moves:
        count[m.flow.host] += 1
        count[m.flow.peer] += 1
    over = [f"{h} ({n})" for h, n in sorted(count.items()) if n > MAX_MOVES_PER_HOST]
    if over:
        raise CwctlError(
            f"more than {MAX_MOVES_PER_HOST} flows to move on one host: {', '.join(over[:4])}",
            exit_code=EXIT_PROBLEMS,
        )
