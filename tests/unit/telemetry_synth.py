"""A tiny fabric-shaped probe table for telemetry tests, independent of the simulator.

Its own fabric model, sharing no code with ``cwctl.sim``: each leaf picks a flow's spine
with its own hash (BLAKE2b of the leaf's secret and the 5-tuple), switches have their
own addresses, and every traced flow gets a path record (all hops answered, or the
share ``discovered`` of them) as agents write them. Clocks are perfect (every host reads
true time), so a zero ``ClockSolution`` corrects them exactly and the one-way delays are
known: ``base + queueing`` per direction. Faults are per element name (``spine2``,
``leaf1-spine2``, ``gpu-001``): a loss probability and a mean extra delay (exponential)
for every probe that crosses the element.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cwctl.collection import Collection, HostInfo, HostStatus
from cwctl.records import TS_CODE, ProbeTable
from cwctl.records.path import PathTable, decode_path
from cwctl.sync.solution import ClockSolution
from cwctl.topology import Topology, assign_peers, leaf_spine

T0 = 1_800_000_000_000_000_000


@dataclass
class Synth:
    n_hosts: int = 32
    per_leaf: int = 8
    spines: int = 4
    peers: int = 6
    pairs: int = 60  # coded pairs per edge
    ports: int = 4
    base_ns: float = 2_000.0
    queue_ns: float = 300.0
    loss: Mapping[str, float] = field(default_factory=dict)
    delay_ns: Mapping[str, float] = field(default_factory=dict)
    # loss of one directed host pair only (a filter, a bad hash bucket): no element's
    pair_loss: Mapping[tuple[str, str], float] = field(default_factory=dict)
    seed: int = 0
    topology: bool = True
    discovered: float = 1.0  # share of the traced flows whose path record names the spine
    answer_port: int = 7000


def _spine(leaf: str, spines: tuple[str, ...], src: str, dst: str, sport: int, dport: int) -> str:
    """This model's ECMP: the leaf hashes the 5-tuple with its own secret."""
    key = f"secret-{leaf}|{src}|{dst}|{sport}|{dport}|udp".encode()
    return spines[int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % len(spines)]


def _route(topo: Topology, a: str, b: str, sport: int, dport: int) -> list[str]:
    """The elements a flow from host a to b crosses, and its spine (or none)."""
    la, lb = topo.leaf_of[a], topo.leaf_of[b]
    if la == lb:
        return [a, la, b]
    s = _spine(la, topo.uplinks[la], a, b, sport, dport)
    return [a, la, f"{la}-{s}", s, f"{lb}-{s}", lb, b]


def _host_address(host: str) -> str:
    i = int(host.rsplit("-", 1)[1])
    return f"10.250.{i // 256}.{i % 256}"


def _address(switch: str, other: str) -> str:
    """The address ``switch`` answers from on its interface towards ``other``."""
    digest = hashlib.blake2b(f"{switch}>{other}".encode(), digest_size=3).digest()
    return "10.{}.{}.{}".format(*digest)


