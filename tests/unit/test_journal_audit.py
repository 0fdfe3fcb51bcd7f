"""The journal an auditor can read (issue 35, item 12): who acted and where, filters by
element, time and count, a sync that fed nothing said so, and a rollback of steps a
`sim reset` already undid said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.actions.history import history
from cwctl.actions.journal import Journal, acting_user
from cwctl.chrony.journal import SyncJournal
from cwctl.cli import app
from cwctl.cli.journaltable import parse_since

SIM16 = ["--sim", "--hosts", "16", "--hosts-per-leaf", "4"]


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    return tmp_path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_table_says_who_and_where_and_filters(state: Path) -> None:
    assert run("reroute", *SIM16, "spine3", "--apply", "-y")[0] == 0
    assert run("drain", *SIM16, "gpu-005", "--apply", "-y")[0] == 0
    code, out, _ = run("journal")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[7:9] == ["BY", "WHERE"]
    assert len(rows) == 2
    assert all(r.split()[7:9] == [f"{acting_user()}/cli", "sim"] for r in rows), out
    assert [r.split()[4] for r in run("journal", "spine*")[1].splitlines()[1:]] == ["spine3"]
    assert [r.split()[4] for r in run("journal", "--limit", "1")[1].splitlines()[1:]] == ["gpu-005"]
    code, out, err = run("journal", "--since", "2999-01-01")
    assert code == 0 and out == "" and err == "cwctl: no action matches\n"
    assert len(run("journal", "--since", "1h")[1].splitlines()) == 3
    entries = json.loads(run("journal", "-o", "json", "gpu-*")[1])["entries"]
    assert [(e["element"], e["by"], e["where"]) for e in entries] == [("gpu-005", "cli", "sim")]


def test_since_takes_a_duration_or_a_utc_time() -> None:
    import datetime as dt

    now = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
    assert parse_since("2h", now) == "2026-12-06T10:00:00Z"
    assert parse_since("2026-12-06T09:30", now) == "2026-12-06T09:30:00Z"
    assert parse_since("2026-12-05", now) == "2026-12-05T00:00:00Z"
    code, _, err = run("journal", "--since", "yesterday")
    assert code == 2 and err.startswith("cwctl: --since 'yesterday': give a duration")


def test_a_sync_that_fed_nothing_is_not_applied(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    sync = SyncJournal(journal, {"reference": "gpu-001", "source": "sim"})
    sync.intent(1, [])  # no host qualified this round
    sync.outcome(1, [])
    sync.close()
    (action,) = history(journal).actions
    assert action.status == "nothing-fed" and action.plan.steps == []


def test_rollback_of_steps_a_sim_reset_undid_says_so(state: Path) -> None:
    assert run("reroute", *SIM16, "spine3", "--apply", "-y")[0] == 0
    assert run("sim", "reset")[0] == 0
    code, _, err = run("rollback", "--apply", "-y")
    assert code == 0, err
    steps = [line for line in err.splitlines() if "ECMP weight of spine3" in line]
    assert len(steps) == 4 and all("already so: nothing changed" in line for line in steps), err
