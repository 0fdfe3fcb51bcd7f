"""What an element's name names in a target's fabric: a switch, a link, a NIC or a host
(``resolve``), and the one element that covers a candidate set (``covering``).

Names as DESIGN.md gives them: ``spine2``, ``leaf1-spine2`` (lower tier first, either
order accepted), ``gpu-001/mlx5_1``, ``gpu-001``, and ``gpu-001-leaf1`` for an access link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from cwctl.errors import InputError


@dataclass(frozen=True)
class FabricShape:
    """The names of a target's fabric, in its own order."""

    hosts: tuple[str, ...]
    leaves: tuple[str, ...]
    spines: tuple[str, ...]
    nics: Mapping[str, tuple[str, ...]]
    leaf_of: Mapping[str, str | None]
    uplinks: Mapping[str, frozenset[str]]  # leaf -> the spines it reaches
    where: str  # how an error names the fabric: "the simulated fabric", the inventory path
    # the simulator's ECMP groups are per leaf, for every destination: a reroute of any
    # link of a spine takes the whole spine out of every leaf's group
    groups_per_leaf: bool = False
    hidden: frozenset[str] = frozenset()  # switches no name can reach (the simulator's)

    def serves(self, spine: str) -> list[str]:
        """The leaves with an uplink to ``spine``."""
        return [leaf for leaf in self.leaves if spine in self.uplinks.get(leaf, ())]


class Shaped(Protocol):
    """What naming reads of a plan's target (``target.ActionTarget``)."""

    def shape(self) -> FabricShape: ...


@dataclass(frozen=True)
class Element:
    kind: str  # switch | link | nic | host
    name: str
    leaf: str | None = None  # switch: a leaf; link: its lower end
    spine: str | None = None  # switch: a spine; link: its upper end
    host: str | None = None  # nic, host, access link
    nic: str | None = None


def _link_ends(name: str, lower: set[str], upper: set[str]) -> tuple[str, str] | None:
    for cut in [i for i, c in enumerate(name) if c == "-"]:
        a, b = name[:cut], name[cut + 1 :]
        if a in lower and b in upper:
            return a, b
        if b in lower and a in upper:
            return b, a
    return None


def resolve(name: str, target: Shaped) -> Element:
    """The element ``name`` names in the target's fabric; ``InputError`` when none."""
    shape = target.shape()
    hosts, spines = set(shape.hosts), set(shape.spines)
    leaves = set(shape.leaves) - shape.hidden
    nics, leaf_of, uplinks, where = shape.nics, shape.leaf_of, shape.uplinks, shape.where
    if name in spines:
        return Element("switch", name, spine=name)
    if name in leaves:
        return Element("switch", name, leaf=name)
    if name in hosts:
        return Element("host", name, host=name)
    if "/" in name:
        host, _, nic = name.partition("/")
        if host in hosts and nic in nics.get(host, ()):
            return Element("nic", name, host=host, nic=nic)
        raise InputError(f"no NIC {name!r} in {where} (NICs are named HOST/NIC, gpu-001/mlx5_1)")
    ends = _link_ends(name, leaves, spines)
    if ends is not None and ends[1] in uplinks.get(ends[0], ()):
        return Element("link", f"{ends[0]}-{ends[1]}", leaf=ends[0], spine=ends[1])
    ends = _link_ends(name, hosts, leaves)
    if ends is not None and leaf_of.get(ends[0]) == ends[1]:
        return Element("link", f"{ends[0]}-{ends[1]}", host=ends[0], leaf=ends[1])
    raise InputError(
        f"no element {name!r} in {where}: name a switch (spine2), a link (leaf1-spine2), "
        "a NIC (gpu-001/mlx5_1) or a host (gpu-001)"
    )


def covering_switch(candidates: list[str]) -> str | None:
    """The switch every candidate is, or is a link of (``leaf1-spine2`` ends on
    ``spine2``), or None: read off the names alone, as the watch sees a suspect's
    candidates (``covering`` takes it first, so the two never disagree on a switch)."""
    for c in candidates:
        end = c.rsplit("-", 1)[-1]
        if all(x == end or x.endswith(f"-{end}") for x in candidates):
            return end
    return None


def covering(name: str, target: Shaped) -> tuple[Element, list[Element]]:
    """The one element that covers a candidate set (``a|b|c``, as a scan names a suspect
    it cannot narrow): a switch every candidate is, or a link of; a host every candidate
    is, or a NIC or access link of. The switch of a spine and its links is the spine.
    ``InputError`` naming the candidates when no one element covers them all."""
    members = [resolve(m.strip(), target) for m in name.split("|") if m.strip()]
    if not members:
        raise InputError(f"empty candidate set {name!r}: name its elements joined with '|'")
    switch = covering_switch([e.name for e in members])
    shape = target.shape()
    if switch is not None and switch in shape.spines + shape.leaves:
        return resolve(switch, target), members

    def ends(e: Element) -> set[str]:
        if e.kind == "nic":
            return {e.host or ""}
        return {x for x in (e.leaf, e.spine, e.host) if x} | {e.name}

    common = set.intersection(*(ends(e) for e in members))
    # the covering element is itself an element: a spine before a leaf, a host last
    order = [e for e in members if e.name in common]
    if not order:
        order = [resolve(c, target) for c in sorted(common)]
    order.sort(key=lambda e: (e.kind != "switch", e.leaf is not None, e.name))
    if not order:
        raise InputError(
            f"no one element covers the candidate set {name!r} (candidates: "
            f"{', '.join(e.name for e in members)}): act on one of them by name, or rescan "
            "longer (with path discovery) to narrow the set"
        )
    return order[0], members
