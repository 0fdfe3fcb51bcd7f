"""A running ``cwctl watch`` (a real process) sent a real SIGHUP after its policy or
inventory was made hostile: huge integers, nesting past the recursion limit, a FIFO, a
link to /dev/zero. Each reload is refused with one line naming the file, the old
configuration is kept, rounds go on, and SIGTERM still ends it with exit 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
GUARD_S = 120.0  # a hang guard, not a timing assertion


class Watched:
    """``cwctl watch ARGS`` with its stderr lines read on a thread into a queue."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cwctl", "watch", *args],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state"), **(env or {})},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put("")

    def next_event(self, event: str, **match: Any) -> dict[str, Any]:
        """The next JSON line with this ``event`` (and these keys), skipping the others."""
        while True:
            try:
                line = self.lines.get(timeout=GUARD_S)
            except queue.Empty:
                raise AssertionError(f"no {event!r} line; saw {self.seen[-5:]}") from None
            if not line:
                raise AssertionError(f"the watch ended before a {event!r} line: {self.seen[-5:]}")
            self.seen.append(line)
            if not line.startswith("{"):
                continue
            entry = json.loads(line)
            if entry.get("event") == event and all(entry.get(k) == v for k, v in match.items()):
                return entry

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=GUARD_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _huge_hold(path: Path) -> str:
    path.write_text("[act]\nhold_s = 1" + "0" * 400 + "\n")
    return f"{path}:2: key 'act.hold_s': must be a number below 2**53, not one of 401 digits"


def _too_many_digits(path: Path) -> str:
    path.write_text("[act]\nrounds = 1" + "0" * 5000 + "\n")
    return f"{path}:2: TOML syntax error: an integer of too many digits"


