"""The ``ssh`` transport: an agent on every inventory host, through asyncssh.

Host keys are checked against known_hosts (the inventory's, else ``~/.ssh/known_hosts``)
on every connection; an unknown or changed key fails that host with a message naming
the host and the key's fingerprint. ``--accept-new-host-keys`` trusts a key the file
does not know yet (first use) and records it there; a changed key is refused always.
``~/.ssh/config`` (Host aliases, User, Port, IdentityFile, ProxyJump) and ssh-agent
keys are honoured through one ``SSHClientConnectionOptions`` built once; the
inventory's jump host is one shared tunnel connection. Handshakes are bounded by a
semaphore (``--concurrency``, default 128: sshd's MaxStartups drops unauthenticated
connections beyond its limit). One host's failure never stops the scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import getpass
import os
import resource
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cwctl.errors import InputError
from cwctl.inventory import Endpoint, Inventory, load_inventory
from cwctl.inventory.local import identity_problem
from cwctl.inventory.model import jump_parts
from cwctl.probe.bootstrap import bootstrap_command
from cwctl.scan.collection import Collection, HostInfo
from cwctl.scan.pathcache import PathCache
from cwctl.scan.request import Progress, ScanRequest
from cwctl.transport.base import hard_lifetime_s, run_scan
from cwctl.transport.hostrun import HostFailure, read_tail
from cwctl.transport.plan import inventory_plan
from cwctl.transport.sshlib import asyncssh

# AES-GCM first: with AES-NI it costs far less per packet than asyncssh's ChaCha20-Poly1305
# (which builds a cipher object per packet), and the record streams are many packets.
# Every OpenSSH since 6.2 offers it; the rest of asyncssh's list follows as fallback.
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)
KEEPALIVE_INTERVAL_S = 5.0
KEEPALIVE_COUNT_MAX = 3


def known_hosts_line(address: str, port: int, key: asyncssh.SSHKey) -> str:
    """An OpenSSH known_hosts line for ``key`` at ``address:port``."""
    pattern = address if port == 22 else f"[{address}]:{port}"
    return f"{pattern} {key.export_public_key('openssh').decode().strip()}\n"


class SSHSession:
    """The bootstrap running on one host over one SSH connection."""

    def __init__(
        self,
        conn: asyncssh.SSHClientConnection,
        proc: asyncssh.SSHClientProcess,
        bind_address: str | None = None,
    ) -> None:
        self.conn = conn
        self.proc = proc
        self.bind_address = bind_address  # where the agent binds: the address we reached
        self._stderr = asyncio.create_task(self._read_stderr())

    async def _read_stderr(self) -> str:
        return await read_tail(self.proc.stderr.read, stop_on=(asyncssh.Error, OSError))

    async def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def read(self) -> bytes:
        try:
            return await self.proc.stdout.read(1 << 16)
        except (asyncssh.Error, BrokenPipeError) as exc:
            raise ConnectionError(str(exc)) from None

    async def finish(self) -> tuple[int | None, str | None, str]:
        await self.proc.wait_closed()
        stderr = await self._stderr
        signal = self.proc.exit_signal
        if signal is not None:
            return None, str(signal[0]), stderr
        return self.proc.exit_status, None, stderr

    async def close(self) -> None:
        """Close stdin (the agent exits on EOF), then the channel and the connection."""
        with contextlib.suppress(Exception):
            self.proc.stdin.write_eof()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait_closed(), 2.0)
        self.proc.close()
        self.conn.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.conn.wait_closed(), 2.0)
        if not self._stderr.done():
            self._stderr.cancel()


USER_VARS = ("LOGNAME", "USER", "LNAME", "USERNAME")  # where getpass looks first


def pin_local_username() -> None:
    """asyncssh asks ``getpass.getuser()`` for the local user name at every connect;
    without one of ``USER_VARS`` set (cron, CI, systemd) that reads the password database,
    which cannot be opened once a wide scan has used up the descriptors (EMFILE), and the
    connect then fails with "Unknown local username". Ask once, now, while they are free."""
    if not any(os.environ.get(v) for v in USER_VARS):
        with contextlib.suppress(KeyError, OSError):
            os.environ["LOGNAME"] = getpass.getuser()


class SSHLauncher:
    """Opens SSH sessions to inventory hosts and starts the agent bootstrap on each."""

    def __init__(
        self,
        inventory: Inventory,
        *,
        accept_new_host_keys: bool = False,
        concurrency: int | None = None,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.inventory = inventory
        pin_local_username()
        ssh = inventory.ssh
        self.lifetime_s: float | None = None  # the remote command's hard lifetime, per scan
        self.outer_guard = True  # timeout(1) enforces it too (not for a feeder's lease)
        self.accept_new = accept_new_host_keys
        self.semaphore = asyncio.Semaphore(concurrency or ssh.concurrency)
        self.known_hosts_path = Path(ssh.known_hosts or "~/.ssh/known_hosts").expanduser()
        self._known_text = self._read_known_hosts()
        kwargs: dict[str, Any] = {
            "connect_timeout": ssh.connect_timeout,
            "login_timeout": ssh.connect_timeout,
            "keepalive_interval": KEEPALIVE_INTERVAL_S,
            "keepalive_count_max": KEEPALIVE_COUNT_MAX,
            "encryption_algs": PREFERRED_CIPHERS,
        }
        if ssh.identity:
            problem = identity_problem(inventory)  # what `cwctl inventory check` says too
            if problem is not None:
                raise InputError(problem)
            kwargs["client_keys"] = [str(Path(ssh.identity).expanduser())]
        kwargs.update(client_options or {})
        # ~/.ssh/config is parsed per host at connect time (Host blocks match the name
        # given); the shared options carry everything else.
        config = kwargs.pop("config", ())
        if config == ():
            default = Path("~/.ssh/config").expanduser()
            config = [str(default)] if os.access(default, os.R_OK) else []
        self.config_paths: list[str] = [] if config is None else list(config)
        kwargs["config"] = None
        try:
            self.options = asyncssh.SSHClientConnectionOptions(**kwargs)
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise InputError(f"ssh settings: {exc}") from None
        self._tunnel: asyncssh.SSHClientConnection | None = None
        self._tunnel_lock = asyncio.Lock()

    @classmethod
    def for_request(
        cls,
        inventory: Inventory,
        request: ScanRequest,
        *,
        client_options: Mapping[str, Any] | None = None,
    ) -> SSHLauncher:
        """The launcher a request asks for: its host-key policy and concurrency."""
        return cls(
            inventory,
            accept_new_host_keys=request.accept_new_host_keys,
            concurrency=request.concurrency,
            client_options=client_options,
        )

    def _read_known_hosts(self) -> str:
        try:
            return self.known_hosts_path.read_text()
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise InputError(f"cannot read known_hosts {self.known_hosts_path}: {exc}") from None

    @property
    def known_hosts(self) -> asyncssh.SSHKnownHosts:
        return asyncssh.import_known_hosts(self._known_text)

    def endpoint(self, info: HostInfo) -> Endpoint:
        return self.inventory.endpoint(info.name)

    async def tunnel(self) -> asyncssh.SSHClientConnection | None:
        """The inventory's jump host, one connection shared by every host (None: none)."""
        jump = self.inventory.ssh.jump
        if not jump:
            return None
        async with self._tunnel_lock:
            if self._tunnel is None:
                user, host, port = jump_parts(jump)  # checked when the inventory loaded
                kwargs: dict[str, Any] = {"username": user} if user else {}
                try:
                    self._tunnel = await asyncssh.connect(
                        host,
                        port if port is not None else (),
                        config=self.config_paths,
                        options=self.options,
                        known_hosts=self.known_hosts,
                        **kwargs,
                    )
                except (OSError, TimeoutError, asyncssh.Error) as exc:
                    raise HostFailure("unreachable", f"jump host {jump}: {_why(exc)}") from None
            return self._tunnel

    async def __call__(self, info: HostInfo) -> SSHSession:
        ep = self.endpoint(info)
        async with self.semaphore:
            conn = await self.connect(ep, self._explicit_port(info))
        try:
            command = bootstrap_command(
                ep.python, lifetime_s=self.lifetime_s, outer_guard=self.outer_guard
            )
            proc = await conn.create_process(command, encoding=None)
        except (OSError, asyncssh.Error) as exc:
            conn.close()
            raise HostFailure("error", f"{ep.name}: cannot start the agent: {_why(exc)}") from None
        return SSHSession(conn, proc, bind_address=_peer_ip(conn, tunnel=self._tunnel))

    def _explicit_port(self, info: HostInfo) -> int | tuple[()]:
        """The port the inventory names, else ``()``: ~/.ssh/config's Port, else 22."""
        host = self.inventory.host(info.name)
        if host.port is not None:
            return host.port
        return self.inventory.ssh.port if self.inventory.ssh.port != 22 else ()

    async def connect(self, ep: Endpoint, port: int | tuple[()]) -> asyncssh.SSHClientConnection:
        where = f"{ep.name} ({ep.address}:{ep.port})"
        tunnel = await self.tunnel()
        kwargs: dict[str, Any] = {"username": ep.user} if ep.user else {}
        kwargs["config"] = self.config_paths
        if tunnel is not None:
            kwargs["tunnel"] = tunnel

        async def connect() -> asyncssh.SSHClientConnection:
            return await asyncssh.connect(
                ep.address, port, options=self.options, known_hosts=self.known_hosts, **kwargs
            )

        try:
            try:
                return await connect()
            except asyncssh.HostKeyNotVerifiable:
                await self._host_key_problem(ep, tunnel)  # raises, or records a new key
                return await connect()
        except HostFailure:
            raise
        except asyncssh.PermissionDenied:
            user = f" as {ep.user}" if ep.user else ""
            raise HostFailure("unreachable", f"{where}: authentication refused{user}") from None
        except (OSError, TimeoutError, asyncssh.Error) as exc:
            # out of file descriptors is this machine's problem, not the host's
            local = isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)
            raise HostFailure(
                "error" if local else "unreachable", f"{where}: {_why(exc)}"
            ) from None

    async def _host_key_problem(
        self, ep: Endpoint, tunnel: asyncssh.SSHClientConnection | None
    ) -> None:
        """Why the key was refused (unknown or changed), with its fingerprint; TOFU if asked."""
        where = f"{ep.name} ({ep.address}:{ep.port})"
        key = await asyncssh.get_server_host_key(
            ep.address, ep.port, tunnel=tunnel or (), config=self.config_paths, options=self.options
        )
        if key is None:
            raise HostFailure("unreachable", f"{where}: the server presented no host key")
        fingerprint = f"{key.get_algorithm()} {key.get_fingerprint()}"
        trusted, ca_keys, *_ = self.known_hosts.match(ep.address, ep.address, ep.port)
        if trusted or ca_keys:
            raise HostFailure(
                "unreachable",
                f"{where}: host key CHANGED: the server offers {fingerprint}, "
                f"{self.known_hosts_path} has another key for it; refused "
                "(possible man-in-the-middle; fix known_hosts if the change is expected)",
            )
        if not self.accept_new:
            raise HostFailure(
                "unreachable",
                f"{where}: unknown host key {fingerprint} (not in {self.known_hosts_path}); "
                "check it and add it, or rerun with --accept-new-host-keys",
            )
        line = known_hosts_line(ep.address, ep.port, key)
        try:
            self.known_hosts_path.parent.mkdir(parents=True, exist_ok=True)
            with self.known_hosts_path.open("a") as f:
                f.write(line)
        except OSError as exc:
            raise HostFailure(
                "unreachable", f"{where}: cannot record its host key in known_hosts: {exc}"
            ) from None
        self._known_text += line
        # as OpenSSH says it (StrictHostKeyChecking=accept-new): the operator sees each key
        # that was trusted on first use, and where it went
        print(
            f"cwctl: Permanently added {fingerprint} for {where} to {self.known_hosts_path}",
            file=sys.stderr,
            flush=True,
        )

    async def close(self) -> None:
        if self._tunnel is not None:
            self._tunnel.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tunnel.wait_closed(), 2.0)


