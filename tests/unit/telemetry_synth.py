"""A tiny fabric-shaped probe table for telemetry tests, independent of the simulator.

Its own fabric model, sharing no code with ``cwctl.sim``: each leaf picks a flow's spine
with its own hash (BLAKE2b of the leaf's secret and the 5-tuple), switches have their
own addresses, and every traced flow gets a path record (all hops answered, or the
share ``discovered`` of them) as agents write them. Clocks are perfect (every host reads
true time) unless ``clock_ns`` gives each host an offset (then ``make``'s zero
``ClockSolution`` is wrong and only the solver, as ``--replay`` runs it, corrects them):
the one-way delays are ``base + queueing`` per direction, ``queue_ns`` the mean of an
exponential wait. Faults are per element name (``spine2``, ``leaf1-spine2``,
``gpu-001``): a loss probability, a mean extra delay (exponential) and a fixed extra
delay (``slow_ns``: every crossing probe, a slow element) for every probe that crosses it.

Timestamps are the NIC's (``stamps="hw"``: exact) or the kernel's (``"sw"``), as issue 21
describes them: every stamp off by a Gaussian of ``SW_SIGMA_NS``, and on ``SW_TAIL_SHARE``
of the stamps a lognormal tail, median ``SW_TAIL_MEDIAN_NS`` times a per-host factor (each
host's kernel has its own tail), always the way that lengthens the delay measured (a send
stamp early, a receive stamp late).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cwctl.fabric.topology import Topology, assign_peers, leaf_spine
from cwctl.records import TS_CODE, ProbeTable
from cwctl.records.path import PathTable, decode_path
from cwctl.scan.collection import Collection, HostInfo, HostStatus
from cwctl.sync.solution import ClockSolution

T0 = 1_800_000_000_000_000_000
TURNAROUND_NS = 100_000  # the answering agent's (user space): longer than any stamp's error
SW_SIGMA_NS = 150.0
SW_TAIL_SHARE = 0.3
SW_TAIL_MEDIAN_NS = 800.0
SW_TAIL_SHAPE = 1.0  # sigma of the tail's log
SW_TAIL_CAP_NS = 20_000.0  # no kernel stamp errs by more (a scheduling delay's worth)
SW_HOST_FACTOR = (0.5, 4.0)  # each host's tail median scaled by a factor uniform in this


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
    slow_ns: Mapping[str, float] = field(default_factory=dict)  # fixed extra per crossing
    # loss of one directed host pair only (a filter, a bad hash bucket): no element's
    pair_loss: Mapping[tuple[str, str], float] = field(default_factory=dict)
    # ...and a standing queue of one directed host pair (ns on every probe)
    pair_delay_ns: Mapping[tuple[str, str], float] = field(default_factory=dict)
    # which probes that queue holds: "both" (every probe: a standing queue), "pairs" (both
    # probes of half the pairs: a queue on the path that comes and goes), or "first"
    # (the first probe of every pair: the host's own doing; with kernel stamps, the reply
    # to a pair's first probe waits while its second arrives)
    pair_delay_side: str = "both"
    seed: int = 0
    topology: bool = True
    discovered: float = 1.0  # share of the traced flows whose path record names the spine
    answer_port: int = 7000
    stamps: str = "hw"  # hw: exact stamps | sw: kernel stamps (module docstring)
    clock_ns: float = 0.0  # hosts' clock offsets uniform in +-clock_ns (0: perfect clocks)
    drift_ppb: float = 0.0  # ...and rates off by a drift uniform in +-drift_ppb
    # share of the tail stamps the other way (a send stamp taken after the packet left):
    # they shorten the delay measured, below the path's true floor
    sw_early_share: float = 0.0
    rate: float | None = None  # pairs/s written as the scan's rate (duration: pairs / rate)


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


def _stamp_noise(s: Synth, rng: np.random.Generator, n_hosts: int) -> Any:
    """A function giving, for each stamp's host, how far its stamp is off (ns, >= 0 in
    the tail: the caller applies it the way that lengthens the measured delay)."""
    if s.stamps == "hw":
        return lambda host: np.zeros(len(host))
    factor = rng.uniform(*SW_HOST_FACTOR, n_hosts)

    def noise(host: np.ndarray) -> np.ndarray:
        n = len(host)
        tail = rng.random(n) < SW_TAIL_SHARE
        size = SW_TAIL_MEDIAN_NS * factor[host] * rng.lognormal(0.0, SW_TAIL_SHAPE, n)
        size = np.minimum(size, SW_TAIL_CAP_NS)
        size *= np.where(rng.random(n) < s.sw_early_share, -1.0, 1.0)
        return rng.normal(0.0, SW_SIGMA_NS, n) + np.where(tail, size, 0.0)

    return noise


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
    spacing = int(1e9 / s.rate) if s.rate else 10_000_000
    t1 = T0 + (pair * spacing + idx.astype(np.int64) * 20_000 + e_of * 997).astype(np.int64)

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
        fixed = np.zeros(len(uniq))
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
            fixed[u] += s.pair_delay_ns.get((hx, hy), 0.0)
            for el in route:
                p_ok[u] *= 1.0 - s.loss.get(el, 0.0)
                if el in s.delay_ns:
                    extra[u].append(s.delay_ns[el])
                fixed[u] += s.slow_ns.get(el, 0.0)
        ok = rng.random(m) < p_ok[inv]
        mean_extra = np.array([sum(x) for x in extra])[inv]
        held = {"first": idx == 0, "pairs": pair % 4 < 2}.get(s.pair_delay_side, np.ones(m, bool))
        pair_fixed = np.array([s.pair_delay_ns.get((hosts[x], hosts[y]), 0.0) for x, y, _ in uniq])
        fixed_m = fixed[inv] - np.where(held, 0.0, pair_fixed[inv])
        delay = s.base_ns + fixed_m + rng.exponential(s.queue_ns, m)
        delay += np.where(mean_extra > 0, rng.exponential(np.maximum(mean_extra, 1.0)), 0.0)
        return ok, delay

    ok_f, d_f = leg(src, dst)
    ok_r, d_r = leg(dst, src)
    n_hosts = len(hosts)
    offset = rng.uniform(-s.clock_ns, s.clock_ns, n_hosts) if s.clock_ns else np.zeros(n_hosts)
    # true times of the four events (ns after T0: floats hold them exactly), then each
    # read by its host's clock and stamp
    true1 = (t1 - T0).astype(np.float64)
    true2 = true1 + d_f
    true3 = true2 + TURNAROUND_NS
    true4 = true3 + d_r
    noise = _stamp_noise(s, rng, len(hosts))

    drift = rng.uniform(-s.drift_ppb, s.drift_ppb, n_hosts) * 1e-9 if s.drift_ppb else 0 * offset

    def read(true: np.ndarray, host: np.ndarray, sign: float) -> np.ndarray:
        clock = true + offset[host] + drift[host] * true
        return T0 + np.rint(clock + sign * noise(host)).astype(np.int64)

    t1 = read(true1, src, -1.0)  # a send stamp: early
    t2 = np.where(ok_f, read(true2, dst, 1.0), 0)  # a receive stamp: late
    t3 = np.where(ok_f, read(true3, dst, -1.0), 0)
    t4 = np.where(ok_f & ok_r, read(true4, src, 1.0), 0)
    table = ProbeTable(
        hosts=list(hosts),
        src=src.astype(np.int32),
        dst=dst.astype(np.int32),
        sport=sport.astype(np.int32),
        pair=pair.astype(np.int64),
        idx=idx,
        gap_ns=np.full(m, 20_000, np.int64),
        ts=np.full(m, TS_CODE[s.stamps], np.int8),
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
        duration_s=s.pairs / s.rate if s.rate else 1.0,
        params={"rate": s.rate} if s.rate else {},
        status={h: HostStatus() for h in hosts},
        topology=topology,
        peers=peers,
        paths=PathTable.of(decode_path(r) for r in records),
    )
    return collection, solution
