"""The journal as a write-ahead log: intent before effect, torn lines, interrupted
actions, refusal of a journal or lock someone else could have written. Real files,
real commands (``cp``, ``touch``), a real chown to another uid where the test runs as root.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cwctl.actions.executor import apply_plan, rollback_plan
from cwctl.actions.history import INTERRUPTED, find, history, iter_rows
from cwctl.actions.journal import ActionLock, Journal
from cwctl.actions.plan import ActionPlan, Step
from cwctl.actions.runners import LocalRunner
from cwctl.errors import InputError


def touch_step(path: Path) -> Step:
    return Step(
        "local", f"create {path.name}", argv=("touch", str(path)), undo_argv=("rm", str(path))
    )


def v1_entry(eid: str, event: str = "apply", status: str = "applied", **more: object) -> dict:
    """A line as cwctl.journal/1 wrote it (one line per action, after it ran)."""
    plan = ActionPlan("drain", "gpu-001", "r", [Step("local", "d", ("true",), ("true",))], id=eid)
    steps = [{"index": 0, "status": "ok", "rc": 0, "detail": ""}]
    return {"id": eid, "event": event, "status": status, "plan": plan.to_json(), "steps": steps}


async def test_the_intent_is_on_disk_before_the_first_step_runs(tmp_path: Path) -> None:
    """The first step copies the journal as it is at that moment: it already holds the
    intent (plan, undo steps, prior state) and the step's own 'started' record."""
    state = tmp_path / "state"
    seen = tmp_path / "seen.jsonl"
    plan = ActionPlan(
        "reroute",
        "x",
        "t",
        [
            Step("local", "copy", argv=("cp", str(state / "journal.jsonl"), str(seen))),
            touch_step(tmp_path / "b"),
        ],
        prior={"local": {"seen": "before"}},
    )
    execution = await apply_plan(plan, LocalRunner(), Journal(state))
    assert execution.status == "applied"
    lines = [json.loads(x) for x in seen.read_text().splitlines()]
    assert [(x["event"], x.get("status")) for x in lines] == [
        ("intent", None),
        ("step", "started"),
    ]
    assert lines[0]["plan"]["steps"][1]["undo_argv"] == ["rm", str(tmp_path / "b")]
    assert lines[0]["prior"] == {"local": {"seen": "before"}}
    (action,) = history(Journal(state)).actions
    assert action.status == "applied" and action.may_have_changed() == [0, 1]


