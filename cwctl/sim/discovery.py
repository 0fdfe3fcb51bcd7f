"""Simulated path discovery: the path records real agents would write (docs/discovery.md).

Every host traces each 5-tuple it sends on, as the agent does: its probe tuples (role
``probe``: its NIC's address and source port to the peer's address and answering port)
and its reply tuples (role ``reply``: its answering port back to the prober's source
port). A trace sends one packet per TTL, 1 up to the hop after the last switch, with the
flow's own 5-tuple, so every switch hashes it like the flow's probes; the traces of a
host are spread evenly over the scan in a seeded order.

A TTL-limited packet gets an answer from the switch where it expires when

- it and the answer survive the way there and back (``down`` and ``flap`` elements drop
  it, ``lossy`` ones with their probability, both ways);
- the switch is not ``silent``;
- the switch's ICMP rate limits allow it, as Linux's do (net/ipv4/icmp.c, 6.11
  order): a token bucket per (switch, destination address: the tracing NIC) holding
  ``icmp_burst`` tokens, one earned every ``icmp_ratelimit_ms``
  (``inet_peer_xrlim_allow``; a new destination starts full), then the switch-wide
  bucket of ``icmp_msgs_per_sec`` with a burst of ``icmp_msgs_burst``
  (``icmp_global_allow``).

Otherwise the hop is ``null``. ``complete`` is true when the packet with the TTL after
the last switch reached the destination. The records follow /work/PLAN.md's format.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cwctl.records.path import PathRecord
from cwctl.sim.addresses import ip_text
from cwctl.sim.fabric import HIDDEN_LEAF
from cwctl.sim.faults import fault_active
from cwctl.sim.world import FlowPaths, SimWorld

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
HOP_COLUMNS = (3, 5, 7)  # leaf, spine, far leaf in a path's element row (window._direction)
DEST_COLUMN = 10


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


def _survival(
    model: SimWorld, elements: npt.NDArray[np.int32], t_ns: F64, rng: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """(T x 4) whether the packets expiring at each hop (and the one reaching the
    destination) get there and their answers come back."""

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
    return rng.random((n, len(cols))) < survive


class _Limiter:
    """Linux's two ICMP rate limits of every switch, fed answers in time order."""

    def __init__(self, model: SimWorld) -> None:
        p = model.params
        self.timeout_ns = p.icmp_ratelimit_ms * 1e6
        self.peer_cap_ns = p.icmp_burst * self.timeout_ns
        self.per_ns = p.icmp_msgs_per_sec / 1e9
        self.global_burst = float(p.icmp_msgs_burst)
        self.peer: dict[tuple[int, int], tuple[float, float]] = {}  # tokens (ns), last
        self.switch: dict[int, tuple[float, float]] = {}  # credit, last

    def allow(self, switch: int, dest: int, t: float) -> bool:
        tokens, last = self.peer.get((switch, dest), (self.peer_cap_ns, t))
        tokens = min(tokens + (t - last), self.peer_cap_ns)
        if tokens < self.timeout_ns:
            self.peer[(switch, dest)] = (tokens, t)
            return False
        credit, stamp = self.switch.get(switch, (self.global_burst, t))
        credit = min(self.global_burst, credit + (t - stamp) * self.per_ns)
        if credit < 1.0:
            self.peer[(switch, dest)] = (tokens, t)
            self.switch[switch] = (credit, t)
            return False
        self.peer[(switch, dest)] = (tokens - self.timeout_ns, t)
        self.switch[switch] = (credit - 1.0, t)
        return True


