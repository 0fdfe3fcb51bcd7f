"""``cwctl watch`` killed (SIGKILL) in the middle of an automatic action, then started
again: the fabric is exactly as before the action.

The watch acts on ``switch:spine2:down`` (a reroute: one ECMP step per leaf) or, the
fault gone, restores it; ``CWCTL_FAILPOINT=journal:K`` stops the process just before its
Kth journal append (intent, each step's start and outcome, end) and the test kills it
there. A watch started again on the same fabric, without the fault, rolls back what the
cut-short action may have changed (a decision ``taken-up``), or finishes the cut-short
restore; ``cwctl sim status`` then lists no change. Killed after the action's end, the
restarted watch adopts the action instead (it stays, to be restored after its hold).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_journal_kill import wait_stopped_or_exited

REPO = Path(__file__).resolve().parents[2]
SHAPE = ["--sim", "--hosts", "16", "--hosts-per-leaf", "8", "--spines", "2"]
ACT = '[act]\nrounds = 1\nhold_s = {hold}\n[[allow]]\nkind = "switch"\naction = "reroute"\n'
APPENDS = 6  # intent, 2 x (started, ok), end: an apply or a rollback of the two steps


def _env(state: Path, failpoint: int | None = None) -> dict[str, str]:
    env = {**os.environ, "CWCTL_STATE_DIR": str(state)}
    env.pop("CWCTL_FAILPOINT", None)
    if failpoint is not None:
        env["CWCTL_FAILPOINT"] = f"journal:{failpoint}"
    return env


def watch(state: Path, policy: Path, *args: str, rounds: int = 2) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "cwctl", "watch", *SHAPE, "--policy", str(policy),
         "--interval", "0", "--rounds", str(rounds), *args],
        cwd=REPO, capture_output=True, text=True, timeout=180, env=_env(state),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]


def watch_killed_at(k: int, state: Path, policy: Path, *args: str) -> bool:
    """The watch with the failpoint at append ``k``, SIGKILLed there; False when it
    never got that far."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cwctl", "watch", *SHAPE, "--policy", str(policy),
         "--interval", "0", "--rounds", "2", *args],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(state, k),
    )  # fmt: skip
    status = wait_stopped_or_exited(proc)  # type: ignore[arg-type]
    if os.WIFSTOPPED(status):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return True
    return False


def sim_status(state: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "cwctl", "sim", "status"],
        cwd=REPO, capture_output=True, text=True, timeout=60, env=_env(state),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("k", range(1, APPENDS + 1))
def test_killed_during_an_automatic_reroute_a_restart_leaves_the_fabric_as_before(
    tmp_path: Path, k: int
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(ACT.format(hold=3600))
    state = tmp_path / "state"
    before = sim_status(state)
    assert "change" not in before
    assert watch_killed_at(k, state, policy, "--fault", "switch:spine2:down")
    said = watch(state, policy, rounds=1)
    taken = [x for x in said if x.get("verb") == "taken-up"]
    if k >= 3:  # a step had started: something may have changed, and was rolled back
        assert len(taken) == 1 and taken[0]["code"] == "rolled-back", said
        assert taken[0]["element"] == "spine2"
    else:
        assert taken == []
    assert sim_status(state) == before


@pytest.mark.parametrize("k", range(2, APPENDS + 1))
def test_killed_during_an_automatic_restore_a_restart_finishes_it(tmp_path: Path, k: int) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(ACT.format(hold=3600))
    state = tmp_path / "state"
    before = sim_status(state)
    acted = watch(state, policy, "--fault", "switch:spine2:down")
    assert any(x.get("verb") == "acted" for x in acted), acted
    assert "2 change(s)" in sim_status(state)
    policy.write_text(ACT.format(hold=0.001))  # restored at the first clean round
    assert watch_killed_at(k, state, policy)
    said = watch(state, policy, rounds=1)
    taken = [x for x in said if x.get("verb") == "taken-up"]
    assert len(taken) == 1 and taken[0]["code"] == "rolled-back", said
    assert sim_status(state) == before


def test_killed_after_the_end_the_action_is_adopted_not_undone(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(ACT.format(hold=3600))
    state = tmp_path / "state"
    assert watch_killed_at(APPENDS + 1, state, policy, "--fault", "switch:spine2:down")
    said = watch(state, policy, rounds=1)
    assert [x["event"] for x in said if x["event"] in ("adopted", "decision")] == ["adopted"]
    assert "2 change(s)" in sim_status(state)
