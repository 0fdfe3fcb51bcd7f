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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from cwctl.records.path import PathRecord, hop_switches

I64 = npt.NDArray[np.int64]
Key = tuple[str, str, str, int, str | None]  # host, peer, role, the prober's port, nic


def route_index(
    records: Iterable[PathRecord],
    switch_of_address: Mapping[str, str],
    spines: Iterable[str],
) -> dict[Key, str]:
    """The spine each traced tuple crossed, keyed by (host, peer, role, prober's port,
    NIC or None); the newest record that names one wins."""
    spine_set = set(spines)
    best: dict[Key, tuple[int, str]] = {}
    for r in records:
        named = hop_switches(r, switch_of_address)
        found = {s for s in named if s in spine_set}
        if len(found) != 1:
            continue  # no spine answered (or, oddly, two): unknown
        key = (r.host, r.peer, r.role, r.flow_port, r.nic)
        if key not in best or best[key][0] <= r.t_ns:
            best[key] = (r.t_ns, found.pop())
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
    discovered path names, -1 where none is known."""
    out = np.full(len(src), -1, np.int64)
    if not index:
        return out
    where = {s: i for i, s in enumerate(spines)}
    for f, (a, b, port, code, rev) in enumerate(
        zip(src.tolist(), dst.tolist(), sport.tolist(), nic.tolist(), reverse.tolist(), strict=True)
    ):
        role = "reply" if rev else "probe"
        name = nics[code] if 0 <= code < len(nics) else None
        spine = index.get((hosts[a], hosts[b], role, port, name))
        if spine is None and name is not None:
            spine = index.get((hosts[a], hosts[b], role, port, None))
        if spine is not None:
            out[f] = where.get(spine, -1)
    return out
