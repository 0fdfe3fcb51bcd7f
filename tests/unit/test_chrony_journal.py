"""``cwctl sync --apply`` in the journal: one action per stretch of rounds feeding the
same hosts, written ahead, folded like any action, listed by ``cwctl journal``, refused
by ``cwctl rollback`` (a feed has nothing to undo)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cwctl.actions.history import history
from cwctl.actions.journal import Journal
from cwctl.chrony.journal import SyncJournal
from cwctl.chrony.rules import FeedDecision
from cwctl.cli import app


def decisions(*fed: str, step: str | None = None) -> list[FeedDecision]:
    out = [FeedDecision("a", "skip", "the reference: never fed")]
    for h in fed:
        out.append(
            FeedDecision(h, "fed", offset_ns=120.0, drift_ppb=3.0, t_ref_ns=1, socket=f"/s/{h}")
        )
        out[-1].step = h == step
    return out


def settle(sj: SyncJournal, n: int, ds: list[FeedDecision], samples: int = 5) -> None:
    for d in ds:
        if d.action == "fed":
            d.samples = samples
    sj.outcome(n, ds)


def lines(journal: Journal) -> int:
    return len(journal.read().entries)


def test_a_stretch_is_one_action_written_ahead(tmp_path, monkeypatch):
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    journal = Journal(tmp_path)
    sj = SyncJournal(journal, {"source": "local", "reference": "a"})
    r1 = decisions("b", "c")
    sj.intent(1, r1)
    # before any outcome: the intent names the hosts, sockets and offsets, and each step
    # has started; an action cut off here reads as interrupted
    (action,) = history(journal).actions
    assert action.event == "sync" and action.status == "interrupted"
    assert [s.host for s in action.plan.steps] == ["b", "c"]
    assert "/s/b" in action.plan.steps[0].description
    assert "-120.0 ns" in action.plan.steps[0].description  # chrony's sign: true - host
    assert all(not s.reversible for s in action.plan.steps)
    written = lines(journal)
    for n in range(2, 50):  # the same hosts, round after round: not a line more
        sj.intent(n, decisions("b", "c"))
        settle(sj, n - 1, r1 if n == 2 else decisions("b", "c"))
    assert lines(journal) == written
    r50 = decisions("b")  # c drops out: the stretch ends once counted, a new one starts
    r50[0].action = "skip"
    sj.intent(50, r50)
    settle(sj, 49, decisions("b", "c"))
    r50[1].action, r50[1].error = "failed", "b: feeder: no socket at /s/b"
    sj.outcome(50, r50)
    sj.close()
    first, second = history(journal).actions
    assert first.status == "applied" and first.step_status(0) == "ok"
    assert first.steps[0]["detail"] == "245 samples sent, rounds 1-49"
    assert second.status == "failed" and second.steps[0]["detail"].endswith("no socket at /s/b")
    runner = CliRunner()
    rows = json.loads(runner.invoke(app, ["journal", "--format", "json"]).stdout)["entries"]
    assert [(r["kind"], r["element"], r["status"]) for r in rows] == [
        ("sync", "chronyd", "applied"),
        ("sync", "chronyd", "failed"),
    ]
    refused = runner.invoke(app, ["rollback", first.id])
    assert refused.exit_code == 2 and "nothing to undo" in refused.stderr


def test_every_step_feed_is_its_own_action(tmp_path):
    journal = Journal(tmp_path)
    sj = SyncJournal(journal, {"source": "local", "reference": "a"})
    for n in (1, 2, 3):
        sj.intent(n, decisions("b", step="b"))
    for n in (1, 2, 3):
        settle(sj, n, decisions("b", step="b"))
    sj.close()
    actions = history(journal).actions
    assert len(actions) == 3 and all(a.status == "applied" for a in actions)
    assert all("confirmed" in a.plan.steps[0].description for a in actions)
