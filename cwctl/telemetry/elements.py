"""Which elements of the fabric each probe flow crossed: the rows of localisation.

A flow is one direction of one 5-tuple (sender, receiver, the prober's source port, the
prober's NIC when records name it): every probe of it takes the same route. What it
certainly crossed: both hosts, both NICs (``_nic_columns``), both leaves. Which spine
(and so which two leaf-spine links) only a discovered path tells (``routes.py``); where
none does, the flow has one *alternative* per equal-cost spine (the spines both leaves
reach), each a priori as likely, and the explanation (``explain.py``) weighs them as a
mixture. A loss trial is a round trip: its alternatives are every pair of a forward and
a reverse alternative, and what both directions cross counts twice (past ``MAX_ROWS``
alternatives, on very large fabrics with few known paths, unknown directions count only
for what they certainly cross). Without a topology
the elements are the two hosts, the NIC, and the host pair itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from cwctl.fabric.topology import Topology
from cwctl.runtime.arrays import I64, B
from cwctl.telemetry.likelihood import Rows
from cwctl.telemetry.paths import group_ids

MAX_ROWS = 4_000_000  # alternatives weighed per signal; beyond, unknown paths count as certain-only


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
    """The rows of a signal's flows over one space of element names and kinds."""

    names: list[str]
    kinds: list[str]  # switch | link | nic | host
    rows: Rows

    @cached_property
    def matrix(self) -> sp.csr_matrix:
        """(flows x elements) 1 where the flow certainly crossed the element (whichever
        alternative it took). Built once per incidence."""
        rows = self.rows
        per_flow = np.bincount(rows.flow, minlength=rows.n_flows)
        tier = rows.by_flow()
        flow_of = np.repeat(np.arange(tier.shape[0]), np.diff(tier.indptr))
        tier.data = (tier.data >= per_flow[flow_of]).astype(np.float64)
        out = sp.csr_matrix(rows.certain_crossing().maximum(tier))
        out.eliminate_zeros()
        return out

    @cached_property
    def maybe(self) -> sp.csc_matrix:
        """(flows x elements), column by column: 1 where some alternative of the flow (or
        every one) crosses the element."""
        rows = self.rows
        out = sp.csr_matrix(((rows.certain_crossing() + rows.by_flow()) > 0).astype(np.float64))
        out.eliminate_zeros()
        return out.tocsc()

    @cached_property
    def by_element(self) -> sp.csc_matrix:
        """``matrix`` column by column (the flows that certainly cross each element)."""
        return self.matrix.tocsc()


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


@dataclass(frozen=True)
class _Tiers:
    """The topology's leaves, spines and links as element codes (last index: none)."""

    host_leaf: I64  # per host (and a trailing "none"), leaf index or -1
    leaf_code: I64
    spine_code: I64
    link_code: I64  # (leaves + 1, spines + 1)
    common: B  # (leaves + 1, leaves + 1, spines): spines both leaves reach

    @property
    def n_spines(self) -> int:
        return len(self.spine_code) - 1


def _tiers(hosts: list[str], topology: Topology, reg: _Names) -> _Tiers:
    leaves = topology.leaves
    leaves += sorted(set(topology.leaf_of.values()) - set(leaves))
    leaf_index = {leaf: i for i, leaf in enumerate(leaves)}
    leaf_code = reg.codes(leaves, "switch")
    spines = topology.spines
    spine_index = {s: i for i, s in enumerate(spines)}
    spine_code = reg.codes(spines, "switch")
    host_leaf = np.array(
        [leaf_index.get(topology.leaf_of.get(h, ""), -1) for h in hosts] + [-1], np.int64
    )
    n_l, n_s = len(leaves), len(spines)
    link_code = np.full((n_l + 1, n_s + 1), -1, np.int64)
    up = np.zeros((n_l + 1, max(n_s, 1)), bool)
    for leaf, i in leaf_index.items():
        for s in topology.uplinks.get(leaf, ()):
            link_code[i, spine_index[s]] = reg.code(f"{leaf}-{s}", "link")
            up[i, spine_index[s]] = True
    common = up[:, None, :] & up[None, :, :]
    return _Tiers(host_leaf, leaf_code, spine_code, link_code, common[:, :, :n_s])


def _possible(src: I64, dst: I64, known: I64, t: _Tiers) -> B:
    """(flows x spines+1): the spines each direction may have crossed; the last column
    marks a direction that crosses no spine (same leaf, or no common spine)."""
    a, b = t.host_leaf[src], t.host_leaf[dst]
    n = len(src)
    out = np.zeros((n, t.n_spines + 1), bool)
    if t.n_spines:
        common = t.common[a, b] & ((a >= 0) & (b >= 0) & (a != b))[:, None]
        ok = known >= 0
        if ok.any():
            rows = np.flatnonzero(ok)
            hit = common[rows, known[rows]]
            common[rows[hit]] = False
            common[rows[hit], known[rows[hit]]] = True
        out[:, :-1] = common
    out[:, -1] = ~out[:, :-1].any(axis=1)
    return out


def _certain_only(possible: B) -> B:
    """Directions with several alternatives keep none: only what they certainly cross."""
    out = possible.copy()
    several = out[:, :-1].sum(axis=1) > 1
    out[several] = False
    out[several, -1] = True
    return out


def _tier_columns(a: I64, b: I64, spine: I64, t: _Tiers) -> list[I64]:
    """The leaf-spine link, spine and spine-leaf link of a direction from leaf a to b
    through ``spine`` (the "none" index: no columns)."""
    none = spine >= t.n_spines
    s = np.where(none, t.n_spines, spine)
    return [
        np.where(none, -1, t.link_code[a, s]),
        np.where(none, -1, t.spine_code[s]),
        np.where(none, -1, t.link_code[b, s]),
    ]


