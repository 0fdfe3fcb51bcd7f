"""A tiny fabric-shaped probe table for telemetry tests, independent of the simulator.

Clocks are perfect (every host reads true time), so a zero ``ClockSolution`` corrects
them exactly and the one-way delays are known: ``base + queueing`` per direction. Faults
are per element name (as ``Topology.path_elements`` names them): a loss probability
and a mean extra delay (exponential) for every probe that crosses the element.
Routes come from ``Topology.path_elements`` (the per-flow Python call is fine here: a
few thousand flows), so the tests check ``elements.py``'s vectorised hash against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cwctl.collection import Collection, HostInfo, HostStatus
from cwctl.records import TS_CODE, ProbeTable
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
    seed: int = 0
    topology: bool = True


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

    def leg(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per probe: delivered?, delay (ns) along a -> b for source port ``sport``."""
        keys = np.stack([a, b, sport], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        p_ok = np.ones(len(uniq))
        extra = np.zeros((len(uniq), 0)).tolist()
        for u, (x, y, port) in enumerate(uniq.tolist()):
            for el in topo.path_elements(hosts[x], hosts[y], port):
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
    topology: Topology | None = topo if s.topology else None
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
    )
    return collection, solution
