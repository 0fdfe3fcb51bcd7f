"""Which elements of the fabric each probe flow crossed: the incidence matrix of localisation.

A flow is one directed path and one source port (and the probing host's NIC when the
records name it): under ECMP every probe of a flow takes the same route, so a flow maps
to a fixed set of elements. With a ``Topology`` the route is the one
``Topology.path_elements`` describes (host, NIC, leaf, leaf-spine link, spine, far link,
far leaf, far host), the spine chosen by ``ecmp_hash`` over (sender, receiver, source
port) in the direction of travel, computed here for all flows at once. Without one, the
elements are the two hosts, the NIC, and the host pair itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from cwctl.telemetry.paths import group_ids
from cwctl.topology import Topology, ecmp_hash, host_id

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Flows:
    """The flows of a scan: one row each, indices into ``hosts`` and ``nics``."""

    hosts: list[str]
    nics: list[str]
    src: I64  # sender in the direction of travel
    dst: I64
    sport: I64
    nic: I64  # the probing host's NIC code, -1 unknown
    reverse: npt.NDArray[np.bool_]  # a reply: the probing host is ``dst``

    def __len__(self) -> int:
        return len(self.src)

    @property
    def prober(self) -> I64:
        return np.where(self.reverse, self.dst, self.src)


@dataclass(frozen=True)
class Incidence:
    """``matrix[f, e]`` is 1 when flow f crosses element e; names and kinds per element."""

    names: list[str]
    kinds: list[str]  # switch | link | nic | host
    matrix: sp.csr_matrix  # (n_flows, n_elements), float64 0/1


class _Names:
    """Interns element names in first-seen order, with their kinds."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.kinds: list[str] = []
        self._code: dict[str, int] = {}

    def code(self, name: str, kind: str) -> int:
        c = self._code.get(name)
        if c is None:
            c = self._code[name] = len(self.names)
            self.names.append(name)
            self.kinds.append(kind)
        return c

    def codes(self, names: list[str], kind: str) -> I64:
        return np.array([self.code(n, kind) for n in names] + [-1], np.int64)


def incidence(
    flows: Flows, topology: Topology | None, host_nics: Mapping[str, Sequence[str]] | None = None
) -> Incidence:
    """The flow x element incidence, vectorised over flows (loops only over hosts/switches).

    ``host_nics`` lists each host's NICs (inventory or simulator); it places the far
    end's NIC, which records do not name (see ``_nic_columns``).
    """
    reg = _Names()
    n = len(flows)
    host_code = reg.codes(flows.hosts, "host")  # trailing -1 for "none"
    columns: list[I64] = [host_code[flows.src], host_code[flows.dst]]
    if flows.nics:
        columns += _nic_columns(flows, reg, host_nics or {})
    elif host_nics:
        # records name no NIC: a host's only NIC is on all its flows (and cannot be told
        # apart from the host; the suspect's evidence says so)
        only = np.array(
            [
                reg.code(f"{h}/{host_nics[h][0]}", "nic") if len(host_nics.get(h, ())) == 1 else -1
                for h in flows.hosts
            ]
            + [-1],
            np.int64,
        )
        columns += [only[flows.src], only[flows.dst]]
    leaf_of = topology.leaf_of if topology is not None else {}
    placed = np.array([h in leaf_of for h in flows.hosts] + [False])
    if topology is not None and placed.any():
        columns += _fabric_columns(flows, topology, reg)
    elif n:
        # no topology: the unordered host pair is an element of its own
        lo, hi = np.minimum(flows.src, flows.dst), np.maximum(flows.src, flows.dst)
        inverse, pairs = group_ids(lo, hi)
        pair_code = reg.codes(
            [f"{flows.hosts[a]}-{flows.hosts[b]}" for a, b in pairs.tolist()], "link"
        )
        columns.append(pair_code[inverse])
    cols = np.stack(columns, axis=1) if columns else np.zeros((n, 0), np.int64)
    rows = np.repeat(np.arange(n), cols.shape[1])
    flat = cols.reshape(-1)
    keep = flat >= 0
    matrix = sp.csr_matrix(
        (np.ones(int(keep.sum())), (rows[keep], flat[keep])), shape=(n, len(reg.names))
    )
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return Incidence(reg.names, reg.kinds, matrix)