def _certain(
    flows: Flows, reg: _Names, host_nics: Mapping[str, Sequence[str]], t: _Tiers | None
) -> list[I64]:
    """Per flow direction, the elements it certainly crossed: hosts, NICs, leaves."""
    host_code = reg.codes(flows.hosts, "host")
    columns: list[I64] = [host_code[flows.src], host_code[flows.dst]]
    if flows.nics:
        columns += _nic_columns(flows, reg, host_nics)
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
    if t is not None:
        a, b = t.host_leaf[flows.src], t.host_leaf[flows.dst]
        columns += [
            np.where(a >= 0, t.leaf_code[a], -1),
            np.where((b >= 0) & (b != a), t.leaf_code[b], -1),
        ]
    elif len(flows):
        # no topology: the unordered host pair is an element of its own
        lo, hi = np.minimum(flows.src, flows.dst), np.maximum(flows.src, flows.dst)
        inverse, pairs = group_ids(lo, hi)
        pair_code = reg.codes(
            [f"{flows.hosts[a]}-{flows.hosts[b]}" for a, b in pairs.tolist()], "link"
        )
        columns.append(pair_code[inverse])
    return columns


def _matrix(columns: list[I64], n: int, n_elements: int) -> sp.csr_matrix:
    """(n x elements) counts of the element codes in ``columns`` (-1: none), built as
    CSR directly from the row-major codes (no COO triplets: a quarter of the memory).
    The counts are int8 (a row has a dozen columns at most): an eighth of float64's
    bytes, and every product with a float is the float's (77 MB less for the 11 M
    entries of a 10 000-host scan's loss alternatives)."""
    if not columns:
        return sp.csr_matrix((n, n_elements), dtype=np.int8)
    codes = np.empty((n, len(columns)), np.int32)
    for i, column in enumerate(columns):
        codes[:, i] = column
    keep = codes >= 0
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.count_nonzero(keep, axis=1), out=indptr[1:])
    indices = codes[keep]  # row by row, each row's codes in column order
    del codes, keep
    matrix = sp.csr_matrix((np.ones(len(indices), np.int8), indices, indptr), shape=(n, n_elements))
    matrix.sum_duplicates()
    return matrix


def _rows(certain: list[I64], tier: list[I64], flow: I64, n_flows: int, n_el: int) -> Rows:
    count = np.bincount(flow, minlength=n_flows)
    return Rows(
        _matrix(certain, n_flows, n_el),
        _matrix(tier, len(flow), n_el),
        flow.astype(np.int64),
        -np.log(count[flow].astype(np.float64)),
    )


def incidences(
    exchanges: Flows,
    flows: Flows,
    topology: Topology | None,
    host_nics: Mapping[str, Sequence[str]] | None,
    known: tuple[I64, I64, I64] | None = None,
) -> tuple[Incidence, Incidence]:
    """The loss rows (exchanges: round trips) and the delay rows (directed flows), over
    one space of element names. ``known`` gives, per exchange forward, exchange reverse
    and directed flow, the index in ``topology.spines`` of the discovered spine (-1:
    unknown); None: nothing discovered."""
    reg = _Names()
    host_nics = host_nics or {}
    placed = topology is not None and any(h in topology.leaf_of for h in flows.hosts)
    t = _tiers(flows.hosts, topology, reg) if topology is not None and placed else None
    back = Flows(exchanges.hosts, exchanges.nics, exchanges.dst, exchanges.src,
                 exchanges.sport, exchanges.nic, np.ones(len(exchanges), bool))  # fmt: skip
    cert_x = _certain(exchanges, reg, host_nics, t) + _certain(back, reg, host_nics, t)
    cert_f = _certain(flows, reg, host_nics, t)
    nx, nf = len(exchanges), len(flows)
    n_el = len(reg.names)  # every name is registered by now: the rows only read codes
    unknown = (np.full(nx, -1), np.full(nx, -1), np.full(nf, -1))
    kx_f, kx_r, k_f = known if known is not None else unknown

    def loss_rows() -> Rows:  # round trips: every forward alternative with every reverse
        if t is None:
            return _rows(cert_x, [], np.arange(nx), nx, n_el)
        pf = _possible(exchanges.src, exchanges.dst, kx_f, t)
        pr = _possible(exchanges.dst, exchanges.src, kx_r, t)
        if int(pf.sum(axis=1) @ pr.sum(axis=1)) > MAX_ROWS:
            # too many alternatives to weigh: unknown directions count for what is certain
            pf, pr = _certain_only(pf), _certain_only(pr)
        pairs = pf[:, :, None] & pr[:, None, :]
        flow, s1, s2 = np.nonzero(pairs)
        a, b = t.host_leaf[exchanges.src[flow]], t.host_leaf[exchanges.dst[flow]]
        tier = _tier_columns(a, b, s1, t) + _tier_columns(b, a, s2, t)
        return _rows(cert_x, tier, flow, nx, n_el)

    def delay_rows() -> Rows:
        if t is None:
            return _rows(cert_f, [], np.arange(nf), nf, n_el)
        p = _possible(flows.src, flows.dst, k_f, t)
        if int(p.sum()) > MAX_ROWS:
            p = _certain_only(p)
        flow, s = np.nonzero(p)
        a, b = t.host_leaf[flows.src[flow]], t.host_leaf[flows.dst[flow]]
        return _rows(cert_f, _tier_columns(a, b, s, t), flow, nf, n_el)

    loss, delay = loss_rows(), delay_rows()
    return (
        Incidence(list(reg.names), list(reg.kinds), loss),
        Incidence(list(reg.names), list(reg.kinds), delay),
    )


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
