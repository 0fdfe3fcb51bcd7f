"""Fabric telemetry: corrected one-way delays per path, and fault localisation.

Public API: ``build_snapshot(collection, solution) -> FabricSnapshot``.
(Placeholder until the telemetry issue lands: per-path counts and OWD quantiles only.)
"""

from __future__ import annotations

import numpy as np

from cwctl.collection import Collection
from cwctl.snapshot import FabricSnapshot, HostReport, PathReport
from cwctl.sync import ClockSolution, one_way_delays


def build_snapshot(collection: Collection, solution: ClockSolution) -> FabricSnapshot:
    table = collection.table
    index = {name: i for i, name in enumerate(solution.hosts)}
    hosts = []
    for info in collection.hosts:
        status = collection.status.get(info.name)
        report = HostReport(
            name=info.name,
            status=status.status if status else "ok",
            error=status.error if status else None,
        )
        i = index.get(info.name)
        if i is not None:
            report.offset_ns = float(solution.offset_ns[i])
            report.drift_ppb = float(solution.drift_ppb[i])
            report.uncertainty_ns = float(solution.uncertainty_ns[i])
        hosts.append(report)
    paths = []
    if len(table):
        fwd, rev = one_way_delays(table, solution)
        n = len(table.hosts)
        for s, d, delays in ((table.src, table.dst, fwd), (table.dst, table.src, rev)):
            key = s.astype(np.int64) * n + d
            for k in np.unique(key):
                sel = delays[key == k]
                got = sel[~np.isnan(sel)]
                q = [float(x) for x in np.percentile(got, [0, 50, 99, 100])] if len(got) else []
                paths.append(
                    PathReport(
                        src=table.hosts[int(k) // n],
                        dst=table.hosts[int(k) % n],
                        sent=len(sel),
                        received=len(got),
                        owd_min_ns=q[0] if q else None,
                        owd_p50_ns=q[1] if q else None,
                        owd_p99_ns=q[2] if q else None,
                        owd_max_ns=q[3] if q else None,
                    )
                )
    return FabricSnapshot(
        source=collection.source,
        reference=solution.reference,
        duration_s=collection.duration_s,
        hosts=hosts,
        paths=paths,
        timestamp_source=table.timestamp_source,
        sync=dict(solution.quality),
        truth=collection.truth,
        records=len(table),
    )
