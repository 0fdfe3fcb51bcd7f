"""Rebalance colliding elephant flows across the spines, at the hosts (``cwctl rebalance``).

ECMP hashes each flow's 5-tuple once; training traffic has few, long, fat flows, so two
of them often share an uplink while another idles. Nothing is broken: the element is
healthy and full. Routing around it (``reroute``) would move every flow off a spine and
overload the other; here each elephant is given the wire port whose traced path levels
the load, and only as many flows move as the balance needs.

Planning, on an inventory whose leaves name their uplinks:

1. every host read at once (``uplinkload.observe``): the flows between hosts and their
   rates over an interval, each flow's wire port, ``nft list tables`` (the prior);
2. each flow's wire port traced both ways: the load each directed uplink and downlink
   carries (``uplinkload.link_loads``), an imbalance named per leaf (``findings``);
3. when a leaf's links are further apart than ``target`` (max/mean), each elephant's
   candidate wire ports traced both ways, and ``balance.rebalance`` picks the moves: the
   fewest bytes moved for the gain, never onto an ``avoid``-ed element (a suspect),
   never a ``pinned`` flow (one a cwctl table translates already, or one the watch
   moved within its hold);
4. the moves carried out by ``moveflows``' paired translation (restoring tables on every
   host before any rewriting one), and new connections to each moved flow's service
   from ports whose data path is the leaf's coldest uplink after the moves.

Verify (``verify``): the hosts read and traced again; verified when the measured
max/mean is within ``target`` or at least half the gain the plan predicted is there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cwctl.actions import balance, moveflows, steer
from cwctl.actions import steerports as sp
from cwctl.actions import uplinkload as ul
from cwctl.actions.executor import Verification
from cwctl.actions.plan import SUDO, ActionPlan, Step, new_plan_id
from cwctl.actions.runners import Runner
from cwctl.errors import InputError

ELEMENT = "uplinks"  # what a rebalance plan acts on (the journal's ELEMENT column)
METHOD = "nftables netdev paired port translation, ports chosen by balance.rebalance"
TARGET = balance.DEFAULT_TARGET  # a leaf's busiest link at most this far above its mean
MIN_GAIN = 0.1  # a plan whose worst max/mean falls by less than this moves nothing
CANDIDATES_PER_FLOW = 12  # wire ports traced per elephant (both ways: 2 spines -> 4 paths)
TRACE_ROUNDS = 2  # a port left unanswered is asked once more
SHOWN = 8  # links and moves in the notes (the JSON has every one)


@dataclass(frozen=True)
class RebalanceOptions:
    interval_s: float = ul.INTERVAL_S
    target: float = TARGET
    min_gain: float = MIN_GAIN
    elephant_bps: float = ul.ELEPHANT_BPS
    avoid: frozenset[str] = frozenset()  # directed elements never moved onto (suspects)
    pinned: frozenset[str] = frozenset()  # flow ids (``FlowRate.id``) that stay put
    sudo: bool = False


Placed = tuple[ul.FlowRate, str, str]  # a flow, its data's spine, its replies' spine


@dataclass
class Measured:
    """One measurement: the flows placed on their traced paths, per link and group."""

    seen: ul.Observed
    placed: list[Placed]
    unplaced: list[ul.FlowRate]  # their own port's path not known both ways
    rows: list[ul.LinkLoad]
    ratios: dict[str, float]

    @property
    def worst(self) -> float:
        return max(self.ratios.values(), default=1.0)

    def to_json(self, target: float) -> dict[str, Any]:
        return {
            "interval_s": round(self.seen.interval_s, 3),
            "flows": len(self.placed) + len(self.unplaced),
            "unplaced": len(self.unplaced),
            "links": [r.to_json() for r in self.rows],
            "max_over_mean": {g: round(v, 3) for g, v in sorted(self.ratios.items())},
            "imbalance": ul.findings(self.rows, target),
        }


def _check(fabric: steer.HostFabric, options: RebalanceOptions) -> dict[str, tuple[str, ...]]:
    sets = ul.groups(fabric)
    if not sets:
        raise InputError(
            "no leaf in the inventory has two uplinks: nothing to balance (give each leaf "
            "switch its uplinks, and each [[host]] its leaf)"
        )
    if options.target < 1.0:
        raise InputError(f"--target {options.target:g}: max/mean is never under 1 (try 1.2)")
    if not 0.0 <= options.min_gain < options.target:
        raise InputError(f"--min-gain {options.min_gain:g}: must be from 0 to under the target")
    return sets


def expand_avoid(names: frozenset[str], sets: Mapping[str, Sequence[str]]) -> frozenset[str]:
    """The directed elements ``names`` stand for: a switch (``spine2``) every link that
    ends on it, a link (``leaf1-spine2``) both its directions, a directed link itself;
    ``InputError`` naming one that is none of this fabric's."""
    links = {m for members in sets.values() for m in members}
    out: set[str] = set()
    for name in sorted(names):
        a, dash, b = name.partition("-")
        hits = {
            m
            for m in links
            if m == name
            or (not dash and name in m.split(">"))
            or (dash and set(m.split(">")) == {a, b})
        }
        if not hits:
            raise InputError(f"--avoid {name}: no spine, leaf or leaf-spine link of this fabric")
        out |= hits
    return frozenset(out)


