"""Two jobs collide on one spine; ``cwctl watch`` with a ``[rebalance]`` policy spreads them.

One trial (``tests/testbed/collision.py``): every leaf-spine link capped at 200 Mbit/s
each way, two iperf3 jobs from leaf1 to leaf2 on client ports the leaves' own kernels send
up spine2, the collision alone for 8 s, then the watch. Judged by iperf3's own intervals,
the switches' interface counters and the nft maps on the hosts, none of which cwctl
reads: leaf1's uplinks within 1.2x of their mean within 60 s of the collision starting,
the two jobs' throughput together at least 1.5x (and each faster: TCP shares one link
unfairly, so one job may have had 40 of the 200 Mbit/s and the other 150), no job
restarted, no flow moved twice, and nothing moved in the steady part. Costs about 55 s
on 2 cores (the testbed up ~1 s, the trial ~54 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testbed import layout as L
from tests.testbed.collision import BALANCED, capped, trial
from tests.testbed.workload import header_hashing, ruleset

STEADY_S = 15.0


@pytest.fixture(autouse=True, scope="module")
def _hashing(testbed) -> Iterator[None]:
    with header_hashing(testbed):
        yield


def test_a_rebalancing_watch_spreads_two_colliding_jobs(fabric, tmp_path: Path) -> None:
    before = {h: ruleset(fabric, h) for h in L.HOSTS}
    with capped(fabric):  # inside the test: ``fabric`` clears every link's qdisc
        out = trial(fabric, tmp_path, STEADY_S)
    said = [f"{e.get('verb')} {e.get('code')}: {e.get('why', '')[:160]}" for e in out.decisions]
    assert out.jobs_ok, said
    assert out.ratio_before is not None and out.ratio_before > 1.8, out
    assert out.balanced_s is not None and out.balanced_s <= 60, (out, said)
    assert out.ratio_after is not None and out.ratio_after <= BALANCED, (out, said)
    assert out.gain >= 1.5 and out.least_gain > 1.0, (out.before_mbit, out.after_mbit)
    assert out.rebalances >= 1 and out.steady_rebalances == 0, said
    assert out.moves and max(out.moves.values()) == 1, out.moves
    assert {h: ruleset(fabric, h) for h in L.HOSTS} == before  # every rebalance undone