def make(s: Synth) -> tuple[Collection, ClockSolution]:
    rng = np.random.default_rng(s.seed)
    hosts, topo = leaf_spine(s.n_hosts, s.per_leaf, s.spines)
    peers = assign_peers(hosts, s.peers, seed=s.seed, leaf_of=topo.leaf_of)
    index = {h: i for i, h in enumerate(hosts)}
    edges = np.array([(index[a], index[b]) for a, ps in peers.items() for b in ps], np.int64)
    m = len(edges) * s.pairs * 2
    e_of = np.repeat(np.arange(len(edges)), s.pairs * 2)
    pair = np.repeat(np.tile(np.arange(s.pairs), len(edges)), 2)
    idx = np.tile([0, 1], len(edges) * s.pairs).astype(np.int8)
    sport = 40000 + pair % s.ports
    src, dst = edges[e_of, 0], edges[e_of, 1]
    t1 = T0 + (pair * 10_000_000 + idx.astype(np.int64) * 20_000 + e_of * 997).astype(np.int64)

    records: list[dict[str, Any]] = []
    switch_of: dict[str, str] = {}

    def trace(x: str, y: str, role: str, sport_: int, dport_: int, path: list[str]) -> None:
        addrs: list[str | None] = []
        prev, cut = x, False
        for el in path[:-1]:
            cut = cut or s.loss.get(el, 0.0) >= 1.0  # past a dead element nothing answers
            if "-" in el or el == x:
                continue
            addr = _address(el, prev)
            switch_of[addr] = el
            asked = rng.random() < s.discovered or el.startswith("leaf")
            addrs.append(addr if asked and not cut else None)
            prev = el
        records.append({"type": "path", "v": 1, "host": x, "peer": y, "role": role,
                        "src": _host_address(x), "sport": sport_, "dst": _host_address(y),
                        "dport": dport_, "proto": "udp", "hops": addrs, "complete": True,
                        "t_ns": T0, "cached": False})  # fmt: skip

    def leg(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per probe: delivered?, delay (ns) along a -> b (the prober's port ``sport``)."""
        keys = np.stack([a, b, sport], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        p_ok = np.ones(len(uniq))
        extra = np.zeros((len(uniq), 0)).tolist()
        forward = bool(np.array_equal(a, src))
        for u, (x, y, port) in enumerate(uniq.tolist()):
            hx, hy = hosts[x], hosts[y]
            ports = (port, s.answer_port) if forward else (s.answer_port, port)
            if s.topology:
                route = _route(topo, hx, hy, *ports)
                trace(hx, hy, "probe" if forward else "reply", *ports, route)
            else:
                route = [hx, hy]
            p_ok[u] *= 1.0 - s.pair_loss.get((hx, hy), 0.0)
            for el in route:
                p_ok[u] *= 1.0 - s.loss.get(el, 0.0)
                if el in s.delay_ns:
                    extra[u].append(s.delay_ns[el])
        ok = rng.random(m) < p_ok[inv]
        mean_extra = np.array([sum(x) for x in extra])[inv]
        delay = s.base_ns + rng.exponential(s.queue_ns, m)
        delay += np.where(mean_extra > 0, rng.exponential(np.maximum(mean_extra, 1.0)), 0.0)
        return ok, delay

    ok_f, d_f = leg(src, dst)
    ok_r, d_r = leg(dst, src)
    t2 = np.where(ok_f, t1 + np.rint(d_f).astype(np.int64), 0)
    t3 = np.where(ok_f, t2 + 5_000, 0)
    t4 = np.where(ok_f & ok_r, t3 + np.rint(d_r).astype(np.int64), 0)
    table = ProbeTable(
        hosts=list(hosts),
        src=src.astype(np.int32),
        dst=dst.astype(np.int32),
        sport=sport.astype(np.int32),
        pair=pair.astype(np.int64),
        idx=idx,
        gap_ns=np.full(m, 20_000, np.int64),
        ts=np.full(m, TS_CODE["hw"], np.int8),
        t1=t1,
        t2=t2,
        t3=t3,
        t4=t4,
    )
    n = len(hosts)
    solution = ClockSolution(
        hosts=list(hosts),
        offset_ns=np.zeros(n),
        drift_ppb=np.zeros(n),
        uncertainty_ns=np.full(n, 5.0),
        reference=hosts[0],
        t_ref_ns=T0,
    )
    topology: Topology | None = replace(topo, switch_of_address=switch_of) if s.topology else None
    collection = Collection(
        source="test",
        hosts=[
            HostInfo(h, f"10.0.0.{i}", topo.leaf_of[h] if s.topology else None)
            for i, h in enumerate(hosts)
        ],
        table=table,
        duration_s=1.0,
        status={h: HostStatus() for h in hosts},
        topology=topology,
        peers=peers,
        paths=PathTable.of(decode_path(r) for r in records),
    )
    return collection, solution
