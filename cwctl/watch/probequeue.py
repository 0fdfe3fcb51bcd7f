"""The probes' queueing per directed leaf-spine link, where a scan has it.

Each probe flow (prober, answerer, source port) has its own one-way delay statistics in
the snapshot (``PathReport.ports``: the p50 per source port) and, where the agents traced
it, its discovered forward path (``records.path.PathTable.forward``): the spine is the
hop at the spine's TTL (the agents trace that hop alone), the leaves the hosts' own.
Its queueing is its p50 minus its path's floor (the heatmaps' metric, per port). A link's
figure is the median over the probe flows whose forward path crosses it, beside the load
the hosts' flows put on it (``rebalance``'s ``uplink_load``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from cwctl.actions.balance import directed
from cwctl.actions.steerports import SPINE_TTL
from cwctl.records.path import hop_switches
from cwctl.scan.snapshot import FabricSnapshot

KEY = "probe_queueing_p50_us"  # a link row's key in ``uplink_load``


def probe_queueing(
    snapshot: FabricSnapshot | None,
    table: Any,
    switch_of_address: Mapping[str, str],
    leaf_of: Mapping[str, str | None],
) -> dict[str, float]:
    """Directed link (``leaf1>spine2``, ``spine2>leaf2``) -> the median queueing (us) of
    the probe flows whose discovered forward path crosses it; {} without a scan or paths."""
    if snapshot is None or table is None:
        return {}
    seen: dict[str, list[float]] = defaultdict(list)
    for path in snapshot.paths:
        if path.ports is None or path.owd_min_ns is None:
            continue
        a, b = leaf_of.get(path.src), leaf_of.get(path.dst)
        if a is None or b is None or a == b:
            continue
        for port in path.ports.to_json():
            p50 = port["owd_p50_ns"]
            if p50 is None:
                continue
            record = table.forward(path.src, path.dst, int(port["sport"]))
            hops = hop_switches(record, switch_of_address) if record is not None else []
            spine = hops[SPINE_TTL - 1] if len(hops) >= SPINE_TTL else None
            if spine is None:
                continue
            queueing_us = (float(p50) - path.owd_min_ns) / 1000
            seen[directed(a, spine)].append(queueing_us)
            seen[directed(spine, b)].append(queueing_us)
    return {link: statistics.median(values) for link, values in seen.items()}


def with_probes(uplink_load: dict[str, Any], probes: Mapping[str, float]) -> dict[str, Any]:
    """``uplink_load`` with each link row's probe queueing (None where no probe crossed)."""
    if not uplink_load or not probes:
        return uplink_load
    rows = []
    for row in uplink_load.get("links") or []:
        q = probes.get(str(row.get("link")))
        rows.append({**row, KEY: None if q is None else round(q, 1)})
    return {**uplink_load, "links": rows}
