"""What the journal says happened: its lines folded into one ``Action`` per action id.

An apply or a rollback is written ahead of its effects (schema ``cwctl.journal/2``)::

    {"event": "intent", "id", "time", "action": "apply"|"rollback", "plan": {...},
     "prior": {...}, "rollback_of": "<id>"}                  # before any target is touched
    {"event": "step", "id", "index", "status": "started"}    # before step INDEX runs
    {"event": "step", "id", "index", "status": "ok"|"failed", "rc", "detail"}
    {"event": "step", "id", "index", "status": "undoing"}    # rolling back after a failure
    {"event": "step", "id", "index", "status": "rolled back"|"rollback failed"|"not undone"}
    {"event": "end", "id", "status": "applied"|"failed"}
    {"event": "verify", "id", "status": "gone"|"still there"|"unvouched", "verify": {...}}

An action with an intent and no end is ``interrupted`` (killed, lost its terminal, the
machine crashed). Its steps that *may have changed* their target are those whose last
record is ``started``, ``ok``, ``undoing``, ``rollback failed`` or ``not undone``: rollback
undoes exactly those (every undo sets an absolute state, so undoing a step that never got
to run changes nothing). Lines of the older ``cwctl.journal/1`` (one line per action,
written after it ran) still read, as finished actions.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cwctl.actions.journal import Journal, JournalRead
from cwctl.actions.plan import ActionPlan
from cwctl.errors import InputError

APPLIED, FAILED, INTERRUPTED = "applied", "failed", "interrupted"
# step states whose target may differ from what it was before the action
MAY_HAVE_CHANGED = frozenset({"started", "ok", "undoing", "rollback failed", "not undone"})


@dataclass
class Action:
    id: str
    event: str  # apply | rollback
    plan: ActionPlan
    time: str | None = None
    status: str = INTERRUPTED
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)  # last record per step
    prior: dict[str, Any] = field(default_factory=dict)
    rollback_of: str | None = None
    verify: str | None = None

    def step_status(self, index: int) -> str:
        return str(self.steps.get(index, {}).get("status", "not run"))

    def may_have_changed(self) -> list[int]:
        return [i for i in range(len(self.plan.steps)) if self.step_status(i) in MAY_HAVE_CHANGED]


@dataclass
class History:
    actions: list[Action]
    read: JournalRead

    def by_id(self, action_id: str) -> Action | None:
        return next((a for a in reversed(self.actions) if a.id == action_id), None)

    def undone_by(self, action_id: str) -> Action | None:
        """The rollback that finished undoing ``action_id``, if one did."""
        return next(
            (
                a
                for a in reversed(self.actions)
                if a.event == "rollback" and a.rollback_of == action_id and a.status == APPLIED
            ),
            None,
        )

    def interrupted(self) -> list[Action]:
        """Interrupted actions not undone since (a rollback of them that finished)."""
        return [a for a in self.actions if a.status == INTERRUPTED and not self.undone_by(a.id)]


def _plan(data: Any) -> ActionPlan | None:
    try:
        return ActionPlan.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def fold(read: JournalRead) -> History:
    actions: dict[str, Action] = {}
    order: list[str] = []
    for n, e in enumerate(read.entries):
        eid, event = str(e["id"]), e.get("event")
        action = actions.get(eid)
        if event == "intent" or (event in ("apply", "rollback") and "status" in e):
            plan = _plan(e.get("plan"))
            if plan is None:
                read.skipped.append(f"journal entry {n + 1} ({eid}): no readable plan, skipped")
                continue
            kind = e.get("action", event)
            action = Action(eid, str(kind), plan, e.get("time"), rollback_of=e.get("rollback_of"))
            action.prior = dict(e.get("prior") or {})
            if event != "intent":  # cwctl.journal/1: the whole action in one line
                action.status = str(e.get("status"))
                action.steps = {int(s["index"]): s for s in e.get("steps", []) if "index" in s}
            if eid not in actions:
                order.append(eid)
            actions[eid] = action
        elif action is None:
            read.skipped.append(f"journal entry {n + 1} ({eid}): {event} of no known action")
        elif event == "step" and isinstance(e.get("index"), int):
            action.steps[e["index"]] = e
        elif event == "end":
            action.status = str(e.get("status"))
        elif event == "verify":
            action.verify = str(e.get("status"))
    return History([actions[i] for i in order], read)


def history(journal: Journal) -> History:
    return fold(journal.read())


def find(journal: Journal, action_id: str | None, hist: History | None = None) -> Action:
    """The apply ``action_id`` (the latest apply when None), refusing what cannot be
    rolled back: a rollback, an action that changed nothing, one already rolled back."""
    hist = hist or history(journal)
    if action_id is None:
        applies = [a for a in hist.actions if a.event == "apply"]
        if not applies:
            raise InputError(f"nothing to roll back: the journal {journal.path} has no actions")
        action = applies[-1]
    else:
        found = hist.by_id(action_id)
        if found is None:
            raise InputError(f"no journal entry {action_id!r} in {journal.path} (cwctl journal)")
        action = found
        if action.event == "rollback":
            hint = (
                f"; it was interrupted: cwctl rollback {action.rollback_of} finishes the undo"
                if action.status == INTERRUPTED
                else "; to redo that action, plan it again"
            )
            raise InputError(f"{action_id} is itself a rollback (of {action.rollback_of}){hint}")
        if action.event == "sync":  # cwctl/chrony/journal.py
            raise InputError(
                f"{action_id} fed chronyd (cwctl sync): nothing to undo; stopping cwctl sync "
                "ends the feed and chronyd goes back to its other sources"
            )
    done = hist.undone_by(action.id)
    if done is not None:
        raise InputError(
            f"{action.id} was already rolled back at {done.time} by {done.id}; "
            "refusing to roll it back twice"
        )
    if action.status != INTERRUPTED and not action.may_have_changed():
        raise InputError(
            f"{action.id} did not apply (status {action.status}) and left nothing to undo: "
            "the steps that ran were rolled back when it failed (cwctl journal lists the others)"
        )
    return action


def iter_rows(hist: History) -> Iterator[dict[str, Any]]:
    """One summary row per action, for ``cwctl journal``; ``rolled_back_by`` filled in."""
    for a in hist.actions:
        undone = hist.undone_by(a.id)
        yield {
            "id": a.id,
            "time": a.time,
            "event": a.event,
            "kind": a.plan.kind,
            "element": a.plan.element,
            "status": a.status,
            "steps_ok": sum(1 for i in range(len(a.plan.steps)) if a.step_status(i) == "ok"),
            "steps": len(a.plan.steps),
            "may_have_changed": a.may_have_changed() if a.status == INTERRUPTED else [],
            "where": a.plan.context.get("source"),
            # who: cli, tui or watch, and the local user (entries before 0.x: the watch's
            # mark only, else unknown)
            "by": a.plan.context.get("by") or ("watch" if "watch" in a.plan.context else None),
            "user": a.plan.context.get("user"),
            "rollback_of": a.rollback_of,
            "rolled_back_by": undone.id if undone else None,
            "verify": a.verify,
        }


def select_rows(
    rows: list[dict[str, Any]],
    *,
    element: str | None = None,
    since: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """``cwctl journal``'s filters: the actions on ``element`` (a glob), at or after
    ``since`` (a UTC time as the journal writes it, ``2026-12-06T10:00:00Z``; the same
    format compares as text), the last ``limit`` of them."""
    if element is not None:
        rows = [r for r in rows if fnmatch.fnmatchcase(str(r["element"]), element)]
    if since is not None:
        rows = [r for r in rows if r["time"] is not None and str(r["time"]) >= since]
    return rows[-limit:] if limit is not None else rows
