"""``cwctl watch`` heals the namespace fabric by policy: a congested, then a down leaf-spine
link is rerouted round by the leaves' ECMP groups (verified by a rescan), and once the
fault is cleared and the hold has passed, rolled back: every switch's routes (every table)
and rules as they were, byte for byte. An intermittent fault causes one action: the watch's
marked probes keep crossing the avoided link, so it never restores to test.

One trial per fault (bench/bench_watch_fabric.py runs five and prints p50 and max); short
rounds (2 s of probing, --interval 2) and a short hold keep it to a few minutes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.watchtrial import WatchRun, intermittent, trial

pytestmark = pytest.mark.netns
HOLD_S = 20.0


@pytest.fixture(scope="module")
def watching(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WatchRun]:
    testbed.reset_routes()
    run = WatchRun(testbed, tmp_path_factory.mktemp("watch"), hold_s=HOLD_S, interval_s=2.0)
    try:
        yield run
    finally:
        code = run.stop()
        assert code == 0, [e for _, e in run.lines[-5:]]


@pytest.mark.parametrize("kind", ["congested", "down"])
def test_a_sick_link_is_rerouted_verified_then_restored_exactly(
    fabric: Testbed, watching: WatchRun, kind: str
) -> None:
    result = trial(fabric, watching, "leaf1>spine2", kind)
    assert result.element in ("leaf1-spine2", "spine2"), result
    assert result.routes_changed == list(L.LEAVES), result  # the leaves' groups, nothing else
    assert result.restored_exactly, result
    print(f"{result.fault}: rerouted in {result.reroute_s:.1f} s, restored "
          f"{result.restore_s:.1f} s after the fault cleared")  # fmt: skip


def test_an_intermittent_fault_causes_at_most_one_action_per_hold(
    fabric: Testbed, watching: WatchRun
) -> None:
    start = time.monotonic()
    acts = intermittent(
        fabric, watching, "leaf1>spine2", "down", on_s=10.0, off_s=10.0, total_s=2.5 * HOLD_S
    )
    # the rerouted traffic avoids the link, the watch's marked probes still cross it: each
    # "off" (shorter than the hold) is seen for what it is, so no restore to test, no re-act
    assert len(acts) == 1, acts
    # and the rounds after the action saw the fault come back: the probes crossed the link
    acted = min(t for t, e in watching.decisions(start) if e["verb"] == "acted")
    seen = [
        e["round"]
        for t, e in watching.lines
        if t > acted and e.get("event") == "round"
        and any("spine2" in s["element"] for s in e.get("suspects", []))
    ]  # fmt: skip
    assert seen, "no round after the reroute named the link: the marked probes avoided it"
