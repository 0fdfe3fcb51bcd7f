"""``cwctl watch`` on the namespace fabric: a fault injected, the reroute timed, the restore
checked byte for byte; shared by tests/integration/test_watch_fabric.py (one trial per
fault) and bench/bench_watch_fabric.py (five, p50 and max).

``WatchRun`` starts ``cwctl watch`` as the operator would (the program, in a subprocess,
against the inventory the testbed wrote, with a policy file) and reads its JSON lines on
a thread, each stamped with when it arrived; ``trial`` injects a fault on one direction
of a leaf-spine link, times injection to the ``acted`` decision (applied and verified by
a rescan), clears the fault and waits for ``restored``, and compares every switch's
``ip route`` with what it was before.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault, clear
from tests.testbed.shell import run

SWITCHES = (*L.SPINES, *L.LEAVES)
POLICY = """\
[act]
rounds = 2
min_score = {min_score}
max_per_hour = 60
hold_s = {hold_s}

[[allow]]
kind = "link"
action = "{action}"
match = ["leaf*-spine*"]

[[allow]]
kind = "switch"
action = "{action}"
match = ["spine*"]
"""


def switch_routes(bed: Testbed) -> dict[str, str]:
    """Every switch's main table, its rules, and the routes of every other table but the
    kernel's own (local): a reroute's copies for the probes (``switchroute.observe_steps``)
    must go with it. (``table all`` also lists what the kernel caches, which moves.)"""
    out = {}
    for s in SWITCHES:
        tables = run(["ip", "route", "show", "table", "all"], ns=bed.ns(s)).stdout
        extra, keep = [], False
        for line in tables.splitlines():  # a multipath route's next hops follow, indented
            if not line[:1].isspace():
                keep = re.search(r" table (?!local\b|main\b)\S", line) is not None
            if keep:
                extra.append(line)
        main = run(["ip", "route", "show"], ns=bed.ns(s)).stdout
        out[s] = main + run(["ip", "rule", "show"], ns=bed.ns(s)).stdout + "\n".join(extra)
    return out


class WatchRun:
    """``cwctl watch`` running on ``bed``; ``lines`` grows as it speaks (arrival, entry)."""

    def __init__(
        self,
        bed: Testbed,
        workdir: Path,
        *,
        hold_s: float,
        interval_s: float,
        action: str = "reroute",
        min_score: float = 0.5,
        job_log: str | None = None,
        policy_text: str | None = None,
        state: Path | None = None,
    ) -> None:
        """``action``: what the policy allows on links and spines, ``reroute`` (the
        switches' ECMP groups) or ``steer`` (the flows moved at the hosts); or the
        whole ``policy_text``. ``state``: the journal's directory (CWCTL_STATE_DIR)."""
        self.policy = workdir / "watch-policy.toml"
        text = policy_text or POLICY.format(hold_s=hold_s, action=action, min_score=min_score)
        if job_log is not None:  # the job's own pace, judged after each action
            text = text.replace("[act]\n", f"[act]\njob_log = {json.dumps(job_log)}\n", 1)
        self.policy.write_text(text)
        env = {**os.environ, "CWCTL_INVENTORY": str(bed.inventory)}
        if state is not None:
            env["CWCTL_STATE_DIR"] = str(state)
        argv = [sys.executable, "-m", "cwctl", "watch", "--interval", str(interval_s),
                "--duration", "2", "--rate", "10", "--policy", str(self.policy)]  # fmt: skip
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"event": "text", "text": line.rstrip()}
            self.lines.append((time.monotonic(), entry))

    def wait(
        self, match: Callable[[dict[str, Any]], bool], after: float, timeout_s: float
    ) -> tuple[float, dict[str, Any]]:
        """The first line after ``after`` (monotonic) that ``match``es."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for t, entry in list(self.lines):
                if t >= after and match(entry):
                    return t, entry
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = [e for _, e in self.lines[-8:]]
        raise AssertionError(f"no such line within {timeout_s:g} s; last lines: {tail}")

    def decisions(self, after: float = 0.0) -> list[tuple[float, dict[str, Any]]]:
        return [(t, e) for t, e in self.lines if t >= after and e.get("event") == "decision"]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


def about(link: str, spine: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("element") in (link, spine)


def verb(name: str, link: str, spine: str) -> Callable[[dict[str, Any]], bool]:
    near = about(link, spine)
    return lambda e: e.get("event") == "decision" and e.get("verb") == name and near(e)


@dataclass
class Trial:
    fault: str
    reroute_s: float  # injection -> the acted decision (applied, rescan clean)
    element: str  # what was rerouted round: the link or its spine
    routes_changed: list[str]  # the switches whose routes the reroute changed
    restore_s: float  # fault cleared -> restored (rolled back, rescan clean)
    restored_exactly: bool  # every switch's `ip route` as before the fault


def trial(
    bed: Testbed, watch: WatchRun, direction: str, kind: str, *, timeout_s: float = 240.0
) -> Trial:
    """Inject ``kind`` on ``direction`` (``leaf1>spine2``), time the reroute, clear it,
    wait for the restore; the routes before and after compared."""
    src, dst = direction.split(">")
    link = L.link(src, dst).name
    spine = src if src in L.SPINES else dst
    before = switch_routes(bed)
    injected = time.monotonic()
    apply_fault(bed, direction, kind)
    t_acted, acted = watch.wait(verb("acted", link, spine), injected, timeout_s)
    rerouted = switch_routes(bed)
    changed = [s for s in SWITCHES if rerouted[s] != before[s]]
    cleared = time.monotonic()
    clear(bed)
    t_restored, _ = watch.wait(verb("restored", link, spine), cleared, timeout_s)
    return Trial(
        fault=f"{kind} {direction}",
        reroute_s=t_acted - injected,
        element=str(acted["element"]),
        routes_changed=changed,
        restore_s=t_restored - cleared,
        restored_exactly=switch_routes(bed) == before,
    )


def intermittent(
    bed: Testbed,
    watch: WatchRun,
    direction: str,
    kind: str,
    *,
    on_s: float,
    off_s: float,
    total_s: float,
) -> list[float]:
    """The fault on ``on_s``, off ``off_s``, for ``total_s``; the times (from the start)
    of every action the watch took on the link or its spine (acted, or re-applied after a
    restore found the fault again)."""
    src, dst = direction.split(">")
    link, spine = L.link(src, dst).name, (src if src in L.SPINES else dst)
    start = time.monotonic()
    while time.monotonic() - start < total_s:
        apply_fault(bed, direction, kind)
        time.sleep(on_s)
        clear(bed)
        time.sleep(off_s)
    near = about(link, spine)
    return [
        t - start
        for t, e in watch.decisions(start)
        if near(e) and e.get("verb") in ("acted", "restore-failed")
    ]
