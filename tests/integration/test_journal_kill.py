"""Kill ``cwctl ... --apply`` (a real subprocess, SIGKILL) at every step boundary, then
``cwctl rollback --apply``: the target is back in its exact prior state each time.

The boundaries are the journal appends (intent, each step's start and outcome, end):
``CWCTL_FAILPOINT=journal:K`` makes cwctl stop itself (SIGSTOP) just before its Kth
append; the test waits until it is stopped and kills it with SIGKILL. K = 1 is "before
anything was written or done", K = last + 1 is "ran to the end". Before the append that
records a step's outcome, the step's effect has happened but the journal only says
``started``: the case a journal written after the fact cannot recover from.

Two targets: the simulator (its saved model state, two ECMP steps) and a NIC exclusion in
an NCCL file over a real OpenSSH sshd (``realsshd.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.actions.history import history
from cwctl.actions.journal import Journal
from cwctl.cli import app
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.sim.model import ExcludeNic
from cwctl.sim.state import restore_saved_state, save_state
from cwctl.transport.sim import model_for
from tests.integration.realsshd import Sshd, needs_sshd, sshd

__all__ = ["sshd"]

SHAPE = {"hosts": 16, "hosts_per_leaf": 8, "spines": 2}
SIM = ["--sim", "--hosts", "16", "--hosts-per-leaf", "8", "--spines", "2"]


def wait_stopped_or_exited(proc: subprocess.Popen[bytes], guard_s: float = 120.0) -> int:
    """The wait status once cwctl stopped at the failpoint or exited; a hang guard
    (not a timing assertion) kills it after ``guard_s``."""
    deadline = time.monotonic() + guard_s
    while time.monotonic() < deadline:
        pid, status = os.waitpid(proc.pid, os.WNOHANG | os.WUNTRACED)
        if pid:
            return status
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    pytest.fail("cwctl neither stopped at the failpoint nor exited")


def cwctl_killed_at(k: int, args: list[str], state: Path) -> str:
    """Run ``cwctl ARGS`` with the failpoint at append ``k``; SIGKILL it when it stops
    there. 'killed' or, when it never got that far, 'finished'."""
    env = {**os.environ, "CWCTL_STATE_DIR": str(state), "CWCTL_FAILPOINT": f"journal:{k}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cwctl.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    status = wait_stopped_or_exited(proc)
    if os.WIFSTOPPED(status):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        return "killed"
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.returncode == 0, err
    return "finished"


def rollback(state: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(state))
    result = CliRunner().invoke(app, ["rollback", "--apply", "--yes"])
    return result.exit_code, result.stderr


def statuses(state: Path) -> list[str]:
    return [a.status for a in history(Journal(state)).actions]


# --- the simulator --------------------------------------------------------------------


def sim_request() -> ScanRequest:
    return ScanRequest(sim=SimOptions(**SHAPE))


def effective_sim_state() -> dict[str, object]:
    """The model a fresh scan would start from (saved state restored), every weight."""
    model = model_for(sim_request())
    restore_saved_state(model, sim_request())
    fabric, st = model.fabric, model.state
    weights = {
        f"{leaf}/{fabric.spines[s]}": st.ecmp_weight.get((leaf, fabric.spines[s]), 1)
        for leaf, ups in zip(fabric.leaves, fabric.uplinks, strict=True)
        for s in ups
    }
    nics, drained = sorted(st.excluded_nics), sorted(st.drained_hosts)
    return {"weights": weights, "nics": nics, "drained": drained}


def test_kill_at_every_boundary_then_rollback_restores_the_simulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes = []
    for k in range(1, 8):  # intent, 2 x (started, ok), end: 6 appends, then "finished"
        state = tmp_path / f"k{k}"
        monkeypatch.setenv("CWCTL_STATE_DIR", str(state))
        model = model_for(sim_request())  # a prior state that is not the default one
        model.apply(ExcludeNic("gpu-003/" + model.fabric.nics[2][0]))
        save_state(model, sim_request())
        prior = effective_sim_state()
        outcome = cwctl_killed_at(k, ["reroute", "spine2", *SIM, "--apply", "--yes"], state)
        outcomes.append(outcome)
        changed = effective_sim_state() != prior
        code, err = rollback(state, monkeypatch)
        if k == 1:  # killed before the intent: nothing written, nothing changed
            assert not changed and code == 2 and "nothing to roll back" in err
        else:
            assert code == 0, (k, err)
            assert statuses(state) == [("applied" if k == 7 else "interrupted"), "applied"]
        assert effective_sim_state() == prior, (k, err)
        if k in (3, 5, 6, 7):  # a step had run by then
            assert changed, k
    assert outcomes == ["killed"] * 6 + ["finished"]


def test_a_rollback_killed_at_every_boundary_is_finished_by_rolling_back_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The undo itself is cut short: ``cwctl rollback ORIGINAL`` again finishes it."""
    for k in range(1, 7):  # the rollback's intent, 2 x (started, ok), end
        state = tmp_path / f"r{k}"
        monkeypatch.setenv("CWCTL_STATE_DIR", str(state))
        prior = effective_sim_state()
        applied = CliRunner().invoke(app, ["reroute", "spine2", *SIM, "--apply", "--yes"])
        assert applied.exit_code == 0, applied.stderr
        (original,) = history(Journal(state)).actions
        assert cwctl_killed_at(k, ["rollback", original.id, "--apply", "--yes"], state) == (
            "killed"
        )
        hist = history(Journal(state))
        expected = ["applied"] if k == 1 else ["applied", "interrupted"]  # the rollback's
        assert [a.status for a in hist.actions] == expected
        result = CliRunner().invoke(app, ["rollback", original.id, "--apply", "--yes"])
        assert result.exit_code == 0, (k, result.stderr)
        assert effective_sim_state() == prior, k
        again = CliRunner().invoke(app, ["rollback", original.id, "--apply", "--yes"])
        assert again.exit_code == 2 and "already rolled back" in again.stderr


