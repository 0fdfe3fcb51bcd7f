"""The analysis runs with the cycle collector paused (``cwctl.session.analyse``): that is
safe only while it makes no reference cycles, which a collection straight after it
would find. Faults of every signal are on, so the localiser's stages all run."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.session import ScanSession, analyse
from cwctl.transport.sim import simulate


@contextmanager
def cycles_kept() -> Iterator[list[Any]]:
    """Every object a collection finds unreachable from here on, kept (not freed) in the
    list yielded: whether the collection ran paused, automatically or when asked."""
    gc.collect()
    gc.garbage.clear()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
        gc.collect()
    finally:
        gc.set_debug(0)


def _analysed(run: Callable[[], Any]) -> list[str]:
    with cycles_kept() as garbage:
        run()
    found = sorted({type(obj).__name__ for obj in garbage})
    gc.garbage.clear()
    return found


FAULTS = (
    (),
    ("switch:spine2:congested",),
    ("link:leaf1-spine1:lossy", "switch:spine3:slow"),
    ("host:gpu-005:down",),
)


@pytest.mark.parametrize("faults", FAULTS, ids=lambda f: "+".join(f) or "healthy")
def test_one_scan_analysed_leaves_no_cycles_and_the_collector_as_it_was(
    faults: tuple[str, ...],
) -> None:
    collection = simulate(SimOptions(hosts=48, hosts_per_leaf=8, seed=5, faults=faults))
    out = []
    assert gc.isenabled()
    assert _analysed(lambda: out.append(analyse(collection, release=True))) == []
    assert gc.isenabled()  # restored
    snapshot = out[0]
    assert snapshot.paths and (snapshot.suspects or not faults)


def test_sliding_scans_analysed_leave_no_cycles() -> None:
    request = ScanRequest(
        sim=SimOptions(hosts=32, hosts_per_leaf=8, seed=2, faults=("switch:spine2:down",))
    )

    async def two_scans() -> list[list[str]]:
        found = []
        async with ScanSession(request, sliding=True) as session:
            for _ in range(2):
                collection = await session.source.scan(request)
                found.append(_analysed(lambda: session._analyse(collection)))  # noqa: B023
        return found

    assert asyncio.run(two_scans()) == [[], []]
