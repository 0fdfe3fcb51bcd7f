"""Simulated path discovery: the path records real agents would write (docs/paths.md).

Every host traces each 5-tuple it sends on, as the agent does: its probe tuples (role
``probe``: its NIC's address and source port to the peer's address and answering port)
and its reply tuples (role ``reply``: its answering port back to the prober's source
port), with the flow's own 5-tuple, so every switch hashes a trace like the flow.

The plan is the agent's (docs/paths.md, "What is traced"): across leaves only TTL 2 is
asked (the spine, the one choice on the way) plus the completion check; within a leaf
only the completion check; the leaves are known from the inventory and stay ``null``.
A tracer paces its cross-leaf traces to its spines' budget: a burst of ``icmp_burst``
per spine, then one per spine every ``icmp_ratelimit_ms`` (or its share of a spine's
``icmp_msgs_per_sec`` when every host's share is less); an unanswered packet is
sent again a second later (``TRIES`` in all); traces not started before the window
ends get no record (traced in a later scan).

A TTL 2 packet gets an answer from the spine when

- it and the answer survive the way there and back (``down`` and ``flap`` elements drop
  it, ``lossy`` ones with their probability, both ways);
- the spine is not ``silent``;
- the spine's ICMP rate limits allow it, as Linux's do (net/ipv4/icmp.c, 6.11
  order): a token bucket per (switch, destination address: the tracing NIC) holding
  ``icmp_burst`` tokens, one earned every ``icmp_ratelimit_ms``
  (``inet_peer_xrlim_allow``; a new destination starts full), then the switch-wide
  bucket of ``icmp_msgs_per_sec`` with a burst of ``icmp_msgs_burst``
  (``icmp_global_allow``).

Otherwise the hop is ``null``: never a guess. ``complete`` is true when a packet of the
completion check reached the destination. The records are ``cwctl.records.path``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from cwctl.records.path import PathRecord
from cwctl.runtime.arrays import F64, I64
from cwctl.sim.addresses import ip_texts
from cwctl.sim.fabric import HIDDEN_LEAF
from cwctl.sim.faults import fault_active
from cwctl.sim.world import FlowPaths, SimWorld

TRIES = 3  # times a trace packet is sent before its hop is recorded as unknown
REVALIDATE = 0.1  # share of the known paths traced again each window (the oldest)
HOP_COLUMNS = (3, 5, 7)  # leaf, spine, far leaf in a path's element row (window._direction)
DEST_COLUMN = 10
RECORD_CHUNK = 1 << 16  # path records made at a time (their field lists are temporary)


def _hop_addresses(model: SimWorld, ls: I64, ld: I64, spine: I64) -> I64:
    """(T x 3) the address each switch hop answers from (0: no such hop)."""
    addr = model.addresses
    fabric = model.fabric
    crosses = spine >= 0
    sp = np.where(crosses, spine, 0)
    hidden = np.array([leaf == HIDDEN_LEAF for leaf in fabric.leaves])
    first = np.where(hidden[ls], 0, addr.leaf_down[ls].astype(np.int64))
    second = np.where(crosses, addr.link_spine[ls, sp].astype(np.int64), 0)
    third = np.where(crosses, addr.link_leaf[ld, sp].astype(np.int64), 0)
    return np.stack([first, second, third], axis=1)


def _survival(model: SimWorld, elements: npt.NDArray[np.int32], t_ns: F64) -> F64:
    """(T x 4) the probability that a packet expiring at each hop (and the one reaching
    the destination) gets there and its answer comes back, for traces sent at ``t_ns``."""
    cols = [*HOP_COLUMNS, DEST_COLUMN]
    n = len(elements)
    survive = np.ones((n, len(cols)))
    for fault, eid in model.faults:
        if fault.mode not in ("down", "flap", "lossy"):
            continue
        where = elements == eid
        if not where.any():
            continue
        pos = np.where(where.any(axis=1), np.argmax(where, axis=1), elements.shape[1])
        active = fault_active(fault.mode, fault.value, fault.at_s, t_ns)
        for j, col in enumerate(cols):
            there = (pos <= col) & active
            back = (pos < col) & active
            if fault.mode == "lossy":
                keep = 1.0 - float(fault.value or 0.0)
                survive[:, j] *= np.where(there, keep, 1.0) * np.where(back, keep, 1.0)
            else:
                survive[there, j] = 0.0
    return survive


def _answered(
    model: SimWorld, n: int, which: I64, when: F64, switch: I64, dest: I64
) -> npt.NDArray[np.bool_]:
    """Per trace (of ``n``), whether a switch answered one of its packets (trace
    ``which[i]`` sent at ``when[i]`` to ``switch[which[i]]``, the answer going to NIC
    ``dest[which[i]]``) under Linux's two ICMP rate limits, fed the packets in time
    order; a trace's later packets are not sent once one was answered.

    Per (switch, destination) a bucket of tokens in ns, ``icmp_burst`` answers deep,
    earning one every ``icmp_ratelimit_ms``; then per switch a credit of
    ``icmp_msgs_burst`` answers earning ``icmp_msgs_per_sec``. One Python step per
    packet (a million at 10 000 hosts), so the loop holds plain lists of floats. A
    bucket starts full, as a new inet_peer does: its last refill is set to its first
    packet's time, so the first refill adds 0 (the same float arithmetic as making the
    bucket at that packet)."""
    p = model.params
    timeout = p.icmp_ratelimit_ms * 1e6
    cap = p.icmp_burst * timeout
    per_ns = p.icmp_msgs_per_sec / 1e9
    burst = float(p.icmp_msgs_burst)
    order = np.argsort(when, kind="stable")
    rows, at = which[order], when[order]
    sw = switch[rows]
    # buckets numbered densely; each starts full, as of its first packet
    pair_of = np.unique(
        sw * (int(dest.max(initial=0)) + 1) + dest[rows], return_index=True, return_inverse=True
    )
    switch_of = np.unique(sw, return_index=True, return_inverse=True)
    tokens = [cap] * len(pair_of[0])  # per (switch, destination): tokens (ns), last
    last = at[pair_of[1]].tolist()
    credit = [burst] * len(switch_of[0])  # per switch: credit, last
    stamp = at[switch_of[1]].tolist()
    answered = bytearray(n)
    for r, k, s, t in zip(
        rows.tolist(), pair_of[2].ravel().tolist(), switch_of[2].ravel().tolist(), at.tolist(),
        strict=True,
    ):  # fmt: skip
        if answered[r]:
            continue
        have = tokens[k] + (t - last[k])
        if have > cap:
            have = cap
        last[k] = t
        if have < timeout:
            tokens[k] = have
            continue
        c = credit[s] + (t - stamp[s]) * per_ns
        if c > burst:
            c = burst
        stamp[s] = t
        if c < 1.0:
            tokens[k], credit[s] = have, c
            continue
        tokens[k], credit[s] = have - timeout, c - 1.0
        answered[r] = 1
    return np.frombuffer(bytes(answered), np.uint8).astype(bool)


def discover(
    model: SimWorld,
    a: I64,
    b: I64,
    port: I64,
    paths: FlowPaths,
    start_s: float,
    duration_s: float,
    rng: np.random.Generator,
) -> tuple[list[PathRecord], I64]:
    """The path records of one window's flows (prober ``a``, peer ``b``, port number),
    and each record's key in the path cache (``trace_keys``)."""
    fabric, params = model.fabric, model.params
    n_flows = len(a)
    # traces: every flow's probe tuple (traced by a) and reply tuple (traced by b)
    tracer = np.concatenate([a, b]).astype(np.int64)
    far = np.concatenate([b, a]).astype(np.int64)
    reverse = np.repeat([False, True], n_flows)
    flow = np.tile(np.arange(n_flows), 2)
    elements = np.concatenate([paths.fwd_elements, paths.rev_elements])
    dark = np.concatenate([paths.fwd_dark, paths.rev_dark])
    spine = np.concatenate([paths.spine_fwd, paths.spine_rev]).astype(np.int64)
    n = len(tracer)
    ls, ld = fabric.host_leaf[tracer].astype(np.int64), fabric.host_leaf[far].astype(np.int64)
    cross = (ls != ld) & (spine >= 0)  # a spine to learn
    # known paths are not traced again, but for the oldest tenth (revalidated)
    own_nic = np.concatenate([paths.src_nic, paths.dst_nic]).astype(np.int64)
    far_nic = np.concatenate([paths.dst_nic, paths.src_nic]).astype(np.int64)
    flow_port = port[flow]
    keys = trace_keys(model, own_nic, far, reverse, flow_port)
    skip = _known(model, keys) if model.path_cache else np.zeros(n, bool)
    pace = cross & ~skip
    # the plan: each tracer's cross-leaf traces in a seeded order, paced to its spines'
    # budget (a burst of icmp_burst per spine, then one per spine per icmp_ratelimit_ms)
    order = np.lexsort((rng.random(n), ~pace, tracer))
    counts = np.bincount(tracer[pace], minlength=fabric.n_hosts)
    rank = np.zeros(n, np.int64)
    sorted_cross = order[pace[order]]
    starts = np.cumsum(counts) - counts
    rank[sorted_cross] = np.arange(len(sorted_cross)) - np.repeat(starts, counts)
    n_up = np.array([max(1, len(u)) for u in fabric.uplinks])[ls]
    # one per router per icmp_ratelimit_ms, or the tracer's share of a router's
    # switch-wide limit when that is tighter (every host traces at once)
    per_router_s = min(1e3 / params.icmp_ratelimit_ms, params.icmp_msgs_per_sec / fabric.n_hosts)
    period_ns = 1e9 / (per_router_s * n_up)
    t0 = start_s * 1e9
    end = (start_s + duration_s) * 1e9
    # the burst is the tracer's share of a router's switch-wide one too (traceplan.py)
    share = min(params.icmp_burst, params.icmp_msgs_burst // fabric.n_hosts)
    burst = np.maximum(1, share * n_up)
    # as the agent paces them (probe/trace.py): the burst back to back (a millisecond
    # apart), then one per interval; a crowd's burst of one at a random phase of the
    # interval; agents start a few milliseconds apart
    phase = rng.uniform(0, 1, fabric.n_hosts)[tracer] * period_ns * (burst == 1)
    t_ns = t0 + rng.uniform(0, 1e7, fabric.n_hosts)[tracer] + phase
    t_ns += np.where(rank < burst, rank * 1e6, (rank - burst + 1) * period_ns)
    traced = ~cross | (pace & (t_ns < end))
    survive = _survival(model, elements, t_ns)
    survive[dark] = 0.0
    tries = np.arange(TRIES) * 1e9  # an unanswered TTL is tried again a second later
    # the completion check (the far agent acknowledges the last TTL): any of the tries
    complete: npt.NDArray[np.bool_] = np.any(rng.random((n, TRIES)) < survive[:, 3:4], axis=1)
    silent = {int(eid) for f, eid in model.faults if f.mode == "silent"}
    silent_spine = np.array([int(fabric.eid_spine(s)) in silent for s in range(fabric.n_spines)])
    asked = np.flatnonzero(cross & traced & ~silent_spine[np.maximum(spine, 0)])
    when = (t_ns[asked, None] + tries[None, :]).ravel()
    which = np.repeat(asked, TRIES)
    reach = rng.random(len(which)) < survive[which, 1]
    keep = (when < end) & reach
    when, which = when[keep], which[keep]
    # answers go to the tracing NIC's address: the per-destination buckets are per NIC
    switch_id = fabric.n_leaves + np.maximum(spine, 0)
    answered = _answered(model, n, which, when, switch_id, own_nic)
    spine_addr = _hop_addresses(model, ls, ld, spine)[:, 1]
    keep_rows = np.flatnonzero(traced)
    records = _records(model, keep_rows, tracer, far, reverse, own_nic, far_nic, flow_port,
                       spine_addr, answered, cross, complete, t_ns)  # fmt: skip
    return records, keys[keep_rows]


def trace_keys(
    model: SimWorld, own_nic: I64, far: I64, reverse: npt.NDArray[np.bool_], port: I64
) -> I64:
    """Each trace's tuple as one integer, the key of the path cache: the tracing NIC
    (global index: the host, and the NIC a record names where the host has several),
    the peer, the role and the probe flow's port number (0..ports-1)."""
    n_hosts, n_ports = model.fabric.n_hosts, model.params.ports
    return ((own_nic.astype(np.int64) * n_hosts + far) * 2 + reverse) * n_ports + port


def _known(model: SimWorld, keys: I64) -> npt.NDArray[np.bool_]:
    """Traces whose path the cache knows, less the oldest tenth of them (revalidated)."""
    cache = model.path_cache
    cached = np.fromiter(cache.keys(), np.int64, len(cache))
    stamps = np.fromiter((p.t_ns for p in cache.values()), np.int64, len(cache))
    order = np.argsort(cached)
    cached, stamps = cached[order], stamps[order]
    pos = np.minimum(np.searchsorted(cached, keys), len(cached) - 1)
    known = cached[pos] == keys
    idx = np.flatnonzero(known)
    if len(idx):
        age = stamps[pos[idx]]
        oldest = idx[np.argsort(age, kind="stable")[: int(np.ceil(REVALIDATE * len(idx)))]]
        known[oldest] = False
    return known


def _records(
    model: SimWorld,
    rows: I64,
    tracer: I64,
    far: I64,
    reverse: npt.NDArray[np.bool_],
    own_nic: I64,
    far_nic: I64,
    flow_port: I64,
    spine_addr: I64,
    answered: npt.NDArray[np.bool_],
    cross: npt.NDArray[np.bool_],
    complete: npt.NDArray[np.bool_],
    t_ns: F64,
) -> list[PathRecord]:
    """One record per trace: across leaves the hops (leaf, spine, leaf) with only the
    spine asked; within a leaf one hop (the leaf), not asked. Every field is picked
    from a list of its distinct values (an address is formatted once, a hop tuple
    made once per spine address), so the records share their strings and tuples."""
    fabric, params = model.fabric, model.params
    h, q, rev = tracer[rows], far[rows], reverse[rows]
    own_nic, far_nic = own_nic[rows], far_nic[rows]
    nic_text = model.addresses.nic_text
    # the NIC name where the tracing host has several (else None, the last entry)
    nic_names = _objects([n for ns in fabric.nics for n in ns] + [None])
    multi = np.array([len(ns) > 1 for ns in fabric.nics])
    nic_code = np.where(multi[h], own_nic, len(nic_names) - 1)
    # hops: (None,) within a leaf, (None, None, None) across unanswered, else the spine's
    said = cross[rows] & answered[rows]
    addrs, which = np.unique(spine_addr[rows][said], return_inverse=True)
    hop_sets = _objects([(None,), (None, None, None)] + [(None, t, None) for t in ip_texts(addrs)])
    hop_code = np.where(cross[rows], 1, 0)
    hop_code[said] = 2 + which.ravel()
    # ports: the flow's source port or the answering port, shared int objects too
    ports = _objects(
        [*range(params.base_port, params.base_port + params.ports), params.answer_port]
    )
    flow_code = flow_port[rows]
    answer_code = params.ports
    stamp = np.rint(t_ns[rows]).astype(np.int64) + params.epoch_ns
    hosts = _objects(fabric.hosts)
    roles = _objects(["probe", "reply"])
    out: list[PathRecord] = []
    for lo in range(0, len(rows), RECORD_CHUNK):  # the field lists of a chunk at a time
        at = slice(lo, lo + RECORD_CHUNK)
        back = rev[at]
        out += [
            PathRecord(host, peer, role, src, sport, dst, dport, hops, done, t, False, nic)
            for host, peer, role, src, sport, dst, dport, hops, done, t, nic in zip(
                hosts[h[at]].tolist(),
                hosts[q[at]].tolist(),
                roles[back.astype(np.intp)].tolist(),
                nic_text[own_nic[at]].tolist(),
                ports[np.where(back, answer_code, flow_code[at])].tolist(),
                nic_text[far_nic[at]].tolist(),
                ports[np.where(back, flow_code[at], answer_code)].tolist(),
                hop_sets[hop_code[at]].tolist(),
                complete[rows[at]].tolist(),
                stamp[at].tolist(),
                nic_names[nic_code[at]].tolist(),
                strict=True,
            )
        ]
    return out


def _objects(values: Sequence[object]) -> npt.NDArray[np.object_]:
    """``values`` as a 1-d object array (tuples stay elements, not rows)."""
    out = np.empty(len(values), object)
    for i, v in enumerate(values):
        out[i] = v
    return out
