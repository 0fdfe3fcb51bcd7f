"""The ``local`` transport: N agents as subprocesses of this machine, on loopback.

Each agent is started through the same bootstrap as over SSH (``python -c CODE``, the
bundle on stdin) and binds its own loopback address, ``127.0.0.2``, ``127.0.0.3``, ...,
so the probes are real UDP packets with real kernel timestamps. Every agent reads the
same clock, so the true offsets are all zero: an accuracy test on real hardware.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from functools import partial

from cwctl import settings
from cwctl.errors import InputError
from cwctl.fabric.names import local_host_names
from cwctl.inventory import ProbeSettings
from cwctl.probe.bootstrap import bootstrap_argv
from cwctl.scan.collection import Collection, HostInfo
from cwctl.scan.request import Progress, ScanRequest
from cwctl.transport.base import hard_lifetime_s, run_scan
from cwctl.transport.hostrun import HostFailure, end_process, read_tail
from cwctl.transport.plan import request_plan


def local_hosts(n: int) -> list[HostInfo]:
    """``local-01`` ... bound to 127.0.0.2 ..."""
    if not settings.LOCAL_MIN <= n <= settings.LOCAL_MAX:
        raise InputError(
            f"--local {n}: give between {settings.LOCAL_MIN} and {settings.LOCAL_MAX} agents"
        )
    return [
        HostInfo(name=name, address=f"127.0.0.{2 + i}")
        for i, name in enumerate(local_host_names(n))
    ]


class LocalSession:
    """An agent subprocess: its pipes and exit status."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._stderr = asyncio.create_task(self._read_stderr())

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def _read_stderr(self) -> str:
        assert self.proc.stderr is not None
        return await read_tail(self.proc.stderr.read)

    async def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def read(self) -> bytes:
        assert self.proc.stdout is not None
        return await self.proc.stdout.read(1 << 16)

    async def finish(self) -> tuple[int | None, str | None, str]:
        code = await self.proc.wait()
        stderr = await self._stderr
        if code < 0:
            return None, signal.Signals(-code).name.removeprefix("SIG"), stderr
        return code, None, stderr

    async def close(self) -> None:
        """Close stdin (the agent exits on EOF); terminate, then kill, if it lingers."""
        await end_process(self.proc, ((None, 2.0), (signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._stderr), 1.0)


async def launch_local(
    info: HostInfo, python: str = sys.executable, *, lifetime_s: float | None = None
) -> LocalSession:
    """Start one agent; ``lifetime_s``: its hard lifetime (``bootstrap_argv``)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *bootstrap_argv(python, lifetime_s=lifetime_s),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise HostFailure("error", f"{info.name}: cannot start {python}: {exc.strerror}") from None
    return LocalSession(proc)


class LocalSource:
    """``request.local`` agents on this machine's loopback: real packets, one clock."""

    name = "local"

    def __init__(self, request: ScanRequest) -> None:
        if request.local is None:
            raise InputError("the local source needs --local N")
        self.hosts = local_hosts(request.local)

    async def scan(self, request: ScanRequest, progress: Progress | None = None) -> Collection:
        """Run the agents and bring their records home."""
        plan = request_plan(request, self.hosts, ProbeSettings(), "local")
        launch = partial(launch_local, lifetime_s=hard_lifetime_s(plan))
        return await run_scan(plan, launch, progress)

    async def aclose(self) -> None:
        """Nothing outlives a scan: its agents exit with it."""
