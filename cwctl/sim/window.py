"""One probing window of the simulated fabric, vectorised: schedule, paths, delays, stamps.

The schedule is the agents': every host sends ``rate`` coded pairs per second to each
of its peers, the two probes of a pair ``gap_ns`` apart, source ports round robin over
``ports``. A *flow* is (probing host, peer, source port): its NICs and its ECMP spine in
each direction are fixed (the reply is hashed on (dst, src, sport) at the far leaf), so
paths, base delays and fault crossings are worked out once per flow, and only queueing,
loss and timestamp noise are drawn per probe.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.records import TS_CODE, ProbeTable
from cwctl.runtime.arrays import F64, I32, I64
from cwctl.runtime.blockpool import map_blocks
from cwctl.sim.discovery import discover
from cwctl.sim.ecmp import PROTO_UDP, documented_hash, host_id, splitmix64, tuple_hash
from cwctl.sim.exchanges import Leg, Schedule, all_exchanges
from cwctl.sim.truth import window_truth
from cwctl.sim.world import FlowPaths, ProbeWindow, SimWorld

SAME_LEAF, CORE, NO_ROUTE = -1, -2, -3


def _active_nics(model: SimWorld) -> list[list[int]]:
    fabric, excluded = model.fabric, model.state.excluded_nics
    out = []
    for h, host in enumerate(fabric.hosts):
        base = int(fabric.nic_base[h])
        out.append(
            [base + i for i, n in enumerate(fabric.nics[h]) if f"{host}/{n}" not in excluded]
        )
    return out


def ecmp_groups(model: SimWorld) -> list[list[int]]:
    """Per leaf, its WCMP group: each uplink spine repeated by its weight (all 1: the uplinks)."""
    fabric, weights = model.fabric, model.state.ecmp_weight
    groups = []
    for leaf, ups in zip(fabric.leaves, fabric.uplinks, strict=True):
        group: list[int] = []
        for s in ups:
            group += [s] * weights.get((leaf, fabric.spines[s]), 1)
        groups.append(group)
    return groups


_STEER_TRIES = 32


def _steered_off(model: SimWorld, a: I32, b: I32) -> I32:
    """Per flow, the spine index its pair is steered off (host-side steering), else -1."""
    out = np.full(len(a), -1, np.int32)
    steered = model.state.steered
    if not steered:
        return out
    fabric = model.fabric
    index = {h: i for i, h in enumerate(fabric.hosts)}
    n = len(fabric.hosts)
    codes = {min(index[x], index[y]) * n + max(index[x], index[y]): fabric.spines.index(s)
             for (x, y), s in steered.items()}  # fmt: skip
    keys = np.array(sorted(codes), np.int64)
    spines = np.array([codes[k] for k in keys], np.int32)
    flow = np.minimum(a, b).astype(np.int64) * n + np.maximum(a, b).astype(np.int64)
    pos = np.minimum(np.searchsorted(keys, flow), len(keys) - 1)
    hit = keys[pos] == flow
    out[hit] = spines[pos[hit]]
    return out


def choose_spine(
    model: SimWorld,
    groups: list[list[int]],
    a: I32,
    b: I32,
    nics: tuple[I32, I32],
    ports: tuple[I64, I64],
    prober_sport: I64,
    proto: int = PROTO_UDP,
) -> I32:
    """The spine each flow from host ``a`` to ``b`` crosses: the ECMP choice of ``a``'s leaf.

    ``nics`` are the flow's NICs (global indices) and ``ports`` its source and destination
    ports, in the direction of travel: with the protocol, the 5-tuple the leaf hashes with
    its own seed (``proto``: UDP for probes, TCP for a job's connections,
    ``cwctl.sim.flows``). The documented hash reads host names and the prober's source
    port.
    """
    fabric = model.fabric
    la, lb = fabric.host_leaf[a], fabric.host_leaf[b]
    if model.params.ecmp == "documented":
        ids = np.array([host_id(h) for h in fabric.hosts], np.uint64)
        h = documented_hash(ids[a], ids[b], prober_sport.astype(np.uint64))
    else:
        addr = model.addresses.nic
        h = tuple_hash(model.switch_seeds[la], addr[nics[0]], addr[nics[1]], *ports, proto)
    width = max(1, max((len(g) for g in groups), default=1))
    table = np.full((len(groups), width), NO_ROUTE, np.int32)
    size = np.ones(len(groups), np.uint64)
    for leaf, group in enumerate(groups):
        if group:
            table[leaf, : len(group)] = group
            size[leaf] = len(group)
    spine = table[la, (h % size[la]).astype(np.intp)]
    avoid = _steered_off(model, a, b)
    for _ in range(_STEER_TRIES):  # a steered pair's flow leaves from another source
        # port (NAT at the host) until its hash picks a spine other than the one avoided
        moved = (avoid >= 0) & (spine == avoid)
        if not moved.any():
            break
        with np.errstate(over="ignore"):
            h = np.where(moved, splitmix64(h + np.uint64(1)), h)
        spine = np.where(moved, table[la, (h % size[la]).astype(np.intp)], spine)
    has_uplinks = np.array([bool(u) for u in fabric.uplinks])[la]
    spine = np.where(has_uplinks, spine, CORE)
    return np.where(la == lb, SAME_LEAF, spine).astype(np.int32)


def _direction(
    model: SimWorld, s: I32, d: I32, ns: I32, nd: I32, spine: I32
) -> tuple[I32, I32, F64]:
    """Per flow direction: the elements crossed (F x 11), its queues (F x 4), its base delay."""
    fabric, fixed = model.fabric, model.fixed
    ls, ld = fabric.host_leaf[s], fabric.host_leaf[d]
    crosses = spine >= 0
    sp = np.where(crosses, spine, 0)
    absent = np.int32(-1)
    elements = np.stack(
        [
            fabric.eid_host(s),
            fabric.eid_nic(ns),
            fabric.eid_access(s),
            fabric.eid_leaf(ls),
            np.where(crosses, fabric.eid_fabric_link(ls, sp), absent),
            np.where(crosses, fabric.eid_spine(sp), absent),
            np.where(crosses, fabric.eid_fabric_link(ld, sp), absent),
            np.where(ls != ld, fabric.eid_leaf(ld), absent),
            fabric.eid_access(d),
            fabric.eid_nic(nd),
            fabric.eid_host(d),
        ],
        axis=1,
    ).astype(np.int32)
    pad = np.int32(fabric.n_queues)  # the pad queue: never busy, no propagation
    queues = np.stack(
        [
            fabric.qid_access(ns, False),
            np.where(crosses, fabric.qid_fabric(ls, sp, False), pad),
            np.where(crosses, fabric.qid_fabric(ld, sp, True), pad),
            fabric.qid_access(nd, True),
        ],
        axis=1,
    ).astype(np.int32)
    prop = np.append(fixed.queue_prop_ns, 0.0)
    base = prop[queues].sum(axis=1) + fixed.leaf_latency_ns[ls]
    base = base + np.where(crosses, fixed.spine_latency_ns[sp] + fixed.leaf_latency_ns[ld], 0.0)
    base = base + np.where(
        spine == CORE, model.params.core_latency_ns + fixed.leaf_latency_ns[ld], 0.0
    )
    return elements, queues, base


def flow_paths(a: I32, b: I32, port: npt.NDArray[np.int64], *, model: SimWorld) -> FlowPaths:
    """The paths of flows from host ``a`` to ``b`` leaving source port number ``port`` (0..P-1)."""
    params = model.params
    a, b = np.asarray(a, np.int32), np.asarray(b, np.int32)
    port = np.asarray(port, np.int64)
    sport = params.base_port + port
    active = _active_nics(model)
    count = np.array([len(x) for x in active], np.int64)
    padded = np.array([x + [0] * (max(count.max(), 1) - len(x)) for x in active], np.int32)
    safe = np.maximum(count, 1)
    na = padded[a, port % safe[a]]
    nb = padded[b, port % safe[b]]
    dark = (count[a] == 0) | (count[b] == 0)
    groups = ecmp_groups(model)
    answer = np.full(len(sport), params.answer_port, np.int64)
    spine_fwd = choose_spine(model, groups, a, b, (na, nb), (sport, answer), sport)
    spine_rev = choose_spine(model, groups, b, a, (nb, na), (answer, sport), sport)
    fe, fq, fbase = _direction(model, a, b, na, nb, spine_fwd)
    re, rq, rbase = _direction(model, b, a, nb, na, spine_rev)
    return FlowPaths(
        src_nic=na,
        dst_nic=nb,
        spine_fwd=spine_fwd,
        spine_rev=spine_rev,
        fwd_elements=fe,
        fwd_queues=fq,
        fwd_base_ns=fbase,
        fwd_dark=dark | (spine_fwd == NO_ROUTE),
        rev_elements=re,
        rev_queues=rq,
        rev_base_ns=rbase,
        rev_dark=dark | (spine_rev == NO_ROUTE),
    )


def simulate_window(
    model: SimWorld, start_s: float, duration_s: float, rng: np.random.Generator
) -> ProbeWindow:
    """The records of one window (see the module docstring) and its truth."""
    fabric, params = model.fabric, model.params
    sch = _schedule(model, start_s, duration_s)
    # the traces draw from their own generator (a spawn reads no draws of the window's),
    # so they run beside the exchanges (``runtime.blockpool``), with the same records
    disc_rng = rng.spawn(1)[0] if params.discovery else None

    def traces() -> Any:  # (records, their keys), or None without discovery
        if disc_rng is None:
            return None
        fe, fj = sch.flow_edge, sch.flow_port
        a, b = sch.ea[fe].astype(np.int64), sch.eb[fe].astype(np.int64)
        return discover(model, a, b, fj, sch.paths, start_s, duration_s, disc_rng)

    def exchanges() -> Any:  # the columns
        return all_exchanges(model, sch, rng)

    cols, found = map_blocks(lambda work: work(), (exchanges, traces))
    n = len(cols["src"])
    varying = ("src", "dst", "sport", "pair", "idx", "t1", "t2", "t3", "t4")
    table = ProbeTable(
        hosts=list(fabric.hosts),
        **{name: cols.pop(name) for name in varying},
        # constant columns as read-only broadcast views: no memory per row
        gap_ns=np.broadcast_to(np.int64(params.gap_ns), (n,)),
        ts=np.broadcast_to(np.int8(TS_CODE[params.timestamps]), (n,)),
    )
    _name_nics(table, fabric.nics, sch.paths.src_nic, cols.pop("flow"))
    truth = window_truth(
        model,
        start_s=start_s,
        duration_s=duration_s,
        edge_src=sch.ea,
        edge_dst=sch.eb,
        owd_fwd_ns=cols.pop("owd_fwd"),
        owd_rev_ns=cols.pop("owd_rev"),
        rev_sent=cols.pop("rev_sent"),
    )
    window = ProbeWindow(table=table, truth=truth, start_s=start_s, duration_s=duration_s)
    if found is not None:
        window.paths, window.path_keys = found
    return window


def _schedule(model: SimWorld, start_s: float, duration_s: float) -> Schedule:
    """The window's edges, coded pairs and flows, each flow's path worked out once."""
    fabric, params = model.fabric, model.params
    index = {h: i for i, h in enumerate(fabric.hosts)}
    ea = np.array([index[a] for a, ps in model.peers.items() for _ in ps], np.int32)
    eb = np.array([index[b] for ps in model.peers.values() for b in ps], np.int32)
    n_edges, n_ports = len(ea), params.ports
    # flows: (edge, port); NICs rotate with the port over each host's active NICs
    fe = np.repeat(np.arange(n_edges), n_ports)
    fj = np.tile(np.arange(n_ports), n_edges)
    paths = flow_paths(ea[fe], eb[fe], fj, model=model)
    return Schedule(
        ea=ea,
        eb=eb,
        phase=np.array([i / len(ps) for ps in model.peers.values() for i in range(len(ps))]),
        n_pairs=max(1, round(params.rate * duration_s)),
        start_s=start_s,
        flow_edge=fe,
        flow_port=fj,
        paths=paths,
        fwd=Leg(model, paths.fwd_elements, paths.fwd_queues, paths.fwd_base_ns, paths.fwd_dark),
        rev=Leg(model, paths.rev_elements, paths.rev_queues, paths.rev_base_ns, paths.rev_dark),
    )


def _name_nics(table: ProbeTable, nics: list[tuple[str, ...]], src_nic: I32, flow: I32) -> None:
    """Records name the NIC a probe left from on hosts with several (one NIC: no name)."""
    if any(len(ns) > 1 for ns in nics):
        distinct = sorted({n for ns in nics if len(ns) > 1 for n in ns})
        code = {name: i for i, name in enumerate(distinct)}
        nic_code = np.array([code[n] if len(ns) > 1 else -1 for ns in nics for n in ns], np.int16)
        table.nics = distinct
        table.nic = nic_code[src_nic[flow]]
