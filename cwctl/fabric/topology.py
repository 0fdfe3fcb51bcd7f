"""The fabric's shape: hosts on leaves, leaves up to spines; and which hosts probe which.

Nothing here says which way a flow goes: under ECMP that is each switch's own hash,
which cwctl does not know. Localisation learns a flow's path from discovered paths
(path records, whose hop addresses ``switch_of_address`` names) and otherwise only what
is certain: the hosts, their leaves and the leaves' equal-cost uplinks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cwctl import settings
from cwctl.fabric.names import sim_host_names


@dataclass(frozen=True)
class Topology:
    """A two-tier leaf-spine fabric.

    ``leaf_of`` maps each host to its leaf; ``uplinks`` maps each leaf to the spines it
    connects to, in order (its equal-cost next hops). A host without a leaf
    (an inventory that gives none) is outside the topology: localisation then falls back
    to hosts and NICs.
    """

    leaf_of: Mapping[str, str]
    uplinks: Mapping[str, tuple[str, ...]]
    nics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # fabric address -> switch name (an ICMP answer from it names that switch), and
    # host probe address -> (host, NIC or None); both from the inventory, empty if unknown
    switch_of_address: Mapping[str, str] = field(default_factory=dict)
    host_of_address: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)

    @property
    def leaves(self) -> list[str]:
        return sorted(self.uplinks, key=_natural_key)

    @property
    def spines(self) -> list[str]:
        return sorted({s for ups in self.uplinks.values() for s in ups}, key=_natural_key)


def leaf_spine(
    n_hosts: int = settings.SIM_HOSTS,
    hosts_per_leaf: int = settings.SIM_HOSTS_PER_LEAF,
    n_spines: int = settings.SIM_SPINES,
    prefix: str = settings.SIM_HOST_PREFIX,
) -> tuple[list[str], Topology]:
    """The simulator's default fabric: ``gpu-001``..., ``leaf1``..., ``spine1``...; full mesh."""
    names = sim_host_names(n_hosts, prefix)
    n_leaves = max(1, -(-n_hosts // hosts_per_leaf))
    spines = tuple(f"spine{j + 1}" for j in range(n_spines))
    leaf_of = {name: f"leaf{i // hosts_per_leaf + 1}" for i, name in enumerate(names)}
    uplinks = {f"leaf{k + 1}": spines for k in range(n_leaves)}
    return names, Topology(leaf_of=leaf_of, uplinks=uplinks)


def _natural_key(name: str) -> tuple[str, int]:
    stem = name.rstrip("0123456789")
    digits = name[len(stem) :]
    return (stem, int(digits) if digits else -1)


def assign_peers(
    hosts: Sequence[str],
    k: int,
    *,
    seed: int = 0,
    leaf_of: Mapping[str, str] | None = None,
) -> dict[str, list[str]]:
    """Which peers each host probes: ring neighbours plus seeded random chords.

    The ring (hosts ordered by leaf, then name) makes the probe graph connected and
    full of short loops, most of them inside a leaf; the chords cross leaves, so every
    spine sees traffic and the network-effect solve has long loops too. Each host
    initiates to ``min(k, n-1)`` distinct peers; an edge may be probed from both ends.
    Deterministic for a seed and independent of the order ``hosts`` is given in.
    O(n*k) after the sort: chords are drawn as offsets along the ring, never as a
    permutation of all hosts.
    """
    names = sorted(set(hosts), key=lambda h: ((leaf_of or {}).get(h, ""), _natural_key(h)))
    n = len(names)
    k = max(0, min(k, n - 1))
    if k == 0:
        return {name: [] for name in names}
    ring = max(1, k // 2)
    offsets = np.empty((n, k), np.int64)
    offsets[:, :ring] = np.arange(1, ring + 1)
    if k > ring:
        # chord offsets ring+1 .. n-1: never the host itself, never a ring successor
        chords = _distinct_draws(np.random.default_rng(seed), n, k - ring, n - 1 - ring)
        offsets[:, ring:] = chords + ring + 1
    peers = (np.arange(n)[:, None] + offsets) % n
    return {name: [names[j] for j in row] for name, row in zip(names, peers.tolist(), strict=True)}


def _distinct_draws(
    rng: np.random.Generator, rows: int, m: int, span: int
) -> npt.NDArray[np.int64]:
    """``rows`` x ``m`` integers in [0, span), distinct within each row (``m <= span``).

    Wide spans draw with replacement and redraw the rows that repeat a value (few, and
    fewer each round); narrow spans take the head of a permutation per row.
    """
    if span <= 4 * m:
        return np.array([rng.permutation(span)[:m] for _ in range(rows)], np.int64).reshape(rows, m)
    out = rng.integers(0, span, size=(rows, m))
    redo = np.arange(rows)
    while len(redo):
        part = np.sort(out[redo], axis=1)
        redo = redo[(part[:, 1:] == part[:, :-1]).any(axis=1)]
        if len(redo):
            out[redo] = rng.integers(0, span, size=(len(redo), m))
    return out


def probe_edges(peers: Mapping[str, Iterable[str]]) -> set[tuple[str, str]]:
    """The undirected edges of a peer assignment, each as a sorted name pair."""
    return {(a, b) if a < b else (b, a) for a, ps in peers.items() for b in ps}
