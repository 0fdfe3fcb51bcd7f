"""Rebalancing jobs' elephant flows on the simulated fabric, judged by its ground truth.

cwctl's side sees what a host could: the flows' 5-tuples and measured rates
(``sim.flows.observe``, as ``ss -ti`` would give them) and, for the current and ``k``
candidate ports of each, the spine address a trace of each direction reports
(``sim.flows.trace``), named through the published topology as an inventory names it.
From that alone it builds the balancing core's input and plans (``balance.rebalance``).

The judge re-hashes every flow with the simulator's secret per-switch hash on the port
the plan gives it (``sim.flows.link_loads``) and measures the leaves' uplinks: what the
fabric really carries, not what the planner believes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cwctl.actions import steerports as sp
from cwctl.actions.balance import (
    DEFAULT_MIN_GAIN,
    DEFAULT_TARGET,
    Balance,
    Elephant,
    GroupLoad,
    directed,
    group_loads,
    rebalance,
)
from cwctl.actions.elephants import (
    Spines,
    candidate_ports,
    elephant,
    flow_id,
    leaf_groups,
)
from cwctl.actions.flowtable import Flow
from cwctl.actions.moveflows import Move, host_maps
from cwctl.sim.flows import JobFlow, link_loads, observe, trace
from cwctl.sim.model import FabricModel

CANDIDATES_PER_FLOW = 16  # candidate wire ports traced per flow, beside its own
RATE_NOISE = 0.05  # relative error of a measured rate (sd)


@dataclass(frozen=True)
class Links:
    """One direction of every leaf's parallel links, by the truth."""

    before: tuple[GroupLoad, ...]  # with ECMP's ports
    after: tuple[GroupLoad, ...]  # with the plan's ports
    bound: tuple[float, ...]  # per leaf: no choice of ports gets its max/mean below this
    data: tuple[bool, ...]  # per leaf: a job's data crosses them (else acks or nothing)

    def ratios(self, when: str) -> list[float]:
        """``before``, ``after`` or ``bound``: the max/mean of each leaf carrying data."""
        if when == "bound":
            return [b for b, d in zip(self.bound, self.data, strict=True) if d]
        groups = self.before if when == "before" else self.after
        return [g.ratio for g, d in zip(groups, self.data, strict=True) if d]


@dataclass(frozen=True)
class SimRebalance:
    """One rebalancing on the simulated fabric: the plan and the truth around it."""

    plan: Balance
    elephants: int  # flows the core could balance (crossing a spine, path known)
    flows: int  # all connections of the jobs
    traces: int  # tuples traced (each direction of the current and candidate ports)
    plan_s: float  # CPU seconds: building the core's input and planning
    up: Links  # each leaf's uplinks
    down: Links  # the links into each leaf from its spines
    rules: Mapping[str, int]  # nft map entries per host the moves need
    moved_bps_true: float  # the true rate of the moved flows


def as_flow(f: JobFlow) -> Flow:
    return Flow(f.proto, f.src, f.sport, f.dst, f.dport)


def rules_per_host(moves: Sequence[Move], address: Mapping[str, str]) -> dict[str, int]:
    """The nft map entries the paired translation installs per host for ``moves``
    (``moveflows.host_maps``: two at each end of a moved flow)."""
    maps = host_maps(moves, dict(address))
    return {
        host: sum(len(entries) for hook in hooks.values() for entries in hook.values())
        for host, hooks in maps.items()
    }


def traced_spines(
    model: FabricModel, flows: Sequence[Flow], ports: Mapping[Flow, Sequence[int]]
) -> dict[Flow, dict[int, Spines]]:
    """For each flow and each of its ports (its own first): the spine each direction's
    trace named, through the published topology's addresses (None: not known)."""
    topo = model.published_topology()
    names = dict(topo.switch_of_address) if topo is not None else {}
    spines = set(model.fabric.spines)
    rows = [(f, p) for f in flows for p in (f.port, *ports.get(f, ()))]
    out: dict[Flow, dict[int, Spines]] = {f: {} for f in flows}
    for proto in sorted({f.proto for f in flows}):
        mine = [(f, p) for f, p in rows if f.proto == proto]
        fwd = trace(model, [f.host for f, _ in mine], [f.peer for f, _ in mine],
                    [p for _, p in mine], [f.peer_port for f, _ in mine], proto)  # fmt: skip
        rev = trace(model, [f.peer for f, _ in mine], [f.host for f, _ in mine],
                    [f.peer_port for f, _ in mine], [p for _, p in mine], proto)  # fmt: skip
        for (f, p), a, b in zip(mine, fwd, rev, strict=True):
            out[f][p] = (sp.spine_of(a, names, spines), sp.spine_of(b, names, spines))
    return out


