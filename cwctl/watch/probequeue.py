"""The probes' queueing per directed leaf-spine link, where a scan has it.

Each probe flow (prober, answerer, source port) has its own one-way delay statistics in
the snapshot (``PathReport.ports``: the p50 per source port) and, where the agents traced
it, its discovered forward path (``records.path.PathTable.forward``: leaf, spine, leaf).
Its queueing is its p50 minus its path's floor (the heatmaps' metric, per port). A link's
figure is the median over the probe flows whose forward path crosses it, beside the load
the hosts' flows put on it (``rebalance``'s ``uplink_load``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from cwctl.records.path import hop_switches
from cwctl.snapshot import FabricSnapshot

KEY = "probe_queueing_p50_us"  # a link row's key in ``uplink_load``


def probe_queueing(
    snapshot: FabricSnapshot | None, table: Any, switch_of_address: Mapping[str, str]
) -> dict[str, float]:
    """Directed link (``leaf1>spine2``, ``spine2>leaf2``) -> the median queueing (us) of
    the probe flows whose discovered forward path crosses it; {} without a scan or paths."""
    if snapshot is None or table is None:
        return {}
    seen: dict[str, list[float]] = defaultdict(list)
    for path in snapshot.paths:
        if path.ports is None or path.owd_min_ns is None:
            continue
        for port in path.ports.to_json():
            p50 = port["owd_p50_ns"]
            record = (
                table.forward(path.src, path.dst, int(port["sport"])) if p50 is not None else None
            )
            if record is None:
                continue
            hops = hop_switches(record, switch_of_address)[:3]
            if len(hops) < 3 or None in hops:
                continue
            queueing_us = (float(p50) - path.owd_min_ns) / 1000
            seen[f"{hops[0]}>{hops[1]}"].append(queueing_us)
            seen[f"{hops[1]}>{hops[2]}"].append(queueing_us)
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
