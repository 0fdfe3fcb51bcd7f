"""The fabric's shape and the peer assignment (the simulator's ECMP: test_sim_ecmp.py)."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.fabric.topology import (
    assign_peers,
    leaf_spine,
    probe_edges,
)


def _connected(names: list[str], edges: set[tuple[str, str]]) -> bool:
    adjacent: dict[str, set[str]] = {n: set() for n in names}
    for a, b in edges:
        adjacent[a].add(b)
        adjacent[b].add(a)
    seen, todo = {names[0]}, [names[0]]
    while todo:
        for nxt in adjacent[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return len(seen) == len(names)


def test_default_fabric_names_and_shape() -> None:
    names, topo = leaf_spine(64, 8, 4)
    assert names[0] == "gpu-001" and names[-1] == "gpu-064"
    assert topo.leaves == [f"leaf{i}" for i in range(1, 9)]
    assert topo.spines == ["spine1", "spine2", "spine3", "spine4"]
    assert topo.leaf_of["gpu-009"] == "leaf2"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 80), k=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_peer_assignment_is_connected_bounded_and_stable(n: int, k: int, seed: int) -> None:
    names, topo = leaf_spine(n, 8, 2)
    peers = assign_peers(names, k, seed=seed, leaf_of=topo.leaf_of)
    for host, chosen in peers.items():
        assert len(chosen) == min(k, n - 1)
        assert host not in chosen
        assert len(set(chosen)) == len(chosen)
    assert _connected(names, probe_edges(peers))
    shuffled = names[:]
    random.Random(seed).shuffle(shuffled)
    assert assign_peers(shuffled, k, seed=seed, leaf_of=topo.leaf_of) == peers


def test_peer_assignment_depends_on_seed() -> None:
    names, _ = leaf_spine(64, 8, 4)
    assert assign_peers(names, 10, seed=1) != assign_peers(names, 10, seed=2)


def test_chords_cross_leaves() -> None:
    names, topo = leaf_spine(64, 8, 4)
    edges = probe_edges(assign_peers(names, 10, seed=3, leaf_of=topo.leaf_of))
    crossing = sum(topo.leaf_of[a] != topo.leaf_of[b] for a, b in edges)
    assert crossing > len(edges) / 2


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 3000),
    per_leaf=st.integers(1, 40),
    k=st.integers(1, 16),
    seed=st.integers(0, 2**32 - 1),
)
def test_peer_assignment_covers_leaf_mates_and_other_leaves(
    n: int, per_leaf: int, k: int, seed: int
) -> None:
    names, topo = leaf_spine(n, per_leaf, 2)
    peers = assign_peers(names, k, seed=seed, leaf_of=topo.leaf_of)
    assert sorted(peers) == sorted(names)
    for host, chosen in peers.items():
        assert len(chosen) == len(set(chosen)) == min(k, n - 1)
        assert host not in chosen
    edges = probe_edges(peers)
    assert len(edges) >= n * min(k, n - 1) / 2
    touched_in_leaf = {h for a, b in edges if topo.leaf_of[a] == topo.leaf_of[b] for h in (a, b)}
    size = Counter(topo.leaf_of.values())
    mates = {h for h in names if size[topo.leaf_of[h]] > 1}
    assert mates <= touched_in_leaf  # every host with a leaf mate probes within its leaf
    leaves = set(topo.leaf_of.values())
    if len(leaves) > 1:
        crossing = {(topo.leaf_of[a], topo.leaf_of[b]) for a, b in edges}
        left = {x for pair in crossing if pair[0] != pair[1] for x in pair}
        assert left == leaves  # every leaf reaches another leaf


def test_peer_assignment_at_fleet_scale_is_regular() -> None:
    names, topo = leaf_spine(30_000, 8, 4)
    peers = assign_peers(names, 10, seed=5, leaf_of=topo.leaf_of)
    indegree: dict[str, int] = dict.fromkeys(names, 0)
    for chosen in peers.values():
        assert len(set(chosen)) == 10
        for p in chosen:
            indegree[p] += 1
    # chords are spread: nobody is probed by far more hosts than the average of 10
    assert max(indegree.values()) < 40
