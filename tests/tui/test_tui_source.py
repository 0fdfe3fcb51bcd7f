"""A sliding scan session (the TUI's): successive windows of one model, warm solves,
offsets true to the sim."""

from __future__ import annotations

import numpy as np

from cwctl.scan.request import ScanRequest
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import ScanSession


def offset_error_p99_ns(snapshot: FabricSnapshot) -> float:
    assert snapshot.truth is not None
    truth = snapshot.truth["offset_ns"]
    err = np.array([h.offset_ns - truth[h.name] for h in snapshot.hosts if h.offset_ns is not None])
    err -= np.median(err)  # the truth's reference need not be the solver's
    return float(np.percentile(np.abs(err), 99))


async def test_warm_scans_stay_true_to_the_simulators_clocks(sim_request: ScanRequest) -> None:
    source = ScanSession(sim_request, sliding=True)
    first = await source.next_snapshot()
    second = await source.next_snapshot()
    assert source.model is not None and source.model.windows == 2
    assert first.truth is not None and second.truth is not None
    assert second.truth["t_mid_ns"] > first.truth["t_mid_ns"]  # the next window, not a rerun
    assert not first.sync.get("warm") and second.sync.get("warm")
    assert offset_error_p99_ns(first) < 200
    assert offset_error_p99_ns(second) < 200  # warm start, same accuracy
