"""A hand-made snapshot with known values for the TUI tests, the terminal size they run
at, and how they wait for the app."""

from __future__ import annotations

from typing import Any

from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport, Suspect

# Four hosts on two leaves; hosts are listed out of leaf order on purpose.
HOSTS = [("gpu-003", "leaf2"), ("gpu-001", "leaf1"), ("gpu-004", "leaf2"), ("gpu-002", "leaf1")]
# (src, dst, queueing p50 ns, loss): one path per colour bin, one lossy path.
PATHS = [
    ("gpu-001", "gpu-002", 500.0, 0.0),  # bin 0: < 1 µs
    ("gpu-001", "gpu-003", 2_000.0, 0.0),  # bin 1
    ("gpu-002", "gpu-004", 8_000.0, 0.0),  # bin 2
    ("gpu-003", "gpu-004", 30_000.0, 0.0),  # bin 3
    ("gpu-004", "gpu-001", 100_000.0, 0.5),  # bin 4, half the probes lost
]


def known_snapshot(*, suspects: bool = True) -> FabricSnapshot:
    hosts = [
        HostReport(
            name=name,
            leaf=leaf,
            offset_ns=1_000.0 * i,
            drift_ppb=10.0 * i,
            uncertainty_ns=30.0,
            gpus=[{"index": 0, "name": "H100"}] if name == "gpu-002" else [],
            gpu_verdict="ok" if name == "gpu-002" else None,
        )
        for i, (name, leaf) in enumerate(HOSTS)
    ]
    paths = [
        PathReport(
            src=src,
            dst=dst,
            sent=100,
            received=round(100 * (1 - loss)),
            owd_min_ns=1_000.0,
            owd_p50_ns=1_000.0 + excess,  # queueing p50 (the heatmap's metric): excess
            owd_p99_ns=1_000.0 + 2 * excess,
        )
        for src, dst, excess, loss in PATHS
    ]
    found = (
        [Suspect("leaf2", "switch", 0.9, "delay: 2 of 2 paths through leaf2 queue")]
        if suspects
        else []
    )
    return FabricSnapshot(
        source="sim",
        reference="gpu-003",
        duration_s=0.3,
        hosts=hosts,
        paths=paths,
        suspects=found,
        timestamp_source="hw",
        sync={"residual_rms_ns": 40.0},
    )


SIZE = (120, 40)


async def wait_for(pilot: Any, condition: Any, timeout_s: float = 30.0) -> None:
    waited = 0.0
    while not condition():
        assert waited < timeout_s, "timed out waiting"
        await pilot.pause(0.02)
        waited += 0.02
