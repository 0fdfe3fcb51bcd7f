"""Which spine each flow direction crossed, as far as discovered paths tell.

Path records (docs/records.md, ``path``) list, per 5-tuple a host traced, the address
that answered each TTL (null: no answer). The inventory's switch ``addresses``
(``Topology.switch_of_address``) turn them into switch names. A probe flow (prober P,
peer Q, source port s) crossed, forward, what the record (host P, peer Q, role probe,
sport s) shows, and back what the record (host Q, peer P, role reply, dport s) shows;
the NIC is the record's (P's NIC for the probe, Q's for the reply; records of one-NIC
hosts name none).

Nothing else says which way a flow went: no hash, no model. A direction with no
record, or whose record names no spine, keeps every equal-cost spine as a candidate.

Records age: one older than ``settings.PATH_MAX_AGE_S`` at the scan (a cache the agents
were not asked to refresh, a record file replayed with old traces) is discounted, its
flow's spine unknown; where two records of one tuple name different spines the route
changed, and the older is superseded (the newest wins). ``PathAges`` counts both, and
the scan says so (``telemetry.path_records``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl import settings
from cwctl.fabric.topology import Topology
from cwctl.records import ProbeTable
from cwctl.records.path import PathRecord, hop_switches
from cwctl.runtime.arrays import I64
from cwctl.sync.spinepaths import SpineLegs

Key = tuple[str, str, str, int, str | None]  # host, peer, role, the prober's port, nic


@dataclass
class PathAges:
    """What the path records were worth: those naming a spine, those discounted as too
    old, those superseded by a newer record of the same tuple naming another spine."""

    records: int = 0
    aged: int = 0
    superseded: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "aged": self.aged,
            "superseded": self.superseded,
            "max_age_s": settings.PATH_MAX_AGE_S,
        }


def route_index(
    records: Iterable[PathRecord],
    switch_of_address: Mapping[str, str],
    spines: Iterable[str],
    *,
    now_ns: int | None = None,
    ages: PathAges | None = None,
) -> dict[Key, str]:
    """The spine each traced tuple crossed, keyed by (host, peer, role, prober's port,
    NIC or None); the newest record that names one wins, one older than
    ``PATH_MAX_AGE_S`` before ``now_ns`` counts for nothing. The spine a hop list names is
    worked out once per distinct hop list (a scan has few; half a million records).
    ``ages``, when given, is filled in."""
    ages = ages if ages is not None else PathAges()
    oldest = None if now_ns is None else now_ns - int(settings.PATH_MAX_AGE_S * 1e9)
    spine_set = set(spines)
    best: dict[Key, tuple[int, str]] = {}
    named: dict[tuple[str | None, ...], str | None] = {}
    for r in records:
        if r.hops in named:
            spine = named[r.hops]
        else:
            found = {s for s in hop_switches(r, switch_of_address) if s in spine_set}
            # no spine answered (or, oddly, two): unknown
            spine = named[r.hops] = found.pop() if len(found) == 1 else None
        if spine is None:
            continue
        ages.records += 1
        if oldest is not None and r.t_ns < oldest:
            ages.aged += 1
            continue
        key = (r.host, r.peer, r.role, r.flow_port, r.nic)
        old = best.get(key)
        if old is None or old[0] <= r.t_ns:
            ages.superseded += old is not None and old[1] != spine
            best[key] = (r.t_ns, spine)
        else:
            ages.superseded += old[1] != spine
    return {key: spine for key, (_, spine) in best.items()}


def known_spines(
    hosts: list[str],
    nics: list[str],
    src: I64,
    dst: I64,
    sport: I64,
    nic: I64,
    reverse: npt.NDArray[np.bool_],
    index: Mapping[Key, str],
    spines: list[str],
) -> I64:
    """Per flow direction (sender ``src``, receiver ``dst``, the prober's ``sport`` and
    NIC code, whether it is the reply), the index in ``spines`` of the spine its
    discovered path names, -1 where none is known: the path of the flow's NIC, else the
    one traced without a NIC name. Both sides coded as integers and matched by a sorted
    search (a million flow directions at 10 000 hosts)."""
    out = np.full(len(src), -1, np.int64)
    if not index or not len(src):
        return out
    host_id = {h: i for i, h in enumerate(hosts)}
    nic_id = {n: i for i, n in enumerate(nics)}  # a name's code (the last, if written twice)
    where = {s: i for i, s in enumerate(spines)}
    # the index's keys whose hosts and NIC the flows can name, coded alike
    rows = [
        (
            host_id[h],
            host_id[p],
            role == "reply",
            port,
            -1 if n is None else nic_id[n],
            where.get(s, -1),
        )
        for (h, p, role, port, n), s in index.items()
        if h in host_id
        and p in host_id
        and role in ("probe", "reply")
        and (n is None or n in nic_id)
    ]
    if not rows:
        return out
    ih, ip, irev, iport, inic, ispine = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    ports, iport = np.unique(iport, return_inverse=True)
    # a flow's NIC name as the index codes it: -1 where it has none
    canon = np.array([nic_id[n] for n in nics] + [-1], np.int64)
    fnic = canon[np.where((nic >= 0) & (nic < len(nics)), nic, len(nics))]
    fport = np.searchsorted(ports, sport)
    fport_ok = (fport < len(ports)) & (ports[np.minimum(fport, len(ports) - 1)] == sport)

    def code(a: I64, b: I64, rev: I64, port: I64, n: I64) -> I64:
        return (((a * len(hosts) + b) * 2 + rev) * len(ports) + port) * (len(nics) + 1) + n + 1

    keys = code(ih, ip, irev, iport.ravel(), inic)
    order = np.argsort(keys)
    keys, spine_of = keys[order], ispine[order]

    # host names as the index codes them (the last of a name written twice)
    hcanon = np.array([host_id[h] for h in hosts], np.int64)
    a, b, rev = hcanon[src], hcanon[dst], reverse.astype(np.int64)
    found = np.zeros(len(src), bool)

    def look(n: I64, want: npt.NDArray[np.bool_]) -> None:
        k = code(a, b, rev, fport, n)
        pos = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
        hit = want & fport_ok & (keys[pos] == k)
        out[hit] = spine_of[pos[hit]]
        found[hit] = True

    look(fnic, np.ones(len(src), bool))
    # not found under its NIC's name: the path traced without one
    look(np.full(len(src), -1, np.int64), ~found & (fnic >= 0))
    return out


def spine_legs(
    table: ProbeTable, topology: Topology | None, records: Iterable[PathRecord]
) -> SpineLegs | None:
    """What the clock solve may know of ``table``'s legs' spines (``sync.spinepaths``):
    per row the spine of its probe's and of its reply's discovered path, per host its
    leaf; None without a topology that names switch addresses, or without records."""
    if topology is None or not topology.switch_of_address:
        return None
    spines = topology.spines
    index = route_index(records, topology.switch_of_address, spines)
    if not index:
        return None
    t, n = table, len(table)
    src, dst, sport, nic = (c.astype(np.int64) for c in (t.src, t.dst, t.sport, t.nic))
    fwd, rev = (
        known_spines(t.hosts, t.nics, a, b, sport, nic, np.full(n, way), index, spines)
        for a, b, way in ((src, dst, False), (dst, src, True))
    )
    leaf_index = {leaf: i for i, leaf in enumerate(topology.leaves)}
    leaf = np.array([leaf_index.get(topology.leaf_of.get(h, ""), -1) for h in t.hosts], np.intp)
    return SpineLegs(fwd, rev, leaf, len(spines))