def plan_sim(
    model: FabricModel,
    observed: Sequence[JobFlow],
    *,
    k: int = CANDIDATES_PER_FLOW,
    target: float = DEFAULT_TARGET,
    min_gain: float = DEFAULT_MIN_GAIN,
) -> tuple[Balance, list[Elephant], int]:
    """cwctl's plan from what it observed: the plan, the core's input, the traces made."""
    topo = model.published_topology()
    if topo is None:
        raise ValueError("rebalancing needs a topology (leaves and their uplinks)")
    flows = [as_flow(f) for f in observed]
    rate = {as_flow(f): (f.bps, f.back_bps) for f in observed}
    ports = candidate_ports(flows, k)
    traced = traced_spines(model, flows, ports)
    leaf_of = dict(topo.leaf_of)
    made = [elephant(f, leaf_of, rate[f], traced[f]) for f in flows]
    elephants = [e for e in made if e is not None]
    plan = rebalance(elephants, leaf_groups(topo.uplinks), target=target, min_gain=min_gain)
    return plan, elephants, 2 * sum(len(t) for t in traced.values())


def link_groups(
    model: FabricModel, *, down: bool = False
) -> tuple[list[str], list[tuple[str, ...]]]:
    """The leaves with more than one uplink, and each one's uplinks (``leaf>spine``), or
    with ``down`` the links into it from its spines (``spine>leaf``)."""
    fabric = model.fabric
    pairs = [
        (
            leaf,
            tuple(
                directed(*((s, leaf) if down else (leaf, s)))
                for s in map(fabric.spines.__getitem__, ups)
            ),
        )
        for leaf, ups in zip(fabric.leaves, fabric.uplinks, strict=True)
        if len(ups) > 1
    ]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def link_truth(
    model: FabricModel, load: Mapping[tuple[str, str], float], *, down: bool = False
) -> tuple[GroupLoad, ...]:
    """Each leaf's uplinks (or downlinks), from true loads keyed (sender, receiver)."""
    named = {directed(a, b): v for (a, b), v in load.items()}
    return group_loads(named, link_groups(model, down=down)[1])


def links(
    model: FabricModel,
    flows: Sequence[JobFlow],
    before: Mapping[tuple[str, str], float],
    after: Mapping[tuple[str, str], float],
    *,
    down: bool = False,
) -> Links:
    """The truth of each leaf's uplinks (or downlinks) before and after, with a bound:
    whole flows on ``m`` links put at least max(mean, the biggest, the m-th + (m+1)-th
    biggest) on one (the makespan bound); it ignores that a flow has only its traced
    ports, and counts only data (the acknowledgements only raise the max)."""
    fabric = model.fabric
    leaf = dict(
        zip(fabric.hosts, [fabric.leaves[i] for i in fabric.host_leaf.tolist()], strict=True)
    )
    rates: dict[str, list[float]] = {}
    for f in flows:
        if leaf[f.src] != leaf[f.dst]:
            rates.setdefault(leaf[f.dst] if down else leaf[f.src], []).append(f.bps)
    names, _ = link_groups(model, down=down)
    ecmp = link_truth(model, before, down=down)
    least = []
    for name, g in zip(names, ecmp, strict=True):
        r, m = sorted(rates.get(name, []), reverse=True), len(g.group)
        top = max([g.mean, *r[:1], *([r[m - 1] + r[m]] if len(r) > m else [])])
        least.append(top / g.mean if g.mean > 0 else 1.0)
    return Links(ecmp, link_truth(model, after, down=down), tuple(least),
                 tuple(name in rates for name in names))  # fmt: skip


def run(
    model: FabricModel,
    flows: Sequence[JobFlow],
    *,
    seed: int,
    noise: float = RATE_NOISE,
    k: int = CANDIDATES_PER_FLOW,
    target: float = DEFAULT_TARGET,
    min_gain: float = DEFAULT_MIN_GAIN,
) -> SimRebalance:
    """Observe, plan, and judge by the truth (module docstring)."""
    observed = observe(flows, seed=seed, noise=noise)
    cpu0 = time.process_time()
    plan, elephants, traces = plan_sim(model, observed, k=k, target=target, min_gain=min_gain)
    plan_s = time.process_time() - cpu0
    ids = [flow_id(as_flow(f)) for f in flows]
    wire = [plan.moves.get(i, f.sport) for i, f in zip(ids, flows, strict=True)]
    address = {h: a[0] for h, a in model.addresses.host_addresses(model.fabric).items()}
    ecmp, after = link_loads(model, flows), link_loads(model, flows, wire)
    moves = [Move(as_flow(f), w) for f, w in zip(flows, wire, strict=True) if w != f.sport]
    return SimRebalance(
        plan=plan,
        elephants=len(elephants),
        flows=len(flows),
        traces=traces,
        plan_s=plan_s,
        up=links(model, flows, ecmp, after),
        down=links(model, flows, ecmp, after, down=True),
        rules=rules_per_host(moves, address),
        moved_bps_true=sum(f.bps for f, w in zip(flows, wire, strict=True) if w != f.sport),
    )