async def measure(runner: Runner, fabric: steer.HostFabric, options: RebalanceOptions) -> Measured:
    """Read every host with a leaf, trace each crossing flow's wire port, sum the loads."""
    hosts = sorted(h for h, leaf in fabric.leaf_of.items() if leaf)
    seen = await ul.observe(runner, fabric, hosts, options.interval_s, options.sudo)
    flows = [r for r in seen.flows if ul.crossing(fabric, r.flow)]
    wanted: dict[sp.Key, list[int]] = defaultdict(list)
    for r in flows:
        wanted[r.flow.key].append(r.wire)
    traced = (
        await steer.trace_answered(runner, fabric, dict(wanted), options.sudo, TRACE_ROUNDS)
        if wanted
        else sp.TracedPorts()
    )
    placed, unplaced = [], []
    for r in flows:
        spine, back = traced.forward[r.flow.key][r.wire], traced.reverse[r.flow.key][r.wire]
        if spine is None or back is None:
            unplaced.append(r)
        else:
            placed.append((r, spine, back))
    rows = ul.link_loads(fabric, placed, options.elephant_bps)
    ratios = ul.group_ratios({row.link: row.bps for row in rows}, ul.groups(fabric))
    return Measured(seen, placed, unplaced, rows, ratios)


async def plan_rebalance(
    inventory: Any, runner: Runner, options: RebalanceOptions, context: dict[str, Any]
) -> ActionPlan:
    """The plan: the loads seen, the imbalance named, the moves that level it."""
    fabric = steer.HostFabric.of(inventory)
    sets = _check(fabric, options)
    expand_avoid(options.avoid, sets)  # a bad name refused before anything is read
    plan = ActionPlan(
        kind="rebalance",
        element=ELEMENT,
        reason="balance colliding elephant flows across the spines",
        steps=[],
        context=context,
        id=new_plan_id(),
    )
    now = await measure(runner, fabric, options)
    steer.record_prior(plan, now.seen.tables, options.sudo)
    plan.steering = {
        "method": METHOD,
        "target": options.target,
        "min_gain": options.min_gain,
        "interval_s": options.interval_s,
        "uplink_load": now.to_json(options.target),
        "moves": [],
    }
    plan.notes += load_lines(now.rows) + now.to_json(options.target)["imbalance"]
    if now.unplaced:
        plan.notes.append(f"{len(now.unplaced)} flow(s) left out: their path did not answer")
    if now.worst <= options.target:
        plan.notes.append(
            f"balanced: every leaf's busiest link is within {options.target:g}x of its "
            f"links' mean (max/mean {now.worst:.2f})"
        )
        return plan
    plan.steps = await _moves(runner, fabric, sets, now, options, plan)
    return plan


