"""``read_on_all``: the one way planning reads state on many hosts or switches (host
routes, NCCL settings, the leaves' route tables): all at once, nothing planned on a
partial view, one error that names who could not be read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from cwctl.actions.runners import CommandResult, LocalRunner, ReadFailed, read_on_all, read_together
from cwctl.errors import EXIT_PROBLEMS, CwctlError


class Hosts:
    def __init__(self, down: Sequence[str] = ()) -> None:
        self.down = set(down)
        self.ran: list[tuple[str, tuple[str, ...]]] = []

    async def run(self, host: str, argv: Sequence[str]) -> CommandResult:
        self.ran.append((host, tuple(argv)))
        if host in self.down:
            return CommandResult(255, "", f"ssh: connect to {host}: connection refused\n")
        return CommandResult(0, f"{host} says {' '.join(argv)}")

    async def apply_change(self, change: dict[str, Any]) -> CommandResult:
        raise AssertionError("reading applies nothing")

    async def close(self) -> None:
        return None


async def test_every_target_read_with_its_own_argv() -> None:
    hosts = Hosts()
    out = await read_on_all(hosts, ["a", "b"], lambda h: ["cat", f"/etc/{h}"], "the files")
    assert out == {"a": "a says cat /etc/a", "b": "b says cat /etc/b"}
    assert sorted(hosts.ran) == [("a", ("cat", "/etc/a")), ("b", ("cat", "/etc/b"))]


async def test_one_failure_fails_the_read_and_names_the_host() -> None:
    hosts = Hosts(down=["b"])
    with pytest.raises(CwctlError) as caught:
        await read_on_all(hosts, ["a", "b", "c"], lambda h: ["ip", "route"], "the route")
    assert caught.value.exit_code == EXIT_PROBLEMS
    assert str(caught.value) == (
        "could not read the route on 1 host(s): b: ssh: connect to b: connection refused"
    )
    assert {h for h, _ in hosts.ran} == {"a", "b", "c"}  # all were tried, at once


async def test_the_targets_kind_is_said_and_at_most_five_named() -> None:
    names = [f"leaf{i}" for i in range(1, 8)]
    with pytest.raises(CwctlError) as caught:
        await read_on_all(Hosts(down=names), names, lambda s: ["x"], "the routes", "switch(es)")
    message = str(caught.value)
    assert message.startswith("could not read the routes on 7 switch(es): leaf1: ")
    assert "leaf5:" in message and "leaf6" not in message


async def test_reads_together_take_one_session_per_host_and_come_apart() -> None:
    """A real ``sh`` on this machine (the local runner): three reads in one command per
    host, each handed back under its own name, exactly as it printed."""

    class Counted(LocalRunner):
        def __init__(self) -> None:
            super().__init__()
            self.sessions: list[str] = []

        async def run(self, host: str, argv: Sequence[str]) -> CommandResult:
            self.sessions.append(host)
            return await super().run(host, argv)

    runner = Counted()
    reads = {"one": ["printf", "a\n\nb"], "two": ["true"], "three": ["echo", "x; y"]}
    out = await read_together(runner, ["h1", "h2"], reads, wrap=tuple)
    assert sorted(runner.sessions) == ["h1", "h2"]
    assert out == {
        "one": {"h1": "a\n\nb", "h2": "a\n\nb"},
        "two": {"h1": "", "h2": ""},
        "three": {"h1": "x; y\n", "h2": "x; y\n"},
    }


async def test_a_read_that_fails_together_is_named_and_nothing_is_returned() -> None:
    reads = {"the first": ["true"], "the tables": ["sh", "-c", "echo no nft >&2; exit 1"]}
    with pytest.raises(ReadFailed) as caught:
        await read_together(LocalRunner(), ["h1"], reads)
    assert caught.value.what == "the tables" and caught.value.exit_code == EXIT_PROBLEMS
    assert str(caught.value) == "could not read the tables on 1 host(s): h1: no nft"


async def test_sudo_wraps_each_read_and_never_the_shell() -> None:
    """A sudoers rule may allow ``nft`` and ``ss`` and not ``sh``: the prefix goes on each
    read inside the one shell, which itself runs unprivileged (``env`` stands in for
    ``sudo -n`` on this machine: a real prefix, the same outputs)."""
    hosts = Hosts()
    reads = {"tables": ["nft", "list", "tables"], "sockets": ["ss", "-t"]}
    with pytest.raises(ReadFailed):  # (this fake host answers with no sections)
        await read_together(hosts, ["a"], reads, wrap=lambda a: ("sudo", "-n", *a))
    ((_, argv),) = hosts.ran
    assert argv[:2] == ("sh", "-c")
    assert "sudo -n nft list tables;" in argv[2] and "sudo -n ss -t;" in argv[2]
    out = await read_together(
        LocalRunner(), ["h1"], {"one": ["echo", "x"]}, wrap=lambda a: ("env", *a)
    )
    assert out == {"one": {"h1": "x\n"}}


async def test_a_host_whose_one_command_failed_names_every_read_it_lacks() -> None:
    """Unreachable, no read ran there: the error is not one read's (not "no nftables")."""
    reads = {"tables": ["nft", "list", "tables"], "sockets": ["ss", "-t"]}
    with pytest.raises(ReadFailed) as caught:
        await read_together(Hosts(down=["b"]), ["b"], reads)
    assert caught.value.what == "tables, sockets"
    assert str(caught.value) == (
        "could not read tables, sockets on 1 host(s): b: ssh: connect to b: connection refused"
    )
