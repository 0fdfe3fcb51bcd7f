"""Jobs' elephant flows in the simulated fabric: their 5-tuples, their true rates, the
spines the switches' secret hash puts them on, and what a trace of a tuple reports.

A job's ranks talk in a ring (each host to the next of the job's hosts, the last to the
first), each ring edge carried by ``channels`` TCP connections, as NCCL's and Gloo's
socket transports open several per peer. A connection goes from an ephemeral port of
the connecting host (Linux's range, 32768-60999, drawn per host without repeats) to the
port the next rank listens on (one per rank, also ephemeral). Its data rate is the
job's per-host rate over the channels; the way back carries acknowledgements, ``ack``
of it.

Ground truth (``spines``, ``link_loads``) hashes each direction's 5-tuple at the
sender's leaf with that leaf's secret seed, exactly as probe flows are hashed
(``window.choose_spine``): this is the fabric, and only the checker reads it. What
cwctl may learn is what a host could see: the 5-tuples and their measured rates
(``observe``, as ``ss -ti`` would give them) and, for any tuple, the address that
answers a TTL-2 probe sent with it (``trace``, as ``probe/hosttrace.py`` reports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cwctl.errors import InputError
from cwctl.runtime.arrays import I32
from cwctl.sim.addresses import ip_text
from cwctl.sim.window import choose_spine, ecmp_groups
from cwctl.sim.world import SimWorld

PROTO_NUMBERS = {"tcp": 6, "udp": 17}
EPHEMERAL = (32768, 60999)  # net.ipv4.ip_local_port_range's default
CHANNELS = 4  # connections per ring edge
HOST_BPS = (20e9, 100e9)  # a job's per-host send rate, uniform in this range
ACK = 0.02  # the way back of a bulk TCP transfer: one ~66-byte ack per two 1448-byte segments


@dataclass(frozen=True)
class JobFlow:
    """One connection of a job: ``src:sport`` (the connecting end) to ``dst:dport``."""

    job: str
    proto: str
    src: str
    sport: int
    dst: str
    dport: int
    bps: float  # src -> dst, true
    back_bps: float  # dst -> src (acknowledgements), true


def scattered(hosts: Sequence[str], sizes: Sequence[int], seed: int) -> list[tuple[str, ...]]:
    """Jobs of ``sizes`` hosts on hosts drawn at random (a fragmented cluster), in the
    fabric's order within each job; fewer jobs when hosts run out."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5CA7]))
    order = [hosts[i] for i in rng.permutation(len(hosts)).tolist()]
    rank = {h: i for i, h in enumerate(hosts)}
    out, at = [], 0
    for size in sizes:
        if at + size > len(order):
            break
        out.append(tuple(sorted(order[at : at + size], key=rank.__getitem__)))
        at += size
    return out


def job_flows(
    jobs: Sequence[Sequence[str]],
    *,
    seed: int,
    names: Sequence[str] | None = None,
    channels: int = CHANNELS,
    host_bps: tuple[float, float] = HOST_BPS,
    ack: float = ACK,
) -> list[JobFlow]:
    """Every connection of each job's ring (a job of one host has none), seeded."""
    if channels < 1 or not 0 <= host_bps[0] <= host_bps[1] or ack < 0:
        raise InputError("job flows need channels >= 1, 0 <= host rate low <= high, ack >= 0")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xF10]))
    used: dict[str, set[int]] = {}

    def port(host: str) -> int:
        taken = used.setdefault(host, set())
        while True:
            p = int(rng.integers(EPHEMERAL[0], EPHEMERAL[1], endpoint=True))
            if p not in taken:
                taken.add(p)
                return p

    out = []
    for j, hosts in enumerate(jobs):
        name = names[j] if names is not None else f"job{j + 1}"
        if len(hosts) < 2:
            continue
        per_conn = float(rng.uniform(*host_bps)) / channels
        listen = {h: port(h) for h in hosts}
        for i, src in enumerate(hosts):
            dst = hosts[(i + 1) % len(hosts)]
            if len(hosts) == 2 and i == 1:
                continue  # two ranks: one ring edge each way is the same pair twice
            for _ in range(channels):
                out.append(
                    JobFlow(name, "tcp", src, port(src), dst, listen[dst], per_conn, per_conn * ack)
                )
    return out


