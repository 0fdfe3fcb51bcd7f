"""A host that goes away and comes back, under ``cwctl watch``'s rounds over SSH: the round
it is gone says so (unreachable, the others measured), the next rounds find it again, and
the watch never stops; no agent is left after. The in-process SSH fleet runs the real
agent as subprocesses (tests/integration/sshfleet.py)."""

from __future__ import annotations

from cwctl.scan.request import ScanRequest
from cwctl.session import ScanSession
from cwctl.transport.ssh import SSHSource
from cwctl.watch.rounds import Watch
from tests.integration.sshfleet import SSHFleet


async def test_a_host_that_comes_and_goes_is_unreachable_then_back(fleet: SSHFleet) -> None:
    for i in range(3):
        await fleet.add(f"node-{i + 1}")
    request = ScanRequest(duration_s=0.5, concurrency=8)
    source = SSHSource(request, inventory=fleet.inventory(), client_options=fleet.client_options)
    log: list[dict] = []
    session = ScanSession(request, source=source, sliding=True)
    watch = Watch(request, session=session, log=log.append)
    gone = fleet.hosts[2]
    states = []
    try:
        for n, step in enumerate(("up", "down", "down", "up", "up")):
            if n == 1:
                await fleet.stop(gone)
            if n == 3:
                await fleet.start(gone)
            snapshot = await watch.round()
            assert snapshot is not None, log[-1]
            reached = {h.name for h in snapshot.hosts if h.status == "ok"}
            states.append((step, len(reached)))
            if step == "down":
                assert reached == {"node-1", "node-2"}
                (lost,) = snapshot.unreachable
                assert lost.name == "node-3" and lost.status == "unreachable"
            else:
                assert reached == {"node-1", "node-2", "node-3"}
    finally:
        await watch.aclose()
    assert [s for _, s in states] == [3, 2, 2, 3, 3]
    assert watch.metrics.rounds == 5 and watch.metrics.last["unreached"] == 0
    assert [line["reached"] for line in log if line["event"] == "round"] == [3, 2, 2, 3, 3]
