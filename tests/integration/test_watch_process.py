"""``cwctl watch`` as the operator runs it: signals, --once, bad input.

SIGTERM and SIGINT in the middle of a round of real ``--local`` agents: it exits 0 and
every agent it started is gone (the cancelled scan closes their stdin). SIGHUP reloads the
policy: a broken file is kept out with a line naming its line, a good one taken.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.sshfleet import cmdline, descendants, pid_alive

REPO = Path(__file__).resolve().parents[2]


def start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cwctl", "watch", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state")},
    )


def agents_of(pid: int) -> list[int]:
    return [p for p in descendants(pid) if "python" in cmdline(p) and p != pid]


def wait_for(find: Any, what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := find():
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout_s:g} s")


def lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_mid_round_leaves_no_agent_behind(tmp_path: Path, sig: int) -> None:
    proc = start(tmp_path, "--local", "3", "--duration", "60", "--interval", "0")
    try:
        agents = wait_for(lambda: (a := agents_of(proc.pid)) and len(a) >= 3 and a, "agents")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    said = lines(err)
    assert said[-1]["event"] == "stop" and said[-1]["signal"] is True
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in agents) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in agents if pid_alive(p)] == []


def test_sighup_reloads_the_policy_and_keeps_a_broken_one_out(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[allow]]\nkind = "link"\naction = "reroute"\n')
    proc = start(tmp_path, "--sim", "--hosts", "16", "--interval", "0.3", "--policy", str(policy))
    try:
        wait_for(lambda: proc.stderr is not None and proc.stderr.readline(), "start line")
        policy.write_text("[act]\nhold_s = 0\n")
        proc.send_signal(signal.SIGHUP)
        bad = wait_for(lambda: _reload_line(proc), "reload line")
        assert bad["ok"] is False and bad["error"] == (
            f"{policy}:2: key 'act.hold_s': must be a number > 0, not 0"
        )
        policy.write_text("dry_run = true\n")
        proc.send_signal(signal.SIGHUP)
        good = wait_for(lambda: _reload_line(proc), "second reload line")
        assert good["ok"] is True and good["what"] == "policy"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]


def _reload_line(proc: subprocess.Popen[str]) -> dict[str, Any] | None:
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if not line:
        return None
    entry = json.loads(line)
    return entry if entry.get("event") == "reload" else None


def cwctl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cwctl", "watch", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state")},
    )


def test_once_is_one_round_exit_0_healthy_3_problems(tmp_path: Path) -> None:
    ok = cwctl(tmp_path, "--sim", "--hosts", "16", "--once")
    assert ok.returncode == 0, ok.stderr
    sick = cwctl(tmp_path, "--sim", "--hosts", "16", "--once", "--fault", "switch:spine2:down")
    assert sick.returncode == 3, sick.stderr
    rounds = [x for x in lines(sick.stderr) if x["event"] == "round"]
    assert len(rounds) == 1 and "spine2" in rounds[0]["suspects"][0]["element"]
    assert rounds[0]["budget"] == "quick"  # a one-shot answers alone, as a scan does
    sparse = cwctl(tmp_path, "--sim", "--hosts", "16", "--once", "--budget", "watch")
    (said,) = [x for x in lines(sparse.stderr) if x["event"] == "round"]
    assert said["budget"] == "watch"  # asked for by name: kept


def test_once_on_real_agents_is_conclusive_and_healthy(tmp_path: Path) -> None:
    """Four --local agents on loopback: one window at the watch budget crosses each
    element 40 times, too few to vouch for a 2 % loss (inconclusive, exit 3); --once
    probes at the quick budget, so a healthy fabric exits 0 from one round."""
    proc = cwctl(tmp_path, "--local", "4", "--once")
    assert proc.returncode == 0, proc.stderr
    (said,) = [x for x in lines(proc.stderr) if x["event"] == "round"]
    assert said["budget"] == "quick" and said["healthy"] is True and said["reached"] == 4


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--listen", "nowhere"], "--listen 'nowhere': give ADDR:PORT"),
        (["--policy", "missing.toml"], "missing.toml: no such policy file"),
        (["--textfile", "/proc/no/such/dir/x.prom"], "--textfile"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_round(
    tmp_path: Path, args: list[str], says: str
) -> None:
    proc = cwctl(tmp_path, "--sim", "--once", *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert '"event"' not in proc.stderr  # nothing started


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = cwctl(tmp_path, "--sim", "--once", "--listen", f"127.0.0.1:{port}")
    assert proc.returncode == 2, proc.stderr
    assert "cannot listen there" in proc.stderr and "Traceback" not in proc.stderr


def test_every_rounds_agents_are_gone_after_it(tmp_path: Path) -> None:
    proc = start(tmp_path, "--local", "3", "--duration", "0.5", "--interval", "0", "--rounds", "4")
    seen: set[int] = set()
    try:
        while proc.poll() is None:
            seen.update(agents_of(proc.pid))
            time.sleep(0.02)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert len([x for x in lines(err) if x["event"] == "round"]) == 4
    assert len(seen) >= 3  # it did start agents, round after round
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in seen if pid_alive(p)] == []
