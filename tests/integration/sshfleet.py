"""An in-process SSH fleet that runs the real agent (used by the transport tests).

``SSHFleet`` listens with asyncssh on loopback addresses (one listener per host, each
with its own host key, at 127.0.0.N), and its process factory runs the command the
client sent (the real bootstrap) as a subprocess, pumping stdin/stdout/stderr between
it and the channel. Every agent PID is recorded so tests can check none is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from cwctl.inventory import Host, Inventory, ProbeSettings, SSHDefaults

GARBAGE_AFTER_LINES = 3  # a "garbage" host injects a bad line after this many stdout lines


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def parent(pid: int) -> int | None:
    """``pid``'s parent, from /proc (None once it is gone)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return None


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, their children...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            ppid = parent(int(entry.name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def cmdline(pid: int) -> str:
    """``pid``'s command line, arguments joined by spaces ("" once it is gone)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


async def wait_gone(pids: Iterable[int], timeout_s: float = 8.0) -> list[int]:
    """The PIDs still alive after waiting up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        alive = [p for p in alive if pid_alive(p)]
    return alive


def free_tcp_port(address: str = "127.0.0.1") -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@dataclass
class FakeHost:
    name: str
    address: str
    port: int
    host_key: asyncssh.SSHKey
    mode: str = "normal"  # normal | garbage
    pids: list[int] = field(default_factory=list)


class SSHFleet:
    """In-process sshd-alikes on 127.0.0.N that run the real agent as subprocesses."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.hosts: list[FakeHost] = []
        self.servers: list[asyncssh.SSHAcceptor] = []
        self.handlers: set[asyncio.Task[Any]] = set()
        self.known_hosts = tmp_path / "known_hosts"
        self.handshaking = 0  # connections not yet authenticated, now
        self.max_handshaking = 0  # ... and at most, over the fleet's life
        self._listen: dict[str, Callable[[int], Awaitable[asyncssh.SSHAcceptor]]] = {}

    @property
    def pids(self) -> list[int]:
        return [pid for h in self.hosts for pid in h.pids]

    async def add(
        self,
        name: str,
        *,
        mode: str = "normal",
        authorized: asyncssh.SSHKey | None = None,
        known: bool = True,
        forwarding: bool = False,
    ) -> FakeHost:
        """One more host; ``authorized`` another client key (auth will fail), ``known``
        whether its host key goes into the fleet's known_hosts file, ``forwarding``
        whether it lets clients open TCP connections through it (a jump host)."""
        address = f"127.0.0.{2 + len(self.hosts)}"
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client = authorized or self.client_key
        authorized_keys = asyncssh.import_authorized_keys(
            client.export_public_key("openssh").decode()
        )
        host = FakeHost(name, address, 0, host_key, mode)

        async def process_factory(process: asyncssh.SSHServerProcess[bytes]) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.handlers.add(task)
            try:
                await run_command(process, host)
            finally:
                self.handlers.discard(task)

        async def listen(port: int) -> asyncssh.SSHAcceptor:
            return await asyncssh.listen(
                address,
                port,
                server_host_keys=[host_key],
                authorized_client_keys=authorized_keys,
                process_factory=process_factory,
                server_factory=lambda: _FleetServer(self, forwarding),
                encoding=None,
                allow_scp=False,
                reuse_address=True,
            )

        server = await listen(0)
        host.port = server.sockets[0].getsockname()[1]
        self._listen[name] = listen
        self.servers.append(server)
        self.hosts.append(host)
        if known:
            self.trust(host)
        return host

    async def stop(self, host: FakeHost) -> None:
        """The host goes away: its server stops listening (a scan finds it unreachable)."""
        server = self.servers[self.hosts.index(host)]
        server.close()
        await server.wait_closed()

    async def start(self, host: FakeHost) -> None:
        """The host comes back, on the same address, port and host key."""
        self.servers[self.hosts.index(host)] = await self._listen[host.name](host.port)

    def trust(self, host: FakeHost, key: asyncssh.SSHKey | None = None) -> None:
        key = key or host.host_key
        line = f"[{host.address}]:{host.port} {key.export_public_key('openssh').decode()}"
        with self.known_hosts.open("a") as f:
            f.write(line.strip() + "\n")

    def inventory(
        self,
        *,
        extra: Iterable[Host] = (),
        python: str | None = None,
        probe: ProbeSettings | None = None,
        **ssh: Any,
    ) -> Inventory:
        hosts = [Host(name=h.name, address=h.address, port=h.port) for h in self.hosts]
        hosts += list(extra)
        defaults = {
            "known_hosts": str(self.known_hosts),
            "connect_timeout": 5.0,
            "python": python or os.environ.get("CWCTL_TEST_PYTHON", _python()),
        }
        defaults.update(ssh)
        return Inventory(
            hosts=tuple(hosts),
            ssh=SSHDefaults(**defaults),
            probe=probe or ProbeSettings(duration=0.5, rate=40.0, peers=2, ports=2),
        )

    @property
    def client_options(self) -> dict[str, Any]:
        """asyncssh options that keep the developer's ~/.ssh out of the tests."""
        return {"config": None, "agent_path": None, "client_keys": [self.client_key]}

    async def close(self) -> None:
        for server in self.servers:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()
        for task in list(self.handlers):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 5.0)


class _FleetServer(asyncssh.SSHServer):
    """Counts connections still in their handshake; a jump host allows direct-tcpip."""

    def __init__(self, fleet: SSHFleet, forwarding: bool) -> None:
        self.fleet = fleet
        self.forwarding = forwarding
        self.counted = False

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.counted = True
        self.fleet.handshaking += 1
        self.fleet.max_handshaking = max(self.fleet.max_handshaking, self.fleet.handshaking)

    def _done(self) -> None:
        if self.counted:
            self.counted = False
            self.fleet.handshaking -= 1

    def auth_completed(self) -> None:
        self._done()

    def connection_lost(self, exc: Exception | None) -> None:
        self._done()

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        return self.forwarding


def interpreter_pid(pid: int) -> int:
    """The agent's interpreter: ``pid`` itself, or its child when ``pid`` is the
    timeout(1) that bounds the agent's lifetime."""
    from pathlib import Path

    if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"timeout\0"):
        return pid
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    return int(entry.name)
    return pid


