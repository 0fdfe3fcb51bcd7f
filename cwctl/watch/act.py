"""A decision carried out through the actions' one front door, as a person's would be.

``act`` plans the decision's action on the watch's own fabric (``ActionSession``: the
action lock, the write-ahead journal, the prior-state check), applies it, rescans and
records the verification in the journal like ``--apply --verify`` does; a reroute the
rescan still names the element after is rolled back at once. ``restore`` rolls an action
back (``ActionSession.rollback``) and rescans: if the element is named again, the
action is applied anew. A drain is not rescanned (the host's own fault stays after a
drain by design; its scheduler steps read their state back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeGuard

from cwctl.actions.history import APPLIED, INTERRUPTED, history
from cwctl.actions.jobs import refuse_protected
from cwctl.actions.journal import Journal, LockHeld
from cwctl.actions.plan import ActionPlan
from cwctl.actions.session import ActionSession, Ask, Rollback
from cwctl.actions.switchroute import is_observe_rule
from cwctl.actions.target import same_fabric
from cwctl.errors import CwctlError
from cwctl.watch.decide import Decision
from cwctl.watch.policy import ACTIONS, KINDS

REASON = "cwctl watch"
BY = "watch"  # the key of a plan's context that says the watch applied it, and for what


def mark(decision: Decision) -> dict[str, str]:
    return {"element": decision.element, "kind": decision.kind, "action": decision.action}


@dataclass
class Left:
    """What an earlier watch left on this fabric (``left_behind``), oldest first: its
    actions in place (``adopt``: what each was for, its id), those it was killed during
    (``undo``: the ids to roll back now, an apply cut short, or the action whose restore
    was), and journal marks that are not a watch's (``skipped``: one line each)."""

    adopt: list[tuple[dict[str, str], str]] = field(default_factory=list)
    undo: list[tuple[dict[str, str], str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def valid_mark(why: Any) -> TypeGuard[dict[str, str]]:
    """A journalled ``mark`` a watch could have written: three known words as strings."""
    return (
        isinstance(why, dict)
        and all(isinstance(why.get(k), str) for k in ("element", "kind", "action"))
        and why["kind"] in KINDS
        and why["action"] in ACTIONS
        and why["kind"] in ACTIONS[why["action"]]
    )


def left_behind(fabric: WatchTarget, journal: Journal | None = None) -> Left:
    """The watch's own actions on this fabric that a restarted watch (systemd, a crash,
    kill -9) must take up: applied and not rolled back (adopted, so that it still
    restores them), or interrupted (rolled back at once: the fabric as before them)."""
    hist = history(journal or fabric.journal or Journal())
    where = same_fabric(fabric.request.fabric_context())
    out = Left()
    undo: set[str] = set()
    for a in hist.actions:
        why = a.plan.context.get(BY)
        if why is None or same_fabric(a.plan.context) != where:
            continue
        if not valid_mark(why):
            out.skipped.append(f"journal action {a.id}: its watch mark {str(why)[:80]} skipped")
            continue
        if a.event == "apply" and a.status == INTERRUPTED and a.may_have_changed():
            if hist.undone_by(a.id) is None:
                undo.add(a.id)
                out.undo.append((why, a.id))
        elif a.event == "rollback" and a.status == INTERRUPTED and a.rollback_of is not None:
            of = a.rollback_of  # a restore cut short: finish it
            if hist.undone_by(of) is None and of not in undo:
                undo.add(of)
                out.undo.append((why, of))
    for a in hist.actions:
        why = a.plan.context.get(BY)
        if a.event != "apply" or a.status != APPLIED or a.id in undo or not valid_mark(why):
            continue
        if hist.undone_by(a.id) is None and same_fabric(a.plan.context) == where:
            out.adopt.append((why, a.id))
    return out


@dataclass(frozen=True)
class Done:
    """What came of a decision: ``ok``; ``applied`` (something changed, even if undone:
    it counts against the hour); the journal id it ran as; a short code and a line."""

    ok: bool
    applied: bool
    action_id: str | None
    code: str
    why: str
    # the watch's probes take other paths after it (the paths learnt before are stale)
    moves_probes: bool = True


def keeps_probes(plan: ActionPlan) -> bool:
    """The watch's probes keep their paths under ``plan``: host steering never moves them
    (the agents' sockets are unconnected), and a switch-side reroute keeps a rule that
    routes them as before (``switchroute.observe_steps``). Forgetting the paths learnt
    before would have them traced again while the fault is on, where a trace through the
    dead element never answers and its flows go unplaced."""
    return bool(plan.steering) or any(is_observe_rule(s) for s in plan.steps)


@dataclass(frozen=True)
class WatchTarget:
    """What actions apply to: the watch's request, and its simulator model (--sim)."""

    request: Any
    model: Any = None
    journal: Journal | None = None
    verify_s: float | None = None  # a rescan's probing (None: the request's)
    protect: tuple[str, ...] = ()  # the policy's protected job marks (policy.py)
    job_log: str | None = None  # the job's step logs (policy.py), judged after acting


def ask_for(decision: Decision, job_log: str | None = None) -> Ask:
    """The front door's ``Ask`` for a policy action (``policy.ACTIONS``)."""
    if decision.action == "drain":
        return Ask("drain", decision.element, reason=REASON, suspect=decision.element)
    if decision.action == "steer":  # the open flows moved at the hosts (reroute --at hosts)
        return Ask("steer", decision.element, reason=REASON, job_log=job_log)
    return Ask(
        "reroute", decision.element, reason=REASON, suspect=decision.element, job_log=job_log
    )


async def act(fabric: WatchTarget, decision: Decision) -> Done:
    """Plan, apply, rescan (a reroute), roll back if the rescan still names the element."""
    try:
        session = ActionSession(
            fabric.request, model=fabric.model, journal=fabric.journal, by="watch"
        )
    except CwctlError as exc:  # another action holds the lock, or the hosts are unreadable
        return _not_opened(None, exc)
    try:
        ask = ask_for(decision, fabric.job_log)
        try:
            plan = await session.plan(ask)
        except CwctlError as exc:  # the planner's refusals: the last path, a leaf, ...
            return Done(False, False, None, "refused", str(exc))
        if not plan.steps:
            return Done(False, False, None, "refused", "; ".join(plan.notes) or "no steps")
        plan.context = {**plan.context, BY: mark(decision)}  # a restarted watch adopts it
        guarded = refuse_protected(plan, fabric.protect)
        if guarded is not None:  # before anything is journalled or changed
            return Done(False, False, None, "protected", guarded)
        # planned just now, under the lock: the prior is not read again. A drain is not
        # rescanned (the host's own fault stays after it by design); anything else is
        # checked as fits it (steered ports traced again on real hosts, else a rescan)
        # and rolled back at once if the element is still found
        drain = decision.action == "drain"
        outcome = await session.apply(
            plan, recheck=False, check=not drain, verify_s=fabric.verify_s, undo_unless_gone=True
        )
    finally:
        await session.close()
    if outcome.failed:
        return Done(False, True, plan.id, "failed", outcome.message.splitlines()[-1])
    if drain:
        return Done(True, True, plan.id, "applied", f"applied {plan.id}")
    checked = outcome.verification
    assert checked is not None
    if outcome.undone is None:
        job = f"; {outcome.job.message()}" if outcome.job is not None else ""
        why = checked.message() + job
        return Done(True, True, plan.id, "verified", why, moves_probes=not keeps_probes(plan))
    undo = outcome.undone.execution.plan
    back = "ROLLBACK FAILED" if outcome.undone.failed else "rolled back"
    return Done(False, True, plan.id, "verify", f"{checked.message()}; {back} ({undo.id})")


def _rollback_session(fabric: WatchTarget, action_id: str | None) -> Rollback:
    """The session that undoes ``action_id`` on the watch's fabric, and its plan."""
    return ActionSession.rollback(
        action_id,
        journal=fabric.journal,
        request=fabric.request,
        model=fabric.model,
        by="watch",
    )


def _not_opened(action_id: str | None, exc: CwctlError) -> Done:
    """A session that could not be opened: the lock held elsewhere, or refused."""
    return Done(
        False, False, action_id, "lock" if isinstance(exc, LockHeld) else "refused", str(exc)
    )


async def undo_interrupted(fabric: WatchTarget, action_id: str) -> Done:
    """Roll back what ``action_id`` (cut short, or its restore cut short) may have
    changed: every undo sets the prior state, so a step that never ran changes nothing."""
    try:
        session, plan, *_ = _rollback_session(fabric, action_id)
    except CwctlError as exc:
        return _not_opened(action_id, exc)
    try:
        outcome = await session.apply(plan)
    finally:
        await session.close()
    if outcome.execution.failed is not None:
        return Done(False, True, action_id, "failed", outcome.message.splitlines()[-1])
    return Done(True, True, plan.id, "rolled-back", f"rolled back ({plan.id})")


async def restore(fabric: WatchTarget, decision: Decision) -> Done:
    """Roll ``decision.action_id`` back and rescan; ``ok`` when the element is clean.
    Named again: the action is applied anew and ``action_id`` is the new one (None when
    that could not be done)."""
    try:
        session, plan, *_ = _rollback_session(fabric, decision.action_id)
    except CwctlError as exc:
        return _not_opened(None, exc)
    try:  # undone, then a rescan: is the element clean, now it carries traffic again?
        outcome = await session.apply(plan, check=True, verify_s=fabric.verify_s)
    finally:
        await session.close()
    if outcome.failed:
        return Done(False, True, decision.action_id, "failed", outcome.message)
    checked = outcome.verification
    assert checked is not None
    if checked.gone:
        return Done(True, True, plan.id, "clean", f"restored ({plan.id}); {checked.message()}")
    again = await act(fabric, decision)
    why = f"{checked.message()}: applied anew ({again.why})"
    return Done(False, True, again.action_id if again.ok else None, "reapplied", why)
