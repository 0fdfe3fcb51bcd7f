"""Where the TUI's snapshots come from: anything with ``async def next_snapshot()``.

The CLI hands the TUI a ``cwctl.session.ScanSession`` (``sliding=True``): each scan is
the next window of the same source (for ``--sim``, one model: clocks drift on, ``@T``
faults appear, applied changes stay) and the clock solve warm-starts from the previous
one. ``FixedSource`` hands out pre-built snapshots, for tests and demos. Neither
imports Textual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from cwctl.errors import InputError
from cwctl.scan.snapshot import FabricSnapshot


class ScanSource(Protocol):
    """One scan per call; the TUI awaits it in a worker, so it may take seconds."""

    @property
    def label(self) -> str:
        """What the status bar says the hosts are: ``SIMULATED``, ``local``, an inventory."""
        ...

    @property
    def simulated(self) -> bool: ...

    async def next_snapshot(self) -> FabricSnapshot: ...


class FixedSource:
    """Hands out the given snapshots in turn, then the last one again."""

    def __init__(
        self, snapshots: Sequence[FabricSnapshot], *, label: str = "fixed", delay_s: float = 0.0
    ) -> None:
        if not snapshots:
            raise InputError("FixedSource needs at least one snapshot")
        self.snapshots = list(snapshots)
        self.label = label
        self.simulated = label == "SIMULATED"
        self.delay_s = delay_s
        self.calls = 0

    async def next_snapshot(self) -> FabricSnapshot:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        snapshot = self.snapshots[min(self.calls, len(self.snapshots) - 1)]
        self.calls += 1
        return snapshot