def _python() -> str:
    import sys

    return sys.executable


async def run_command(process: asyncssh.SSHServerProcess[bytes], host: FakeHost) -> None:
    """What sshd does with an exec request: run it, pump the three streams, report exit."""
    # exec: the shell becomes the command, so the PID recorded is the agent's own (or that
    # of timeout(1) bounding its lifetime: a command that execs by itself runs as it is)
    command = process.command or "true"
    proc = await asyncio.create_subprocess_shell(
        command if "exec " in command else f"exec {command}",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    host.pids.append(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    async def pump_in() -> None:
        try:
            while data := await process.stdin.read(1 << 16):
                proc.stdin.write(data)
                await proc.stdin.drain()
        except (asyncssh.Error, OSError, ConnectionError):
            pass
        finally:
            with contextlib.suppress(Exception):
                proc.stdin.close()  # channel EOF or gone: the agent sees stdin EOF

    async def pump_out(reader: asyncio.StreamReader, writer: Any, garbage: bool) -> None:
        lines = 0
        dead = False
        while data := await (reader.readline() if garbage else reader.read(1 << 16)):
            if garbage:
                lines += 1
                if lines == GARBAGE_AFTER_LINES + 1:
                    data = b"this is {not a record\n" + data
            if dead:
                continue
            try:
                writer.write(data)
            except (asyncssh.Error, OSError, ConnectionError):
                dead = True  # keep draining so the agent never blocks

    feeder = asyncio.create_task(pump_in())
    try:
        await asyncio.gather(
            pump_out(proc.stdout, process.stdout, host.mode == "garbage"),
            pump_out(proc.stderr, process.stderr, False),
        )
        code = await proc.wait()
        with contextlib.suppress(Exception):
            if code < 0:
                process.exit_with_signal(signal.Signals(-code).name.removeprefix("SIG"))
            else:
                process.exit(code)
    finally:
        feeder.cancel()
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 3.0)
            except TimeoutError:
                proc.kill()
                await proc.wait()
