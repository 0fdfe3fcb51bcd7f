"""How the simulated switches spread flows over their equal-cost next hops.

Two hashes, chosen per model (``SimParams.ecmp``):

``hidden`` (the default)  every switch hashes the full 5-tuple (source and destination
        address, both ports, protocol) with its own secret seed, drawn from the
        simulation's seed. Nothing outside ``cwctl.sim`` knows the seeds or the function,
        as nothing outside a real switch knows its hash: the localiser must learn which
        way a flow went from discovered paths (``cwctl.sim.discovery``), never from here.
``documented``  the old published hash (``docs/simulator.md``, "ECMP"): splitmix64 over
        (CRC-32 of the source host's name, of the destination's, the source port), the
        same at every switch. Kept as an option to compare with; no part of cwctl outside
        the simulator uses it (an import-linter contract forbids telemetry to import
        ``cwctl.sim``).
"""

from __future__ import annotations

import zlib

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import U64

ECMP_MODES = ("hidden", "documented")
PROTO_UDP = 17


def host_id(name: str) -> int:
    """A host's stable 32-bit id for the documented hash: CRC-32 of its UTF-8 name."""
    return zlib.crc32(name.encode())


def splitmix64(x: U64) -> U64:
    """The splitmix64 finaliser, vectorised over uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def documented_hash(src_id: npt.ArrayLike, dst_id: npt.ArrayLike, sport: npt.ArrayLike) -> U64:
    """The documented hash: ``splitmix64(splitmix64(src<<32 ^ dst) ^ sport)``."""
    src = np.asarray(src_id, np.uint64)
    dst = np.asarray(dst_id, np.uint64)
    port = np.asarray(sport, np.uint64)
    return splitmix64(splitmix64((src << np.uint64(32)) ^ dst) ^ port)


def switch_seeds(seed: int, n_switches: int) -> U64:
    """Each switch's secret hash seed, drawn from the simulation's seed (stable per seed)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xEC3F]))
    return rng.integers(0, np.iinfo(np.uint64).max, n_switches, dtype=np.uint64, endpoint=True)


def tuple_hash(
    switch_seed: npt.ArrayLike,
    src_addr: npt.ArrayLike,
    dst_addr: npt.ArrayLike,
    sport: npt.ArrayLike,
    dport: npt.ArrayLike,
    proto: int = PROTO_UDP,
) -> U64:
    """A switch's hash of a 5-tuple (addresses as 32-bit integers), seeded per switch."""
    seed = np.asarray(switch_seed, np.uint64)
    addrs = (np.asarray(src_addr, np.uint64) << np.uint64(32)) ^ np.asarray(dst_addr, np.uint64)
    ports = (
        (np.asarray(sport, np.uint64) << np.uint64(24))
        ^ (np.asarray(dport, np.uint64) << np.uint64(8))
        ^ np.uint64(proto)
    )
    return splitmix64(splitmix64(seed ^ addrs) ^ ports)
