"""Clean hosts, against a real OpenSSH sshd: the remote command has a hard lifetime.

Closing an SSH channel without a terminal signals nothing to the remote process, so
without a lifetime a hung interpreter (here: a "python" that only sleeps) or an agent
stopped with SIGSTOP would stay on the host forever. With ``bootstrap_command``'s
``lifetime_s`` (``timeout -k 5 T``) both are gone once it passes; an agent stopped and
then continued after its channel closed exits at once on stdin EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from pathlib import Path

import asyncssh
import pytest

from cwctl.chrony.feeders import FeederSettings
from cwctl.probe.bootstrap import KILL_AFTER_S, agent_payload, bootstrap_command
from tests.integration.realsshd import ADDRESSES, Sshd, needs_sshd, sshd
from tests.integration.sshfleet import cmdline, descendants, parent, pid_alive, wait_gone

__all__ = ["sshd"]
pytestmark = needs_sshd


def _state(pid: int) -> str:
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return ""


async def _find(sshd: Sshd, needle: str, timeout_s: float = 10.0) -> list[int]:
    """PIDs under sshd whose command line holds ``needle`` (waiting for them to appear),
    but for a fork not yet exec'd: a child an agent forks to run a command (the clock
    watch's ``ctypes.util.find_library`` runs ldconfig) holds its parent's command line
    until it execs, and on a loaded machine the scan can catch it there (CI stop 31's
    make test here: two "agents", one gone a moment later)."""
    for _ in range(int(timeout_s / 0.05)):
        lines = {p: cmdline(p) for p in descendants(sshd.proc.pid)}
        pids = [p for p, line in lines.items() if needle in line]
        pids = [p for p in pids if lines.get(parent(p) or 0) != lines[p]]
        if pids:
            return pids
        await asyncio.sleep(0.05)
    raise AssertionError(f"no process with {needle!r} under sshd")


async def _connect(sshd: Sshd) -> asyncssh.SSHClientConnection:
    return await asyncssh.connect(
        ADDRESSES[0],
        sshd.port,
        known_hosts=str(sshd.known_hosts),
        username="root" if os.geteuid() == 0 else None,
        **sshd.client_options,  # type: ignore[arg-type]
    )


async def test_a_hung_interpreter_leaves_nothing_behind(sshd: Sshd, tmp_path: Path) -> None:
    hung = tmp_path / "hung-python"
    hung.write_text("#!/bin/sh\nexec sleep 3600\n")  # never reads its stdin, never exits
    hung.chmod(0o755)
    conn = await _connect(sshd)
    await conn.create_process(bootstrap_command(str(hung), lifetime_s=2), encoding=None)
    sleeper = await _find(sshd, "sleep 3600")
    conn.close()  # the scan gave up on it: the channel closes, nothing is signalled
    await conn.wait_closed()
    await asyncio.sleep(0.5)
    assert os.path.exists(f"/proc/{sleeper[0]}")  # still there after its channel closed
    assert await wait_gone(sleeper, 2 + KILL_AFTER_S + 5.0) == []  # but not past the lifetime


async def test_without_a_lifetime_the_hung_interpreter_would_stay(
    sshd: Sshd, tmp_path: Path
) -> None:
    """The check above can fail: without the lifetime the sleep outlives its channel."""
    hung = tmp_path / "hung-python"
    hung.write_text("#!/bin/sh\nexec sleep 3601\n")
    hung.chmod(0o755)
    conn = await _connect(sshd)
    await conn.create_process(bootstrap_command(str(hung)), encoding=None)
    sleeper = await _find(sshd, "sleep 3601")
    conn.close()
    await conn.wait_closed()
    try:
        assert await wait_gone(sleeper, 3.0) == sleeper  # still alive after the channel closed
    finally:
        for pid in sleeper:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def _start_agent(
    sshd: Sshd, lifetime_s: float | None
) -> tuple[asyncssh.SSHClientConnection, int]:
    python = sshd.inventory().ssh.python
    conn = await _connect(sshd)
    proc = await conn.create_process(bootstrap_command(python, lifetime_s=lifetime_s),
                                     encoding=None)  # fmt: skip
    params = {"host": "sshd-1", "bind": ADDRESSES[0], "port": 0, "deadline_s": 600.0}
    proc.stdin.write(agent_payload(params))
    hello = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert b"hello" in hello, (hello, await proc.stderr.read(2000))  # the agent runs
    agents = [p for p in await _find(sshd, "cwctl-agent") if cmdline(p).startswith(python)]
    assert len(agents) == 1, [cmdline(p) for p in agents]
    return conn, agents[0]


async def test_a_stopped_agent_is_gone_at_its_lifetime(sshd: Sshd) -> None:
    conn, agent = await _start_agent(sshd, lifetime_s=3)
    os.kill(agent, signal.SIGSTOP)
    await asyncio.sleep(0.2)
    assert _state(agent) == "T"  # stopped: it cannot see its stdin close
    conn.close()
    await conn.wait_closed()
    assert await wait_gone([agent], 3 + KILL_AFTER_S + 5.0) == []


async def test_a_stopped_then_continued_agent_exits_on_its_closed_channel(sshd: Sshd) -> None:
    conn, agent = await _start_agent(sshd, lifetime_s=600)  # the lifetime is not what ends it
    os.kill(agent, signal.SIGSTOP)
    conn.close()
    await conn.wait_closed()
    await asyncio.sleep(1.0)
    assert _state(agent) == "T"  # still there, stopped
    os.kill(agent, signal.SIGCONT)
    assert await wait_gone([agent], 5.0) == []  # continued: stdin EOF ends it at once


@pytest.mark.parametrize("outer_guard", [False, True])
async def test_a_feeder_lives_on_its_lease_past_its_boot_lifetime(
    sshd: Sshd, tmp_path: Path, outer_guard: bool
) -> None:
    """A feeder (cwctl sync) gets a short lifetime for its start, then re-arms its own
    alarm as a lease: over SSH it must run without timeout(1) (fleet_for says so), or
    timeout(1) ends it at the boot lifetime (the counter-check)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / "cwc.sock"))  # where chronyd's refclock would listen
    python = sshd.inventory().ssh.python
    conn = await _connect(sshd)
    command = bootstrap_command(python, lifetime_s=2, outer_guard=outer_guard)
    proc = await conn.create_process(command, encoding=None)
    params = FeederSettings(idle_exit_s=30).params("sshd-1", str(tmp_path / "cwc.sock"))
    proc.stdin.write(agent_payload(params))
    hello = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert b"hello" in hello, (hello, await proc.stderr.read(2000))
    feeder = [p for p in await _find(sshd, "cwctl-agent") if cmdline(p).startswith(python)]
    try:
        await asyncio.sleep(2 + (KILL_AFTER_S if outer_guard else 0) + 1.5)
        assert [p for p in feeder if pid_alive(p)] == ([] if outer_guard else feeder)
    finally:
        conn.close()
        await conn.wait_closed()
        listener.close()
    assert await wait_gone(feeder, 15.0) == []  # its channel closed: EOF ends it


@pytest.mark.parametrize("lifetime", [0.2, 2.4, 59.5])
def test_lifetime_is_whole_seconds_and_keeps_a_fallback(lifetime: float) -> None:
    command = bootstrap_command("python3", lifetime_s=lifetime)
    assert f"exec timeout -k {KILL_AFTER_S} {max(1, -(-lifetime // 1)):.0f} python3 -c " in command
    assert command.startswith("command -v timeout >/dev/null 2>&1 && ")
    assert "; exec python3 -c " in command  # a host without timeout(1) still runs the agent
    # ... with the same lifetime as its own alarm (the last argument of the bootstrap)
    assert command.endswith(f" {max(1, -(-lifetime // 1)):.0f}")
    alarm_only = bootstrap_command("python3", lifetime_s=lifetime, outer_guard=False)
    assert alarm_only.startswith("python3 -c ") and "timeout" not in alarm_only
    assert alarm_only.endswith(f" {max(1, -(-lifetime // 1)):.0f}")
