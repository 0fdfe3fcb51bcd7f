"""Runners: where a step's argv (or model change) is carried out.

``LocalRunner`` runs argv with ``asyncio.create_subprocess_exec`` (no shell).
``SSHRunner`` runs it on an inventory host, a switch with ``kind`` (at its management
address), or the scheduler's host, over SSH with the
scan transport's connection settings (``SSHLauncher``: host keys checked against
known_hosts, ~/.ssh/config, the jump host); the remote side needs a command line, so
the argv is quoted with ``shlex.join`` (POSIX shell quoting: each element arrives as one
argument). Steps on ``"local"`` run locally. ``SimRunner`` applies model changes to a
``FabricModel`` and saves its state after each (``cwctl.sim.state.save_state``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cwctl.actions.plan import LOCAL
from cwctl.errors import EXIT_PROBLEMS, CwctlError, InputError

if TYPE_CHECKING:
    from cwctl.inventory import Inventory

COMMAND_TIMEOUT_S = 120.0
# Commands run at once on one host's connection: under OpenSSH's MaxSessions (10 by
# default), past which sshd refuses a channel ("open failed"); the rest wait their turn.
SESSIONS_PER_HOST = 8


class ReadFailed(CwctlError):
    """A read-only command failed on some targets: nothing is planned on a partial view.
    ``what`` names the read (its callers word their own refusal from it)."""

    def __init__(self, what: str, failed: Sequence[str], targets_are: str = "host(s)") -> None:
        super().__init__(
            f"could not read {what} on {len(failed)} {targets_are}: " + "; ".join(failed[:5]),
            exit_code=EXIT_PROBLEMS,
        )
        self.what = what


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def detail(self) -> str:
        """The last line of stderr (else stdout): why it failed, in one line."""
        for text in (self.stderr, self.stdout):
            lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
            if lines:
                return lines[-1][-300:]
        return ""


class Runner(Protocol):
    async def run(self, host: str, argv: Sequence[str]) -> CommandResult: ...

    async def apply_change(self, change: dict[str, Any]) -> CommandResult: ...

    async def close(self) -> None: ...


async def read_on_all(
    runner: Runner,
    targets: Sequence[str],
    argv_for: Callable[[str], Sequence[str]],
    what: str,
    targets_are: str = "host(s)",
) -> dict[str, str]:
    """Run a read-only argv on every target at once: each one's stdout. If any failed,
    nothing is planned on a partial view: one error (exit 3) names up to five."""
    results = await asyncio.gather(*(runner.run(t, argv_for(t)) for t in targets))
    failed = [
        f"{t}: {r.detail() or f'exit {r.rc}'}"
        for t, r in zip(targets, results, strict=True)
        if not r.ok
    ]
    if failed:
        raise ReadFailed(what, failed, targets_are)
    return {t: r.stdout for t, r in zip(targets, results, strict=True)}


# the line each read's output is followed by in ``together_argv`` (and its exit status)
SECTION = "@@cwctl-read"


def together_argv(argvs: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """One ``sh -c`` running read-only argvs in turn, each one's output followed by a
    ``SECTION`` line with its exit status: one SSH session per host instead of one per
    read (each session is a fork and a shell on the host). The script is built
    from the argvs with ``shlex.join``, so each element still arrives as one argument."""
    script = "; ".join(f"{shlex.join(a)}; printf '\\n{SECTION} %d\\n' $?" for a in argvs)
    return ("sh", "-c", script)


def split_together(stdout: str, n: int) -> list[tuple[int, str]] | None:
    """``together_argv``'s output as (exit status, output) per read; None if it is not
    ``n`` sections (the shell itself failed, or it was cut short)."""
    out: list[tuple[int, str]] = []
    rest = stdout
    for _ in range(n):
        head, sep, tail = rest.partition(f"\n{SECTION} ")
        status, nl, rest = tail.partition("\n")
        if not sep or not nl or not status.isdigit():
            return None
        out.append((int(status), head))
    return out


async def read_together(
    runner: Runner,
    targets: Sequence[str],
    reads: Mapping[str, Sequence[str]],
    wrap: Callable[[Sequence[str]], Sequence[str]] = tuple,
) -> dict[str, dict[str, str]]:
    """``read_on_all`` for several reads at once, in one session per target: per read
    (by its name in ``reads``), each target's stdout. ``wrap`` prefixes each read (sudo),
    not the shell: a sudoers rule that allows ``nft`` and ``ss`` need not allow ``sh``.
    A failed read fails as ``read_on_all`` fails, naming the first of ``reads`` that
    failed; a host whose one command failed as a whole (unreachable, no shell) names all
    of them, since none was read."""
    argv = together_argv([wrap(a) for a in reads.values()])
    results = await asyncio.gather(*(runner.run(t, argv) for t in targets))
    seen: dict[str, dict[str, str]] = {what: {} for what in reads}
    failed: dict[str, list[str]] = {}
    unread: list[str] = []
    for target, r in zip(targets, results, strict=True):
        parts = split_together(r.stdout, len(reads)) if r.ok else None
        if parts is None:
            unread.append(f"{target}: {r.detail() or f'exit {r.rc}'}")
            continue
        for what, (status, text) in zip(reads, parts, strict=True):
            if status != 0:  # its own words are on the shared stderr
                why = CommandResult(status, stderr=r.stderr).detail() or f"exit {status}"
                failed.setdefault(what, []).append(f"{target}: {why}")
            seen[what][target] = text
    if unread:
        raise ReadFailed(", ".join(reads), unread)
    for what in reads:  # the first read (in ``reads``' order) that failed anywhere
        if what in failed:
            raise ReadFailed(what, failed[what])
    return seen


class LocalRunner:
    """Every step on this machine (a step's host is only a label here)."""

    def __init__(self, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s

    async def run(self, host: str, argv: Sequence[str]) -> CommandResult:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            return CommandResult(127, "", f"{argv[0]}: {exc.strerror or exc}")
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return CommandResult(124, "", f"{argv[0]}: timed out after {self.timeout_s:g} s")
        return CommandResult(
            proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")
        )

    async def apply_change(self, change: dict[str, Any]) -> CommandResult:
        raise InputError("a simulator step needs --sim")

    async def close(self) -> None:
        return None


class SSHRunner:
    """Steps on inventory hosts over SSH; ``"local"`` steps on this machine."""

    def __init__(
        self,
        inventory: Inventory,
        *,
        client_options: Mapping[str, Any] | None = None,
        accept_new_host_keys: bool = False,
        timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> None:
        self.inventory = inventory
        self._launcher_args: dict[str, Any] = {
            "accept_new_host_keys": accept_new_host_keys,
            "client_options": client_options,
        }
        self._launcher: Any = None  # built on the first remote command: a dry run of a
        # plan that reads nothing remote needs no SSH settings at all
        self.local = LocalRunner(timeout_s)
        self.timeout_s = timeout_s
        self._conns: dict[str, Any] = {}
        self._lanes: dict[str, asyncio.Semaphore] = {}  # sessions open at once, per host
        self._connecting: dict[str, asyncio.Lock] = {}  # one connection per host

    @property
    def launcher(self) -> Any:
        if self._launcher is None:
            from cwctl.transport.ssh import SSHLauncher

            self._launcher = SSHLauncher(self.inventory, **self._launcher_args)
        return self._launcher

    def _endpoint(self, host: str) -> tuple[Any, Any]:
        """(Endpoint, explicit port) for an inventory host, or for a host only named in
        ``[scheduler] host`` (reached with ``[ssh]``'s defaults and ~/.ssh/config)."""
        from cwctl.inventory import Endpoint

        inv = self.inventory
        if any(h.name == host for h in inv.hosts):
            h = inv.host(host)
            port = h.port if h.port is not None else (inv.ssh.port if inv.ssh.port != 22 else ())
            return inv.endpoint(h), port
        switch = next((s for s in inv.switches if s.name == host and s.kind), None)
        if switch is not None:  # a switch cwctl may act on, at its management address
            port = switch.port if switch.port is not None else inv.ssh.port
            return inv.switch_endpoint(switch), (port if port != 22 else ())
        ep = Endpoint(host, host, inv.ssh.port, inv.ssh.user, inv.ssh.python)
        return ep, (inv.ssh.port if inv.ssh.port != 22 else ())

    async def run(self, host: str, argv: Sequence[str]) -> CommandResult:
        from cwctl.transport.hostrun import HostFailure
        from cwctl.transport.sshlib import asyncssh

        if host == LOCAL:
            return await self.local.run(host, argv)
        lane = self._lanes.setdefault(host, asyncio.Semaphore(SESSIONS_PER_HOST))
        try:
            async with self._connecting.setdefault(host, asyncio.Lock()):
                conn = self._conns.get(host)
                if conn is None:
                    ep, port = self._endpoint(host)
                    # the scan transport's connect: same host-key policy, config, jump host
                    async with self.launcher.semaphore:  # bounded handshakes, as in a scan
                        conn = self._conns[host] = await self.launcher.connect(ep, port)
            async with lane:
                result = await asyncio.wait_for(
                    conn.run(shlex.join(argv), check=False, encoding="utf-8", errors="replace"),
                    self.timeout_s,
                )
        except HostFailure as exc:
            return CommandResult(255, "", exc.reason)
        except TimeoutError:
            return CommandResult(124, "", f"{host}: timed out after {self.timeout_s:g} s")
        except (OSError, asyncssh.Error) as exc:
            return CommandResult(255, "", f"{host}: {exc}")
        rc = result.exit_status if result.exit_status is not None else 255
        return CommandResult(rc, str(result.stdout or ""), str(result.stderr or ""))

    async def apply_change(self, change: dict[str, Any]) -> CommandResult:
        raise InputError("a simulator step needs --sim")

    async def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2.0)
        self._conns.clear()
        if self._launcher is not None:
            await self._launcher.close()
