"""The simulated fabric's elements, indexed for numpy: hosts, NICs, links, switches.

Every element a fault can name gets one integer id in one space (``Fabric.element``):
hosts, NICs (``gpu-001/mlx5_0``), access links (``gpu-001-leaf1``: the cables of all of a
host's NICs to its leaf), leaves, spines, fabric links (``leaf1-spine2``). Queues live
on link *directions*, at the egress of the sending side: a NIC's access link has an up
(host to leaf) and a down (leaf to host) direction, a fabric link an up (leaf to spine)
and a down (spine to leaf) one (``Fabric.qid_*``).

Hosts without a leaf (an inventory that names none) hang off one hidden switch that no
fault can name; leaves without a common spine are joined by a hidden core of fixed delay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cwctl.errors import InputError
from cwctl.fabric.topology import Topology
from cwctl.runtime.arrays import I32
from cwctl.sim.faults import Fault

DEFAULT_NIC = "mlx5_0"
HIDDEN_LEAF = "(unattached)"


@dataclass
class Fabric:
    """Hosts, NICs, leaves and spines of a leaf-spine fabric, with integer ids for each."""

    hosts: list[str]
    topology: Topology | None
    nics: list[tuple[str, ...]]  # per host, its NIC names (>= 1)
    leaves: list[str]  # the last one is HIDDEN_LEAF when some host has no leaf
    spines: list[str]
    host_leaf: I32  # per host, leaf index
    uplinks: list[tuple[int, ...]]  # per leaf, spine indices in the topology's order
    nic_host: I32 = field(init=False)  # per NIC (global index), its host
    nic_base: I32 = field(init=False)  # per host, the global index of its first NIC
    names: list[str] = field(init=False)  # element id -> name
    kinds: list[str] = field(init=False)  # element id -> kind
    _ids: dict[tuple[str, str], int] = field(init=False)

    def __post_init__(self) -> None:
        counts = np.array([len(n) for n in self.nics], np.int32)
        self.nic_base = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
        self.nic_host = np.repeat(np.arange(len(self.hosts), dtype=np.int32), counts)
        names: list[str] = []
        kinds: list[str] = []
        names += self.hosts
        kinds += ["host"] * self.n_hosts
        names += [f"{h}/{n}" for h, ns in zip(self.hosts, self.nics, strict=True) for n in ns]
        kinds += ["nic"] * self.n_nics
        names += [
            f"{h}-{self.leaves[int(leaf)]}"
            for h, leaf in zip(self.hosts, self.host_leaf, strict=True)
        ]
        kinds += ["link"] * self.n_hosts
        names += self.leaves
        kinds += ["switch"] * self.n_leaves
        names += self.spines
        kinds += ["switch"] * self.n_spines
        names += [f"{leaf}-{spine}" for leaf in self.leaves for spine in self.spines]
        kinds += ["link"] * (self.n_leaves * self.n_spines)
        self.names, self.kinds = names, kinds
        self._ids = {
            (kind, name): i
            for i, (kind, name) in enumerate(zip(kinds, names, strict=True))
            if HIDDEN_LEAF not in name
        }

    # --- sizes and id bases -------------------------------------------------------
    @property
    def n_hosts(self) -> int:
        return len(self.hosts)

    @property
    def n_nics(self) -> int:
        return len(self.nic_host)

    @property
    def n_leaves(self) -> int:
        return len(self.leaves)

    @property
    def n_spines(self) -> int:
        return len(self.spines)

    @property
    def n_elements(self) -> int:
        return len(self.names)

    def eid_host(self, h: npt.ArrayLike) -> I32:
        return np.asarray(h, np.int32)

    def eid_nic(self, nic: npt.ArrayLike) -> I32:
        return np.asarray(nic, np.int32) + self.n_hosts

    def eid_access(self, h: npt.ArrayLike) -> I32:
        return np.asarray(h, np.int32) + self.n_hosts + self.n_nics

    def eid_leaf(self, leaf: npt.ArrayLike) -> I32:
        return np.asarray(leaf, np.int32) + 2 * self.n_hosts + self.n_nics

    def eid_spine(self, spine: npt.ArrayLike) -> I32:
        return np.asarray(spine, np.int32) + 2 * self.n_hosts + self.n_nics + self.n_leaves

    def eid_fabric_link(self, leaf: npt.ArrayLike, spine: npt.ArrayLike) -> I32:
        base = 2 * self.n_hosts + self.n_nics + self.n_leaves + self.n_spines
        return base + np.asarray(leaf, np.int32) * self.n_spines + np.asarray(spine, np.int32)

    # --- queue ids: one per link direction ----------------------------------------
    @property
    def n_queues(self) -> int:
        return 2 * self.n_nics + 2 * self.n_leaves * self.n_spines

    def qid_access(self, nic: npt.ArrayLike, down: bool) -> I32:
        return 2 * np.asarray(nic, np.int32) + int(down)

    def qid_fabric(self, leaf: npt.ArrayLike, spine: npt.ArrayLike, down: bool) -> I32:
        link = np.asarray(leaf, np.int32) * self.n_spines + np.asarray(spine, np.int32)
        return 2 * self.n_nics + 2 * link + int(down)

    def queues_of(self, eid: int) -> list[int]:
        """The queue ids an element's ``congested`` mode loads: its egress directions.

        A switch: the directions leaving it. A link, NIC or host: both directions of the
        cables it names.
        """
        kind = self.kinds[eid]
        out: list[int] = []
        if kind == "host" or (kind == "link" and eid < self.eid_leaf(0)):
            h = eid if kind == "host" else eid - self.n_hosts - self.n_nics
            for nic in range(int(self.nic_base[h]), int(self.nic_base[h]) + len(self.nics[h])):
                out += [int(self.qid_access(nic, False)), int(self.qid_access(nic, True))]
        elif kind == "nic":
            nic = eid - self.n_hosts
            out += [int(self.qid_access(nic, False)), int(self.qid_access(nic, True))]
        elif kind == "switch" and eid < self.eid_spine(0):
            leaf = eid - int(self.eid_leaf(0))
            for h in np.flatnonzero(self.host_leaf == leaf).tolist():
                base = int(self.nic_base[h])
                out += [
                    int(self.qid_access(n, True)) for n in range(base, base + len(self.nics[h]))
                ]
            out += [int(self.qid_fabric(leaf, s, False)) for s in range(self.n_spines)]
        elif kind == "switch":
            spine = eid - int(self.eid_spine(0))
            out += [int(self.qid_fabric(leaf, spine, True)) for leaf in range(self.n_leaves)]
        else:  # a fabric link
            link = eid - int(self.eid_fabric_link(0, 0))
            leaf, spine = divmod(link, self.n_spines)
            out += [
                int(self.qid_fabric(leaf, spine, False)),
                int(self.qid_fabric(leaf, spine, True)),
            ]
        return out

    # --- names --------------------------------------------------------------------
    def has(self, kind: str, name: str) -> bool:
        """Whether a fault or change can name this element (hidden switches cannot)."""
        return (kind, name) in self._ids

    def element(self, fault: Fault) -> int:
        """The element id a fault names; ``InputError`` naming the spec if there is none."""
        name = fault.name
        if fault.kind == "link" and (fault.kind, name) not in self._ids and "-" in name:
            # accept either end first: "spine2-leaf1" is "leaf1-spine2"
            for cut in [i for i, c in enumerate(name) if c == "-"]:
                swapped = f"{name[cut + 1 :]}-{name[:cut]}"
                if (fault.kind, swapped) in self._ids:
                    return self._ids[(fault.kind, swapped)]
        eid = self._ids.get((fault.kind, name))
        if eid is None:
            same_kind = [n for (k, n) in self._ids if k == fault.kind]
            stem = name.rstrip("0123456789")
            examples = ([n for n in same_kind if n.startswith(stem)] or same_kind)[:3]
            hint = f" (e.g. {', '.join(examples)})" if examples else ""
            raise InputError(
                f"--fault {fault.text or fault.spec!r}: no {fault.kind} named {name!r}{hint}"
            )
        return eid


def _natural_key(name: str) -> tuple[str, int]:
    stem = name.rstrip("0123456789")
    return (stem, int(name[len(stem) :]) if len(stem) < len(name) else -1)


def build_fabric(
    hosts: Sequence[str], topology: Topology | None, nics: Mapping[str, Sequence[str]] | None = None
) -> Fabric:
    """Index a topology (hosts sorted naturally; NICs default to one ``mlx5_0`` each)."""
    names = sorted(set(hosts), key=_natural_key)
    leaf_of = dict(topology.leaf_of) if topology is not None else {}
    uplinks_by_name = dict(topology.uplinks) if topology is not None else {}
    leaves = sorted(
        {leaf_of[h] for h in names if h in leaf_of} | set(uplinks_by_name), key=_natural_key
    )
    if any(h not in leaf_of for h in names):
        leaves.append(HIDDEN_LEAF)
    spines = sorted({s for ups in uplinks_by_name.values() for s in ups}, key=_natural_key)
    clash = set(spines) & set(leaves)
    if clash:
        raise InputError(f"switch {sorted(clash)[0]!r} is both a leaf and a spine")
    leaf_index = {leaf: i for i, leaf in enumerate(leaves)}
    spine_index = {s: i for i, s in enumerate(spines)}
    host_leaf = np.array([leaf_index[leaf_of.get(h, HIDDEN_LEAF)] for h in names], np.int32)
    uplinks = [tuple(spine_index[s] for s in uplinks_by_name.get(leaf, ())) for leaf in leaves]
    given = dict(nics or {})
    if topology is not None:
        given = {**dict(topology.nics), **given}
    host_nics = [tuple(given.get(h) or (DEFAULT_NIC,)) for h in names]
    return Fabric(
        hosts=names,
        topology=topology,
        nics=host_nics,
        leaves=leaves,
        spines=spines,
        host_leaf=host_leaf,
        uplinks=uplinks,
    )
