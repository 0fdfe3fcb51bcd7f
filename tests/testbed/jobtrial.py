"""One fault under the running PyTorch job, with ``cwctl watch`` steering or without it:
shared by tests/integration/test_workload_testbed.py (one trial) and bench/bench_workload.py
(every fault kind, three trials, with and without cwctl).

The fault goes on the leaf1 uplink that carried most of the job's packets in the second
before (a netdev counter on both ends of each uplink; Gloo's ring uses some of its
connections only, so the one the leaf's kernel puts most connections on,
``trainjob.job_uplinks``, breaks ties only), one way, for ``fault_s``; its counter shows
the job's packets crossing it before the fault (and, with cwctl, none after the move).
The job's own step log is the judge (``trainjob.Timeline``); with a watch, its decisions
are read too: when it acted, and that it restored only after the fault had cleared.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.testbed import layout as L
from tests.testbed.faults import apply_fault, clear
from tests.testbed.linkcount import LinkTcpCounter
from tests.testbed.trainjob import Timeline, TrainJob, job_uplinks
from tests.testbed.watchtrial import WatchRun, about

LEAF = "leaf1"


@dataclass
class JobTrial:
    kind: str
    link: str
    before: int  # the job's TCP packets offered to the link in the second before the fault
    after: int  # ... from the acted decision to the fault's end (with cwctl)
    acted_s: float | None  # injection -> the watch's acted decision
    actions: int  # act decisions on the link or its spine during the fault
    restored_s: float | None  # fault cleared -> restored (negative: before the clear)
    timeline: Timeline


def job_trial(
    bed: object,
    job: TrainJob,
    kind: str,
    *,
    watch: WatchRun | None = None,
    fault_s: float = 60.0,
    restore_timeout_s: float = 120.0,
) -> JobTrial:
    ups = job_uplinks(bed, LEAF)  # type: ignore[arg-type]
    hosts = L.hosts_of(LEAF) + L.hosts_of("leaf2")
    counters = {s: LinkTcpCounter(bed, LEAF, s, hosts) for s in L.SPINES}  # type: ignore[arg-type]
    time.sleep(1.0)
    seen = {s: c.read() for s, c in counters.items()}
    spine = max(L.SPINES, key=lambda s: (seen[s], ups[s]))
    for s, other in counters.items():
        if s != spine:
            other.remove()
    link, counter, before = f"{LEAF}-{spine}", counters[spine], seen[spine]
    try:
        mark = time.monotonic()
        fault_at = time.time()
        apply_fault(bed, f"{LEAF}>{spine}", kind)  # type: ignore[arg-type]
        acted_s, after_from = None, None
        if watch is not None:
            near = about(link, spine)
            try:
                t, _ = watch.wait(
                    lambda e: e.get("verb") == "acted" and near(e), mark, timeout_s=fault_s
                )
                acted_s = t - mark
                after_from = counter.read()
            except AssertionError:  # never acted while the fault lasted: the table says so
                pass
        time.sleep(max(0.0, fault_s - (time.monotonic() - mark)))
        after = counter.read() - after_from if after_from is not None else -1
        until = time.time()
        clear(bed, link)  # type: ignore[arg-type]
        cleared = time.monotonic()
        actions, restored_s = 0, None
        if watch is not None:
            near = about(link, spine)
            actions = sum(
                1 for t, e in watch.decisions(mark) if t < cleared and e["verb"] == "act"
                and near(e)
            )  # fmt: skip
            if acted_s is not None:  # from the injection: a restore before the clear shows
                try:
                    t, _ = watch.wait(
                        lambda e: e.get("verb") == "restored" and near(e), mark, restore_timeout_s
                    )
                    restored_s = t - cleared  # negative: restored while the fault was on
                except AssertionError:  # never restored: the row says so (restored "never")
                    pass
        _resumed(job, until)  # the step the fault held, for the timeline's tail
        timeline = Timeline.of(job.steps(), fault_at, until)
    finally:
        counter.remove()
        clear(bed)  # type: ignore[arg-type]
    return JobTrial(kind, link, before, after, acted_s, actions, restored_s, timeline)


def _resumed(job: TrainJob, since: float, timeout_s: float = 90.0) -> None:
    """Until rank 0 has logged 5 steps after ``since`` (wall clock): a connection the
    fault stalled comes back at its next retransmission, up to a minute later."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(1 for s in job.steps() if s["rank"] == 0 and s["t"] > since) >= 5:
            return
        time.sleep(1.0)
