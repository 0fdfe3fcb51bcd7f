"""Prometheus text exposition of a snapshot (placeholder until the telemetry report lands)."""

from __future__ import annotations

from cwctl.snapshot import FabricSnapshot


def render_prom(snapshot: FabricSnapshot) -> str:
    lines = ["# TYPE cwctl_clock_offset_seconds gauge"]
    for h in snapshot.hosts:
        if h.offset_ns is not None and h.offset_ns == h.offset_ns:
            lines.append(f'cwctl_clock_offset_seconds{{host="{h.name}"}} {h.offset_ns * 1e-9:.12g}')
    return "\n".join(lines) + "\n"
