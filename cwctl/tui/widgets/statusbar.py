"""The status bar: where the hosts come from, timestamps, scans, sync quality."""

from __future__ import annotations

import time

from textual.widgets import Static

from cwctl.scan.snapshot import FabricSnapshot
from cwctl.units import fmt_ns


def status_text(
    source_label: str,
    *,
    scans: int,
    snapshot: FabricSnapshot | None,
    elapsed_s: float | None,
    finished_at: float | None,
    scanning: bool,
    progress: str | None = None,
    error: str | None = None,
    readonly: bool = False,
) -> str:
    parts = [source_label]
    applied = (snapshot.truth or {}).get("applied") if snapshot is not None else None
    if applied:
        parts.append(f"ACTIONS APPLIED ({len(applied)}: cwctl sim status)")
    if readonly:
        parts.append("READONLY")
    if snapshot is not None:
        parts.append(f"timestamps {snapshot.timestamp_source}")
    parts.append(f"scan {scans}")
    if elapsed_s is not None and finished_at is not None:
        clock = time.strftime("%H:%M:%S", time.localtime(finished_at))
        parts.append(f"last {elapsed_s:.1f} s at {clock}")
    if snapshot is not None:
        sync = snapshot.sync
        rms = sync.get("residual_rms_ns")
        parts.append(f"sync rms {fmt_ns(rms)}" if rms is not None else "sync -")
        parts.append(f"{len(snapshot.suspects)} suspect(s)")
        if snapshot.unreachable:
            parts.append(f"{len(snapshot.unreachable)} unreachable")
    if scanning:
        parts.append(f"scanning: {progress}" if progress else "scanning…")
    if error:
        parts.append(f"error: {error}")
    return " · ".join(parts)


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """
