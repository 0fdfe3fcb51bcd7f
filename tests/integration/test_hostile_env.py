"""A hostile or careless environment (issue 24): the state directory as a symlink, a
world-writable or symlinked ``sim/``, temporary files a killed writer left, too few file
descriptors, a blackholed host. Each gets one clear line, not a misleading errno."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cwctl.transport.ssh import USER_VARS

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="lchown, rlimits, netns: root")

APPLY = ["reroute", "spine2", "--sim", "--hosts", "16", "--apply", "--yes"]


def cwctl(
    state: Path, *args: str, preexec: object = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cwctl.cli", *args],
        env={**(os.environ if env is None else env), "CWCTL_STATE_DIR": str(state)},
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        preexec_fn=preexec,  # type: ignore[arg-type]
    )


def test_a_state_directory_symlink_the_operator_owns_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "state"
    link.symlink_to(real)
    out = cwctl(link, *APPLY)
    assert out.returncode == 0, out.stderr
    assert (real / "journal.jsonl").stat().st_size > 0 and list((real / "sim").glob("*.json"))


def test_a_state_directory_symlink_someone_else_planted_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "state"
    link.symlink_to(real)
    os.lchown(link, 65534, 65534)
    out = cwctl(link, *APPLY)
    assert out.returncode == 2
    assert out.stderr == (
        f"cwctl: refusing the state directory {link}: a symlink owned by uid 65534, not by "
        "you (uid 0); point it at a directory of your own, or set it to one\n"
    )
    assert not (real / "journal.jsonl").exists()


def test_a_world_writable_sim_directory_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "sim").mkdir(parents=True)
    state.chmod(0o700)
    (state / "sim").chmod(0o777)
    for args in (APPLY, ["scan", "--sim", "--hosts", "16"]):
        out = cwctl(state, *args)
        assert out.returncode == 2, out.stderr
        assert out.stderr == (
            f"cwctl: refusing the simulator state directory {state / 'sim'}: writable by "
            f"group or others (mode 0777); chmod go-w {state / 'sim'}\n"
        )


def test_a_symlinked_sim_directory_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (state / "sim").symlink_to(elsewhere)
    out = cwctl(state, *APPLY)
    assert out.returncode == 2
    assert out.stderr == (
        f"cwctl: refusing the simulator state directory {state / 'sim'}: it is a symlink "
        "(use a directory)\n"
    )
    assert list(elsewhere.iterdir()) == []


def test_temporaries_a_killed_writer_left_are_cleaned(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    assert cwctl(state, *APPLY).returncode == 0
    (saved,) = (state / "sim").glob("*.json")
    old = saved.with_name(f".{saved.name}.k1ll3d.tmp")
    fresh = saved.with_name(f".{saved.name}.wr1t1n.tmp")
    old.write_text("{")
    fresh.write_text("{")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    out = cwctl(state, "rollback", "--apply", "--yes")
    assert out.returncode == 0, out.stderr
    assert not old.exists() and fresh.exists()  # a live writer's (seconds old) is left


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))


def test_too_few_file_descriptors_is_said_as_such_not_unreachable(tmp_path: Path) -> None:
    """150 hosts at once under ulimit -n 48: the connections that found no descriptor are
    this machine's error, with the fix; the others unreachable. 60 of the hosts sit on
    listeners that never answer, so their connections hold their descriptors until the
    connect timeout and the rest must run out (on closed ports alone each descriptor came
    back at once, and a loaded run found enough of them: every host "refused").
    No user name in the environment (as under cron or CI): the password database cannot be
    opened once descriptors run out, so cwctl must have asked for the name before."""
    (tmp_path / "known_hosts").write_text("")
    with contextlib.ExitStack() as stack:
        silent = [stack.enter_context(socket.socket()) for _ in range(60)]
        for s in silent:
            s.bind(("127.0.0.1", 0))
            s.listen(8)  # the kernel completes the connection; nobody accepts it
        ports = [s.getsockname()[1] for s in silent] + [20000 + i for i in range(60, 150)]
        hosts = "".join(
            f'[[host]]\nname = "h{i:03d}"\naddress = "127.0.0.1"\nport = {port}\n'
            for i, port in enumerate(ports)
        )
        inventory = tmp_path / "inv.toml"
        inventory.write_text(
            f'[ssh]\nknown_hosts = "{tmp_path / "known_hosts"}"\nconcurrency = 200\n'
            f"connect_timeout = 3\n\n{hosts}"
        )
        out = cwctl(
            tmp_path / "state", "scan", "-i", str(inventory), "--format", "json",
            preexec=_few_descriptors,
            env={k: v for k, v in os.environ.items() if k not in USER_VARS},
        )  # fmt: skip
    assert out.returncode == 3, out.stderr
    errors = {h["status"]: set() for h in json.loads(out.stdout)["hosts"]}
    for h in json.loads(out.stdout)["hosts"]:
        errors[h["status"]].add(h["error"].split(": ", 1)[1])
    assert errors["error"] == {
        "too many open files on this machine (ulimit -n is 48): raise it (ulimit -n 65536) "
        "or lower [ssh] concurrency"
    }
    # the others: a silent listener's host that kept its descriptor to the timeout, a
    # closed port reached before they ran out (or none: a connection that got a socket may
    # find no descriptor for what it opens next, and is this machine's error too)
    assert set(errors) <= {"error", "unreachable"}
    assert errors.get("unreachable", set()) <= {"connection timed out", "connection refused"}


def test_a_blackholed_host_is_unreachable_not_an_invalid_argument(tmp_path: Path) -> None:
    """In a network namespace of its own, a blackhole route to the host: connect() says
    EINVAL, which used to reach the report as "invalid argument"."""
    ns = f"cwctl-bh-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", ns, "route", "add", "blackhole", "10.99.0.1/32"], check=True)
        (tmp_path / "known_hosts").write_text("")
        inventory = tmp_path / "inv.toml"
        inventory.write_text(
            f'[ssh]\nknown_hosts = "{tmp_path / "known_hosts"}"\n\n'
            '[[host]]\nname = "dark"\naddress = "10.99.0.1"\n'
        )
        out = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "cwctl.cli", "scan", "-i",
             str(inventory), "--format", "json"],
            env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state")},
            capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    assert out.returncode == 3, out.stderr
    (host,) = json.loads(out.stdout)["hosts"]
    assert host["status"] == "unreachable"
    assert host["error"] == (
        "dark (10.99.0.1:22): unreachable: no route to the host (a blackhole or prohibit route)"
    )
