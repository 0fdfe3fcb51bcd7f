"""Where the TUI's snapshots come from: anything with ``async def next_snapshot()``.

``PipelineSource(request)`` runs the scan pipeline again and again: for ``--sim`` each
scan is the next time window of one kept model (clocks drift on, ``@T`` faults appear,
changes applied to the model stay applied), and the clock solve is a ``SlidingSolver``
warm-started from the previous scan. ``FixedSource`` hands out pre-built snapshots, for
tests and demos. Neither imports Textual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from cwctl.errors import InputError
from cwctl.snapshot import FabricSnapshot


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


class PipelineSource:
    """The scan pipeline of ``request``, once per call, reusing what carries over."""

    def __init__(self, request: Any, *, sliding: bool = True) -> None:
        self.request = request
        self.sliding = sliding
        self._solver: Any = None
        self.model: Any = None  # the simulator's FabricModel, kept across scans
        self.calls = 0

    @property
    def simulated(self) -> bool:
        return self.request.sim is not None

    @property
    def label(self) -> str:
        r = self.request
        if r.sim is not None:
            return "SIMULATED"
        if r.replay is not None:
            return f"replay {r.replay}"
        if r.local is not None:
            return f"local x{r.local}"
        return f"ssh {r.inventory}"

    async def _collect(self) -> Any:
        from cwctl.pipeline import collect

        if self.request.sim is None:
            return await collect(self.request)
        from cwctl.transport.sim import collect_sim, kept_model

        if self.model is None:
            # The process-wide kept model: an action planned for this request in this
            # process changes the same fabric the next scan probes.
            self.model = await asyncio.to_thread(kept_model, self.request)
        return await collect_sim(self.request, model=self.model)

    def _analyse(self, collection: Any) -> FabricSnapshot:
        from cwctl.pipeline import analyse

        if not self.sliding or self.request.replay is not None:
            return analyse(collection, reference=self.request.reference)
        from cwctl.sync.incremental import SlidingSolver
        from cwctl.telemetry import build_snapshot

        if self.request.reference is not None and (
            self.request.reference not in collection.host_names
        ):
            return analyse(collection, reference=self.request.reference)  # raises InputError
        if self._solver is None:
            # The window is this scan's probes (offsets are reported at its middle, as
            # the truth is); the graph, the Huber weights and the offsets stay warm.
            self._solver = SlidingSolver(
                window_s=collection.duration_s, reference=self.request.reference
            )
        solution = self._solver.update(collection.table)
        return build_snapshot(collection, solution)

    async def next_snapshot(self) -> FabricSnapshot:
        collection = await self._collect()
        snapshot = await asyncio.to_thread(self._analyse, collection)
        self.calls += 1
        return snapshot
