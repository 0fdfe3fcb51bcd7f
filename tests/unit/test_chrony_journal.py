"""A fed round in the journal: written ahead, folded like any action, listed by
``cwctl journal``, and refused by ``cwctl rollback`` (a feed has nothing to undo)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cwctl.actions.history import history
from cwctl.actions.journal import Journal
from cwctl.chrony.journal import SyncJournal
from cwctl.chrony.rules import FeedDecision
from cwctl.cli import app


def decisions() -> list[FeedDecision]:
    return [
        FeedDecision("a", "skip", "the reference: never fed"),
        FeedDecision("b", "fed", offset_ns=120.0, drift_ppb=3.0, t_ref_ns=1, socket="/s/b"),
        FeedDecision("c", "fed", offset_ns=-40.0, drift_ppb=0.0, t_ref_ns=1, socket="/s/c"),
    ]


def test_a_round_is_an_action_written_ahead(tmp_path, monkeypatch):
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    journal = Journal(tmp_path)
    sj = SyncJournal(journal, {"source": "local", "reference": "a"})
    ds = decisions()
    sj.intent(1, ds)
    # before any outcome: the intent names the hosts, sockets and offsets, and each step
    # has started; an action cut off here reads as interrupted
    (action,) = history(journal).actions
    assert action.event == "sync" and action.status == "interrupted"
    assert [s.host for s in action.plan.steps] == ["b", "c"]
    assert "/s/b" in action.plan.steps[0].description
    assert "-120.0 ns" in action.plan.steps[0].description  # chrony's sign: true - host
    assert all(not s.reversible for s in action.plan.steps)
    ds[1].samples = 9
    ds[2].action, ds[2].error = "failed", "c: feeder: no socket at /s/c"
    sj.outcome(1)
    (action,) = history(journal).actions
    assert action.status == "failed"
    assert action.step_status(0) == "ok" and action.step_status(1) == "failed"
    assert action.steps[0]["detail"] == "9 samples sent"
    runner = CliRunner()
    rows = json.loads(runner.invoke(app, ["journal", "--format", "json"]).stdout)["entries"]
    assert [(r["kind"], r["element"], r["status"]) for r in rows] == [("sync", "chronyd", "failed")]
    refused = runner.invoke(app, ["rollback", action.id])
    assert refused.exit_code == 2 and "nothing to undo" in refused.stderr