async def _moves(
    runner: Runner,
    fabric: steer.HostFabric,
    sets: Mapping[str, Sequence[str]],
    now: Measured,
    options: RebalanceOptions,
    plan: ActionPlan,
) -> list[Step]:
    """The elephants' candidate ports traced, the balance chosen, its steps."""
    elephants = [p for p in now.placed if p[0].bps >= options.elephant_bps]
    choices = await _choices(runner, fabric, elephants, now.seen.used, options.sudo)
    pinned = options.pinned | {r.id for r, _, _ in elephants if r.translated}
    herd = [
        balance.Elephant(
            r.id, r.wire, {p: ul.path_load(fabric, r, *way) for p, way in ports.items()}
        )
        for r, ports in ((r, choices[r.id]) for r, _, _ in elephants)
    ]
    found = balance.rebalance(
        herd,
        tuple(tuple(m) for m in sets.values()),
        avoid=expand_avoid(options.avoid, sets),
        pinned=pinned,
        target=options.target,
    )
    by_id = {r.id: r for r, _, _ in elephants}
    moves = [
        moveflows.Move(by_id[i].flow, port)
        for i, port in sorted(found.moves.items())
        if port != by_id[i].wire
    ]
    after = ul.group_ratios(found.after, sets)
    plan.steering["predicted"] = {
        "max_over_mean": {g: round(v, 3) for g, v in sorted(after.items())},
        "moved_bps": round(found.moved_bps),
        "unbalanced": [f"{' '.join(u.group)}: {u.reason} ({u.detail})" for u in found.unbalanced],
    }
    plan.steering["pinned"] = sorted(pinned & set(by_id))
    plan.notes += [f"stays above the target: {line}" for line in
                   plan.steering["predicted"]["unbalanced"][:SHOWN]]  # fmt: skip
    gain = found.imbalance_before - found.imbalance_after
    if not moves or gain < options.min_gain:
        plan.notes.append(
            f"no plan lowers max/mean by {options.min_gain:g} or more (best: "
            f"{found.imbalance_before:.2f} -> {found.imbalance_after:.2f}; "
            f"{len(elephants)} elephant(s), {len(pinned & set(by_id))} pinned): nothing moves"
        )
        return []
    moveflows.check_room(moves)
    table = steer.table_name(plan.id)
    pools = _cold_pools(fabric, moves, choices, found.after)
    plan.steering.update(
        table=table,
        moves=[
            {**m.to_json(), "flow": _id(m), "path": list(choices[_id(m)][m.wire]),
             "bps": round(by_id[_id(m)].bps)}
            for m in moves
        ],
        pools=[{"host": a, "peer": b, "proto": s.proto, "dport": s.port, "ports": p}
               for (a, b, s), p in sorted(pools.items())],
    )  # fmt: skip
    worst = found.imbalance_after
    plan.notes.append(
        f"move {len(moves)} of {len(elephants)} elephant(s) ({found.moved_bps / 1e6:.0f} Mbit/s): "
        f"max/mean {now.worst:.2f} -> {worst:.2f} (predicted)"
    )
    plan.notes += [
        f"move {m.flow} via wire port {m.wire} (up {choices[_id(m)][m.wire][0]}, "
        f"back {choices[_id(m)][m.wire][1]})"
        for m in moves[:SHOWN]
    ]
    return moveflows.move_steps(moves, fabric, now.seen.devices, table, pools)


async def _choices(
    runner: Runner,
    fabric: steer.HostFabric,
    elephants: Sequence[Placed],
    used: Mapping[str, set[int]],
    sudo: bool,
) -> dict[str, dict[int, tuple[str, str]]]:
    """Per elephant, its current port's path and each candidate port's traced both ways:
    port -> (the data's spine, the replies' spine)."""
    candidates = _candidates([r for r, _, _ in elephants], used)
    wanted: dict[sp.Key, list[int]] = defaultdict(list)
    for r, _, _ in elephants:
        wanted[r.flow.key] += candidates[r.id]
    traced = await steer.trace_answered(runner, fabric, dict(wanted), sudo, TRACE_ROUNDS)
    choices: dict[str, dict[int, tuple[str, str]]] = {}
    for r, spine, back in elephants:
        key, out = r.flow.key, {r.wire: (spine, back)}
        for port in candidates[r.id]:
            fwd, rev = traced.forward[key][port], traced.reverse[key][port]
            if fwd is not None and rev is not None:
                out[port] = (fwd, rev)
        choices[r.id] = out
    return choices


def _id(m: moveflows.Move) -> str:
    f = m.flow
    return f"{f.host}:{f.port}>{f.peer}:{f.peer_port}"