def test_a_torn_last_line_is_reported_and_never_glued_to_the_next(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(v1_entry("a1"))
    with (tmp_path / "journal.jsonl").open("a") as f:
        f.write('{"id": "a2", "ev')  # a crash mid-write
    read = journal.read()
    assert [e["id"] for e in read.entries] == ["a1"]
    assert read.torn is not None and ":2: the last line is torn" in read.torn
    journal.append(v1_entry("a3"))
    read = journal.read()
    assert [e["id"] for e in read.entries] == ["a1", "a3"]  # a3 on a line of its own
    assert read.torn is None and len(read.skipped) == 1 and ":2: skipped" in read.skipped[0]
    assert find(journal, None).id == "a3"


def test_v1_lines_still_read_and_rollback_refusals(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(v1_entry("a1"))
    journal.append(v1_entry("a2"))
    assert find(journal, None).id == "a2"
    plan = rollback_plan(find(journal, "a1"))
    assert plan.rollback_of == "a1" and plan.steps[0].argv == ("true",)
    journal.append({**v1_entry("r1", event="rollback"), "rollback_of": "a1"})
    with pytest.raises(InputError, match="already rolled back"):
        find(journal, "a1")
    with pytest.raises(InputError, match="itself a rollback"):
        find(journal, "r1")
    with pytest.raises(InputError, match="no journal entry"):
        find(journal, "zz")
    rows = {r["id"]: r for r in iter_rows(history(journal))}
    assert rows["a1"]["rolled_back_by"] == "r1" and rows["a2"]["rolled_back_by"] is None
    assert (tmp_path / "journal.jsonl").stat().st_mode & 0o777 == 0o600


def test_an_action_without_its_end_is_interrupted_and_rollback_covers_the_started_step(
    tmp_path: Path,
) -> None:
    a, b, c = (touch_step(tmp_path / n) for n in "abc")
    plan = ActionPlan("reroute", "x", "t", [a, b, c])
    journal = Journal(tmp_path / "state")
    journal.append({"id": plan.id, "event": "intent", "action": "apply", "plan": plan.to_json()})
    for index, status in ((0, "started"), (0, "ok"), (1, "started")):  # killed during step 2
        journal.append({"id": plan.id, "event": "step", "index": index, "status": status})
    hist = history(journal)
    (action,) = hist.actions
    assert action.status == INTERRUPTED and action.may_have_changed() == [0, 1]
    assert hist.interrupted() == [action]
    undo = rollback_plan(find(journal, None))
    assert [s.argv for s in undo.steps] == [b.undo_argv, a.undo_argv]  # last first, not c
    assert any("step 2 was interrupted" in n for n in undo.notes)
    row = next(iter_rows(hist))
    assert row["status"] == "interrupted" and row["may_have_changed"] == [0, 1]


async def test_an_interrupted_rollback_is_finished_by_rolling_back_the_original(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "state")
    plan = ActionPlan("reroute", "x", "t", [touch_step(tmp_path / "a")])
    await apply_plan(plan, LocalRunner(), journal)
    undo = rollback_plan(find(journal, plan.id))
    journal.append(
        {
            "id": undo.id,
            "event": "intent",
            "action": "rollback",
            "plan": undo.to_json(),
            "rollback_of": plan.id,
        }
    )
    with pytest.raises(InputError, match=f"interrupted: cwctl rollback {plan.id}"):
        find(journal, undo.id)
    assert find(journal, plan.id).id == plan.id  # not counted as rolled back
    done = await apply_plan(rollback_plan(find(journal, plan.id)), LocalRunner(), journal)
    assert done.status == "applied" and not (tmp_path / "a").exists()
    with pytest.raises(InputError, match="already rolled back"):
        find(journal, plan.id)


# --- trust -----------------------------------------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


@needs_root
def test_a_journal_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(v1_entry("a1"))
    os.chown(journal.path, 12345, 12345)
    with pytest.raises(InputError, match="owned by uid 12345, not by you"):
        find(journal, None)
    with pytest.raises(InputError, match="owned by uid 12345"):
        journal.append(v1_entry("a2"))


def test_a_journal_others_can_write_is_refused(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(v1_entry("a1"))
    journal.path.chmod(0o666)
    with pytest.raises(InputError, match=r"writable by group or others \(mode 0666\)"):
        journal.read()


def test_a_symlinked_journal_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.jsonl"
    real.write_text(json.dumps(v1_entry("a1")) + "\n")
    real.chmod(0o600)
    (tmp_path / "journal.jsonl").symlink_to(real)
    with pytest.raises(InputError, match="it is a symlink"):
        Journal(tmp_path).read()


def test_a_state_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    with pytest.raises(InputError, match=r"state directory .* writable by group or others"):
        Journal(state).append(v1_entry("a1"))
    with pytest.raises(InputError, match="writable by group or others"), ActionLock(state):
        pass


@needs_root
def test_a_lock_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "action.lock").touch(mode=0o600)
    os.chown(tmp_path / "action.lock", 12345, 12345)
    refused = pytest.raises(InputError, match=r"action lock .* owned by uid 12345")
    with refused, ActionLock(tmp_path):
        pass


def test_a_fifo_in_the_journals_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    from cwctl.errors import InputError

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / "journal.jsonl", 0o600)
    with pytest.raises(InputError, match="not a regular file"):
        Journal(state).read()