def discover(
    model: SimWorld,
    a: I64,
    b: I64,
    port: I64,
    paths: FlowPaths,
    start_s: float,
    duration_s: float,
    rng: np.random.Generator,
) -> list[PathRecord]:
    """The path records of one window's flows (prober ``a``, peer ``b``, port number)."""
    fabric = model.fabric
    n_flows = len(a)
    # traces: every flow's probe tuple (traced by a) and reply tuple (traced by b)
    tracer = np.concatenate([a, b]).astype(np.int64)
    far = np.concatenate([b, a]).astype(np.int64)
    reverse = np.repeat([False, True], n_flows)
    flow = np.tile(np.arange(n_flows), 2)
    elements = np.concatenate([paths.fwd_elements, paths.rev_elements])
    dark = np.concatenate([paths.fwd_dark, paths.rev_dark])
    spine = np.concatenate([paths.spine_fwd, paths.spine_rev]).astype(np.int64)
    # each host's traces spread evenly over the window, in a seeded order
    n = len(tracer)
    order = np.lexsort((rng.random(n), tracer))
    counts = np.bincount(tracer, minlength=fabric.n_hosts)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    t_ns = start_s * 1e9 + (rank + 0.5) * duration_s * 1e9 / np.maximum(counts[tracer], 1)
    ls, ld = fabric.host_leaf[tracer].astype(np.int64), fabric.host_leaf[far].astype(np.int64)
    hop_addr = _hop_addresses(model, ls, ld, spine)
    same_leaf = ls == ld
    hop_addr[same_leaf, 1:] = 0
    ok = _survival(model, elements, t_ns, rng) & ~dark[:, None]
    # which switch answers each hop: leaves then spines in the seed order of model.py
    switch_id = np.stack([ls, fabric.n_leaves + np.maximum(spine, 0), ld], axis=1)
    silent = {int(eid) for f, eid in model.faults if f.mode == "silent"}
    silent_switch = np.array(
        [int(fabric.eid_leaf(k)) in silent for k in range(fabric.n_leaves)]
        + [int(fabric.eid_spine(s)) in silent for s in range(fabric.n_spines)]
    )
    answered = np.zeros((n, 3), bool)
    candidates = (hop_addr > 0) & ok[:, :3] & ~silent_switch[switch_id]
    limiter = _Limiter(model)
    rows, hops = np.nonzero(candidates)
    when = t_ns[rows]
    # answers go to the tracing NIC's address: the per-destination buckets are per NIC
    own_nic = np.concatenate([paths.src_nic, paths.dst_nic]).astype(np.int64)
    for i in np.argsort(when, kind="stable").tolist():
        r, h = int(rows[i]), int(hops[i])
        answered[r, h] = limiter.allow(int(switch_id[r, h]), int(own_nic[r]), float(when[i]))
    n_hops = np.where(same_leaf, 1, 3)
    complete = ok[:, 3]
    return _records(model, tracer, far, reverse, flow, port, paths, hop_addr, answered, n_hops,
                    complete, t_ns)  # fmt: skip


def _records(
    model: SimWorld,
    tracer: I64,
    far: I64,
    reverse: npt.NDArray[np.bool_],
    flow: I64,
    port: I64,
    paths: FlowPaths,
    hop_addr: I64,
    answered: npt.NDArray[np.bool_],
    n_hops: I64,
    complete: npt.NDArray[np.bool_],
    t_ns: F64,
) -> list[PathRecord]:
    fabric, params = model.fabric, model.params
    nic_addr = model.addresses.nic
    nic_name = [n for ns in fabric.nics for n in ns]
    multi = np.array([len(ns) > 1 for ns in fabric.nics])
    hosts = fabric.hosts
    sport = (params.base_port + port[flow]).tolist()
    own_nic = np.where(reverse, paths.dst_nic[flow], paths.src_nic[flow]).tolist()
    far_nic = np.where(reverse, paths.src_nic[flow], paths.dst_nic[flow]).tolist()
    stamp = (np.rint(t_ns).astype(np.int64) + params.epoch_ns).tolist()
    answer = params.answer_port
    out = []
    for i in range(len(tracer)):
        h, q = int(tracer[i]), int(far[i])
        hops = tuple(
            ip_text(int(hop_addr[i, j])) if answered[i, j] else None for j in range(int(n_hops[i]))
        )
        rev = bool(reverse[i])
        out.append(
            PathRecord(
                host=hosts[h],
                peer=hosts[q],
                role="reply" if rev else "probe",
                src=ip_text(int(nic_addr[own_nic[i]])),
                sport=answer if rev else sport[i],
                dst=ip_text(int(nic_addr[far_nic[i]])),
                dport=sport[i] if rev else answer,
                hops=hops,
                complete=bool(complete[i]),
                t_ns=stamp[i],
                nic=nic_name[own_nic[i]] if multi[h] else None,
            )
        )
    return out
