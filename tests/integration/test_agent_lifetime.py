"""Every agent ends by itself, whatever happens to cwctl: each launcher, for real.

Two ways out, checked per launcher (local subprocesses, ``cwctl sync``'s feeders, the
srun step; SSH in test_clean_hosts.py): stdin EOF (cwctl SIGKILLed: its pipes close)
ends an agent at once, and the hard lifetime (``bootstrap_argv``'s ``signal.alarm``;
a feeder's lease) ends one whose cwctl hangs with the pipe open. Each lifetime check has
its counter-check: without the lifetime the same agent would still be there. Bounds are
generous polls, never a claim on speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cwctl.chrony.feeders import BOOT_LIFETIME_S, FeederSettings, close_feeder, open_feeder
from cwctl.chrony.fleet import fleet_for
from cwctl.probe.bootstrap import agent_bundle, agent_payload
from cwctl.probe.chronysock import LEASE_SLACK_S
from cwctl.scan.collection import HostInfo
from cwctl.scan.request import ScanRequest
from cwctl.transport.local import LocalSession, launch_local, local_hosts
from cwctl.transport.slurm import SrunStep
from tests.integration.sshfleet import cmdline, descendants, pid_alive, wait_gone
from tests.unit.test_chrony_sample import _listen

REPO = Path(__file__).resolve().parents[2]
LONG_S = 600.0  # a deadline that is never what ends an agent here


def _cwctl(*args: str, tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    """``cwctl ARGS`` as its own process: the operator's side, to be SIGKILLed."""
    return subprocess.Popen(
        [sys.executable, "-m", "cwctl", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state"), **env},
    )


def _wait_for(find: Any, what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := find():
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout_s:g} s")


def _left_running(pids: list[int], bound_s: float) -> list[int]:
    """The PIDs still alive after a poll of up to ``bound_s``, SIGKILLed so that a failing
    check leaves nothing behind on the shared machine."""
    left = asyncio.run(wait_gone(pids, bound_s))
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def _lifetime_of(pid: int) -> int:
    """The hard lifetime on an agent's command line (``python -c CODE LIFETIME``)."""
    return int(cmdline(pid).split()[-1])


def _params(info: HostInfo, **extra: Any) -> dict[str, Any]:
    return {"host": info.name, "bind": info.address, "port": 0, "deadline_s": LONG_S, **extra}


async def _status(proc: asyncio.subprocess.Process) -> int:
    """The exit status of an agent already gone (reaped by now, or within a few seconds)."""
    return await asyncio.wait_for(proc.wait(), 10.0)


async def _hello(session: LocalSession) -> dict[str, Any]:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await asyncio.wait_for(session.read(), 30.0)
        assert chunk, "the agent ended before its hello"
        line += chunk
    hello = json.loads(line.split(b"\n")[0])
    assert hello["type"] == "hello", hello
    return hello


def _agents_under(root: int, n: int) -> list[int]:
    """The agents below ``root`` once there are ``n`` of them (else [])."""
    found = [p for p in descendants(root) if "cwctl-agent" in cmdline(p)]
    return found if len(found) == n else []


# --- local ----------------------------------------------------------------------------


def test_local_agents_end_on_eof_when_cwctl_is_killed(tmp_path: Path) -> None:
    cwctl = _cwctl("scan", "--local", "2", "--duration", "60", tmp_path=tmp_path)
    try:
        agents = _wait_for(lambda: _agents_under(cwctl.pid, 2), "two local agents")
        lifetime = _lifetime_of(agents[0])
        assert lifetime > 60  # the scan's window and grace, then the slack
        time.sleep(1.0)  # hello, start: probing
        assert all(pid_alive(p) for p in agents)
    finally:
        cwctl.kill()
        cwctl.wait()
    # EOF on stdin ends them, long before their 60 s window or their lifetime would
    assert _left_running(agents, 20.0) == []


async def test_a_local_agent_whose_cwctl_hangs_mid_bundle_ends_at_its_lifetime() -> None:
    a, b = local_hosts(2)
    bounded = await launch_local(a, lifetime_s=2)
    unbounded = await launch_local(b)  # the counter-check: no lifetime
    half = agent_payload(_params(a))[: len(agent_bundle()) // 2]
    for s in (bounded, unbounded):
        await s.send(half)  # ... and then nothing, the pipe held open: cwctl hangs
    try:
        assert await wait_gone([bounded.pid], 2 + 15.0) == []
        assert await _status(bounded.proc) == -signal.SIGALRM
        assert pid_alive(unbounded.pid)  # without a lifetime it would wait for ever
        assert unbounded.proc.stdin is not None
        unbounded.proc.stdin.close()  # ... until its stdin closes: EOF ends it too
        assert await wait_gone([unbounded.pid], 15.0) == []
        assert await _status(unbounded.proc) not in (0, None)  # a truncated bundle
    finally:
        for s in (bounded, unbounded):
            await s.close()


async def test_a_running_local_agent_whose_cwctl_hangs_ends_at_its_lifetime() -> None:
    info = local_hosts(2)[0]
    session = await launch_local(info, lifetime_s=3)
    try:
        await session.send(agent_payload(_params(info)))  # its own deadline: 600 s
        await _hello(session)  # bound and answering; no start ever comes, stdin stays open
        assert await wait_gone([session.pid], 3 + 15.0) == []
        assert await _status(session.proc) == -signal.SIGALRM
    finally:
        await session.close()


async def test_a_running_local_agent_ends_at_once_on_eof() -> None:
    info = local_hosts(2)[0]
    session = await launch_local(info, lifetime_s=LONG_S)
    try:
        await session.send(agent_payload(_params(info)))
        await _hello(session)
        assert session.proc.stdin is not None
        session.proc.stdin.close()
        assert await wait_gone([session.pid], 15.0) == []
        assert await _status(session.proc) == 0  # its own way out, with a summary
    finally:
        await session.close()


# --- cwctl sync's feeders -------------------------------------------------------------

FEEDER_SIDE = """
import asyncio, sys
from cwctl.chrony.feeders import FeederSettings, open_feeder
from cwctl.transport.local import launch_local, local_hosts

async def main():
    info = local_hosts(2)[1]
    params = FeederSettings(period_s=0.05, idle_exit_s=600).params(info.name, sys.argv[1])
    feeder = await open_feeder(launch_local, info, params)
    print(feeder.hello["pid"], flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_a_feeder_ends_on_eof_when_cwctl_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "cwc.sock"
    listener = _listen(path)  # where chronyd's SOCK refclock would listen
    side = subprocess.Popen(
        [sys.executable, "-c", FEEDER_SIDE, str(path)], cwd=REPO, stdout=subprocess.PIPE
    )
    try:
        assert side.stdout is not None
        feeder = int(side.stdout.readline())
        assert pid_alive(feeder)
    finally:
        side.kill()
        side.wait()
        listener.close()
    assert _left_running([feeder], 20.0) == []  # long before its 600 s idle exit


@pytest.mark.parametrize("past_lease", [True, False])
async def test_a_feeder_that_cannot_run_dies_at_its_lease(tmp_path: Path, past_lease: bool) -> None:
    """Stopped (SIGSTOP) past its lease, then continued: the alarm that fell due while it
    was stopped ends it before it runs a line. The counter-check: continued after its
    idle exit but before its lease, it runs on and leaves by itself, status 0."""
    path = tmp_path / "cwc.sock"
    listener = _listen(path)
    info = local_hosts(2)[1]
    idle_s = 1
    params = FeederSettings(period_s=0.05, idle_exit_s=idle_s).params(info.name, str(path))
    feeder = await open_feeder(launch_local, info, params)
    proc = feeder.session.proc  # type: ignore[attr-defined]
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # it cannot run: as good as hung
        await asyncio.sleep(idle_s + (LEASE_SLACK_S + 2.0 if past_lease else 1.0))
        os.kill(proc.pid, signal.SIGCONT)
        assert await wait_gone([proc.pid], 15.0) == []
        assert await _status(proc) == (-signal.SIGALRM if past_lease else 0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        await close_feeder(feeder)
        listener.close()
    if not past_lease:
        assert feeder.summary is not None and feeder.summary["reason"] == "no word from cwctl"


async def test_a_local_feeder_starts_with_the_boot_lifetime_and_lives_on_its_lease(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cwc.sock"
    listener = _listen(path)
    info = local_hosts(2)[1]
    fleet = fleet_for(ScanRequest(local=2))
    params = FeederSettings(period_s=0.05, idle_exit_s=30).params(info.name, str(path))
    feeder = await open_feeder(fleet.launch, info, params)  # as cwctl sync starts one
    proc = feeder.session.proc  # type: ignore[attr-defined]
    try:
        assert _lifetime_of(proc.pid) == BOOT_LIFETIME_S
    finally:
        await close_feeder(feeder)
    assert await _status(proc) == 0  # EOF
    # the lease replaces the boot lifetime: a feeder booted with 2 s lives on past them
    feeder = await open_feeder(partial(launch_local, lifetime_s=2), info, params)
    proc = feeder.session.proc  # type: ignore[attr-defined]
    try:
        await asyncio.sleep(3.5)
        assert feeder.alive and proc.returncode is None
    finally:
        await close_feeder(feeder)
        listener.close()
    assert await _status(proc) == 0 and feeder.summary is not None
    assert feeder.summary["reason"] == "stdin closed"


# --- the srun step (a real Slurm) -----------------------------------------------------


@pytest.fixture(scope="module")
def slurm() -> Iterator[Any]:
    from slurmbed import SlurmCluster, skip_without_slurm

    skip_without_slurm()
    with SlurmCluster(2, prefix=f"lt{os.getpid() % 10000}") as cluster:
        yield cluster


def _step_agents(nodes: list[str]) -> list[int]:
    """The agent tasks Slurm runs on ``nodes`` (their environment names the node)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and "cwctl-agent" in cmdline(int(entry.name)):
            with contextlib.suppress(OSError):
                env = (entry / "environ").read_bytes().split(b"\0")
                if any(v.startswith(b"SLURMD_NODENAME=") and v[16:].decode() in nodes
                       for v in env):  # fmt: skip
                    out.append(int(entry.name))
    return out


@pytest.mark.slurm
def test_srun_agents_end_when_cwctl_is_killed(slurm: Any, tmp_path: Path) -> None:
    inv = tmp_path / "inv.toml"
    inv.write_text(slurm.inventory_text(duration_s=60.0))
    cwctl = _cwctl("scan", "-i", str(inv), "--via", "slurm", tmp_path=tmp_path,
                   SLURM_CONF=str(slurm.conf))  # fmt: skip
    agents: list[int] = []
    srun: list[int] = []
    try:
        agents = _wait_for(
            lambda: (a := _step_agents(slurm.nodes)) and len(a) == slurm.n and a,
            "an agent on every node",
        )
        srun = [p for p in descendants(cwctl.pid) if cmdline(p).startswith("srun ")]
        assert srun  # srun (and the helper it forks)
        assert _lifetime_of(agents[0]) > 60
        time.sleep(1.0)
        assert all(pid_alive(p) for p in agents)
    finally:
        cwctl.kill()
        cwctl.wait()
        # srun (a session of its own) sees its stdin close and passes the EOF on
        left = _left_running(agents + srun, 60.0)
    assert left == []


@pytest.mark.slurm
async def test_srun_agents_whose_cwctl_hangs_end_at_their_lifetime(
    slurm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts = [HostInfo(name=n, address=a) for n, a in slurm.addresses.items()]
    step = SrunStep(hosts, python="python3", lifetime_s=4)
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    try:
        for info in hosts:
            session = await step.launch(info)
            await session.send(agent_payload(_params(info)))
        agents = await asyncio.to_thread(
            _wait_for, lambda: (a := _step_agents(slurm.nodes)) and len(a) == slurm.n and a,
            "an agent on every node",
        )  # fmt: skip
        assert {_lifetime_of(p) for p in agents} == {4}
        # nothing more is said and srun's stdin stays open: only the lifetime ends them
        assert await wait_gone(agents, 4 + 30.0) == []
    finally:
        await step.close()