def observe(flows: Sequence[JobFlow], *, seed: int, noise: float) -> list[JobFlow]:
    """The flows as the hosts' socket tables report them: the same 5-tuples, each rate
    measured with a relative error of sd ``noise`` (bytes acked over a short interval)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x0B5]))
    err = np.exp(rng.normal(0.0, noise, (len(flows), 2))) if noise > 0 else np.ones((len(flows), 2))
    return [
        JobFlow(f.job, f.proto, f.src, f.sport, f.dst, f.dport, f.bps * a, f.back_bps * b)
        for f, (a, b) in zip(flows, err.tolist(), strict=True)
    ]


Tuples = tuple[Sequence[str], Sequence[str], Sequence[int], Sequence[int], str]


def _hash(
    model: SimWorld,
    src: Sequence[str],
    dst: Sequence[str],
    sport: Sequence[int],
    dport: Sequence[int],
    proto: str,
) -> tuple[I32, I32]:
    """Per tuple (one direction, ``src`` sending): the spine index its leaf's secret hash
    picks (< 0: none crossed), and the sender's leaf."""
    fabric = model.fabric
    index = {h: i for i, h in enumerate(fabric.hosts)}
    for h in (*src, *dst):
        if h not in index:
            raise InputError(f"no host named {h!r} in the simulated fabric")
    a = np.array([index[h] for h in src], np.int32)
    b = np.array([index[h] for h in dst], np.int32)
    nics = (fabric.nic_base[a].astype(np.int32), fabric.nic_base[b].astype(np.int32))
    ports = (np.asarray(sport, np.int64), np.asarray(dport, np.int64))
    spine = choose_spine(model, ecmp_groups(model), a, b, nics, ports, ports[0],
                         PROTO_NUMBERS[proto])  # fmt: skip
    return spine, fabric.host_leaf[a].astype(np.int32)


def spines(
    model: SimWorld,
    src: Sequence[str],
    dst: Sequence[str],
    sport: Sequence[int],
    dport: Sequence[int],
    proto: str = "tcp",
) -> list[str | None]:
    """Ground truth: the spine each tuple (one direction) crosses; None within a leaf."""
    spine, _ = _hash(model, src, dst, sport, dport, proto)
    names = model.fabric.spines
    return [names[s] if s >= 0 else None for s in spine.tolist()]


def trace(
    model: SimWorld,
    src: Sequence[str],
    dst: Sequence[str],
    sport: Sequence[int],
    dport: Sequence[int],
    proto: str = "tcp",
) -> list[str | None]:
    """What ``src`` learns tracing each tuple at TTL 2: the address of the spine's end of
    the link it came in on, as Linux answers (``addresses``); None where no spine is
    crossed or none answers (a ``silent`` spine; a spine or that link ``down``)."""
    spine, leaf = _hash(model, src, dst, sport, dport, proto)
    fabric, addr = model.fabric, model.addresses
    dead = {fabric.names[eid] for f, eid in model.faults if f.mode in ("silent", "down")}
    out: list[str | None] = []
    for s, ls in zip(spine.tolist(), leaf.tolist(), strict=True):
        if s < 0:
            out.append(None)
            continue
        name = fabric.spines[s]
        if name in dead or f"{fabric.leaves[ls]}-{name}" in dead:
            out.append(None)
            continue
        out.append(ip_text(int(addr.link_spine[ls, s])))
    return out


def link_loads(
    model: SimWorld, flows: Sequence[JobFlow], wire: Sequence[int] | None = None
) -> dict[tuple[str, str], float]:
    """Ground truth: the true load (bit/s) on each directed leaf-spine link, (sender,
    receiver), with each flow's source port on the wire ``wire[i]`` (else its own)."""
    ports = [f.sport for f in flows] if wire is None else list(wire)
    out: dict[tuple[str, str], float] = {}
    fabric = model.fabric
    leaf = dict(
        zip(fabric.hosts, [fabric.leaves[i] for i in fabric.host_leaf.tolist()], strict=True)
    )
    for proto in sorted({f.proto for f in flows}):
        rows = [i for i, f in enumerate(flows) if f.proto == proto]
        src, dst = [flows[i].src for i in rows], [flows[i].dst for i in rows]
        sport, dport = [ports[i] for i in rows], [flows[i].dport for i in rows]
        fwd = spines(model, src, dst, sport, dport, proto)
        rev = spines(model, dst, src, dport, sport, proto)
        for i, f_s, r_s in zip(rows, fwd, rev, strict=True):
            f = flows[i]
            for a, b, s, bps in ((f.src, f.dst, f_s, f.bps), (f.dst, f.src, r_s, f.back_bps)):
                if s is None:
                    continue
                for key in ((leaf[a], s), (s, leaf[b])):
                    out[key] = out.get(key, 0.0) + bps
    return out