def _too_deep(path: Path) -> str:
    path.write_text("dry_run = true\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    return f"{path}:2: TOML syntax error: nested too deep"


def _fifo(path: Path) -> str:
    path.unlink()
    os.mkfifo(path)
    return f"{path}: is a FIFO, not a regular file: not read"


def _dev_zero(path: Path) -> str:
    path.unlink()
    path.symlink_to("/dev/zero")
    return f"{path}: is a device or socket, not a regular file: not read"


@pytest.mark.parametrize("spoil", [_huge_hold, _too_many_digits, _too_deep, _fifo, _dev_zero])
def test_a_hostile_policy_on_sighup_is_refused_and_the_watch_goes_on(
    tmp_path: Path, spoil: Any
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('dry_run = true\n[[allow]]\nkind = "link"\naction = "reroute"\n')
    w = Watched(tmp_path, "--sim", "--hosts", "16", "--interval", "0.2", "--policy", str(policy))
    try:
        w.next_event("round")
        says = spoil(policy)
        w.proc.send_signal(signal.SIGHUP)
        refused = w.next_event("reload", what="policy")
        assert refused["ok"] is False and refused["error"] == says
        after = w.next_event("round")  # the process lives and rounds go on
        assert after["round"] >= 2
        rc = w.stop()
    finally:
        w.kill()
    assert rc == 0, "".join(w.seen[-5:])
    assert not any("Traceback" in line for line in w.seen)


def test_a_hostile_inventory_on_sighup_is_refused_and_the_watch_goes_on(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.toml"
    switches = "".join(f'[[switch]]\nname = "spine{i}"\nrole = "spine"\n' for i in (1, 2))
    switches += "".join(
        f'[[switch]]\nname = "leaf{i}"\nrole = "leaf"\nuplinks = ["spine1", "spine2"]\n'
        for i in (1, 2)
    )
    hosts = switches + "".join(
        f'[[host]]\nname = "gpu-{i:03d}"\naddress = "10.0.0.{i}"\nleaf = "leaf{1 + i // 9}"\n'
        for i in range(1, 17)
    )
    inventory.write_text(hosts)
    w = Watched(tmp_path, "--sim", "-i", str(inventory), "--interval", "0.2")
    try:
        w.next_event("round")
        inventory.write_text("[ssh]\nconnect_timeout = 1" + "0" * 400 + "\n" + hosts)
        w.proc.send_signal(signal.SIGHUP)
        refused = w.next_event("reload", what="inventory")
        assert refused["ok"] is False
        assert refused["error"] == (
            f"{inventory}:2: key 'ssh.connect_timeout': must be a number below 2**53, "
            "not one of 401 digits"
        )
        inventory.unlink()
        os.mkfifo(inventory)
        w.proc.send_signal(signal.SIGHUP)
        fifo = w.next_event("reload", what="inventory")
        assert fifo["error"] == f"{inventory}: is a FIFO, not a regular file: not read"
        w.next_event("round")
        rc = w.stop()
    finally:
        w.kill()
    assert rc == 0, "".join(w.seen[-5:])


def test_held_connections_to_metrics_never_starve_the_scans(tmp_path: Path) -> None:
    """300 connections that send half a request line and hold on, against a watch of 4
    real --local agents under ``ulimit -n 256``: every round still reaches every host,
    and once the flood is gone /metrics answers (and only /metrics)."""
    argv = [sys.executable, "-m", "cwctl", "watch", "--local", "4", "--duration", "0.5"]
    argv += ["--interval", "0", "--listen", "127.0.0.1:0"]
    command = "ulimit -n 256 && exec " + " ".join(argv)
    w = Watched.__new__(Watched)
    w.proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state")},
    )
    w.lines, w.seen = queue.Queue(), []
    threading.Thread(target=w._pump, daemon=True).start()
    held: list[socket.socket] = []
    try:
        start = w.next_event("start")
        host, _, port = start["listen"].rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0  # the port it picked, named
        w.next_event("round")
        for _ in range(300):  # each connected (not left in SYN_SENT) and half a request
            s = socket.socket()
            s.settimeout(5)  # a hang guard: the accept queue answers at once
            with contextlib.suppress(OSError):
                s.connect((host, int(port)))
                s.sendall(b"GET /metr")
            held.append(s)
        rounds = [w.next_event("round") for _ in range(3)]
        assert [r["reached"] for r in rounds] == [4, 4, 4], rounds
        for s in held:
            s.close()
        held.clear()
        body = _get(f"http://{host}:{port}/metrics")
        assert "cwctl_watch_rounds_total" in body
        with pytest.raises(urllib.error.HTTPError) as not_found:
            _get(f"http://{host}:{port}/")
        assert not_found.value.code == 404
        rc = w.stop()
    finally:
        for s in held:
            s.close()
        w.kill()
    assert rc == 0, "".join(w.seen[-5:])


def _get(url: str) -> str:
    """A scrape; a refused or cut connection (the cap, a deadline) is tried again."""
    for _ in range(50):
        try:
            with urllib.request.urlopen(url, timeout=GUARD_S) as reply:
                return str(reply.read().decode())
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, ConnectionError):
            threading.Event().wait(0.2)
    raise AssertionError(f"{url}: no answer in 50 tries")


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (lambda mark: mark.pop("kind"), "'element': 'spine2'"),
        (lambda mark: mark.update(element=7), "'element': 7"),
    ],
)
def test_a_malformed_watch_mark_in_the_journal_is_skipped_and_scrapes_answer(
    tmp_path: Path, spoil: Any, says: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[act]\nrounds = 1\nhold_s = 3600\n[[allow]]\nkind = "switch"\n'
                      'action = "reroute"\n')  # fmt: skip
    shape = ["--sim", "--hosts", "16", "--hosts-per-leaf", "8", "--spines", "2"]
    acted = subprocess.run(
        [sys.executable, "-m", "cwctl", "watch", *shape, "--fault", "switch:spine2:down",
         "--policy", str(policy), "--interval", "0", "--rounds", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=GUARD_S,
        env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert '"verb":"acted"' in acted.stderr, acted.stderr[-2000:]
    journal = tmp_path / "state" / "journal.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    for e in entries:
        if e["event"] == "intent":
            spoil(e["plan"]["context"]["watch"])
    journal.write_text("".join(json.dumps(e) + "\n" for e in entries))
    w = Watched(tmp_path, *shape, "--policy", str(policy), "--interval", "0.2",
                "--listen", "127.0.0.1:0")  # fmt: skip
    try:
        skipped = w.next_event("error", kind="journal")  # read before the start line
        assert "its watch mark" in skipped["error"] and says in skipped["error"]
        assert skipped["error"].endswith("skipped")
        listen = w.next_event("start")["listen"]
        w.next_event("round")
        body = _get(f"http://{listen}/metrics")
        assert 'cwctl_watch_errors_total{kind="journal"} 1.0' in body
        rc = w.stop()
    finally:
        w.kill()
    assert rc == 0, "".join(w.seen[-5:])