def _candidates(flows: Sequence[ul.FlowRate], used: Mapping[str, set[int]]) -> dict[str, list[int]]:
    """Per flow, its own candidate wire ports: none a socket of its host holds, none
    another flow's (two flows of one pair on one wire port would clash at the peer)."""
    taken: dict[str, set[int]] = {h: set(p) for h, p in used.items()}
    out: dict[str, list[int]] = {}
    for r in flows:
        mine = taken.setdefault(r.flow.host, set())
        ports = [p for p in sp.CANDIDATES if p not in mine][:CANDIDATES_PER_FLOW]
        mine.update(ports)
        out[r.id] = ports
    return out


def _cold_pools(
    fabric: steer.HostFabric,
    moves: Sequence[moveflows.Move],
    choices: Mapping[str, Mapping[int, tuple[str, str]]],
    after: Mapping[str, float],
) -> dict[sp.Key, list[int]]:
    """Per moved flow's (host, peer, service): the traced candidate ports no move took
    whose data goes up the sender's coldest uplink after the moves, where at least
    ``MIN_PORTS``; new connections to that service leave from them."""
    chosen = {m.wire for m in moves}
    pools: dict[sp.Key, list[int]] = {}
    for m in moves:
        leaf = fabric.leaf_of[m.flow.host]
        spines = fabric.uplinks.get(leaf or "", [])
        if not spines:
            continue
        cold = min(spines, key=lambda s: (after.get(balance.directed(leaf or "", s), 0.0), s))
        ports = [
            p for p, (spine, _) in choices[_id(m)].items()
            if spine == cold and p not in chosen and p != m.flow.port
        ]  # fmt: skip
        pools.setdefault(m.flow.key, [])
        pools[m.flow.key] += [p for p in ports if p not in pools[m.flow.key]]
    return {k: p for k, p in pools.items() if len(p) >= sp.MIN_PORTS}


def load_lines(rows: Sequence[ul.LinkLoad]) -> list[str]:
    """The links as the plan's notes: load, flows, elephants, queueing."""
    out = []
    for r in sorted(rows, key=lambda r: (r.group, r.link))[: SHOWN * 4]:
        q = r.queueing_p50_us
        queue = f", queueing p50 {q:.0f} us" if q is not None else ""
        out.append(
            f"{r.link}: {r.bps / 1e6:.1f} Mbit/s, {r.flows} flow(s), {r.elephants} "
            f"elephant(s){queue}"
        )
    return out


# --- verification -------------------------------------------------------------------------


@dataclass
class BalanceVerification(Verification):
    """The uplinks measured again after the moves."""

    before: float = 1.0
    predicted: float = 1.0
    after: float = 1.0
    target: float = TARGET
    uplink_load: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        extra = {"max_over_mean": {"before": round(self.before, 3),
                                   "predicted": round(self.predicted, 3),
                                   "after": round(self.after, 3)},
                 "uplink_load": self.uplink_load}  # fmt: skip
        return {**super().to_json(), **extra}

    def message(self) -> str:
        verdict = "balanced" if self.gone else "NOT balanced"
        imbalance = self.uplink_load.get("imbalance") or []
        tail = f": {imbalance[0]}" if imbalance and not self.gone else ""
        return (
            f"verify: uplinks measured again, max/mean {self.after:.2f} (was "
            f"{self.before:.2f}, predicted {self.predicted:.2f}, target {self.target:g}): "
            f"{verdict}{tail}"
        )


def balanced(before: float, predicted: float, after: float, target: float) -> bool:
    """Within the target, or at least half the predicted gain measured."""
    return after <= target or after <= before - (before - predicted) / 2


async def verify(plan: ActionPlan, inventory: Any, runner: Runner) -> BalanceVerification:
    s = plan.steering
    sudo = any(v.get("read", [None])[0] == SUDO[0] for v in plan.prior.values())
    target = float(s.get("target", TARGET))
    options = RebalanceOptions(interval_s=float(s.get("interval_s", ul.INTERVAL_S)),
                               target=target, sudo=sudo)  # fmt: skip
    now = await measure(runner, steer.HostFabric.of(inventory), options)
    before = max((s.get("uplink_load") or {}).get("max_over_mean", {}).values(), default=1.0)
    predicted = max(((s.get("predicted") or {}).get("max_over_mean") or {}).values(),
                    default=before)  # fmt: skip
    gone = balanced(float(before), float(predicted), now.worst, target)
    return BalanceVerification(
        plan.element, gone, [], before=float(before), predicted=float(predicted),
        after=now.worst, target=target, uplink_load=now.to_json(target),
    )  # fmt: skip