def _nic_columns(flows: Flows, reg: _Names, host_nics: Mapping[str, Sequence[str]]) -> list[I64]:
    """The probing host's NIC (named by the record) and the far end's NIC.

    Records name only the NIC a probe left from. The far end is taken to receive on its
    NIC of the same name (rail-aligned fabrics: NIC i talks to NIC i; the simulator pairs
    NICs by position the same way), or on its only NIC when it has one.
    """
    n_nics = len(flows.nics)
    nic_code = reg.codes([f"{h}/{nic}" for h in flows.hosts for nic in flows.nics], "nic")
    known = np.zeros((len(flows.hosts) + 1, n_nics), bool)
    only = np.full(len(flows.hosts) + 1, -1, np.int64)
    code_of = {name: i for i, name in enumerate(flows.nics)}
    for h, host in enumerate(flows.hosts):
        names = [code_of[x] for x in host_nics.get(host, ()) if x in code_of]
        known[h, names] = True
        if len(host_nics.get(host, ())) == 1 and names:
            only[h] = names[0]
    # hosts the mapping does not describe: the NICs they were seen probing from
    seen = flows.nic >= 0
    unknown = np.array([host not in host_nics for host in flows.hosts] + [False])
    mark = seen & unknown[flows.prober]
    known[flows.prober[mark], flows.nic[mark]] = True
    has = flows.nic >= 0
    nic = np.maximum(flows.nic, 0)
    prober_col = np.where(has, nic_code[flows.prober * n_nics + nic], -1)
    far = np.where(flows.reverse, flows.src, flows.dst)
    far_nic = np.where(only[far] >= 0, only[far], nic)
    far_ok = has & ((only[far] >= 0) | known[far, nic])
    far_col = np.where(far_ok, nic_code[far * n_nics + far_nic], -1)
    return [prober_col, far_col]


def _fabric_columns(flows: Flows, topology: Topology, reg: _Names) -> list[I64]:
    """Leaf, spine and link columns per flow, via the ECMP hash of the direction of travel."""
    leaves = topology.leaves
    leaves += sorted(set(topology.leaf_of.values()) - set(leaves))
    leaf_index = {leaf: i for i, leaf in enumerate(leaves)}
    leaf_code = reg.codes(leaves, "switch")
    spines = topology.spines
    spine_index = {s: i for i, s in enumerate(spines)}
    spine_code = reg.codes(spines, "switch")
    host_leaf = np.array(
        [leaf_index.get(topology.leaf_of.get(h, ""), -1) for h in flows.hosts] + [-1], np.int64
    )
    width = max((len(topology.uplinks.get(leaf, ())) for leaf in leaves), default=0)
    up = np.full((len(leaves) + 1, max(width, 1)), -1, np.int64)
    n_up = np.zeros(len(leaves) + 1, np.int64)
    for leaf, i in leaf_index.items():
        ups = topology.uplinks.get(leaf, ())
        n_up[i] = len(ups)
        up[i, : len(ups)] = [spine_index[s] for s in ups]
    link_code = np.full((len(leaves) + 1, len(spines) + 1), -1, np.int64)
    for leaf, i in leaf_index.items():
        for s in topology.uplinks.get(leaf, ()):
            link_code[i, spine_index[s]] = reg.code(f"{leaf}-{s}", "link")
    a, b = host_leaf[flows.src], host_leaf[flows.dst]
    ids = np.array([host_id(h) for h in flows.hosts], np.uint64)
    h = ecmp_hash(ids[flows.src], ids[flows.dst], flows.sport.astype(np.uint64))
    crosses = (a >= 0) & (b >= 0) & (a != b) & (n_up[a] > 0)
    choice = (h % np.maximum(n_up[a], 1).astype(np.uint64)).astype(np.int64)
    spine = np.where(crosses, up[a, choice], -1)
    return [
        np.where(a >= 0, leaf_code[a], -1),
        np.where((b >= 0) & (b != a), leaf_code[b], -1),
        np.where(crosses, spine_code[spine], -1),
        np.where(crosses, link_code[a, spine], -1),
        np.where(crosses, link_code[b, spine], -1),
    ]
