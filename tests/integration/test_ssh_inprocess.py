"""The ssh transport against in-process asyncssh servers that run the real agent.

Each test ends (in the ``fleet`` fixture) by checking that no agent process it started
is still alive, by PID.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time

import asyncssh
import pytest

from cwctl.fabric.topology import probe_edges
from cwctl.inventory import Host
from cwctl.scan.collection import Collection
from cwctl.scan.request import ScanRequest
from cwctl.transport.ssh import scan_inventory
from tests.integration.sshfleet import SSHFleet, free_tcp_port, interpreter_pid, wait_gone


def assert_every_pair_probed(c: Collection, hosts: list[str]) -> None:
    table = c.table
    got = {
        (table.hosts[s], table.hosts[d])
        for s, d in zip(table.src[table.complete], table.dst[table.complete], strict=True)
    }
    for src in hosts:
        for dst in c.peers[src]:
            if dst in hosts:
                assert (src, dst) in got, f"no complete exchange {src} -> {dst}"


async def scan(fleet: SSHFleet, inventory, **request) -> Collection:
    req = ScanRequest(inventory=None, **request)
    return await scan_inventory(inventory, req, None, client_options=fleet.client_options)


async def test_full_scan_every_host_ok_and_every_pair_probed(fleet: SSHFleet) -> None:
    for i in range(4):
        await fleet.add(f"node-{i + 1}")
    c = await scan(fleet, fleet.inventory())
    names = [h.name for h in fleet.hosts]
    assert {n: s.status for n, s in c.status.items()} == dict.fromkeys(names, "ok")
    assert c.source == "ssh"
    assert set(c.hello) == set(names)
    assert {c.hello[n]["address"] for n in names} == {h.address for h in fleet.hosts}
    assert probe_edges(c.peers)
    assert_every_pair_probed(c, names)
    assert c.table.timestamp_source == "sw"
    for name in names:
        summary = c.summaries[name]
        rows = int((c.table.src == c.table.hosts.index(name)).sum())
        assert sum(summary["sent"].values()) == rows


async def test_unknown_host_key_refused_with_fingerprint(fleet: SSHFleet) -> None:
    await fleet.add("node-1")
    stranger = await fleet.add("node-2", known=False)
    c = await scan(fleet, fleet.inventory())
    status = c.status["node-2"]
    assert status.status == "unreachable"
    assert "unknown host key" in status.error
    assert stranger.host_key.get_fingerprint() in status.error
    assert "node-2" in status.error
    assert c.status["node-1"].status == "ok"
    assert not stranger.pids  # refused before any command ran


async def test_accept_new_host_keys_records_the_key(
    fleet: SSHFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    await fleet.add("node-1")
    stranger = await fleet.add("node-2", known=False)
    c = await scan(fleet, fleet.inventory(), accept_new_host_keys=True)
    assert c.status["node-2"].status == "ok"
    text = fleet.known_hosts.read_text()
    assert f"[{stranger.address}]:{stranger.port} ssh-ed25519 " in text
    # said on stderr, once, for the one key added (as OpenSSH's "Permanently added")
    said = [line for line in capsys.readouterr().err.splitlines() if "Permanently added" in line]
    assert said == [
        f"cwctl: Permanently added ssh-ed25519 {stranger.host_key.get_fingerprint()} for "
        f"node-2 ({stranger.address}:{stranger.port}) to {fleet.known_hosts}"
    ]


async def test_changed_host_key_refused_even_with_accept_new(fleet: SSHFleet) -> None:
    await fleet.add("node-1")
    changed = await fleet.add("node-2", known=False)
    fleet.trust(changed, asyncssh.generate_private_key("ssh-ed25519"))  # the old key
    c = await scan(fleet, fleet.inventory(), accept_new_host_keys=True)
    status = c.status["node-2"]
    assert status.status == "unreachable"
    assert "CHANGED" in status.error
    assert changed.host_key.get_fingerprint() in status.error
    assert not changed.pids


async def test_wrong_client_key_refused(fleet: SSHFleet) -> None:
    await fleet.add("node-1")
    await fleet.add("node-2")
    locked = await fleet.add("node-3", authorized=asyncssh.generate_private_key("ssh-ed25519"))
    c = await scan(fleet, fleet.inventory())
    assert c.status["node-3"].status == "unreachable"
    assert "authentication refused" in c.status["node-3"].error
    assert not locked.pids
    assert [c.status[n].status for n in ("node-1", "node-2")] == ["ok", "ok"]
    assert_every_pair_probed(c, ["node-1", "node-2"])


async def test_dead_host_among_live_ones(fleet: SSHFleet) -> None:
    for i in range(3):
        await fleet.add(f"node-{i + 1}")
    dead = Host(name="node-dead", address="127.0.0.1", port=free_tcp_port())
    c = await scan(fleet, fleet.inventory(extra=[dead]))
    assert c.status["node-dead"].status == "unreachable"
    assert "node-dead" in c.status["node-dead"].error
    assert "refused" in c.status["node-dead"].error
    live = ["node-1", "node-2", "node-3"]
    assert all(c.status[n].status == "ok" for n in live)
    assert "node-dead" not in c.peers
    assert_every_pair_probed(c, live)


async def test_no_python_on_host(fleet: SSHFleet) -> None:
    await fleet.add("node-1")
    await fleet.add("node-2")
    c = await scan(fleet, fleet.inventory(python="/nonexistent/python3"))
    for name in ("node-1", "node-2"):
        assert c.status[name].status == "error"
        assert "no Python" in c.status[name].error
        assert name in c.status[name].error


async def test_agent_killed_mid_scan(fleet: SSHFleet) -> None:
    for i in range(3):
        await fleet.add(f"node-{i + 1}")
    victim = fleet.hosts[1]

    def progress(event: str, fields: dict) -> None:
        if event == "started":
            agent = interpreter_pid(victim.pids[0])
            asyncio.get_running_loop().call_later(0.3, os.kill, agent, signal.SIGKILL)

    req = ScanRequest(duration_s=1.0)
    c = await scan_inventory(fleet.inventory(), req, progress, client_options=fleet.client_options)
    status = c.status[victim.name]
    assert status.status == "error"
    assert "killed by signal KILL" in status.error
    assert victim.name in status.error
    others = [h.name for h in fleet.hosts if h is not victim]
    assert all(c.status[n].status == "ok" for n in others)
    # the survivors' probes to the dead host after its death are recorded as lost
    lost_to_victim = (c.table.dst == c.table.hosts.index(victim.name)) & ~c.table.received
    assert lost_to_victim.any()


async def test_garbage_record_line_marks_host_and_scan_goes_on(fleet: SSHFleet) -> None:
    await fleet.add("node-1")
    await fleet.add("node-2", mode="garbage")
    await fleet.add("node-3")
    c = await scan(fleet, fleet.inventory())
    status = c.status["node-2"]
    assert status.status == "error"
    assert "node-2" in status.error
    assert "line 4" in status.error
    assert c.status["node-1"].status == c.status["node-3"].status == "ok"
    # the bad host's good records still count
    assert (c.table.src == c.table.hosts.index("node-2")).sum() > 0
    assert "node-2" in c.summaries


async def test_cancellation_closes_sessions_and_agents_die(fleet: SSHFleet) -> None:
    for i in range(3):
        await fleet.add(f"node-{i + 1}")
    started = asyncio.Event()

    def progress(event: str, fields: dict) -> None:
        if event == "started":
            started.set()

    req = ScanRequest(duration_s=30.0)
    task = asyncio.create_task(
        scan_inventory(fleet.inventory(), req, progress, client_options=fleet.client_options)
    )
    await asyncio.wait_for(started.wait(), 20.0)
    await asyncio.sleep(0.3)
    pids = fleet.pids
    assert len(pids) == 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(pids, 5.0) == []


async def test_ssh_config_host_alias_is_honoured(fleet: SSHFleet, tmp_path) -> None:
    a = await fleet.add("node-1")
    b = await fleet.add("node-2")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host alias-b\n  HostName {b.address}\n  Port {b.port}\n")
    inventory = fleet.inventory()
    inventory = type(inventory)(
        hosts=(Host(name="node-1", address=a.address, port=a.port), Host("node-2", "alias-b")),
        ssh=inventory.ssh,
        probe=inventory.probe,
    )
    options = {**fleet.client_options, "config": [str(config)]}
    req = ScanRequest()
    c = await scan_inventory(inventory, req, None, client_options=options)
    assert c.status["node-2"].status == "ok", c.status["node-2"].error
    assert c.hello["node-2"]["address"] == b.address  # bound where the alias led


async def test_hosts_reached_through_a_jump_host(fleet: SSHFleet) -> None:
    for i in range(2):
        await fleet.add(f"node-{i + 1}")
    bastion = await fleet.add("bastion", forwarding=True)
    fleet.hosts.remove(bastion)  # the bastion is not scanned, only crossed
    inventory = fleet.inventory(jump=f"{bastion.address}:{bastion.port}")
    c = await scan(fleet, inventory)
    assert {n: s.status for n, s in c.status.items()} == {"node-1": "ok", "node-2": "ok"}
    assert not bastion.pids  # nothing ran on the bastion
    # through a tunnel the agents bind the inventory address
    assert [c.hello[n]["address"] for n in ("node-1", "node-2")] == [h.address for h in fleet.hosts]


async def test_concurrency_bounds_the_handshakes(fleet: SSHFleet) -> None:
    for i in range(4):
        await fleet.add(f"node-{i + 1}")
    c = await scan(fleet, fleet.inventory(), concurrency=1)
    assert all(s.status == "ok" for s in c.status.values())
    assert fleet.max_handshaking == 1


async def test_silent_server_times_out(fleet: SSHFleet) -> None:
    """A port that accepts TCP but never speaks SSH: the host fails after connect_timeout."""
    await fleet.add("node-1")
    await fleet.add("node-2")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        mute = Host(name="node-mute", address="127.0.0.1", port=silent.getsockname()[1])
        started = time.monotonic()
        c = await scan(fleet, fleet.inventory(extra=[mute], connect_timeout=1.0))
    finally:
        silent.close()
    assert c.status["node-mute"].status == "unreachable"
    assert "timed out" in c.status["node-mute"].error
    assert c.status["node-1"].status == c.status["node-2"].status == "ok"
    assert time.monotonic() - started < 15.0
