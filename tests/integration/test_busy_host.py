"""A starved agent is not the network: real agents on loopback, one stopped (SIGSTOP) for
a second in the middle of probing. Its peers see its answers come late or never; the
agent sees, when it runs again, that it ran a second later than it planned. The scan
reports the host busy and names no network suspect, where the same records without the
agent's starved spans do blame that host (the control: the check can fail)."""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import threading
from dataclasses import replace
from typing import Any

from cwctl.report import render
from cwctl.scan.pathreports import PathReport
from cwctl.scan.request import ProbeOverrides, ScanRequest
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.session import ScanSession, analyse

STOP_AFTER_S = 0.6  # into the probing window
STOP_FOR_S = 1.2  # longer than the probe timeout (0.5 s): exchanges are lost


def test_a_stopped_agent_is_reported_busy_not_as_a_network_suspect() -> None:
    pids: dict[str, int] = {}
    victim = "local-02"
    stopped = threading.Event()

    def stop_and_continue(pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        stopped.set()
        threading.Timer(STOP_FOR_S, os.kill, (pid, signal.SIGCONT)).start()

    def progress(event: str, fields: dict[str, Any]) -> None:
        if event == "connected":
            pids[fields["host"]] = fields["pid"]
        elif event == "started":
            delay = fields["start_in_s"] + STOP_AFTER_S
            threading.Timer(delay, stop_and_continue, (pids[victim],)).start()

    request = ScanRequest(local=4, duration_s=3.0, overrides=ProbeOverrides(rate=50.0))
    collection = asyncio.run(ScanSession(request, progress=progress).collect())
    assert stopped.is_set()
    assert all(s.status == "ok" for s in collection.status.values()), collection.status

    snapshot = analyse(collection)
    agent = {h.name: h.agent for h in snapshot.hosts}
    assert agent[victim] is not None and agent[victim]["busy"], agent[victim]
    assert agent[victim]["starved_s"] >= STOP_FOR_S * 0.8
    assert snapshot.telemetry["busy_exchanges"] > 0
    assert not any(s.element == victim or victim in s.element for s in snapshot.suspects), [
        (s.element, s.evidence) for s in snapshot.suspects
    ]
    assert not [s for s in snapshot.suspects if s.kind in ("host", "nic")], snapshot.suspects
    assert not snapshot.unlocalised, snapshot.unlocalised  # nor loss nobody explains
    # but the scan cannot vouch for the paths the starved agent lost: not healthy (exit 3)
    assert victim in snapshot.busy_with_loss and not snapshot.healthy

    # the control: the same records without the starved spans blame the stopped host
    blind = copy.deepcopy(collection)
    for summary in blind.summaries.values():
        summary["cost"]["starved"] = []
    naive = analyse(blind)
    blamed = [s.element for s in naive.suspects] + [repr(naive.unlocalised or "")]
    assert any(victim in b for b in blamed), blamed
    lossy = [p for p in naive.paths if victim in (p.src, p.dst) and p.received < p.sent]
    assert lossy  # the loss is really there; only its reading changed


def test_the_table_says_which_hosts_were_busy() -> None:
    from cwctl.report import render
    from cwctl.scan.snapshot import FabricSnapshot, HostReport

    hosts = [
        HostReport(name="a", agent={"busy": True, "starved_s": 1.2}),
        HostReport(name="b", agent={"busy": False, "starved_s": 0.0}),
    ]
    snapshot = FabricSnapshot(
        source="local", reference="a", duration_s=2.0, hosts=hosts,
        telemetry={"busy_exchanges": 42},
    )  # fmt: skip
    text = render(snapshot, "table", color=False)
    assert "host busy: a: agent starved (CPU); 42 exchanges left out" in text
    assert "b:" not in text.split("host busy")[1].splitlines()[0]


def test_busy_hosts_that_lost_nothing_leave_the_scan_healthy() -> None:
    busy = {"busy": True, "starved_s": 0.3}
    clean = FabricSnapshot(
        source="local",
        reference="a",
        duration_s=2.0,
        hosts=[HostReport(name="a", agent=busy), HostReport(name="b")],
        paths=[PathReport("a", "b", 100, 100, 1.0, 2.0, 3.0)],
    )
    assert clean.busy_with_loss == [] and clean.healthy
    lossy = replace(clean, paths=[PathReport("b", "a", 100, 97, 1.0, 2.0, 3.0)])
    assert lossy.busy_with_loss == ["a"] and not lossy.healthy
    text = render(lossy, "table", color=False)
    assert "not healthy: 1 busy hosts on paths that lost probes" in text
