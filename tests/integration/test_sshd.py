"""The ssh transport against a real OpenSSH sshd, started by the test on loopback
(``realsshd.py``: three "hosts" at 127.0.0.2-4; no agent may be left behind)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from cwctl.scan.request import ScanRequest
from cwctl.transport.ssh import SSHSource, scan_inventory
from tests.integration.realsshd import ADDRESSES, Sshd, needs_sshd, sshd
from tests.integration.sshfleet import wait_gone

__all__ = ["sshd"]  # the fixture, used by the tests below
pytestmark = needs_sshd


async def test_full_scan_through_real_sshd(sshd: Sshd) -> None:
    connected: list[dict] = []
    c = await scan_inventory(
        sshd.inventory(),
        ScanRequest(),
        lambda e, f: connected.append(f) if e == "connected" else None,
        client_options=sshd.client_options,
    )
    names = ["sshd-1", "sshd-2", "sshd-3"]
    errors = {n: s.error for n, s in c.status.items() if s.status != "ok"}
    assert not errors, f"{errors}\nsshd log: {sshd.log.read_text()[-1500:]}"
    assert sorted(f["host"] for f in connected) == names
    assert [c.hello[n]["address"] for n in names] == list(ADDRESSES)
    t = c.table
    for src, dsts in c.peers.items():
        for dst in dsts:
            rows = (t.src == t.host_index(src)) & (t.dst == t.host_index(dst)) & t.complete
            assert rows.sum() > 0, (src, dst)
    assert t.timestamp_source == "sw"
    assert all(c.summaries[n]["reason"] == "done" for n in names)


async def test_unknown_host_key_refused_by_real_sshd(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    c = await scan_inventory(
        sshd.inventory(known_hosts=empty), ScanRequest(), None, client_options=sshd.client_options
    )
    for name in ("sshd-1", "sshd-2", "sshd-3"):
        assert c.status[name].status == "unreachable"
        assert sshd.host_key.get_fingerprint() in c.status[name].error
        assert name in c.status[name].error


async def test_cancelled_scan_leaves_no_agent_under_real_sshd(sshd: Sshd) -> None:
    started = asyncio.Event()
    task = asyncio.create_task(
        scan_inventory(
            sshd.inventory(),
            ScanRequest(duration_s=30.0),
            lambda e, f: started.set() if e == "started" else None,
            client_options=sshd.client_options,
        )
    )
    await asyncio.wait_for(started.wait(), 30.0)
    await asyncio.sleep(0.3)
    pids = sshd.agent_pids()
    assert len(pids) == 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(pids, 5.0) == []


async def test_scan_from_an_inventory_file(sshd: Sshd, tmp_path: Path) -> None:
    """The path `cwctl scan -i FILE` takes: load_inventory, then the ssh transport."""
    inv = sshd.inventory()
    hosts = "".join(
        f'[[host]]\nname = "{h.name}"\naddress = "{h.address}"\nport = {h.port}\n'
        for h in inv.hosts[:2]
    )
    user = f'user = "{inv.ssh.user}"\n' if inv.ssh.user else ""
    path = tmp_path / "inventory.toml"
    path.write_text(
        f'[ssh]\n{user}known_hosts = "{sshd.known_hosts}"\npython = "{inv.ssh.python}"\n'
        "connect_timeout = 5\n\n[probe]\nduration = 0.5\nrate = 40\npeers = 1\nports = 1\n\n"
        + hosts
    )
    request = ScanRequest(inventory=path)
    c = await SSHSource(request, client_options=sshd.client_options).scan(request)
    assert {n: s.status for n, s in c.status.items()} == {"sshd-1": "ok", "sshd-2": "ok"}
    assert c.params["rate"] == 40 and c.params["ports"] == 1
    assert set(c.table.sport.tolist()) == {
        c.hello["sshd-1"]["sports"][0],
        c.hello["sshd-2"]["sports"][0],
    }


async def test_real_sshd_failures_are_reported_per_host(sshd: Sshd) -> None:
    """One host fine, one without the Python it is told to use, one refusing the login."""
    inv = sshd.inventory()
    ok, no_python, no_login = inv.hosts
    inv = replace(
        inv,
        hosts=(
            ok,
            replace(no_python, python="/nonexistent/python3"),
            replace(no_login, user="cwctl-no-such-user"),
        ),
    )
    c = await scan_inventory(inv, ScanRequest(), None, client_options=sshd.client_options)
    assert c.status["sshd-1"].status == "ok"
    assert c.status["sshd-2"].status == "error"
    assert "sshd-2: no Python to run the agent" in c.status["sshd-2"].error
    assert c.status["sshd-3"].status == "unreachable"
    assert "authentication refused as cwctl-no-such-user" in c.status["sshd-3"].error


async def test_more_commands_at_once_than_sshd_has_sessions_all_run(sshd: Sshd) -> None:
    """An action's runner sends 24 commands to one host at once (steering's tracer
    chunks do): OpenSSH refuses an eleventh session on a connection (MaxSessions 10,
    "open failed"), so the runner keeps at most SESSIONS_PER_HOST open and queues the rest."""
    import asyncio

    from cwctl.actions.runners import SESSIONS_PER_HOST, SSHRunner

    assert SESSIONS_PER_HOST < 10
    runner = SSHRunner(sshd.inventory(), client_options=sshd.client_options)
    try:
        argv = ["sh", "-c", "sleep 0.3; echo $0", "ran"]
        results = await asyncio.gather(*(runner.run("sshd-1", argv) for _ in range(24)))
    finally:
        await runner.close()
    assert [(r.rc, r.stdout) for r in results] == [(0, "ran\n")] * 24, results[0].stderr