# --- a real sshd ----------------------------------------------------------------------


def nccl_inventory(tmp_path: Path, server: Sshd) -> Path:
    identity = tmp_path / "id_ed25519"
    identity.write_bytes(server.client_key.export_private_key("openssh"))
    identity.chmod(0o600)
    inv = server.inventory()
    host = inv.hosts[0]
    path = tmp_path / "inventory.toml"
    path.write_text(
        f'[ssh]\nuser = "root"\nidentity = "{identity}"\nknown_hosts = "{server.known_hosts}"\n'
        f'python = "{inv.ssh.python}"\nconnect_timeout = 5\n\n'
        f'[[host]]\nname = "gpu-001"\naddress = "{host.address}"\nport = {server.port}\n'
        'nics = ["mlx5_0", "mlx5_1"]\n'
    )
    return path


@needs_sshd[1]
@pytest.mark.sshd
def test_kill_at_every_boundary_then_rollback_restores_a_file_over_real_sshd(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = nccl_inventory(tmp_path, sshd)
    for k in range(1, 6):  # intent, started, ok, end: 4 appends, then "finished"
        conf_dir = tmp_path / f"conf{k}"
        conf_dir.mkdir()
        conf = conf_dir / "nccl.conf"
        prior = "# site\nNCCL_IB_HCA=^=mlx5_3\nNCCL_DEBUG=WARN\n"
        conf.write_text(prior)
        conf.chmod(0o640)
        state = tmp_path / f"state{k}"
        args = ["reroute", "gpu-001/mlx5_1", "-i", str(inventory), "--nccl-conf", str(conf)]
        outcome = cwctl_killed_at(k, [*args, "--apply", "--yes"], state)
        assert outcome == ("finished" if k == 5 else "killed")
        changed = conf.read_text() != prior
        assert changed == (k >= 3), k  # from "before the ok append" on, the step had run
        code, err = rollback(state, monkeypatch)
        if k == 1:
            assert code == 2 and "nothing to roll back" in err
        else:
            assert code == 0, (k, err)
            rows = json.loads(CliRunner().invoke(app, ["journal", "--format", "json"]).stdout)
            assert rows["entries"][0]["status"] == ("applied" if k == 5 else "interrupted")
        assert conf.read_text() == prior, k
        assert conf.stat().st_mode & 0o777 == 0o640
        assert sorted(p.name for p in conf_dir.iterdir()) == ["nccl.conf"], k  # no backup left
