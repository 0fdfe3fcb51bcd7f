"""What an element's name names in a target's fabric: a switch, a link, a NIC or a host
(``resolve``), and the one element that covers a candidate set (``covering``).

Names as DESIGN.md gives them: ``spine2``, ``leaf1-spine2`` (lower tier first, either
order accepted), ``gpu-001/mlx5_1``, ``gpu-001``, and ``gpu-001-leaf1`` for an access link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from cwctl.errors import InputError


class Fabricked(Protocol):
    """What naming reads of a plan's target (``planner.Target``): the simulator's model,
    or else the inventory."""

    model: Any
    inventory: Any


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


def resolve(name: str, target: Fabricked) -> Element:
    """The element ``name`` names in the target's fabric; ``InputError`` when none."""
    if target.model is not None:
        fabric = target.model.fabric
        hosts = set(fabric.hosts)
        leaves = {x for x in fabric.leaves if fabric.has("switch", x)}
        spines = set(fabric.spines)
        nics = {h: tuple(n) for h, n in zip(fabric.hosts, fabric.nics, strict=True)}
        leaf_of = {
            h: fabric.leaves[int(i)] for h, i in zip(fabric.hosts, fabric.host_leaf, strict=True)
        }
        uplinks = {
            leaf: {fabric.spines[s] for s in ups}
            for leaf, ups in zip(fabric.leaves, fabric.uplinks, strict=True)
        }
        where = "the simulated fabric"
    else:
        inv = target.inventory
        hosts = {h.name for h in inv.hosts}
        leaves = {s.name for s in inv.switches if s.role == "leaf"}
        spines = {s.name for s in inv.switches if s.role == "spine"}
        nics = {h.name: tuple(h.nics) for h in inv.hosts}
        leaf_of = {h.name: h.leaf for h in inv.hosts}
        uplinks = {s.name: set(s.uplinks) for s in inv.switches if s.role == "leaf"}
        where = str(inv.path or "the inventory")
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


def covering(name: str, target: Fabricked) -> tuple[Element, list[Element]]:
    """The one element that covers a candidate set (``a|b|c``, as a scan names a suspect
    it cannot narrow): a switch every candidate is, or a link of; a host every candidate
    is, or a NIC or access link of. The switch of a spine and its links is the spine.
    ``InputError`` naming the candidates when no one element covers them all."""
    members = [resolve(m.strip(), target) for m in name.split("|") if m.strip()]
    if not members:
        raise InputError(f"empty candidate set {name!r}: name its elements joined with '|'")

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