def _peer_ip(conn: asyncssh.SSHClientConnection, tunnel: object) -> str | None:
    """The IP address a direct connection reached (None through a jump host)."""
    if tunnel is not None:
        return None
    peer = conn.get_extra_info("peername")
    return str(peer[0]) if peer else None


def _why(exc: BaseException) -> str:
    """One line for a connection failure."""
    if isinstance(exc, TimeoutError):
        return "connection timed out"
    if isinstance(exc, asyncssh.DisconnectError):
        return exc.reason or type(exc).__name__
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the address: {exc.strerror}"
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return (
            f"too many open files on this machine (ulimit -n is {soft}): raise it "
            "(ulimit -n 65536) or lower [ssh] concurrency"
        )
    if isinstance(exc, OSError) and exc.errno == errno.EINVAL:  # connect() on a blackhole route
        return "unreachable: no route to the host (a blackhole or prohibit route)"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()  # asyncio's own text repeats the address
    return str(exc) or type(exc).__name__


async def scan_inventory(
    inventory: Inventory,
    request: ScanRequest,
    progress: Progress | None = None,
    *,
    client_options: Mapping[str, Any] | None = None,
    paths: PathCache | None = None,
) -> Collection:
    """Probe every host of ``inventory`` over SSH. ``client_options`` go to asyncssh
    (tests pass ``config=None, agent_path=None`` so no developer's ~/.ssh leaks in);
    ``paths`` keeps discovered paths from one scan to the next (the source's own)."""
    launcher = SSHLauncher.for_request(inventory, request, client_options=client_options)
    plan = inventory_plan(inventory, request, source="ssh", hello_margin_s=20.0, cache=paths)
    launcher.lifetime_s = hard_lifetime_s(plan)  # nothing outlives the scan on a host
    try:
        return await run_scan(plan, launcher, progress)
    finally:
        await asyncio.shield(launcher.close())


class SSHSource:
    """The inventory's hosts over SSH. ``client_options`` go to asyncssh (tests pass
    ``config=None, agent_path=None`` so no developer's ~/.ssh leaks in)."""

    name = "ssh"

    def __init__(
        self,
        request: ScanRequest,
        *,
        inventory: Inventory | None = None,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        if inventory is None:
            if request.inventory is None:
                raise InputError("the ssh source needs an inventory (-i FILE)")
            inventory = load_inventory(request.inventory)
        self.inventory = inventory
        self.client_options = client_options
        self.paths = PathCache()  # what one scan discovered, the next need not trace again

    async def scan(self, request: ScanRequest, progress: Progress | None = None) -> Collection:
        """Probe every host of the inventory and bring the records home."""
        return await scan_inventory(
            self.inventory,
            request,
            progress,
            client_options=self.client_options,
            paths=self.paths,
        )

    async def aclose(self) -> None:
        """Each scan opens and closes its own connections."""
