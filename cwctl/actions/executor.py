"""Carry a plan out: steps in order, stop at the first failure, roll back what ran.

``execute(plan, runner)`` runs each step (argv through the runner on the step's host,
or a model change on the simulator). When a step fails, the steps before it are undone
in reverse order and the rest never run ("roll back what ran"); ``Execution`` says for
every step what happened. ``apply_plan`` does that and appends the outcome to the
journal. ``rollback_plan`` is the plan that undoes a journalled action: the inverses
of the steps that ran, last first. ``verify`` rescans and says whether the suspect is
gone. Nothing here asks the operator anything; the CLI confirms before calling.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cwctl import settings
from cwctl.actions.history import Action
from cwctl.actions.journal import Journal, JournalWriteError
from cwctl.actions.plan import ActionPlan, Step, utc_now
from cwctl.actions.runners import CommandResult, Runner
from cwctl.actions.target import ActionTarget

if TYPE_CHECKING:
    from cwctl.scan.snapshot import FabricSnapshot

LINE_ROOM = 512  # bytes a step, verify or end line of the journal takes, with room

# step statuses (STARTED and UNDOING are only written to the journal, ahead of the effect)
OK, FAILED, NOT_RUN, STARTED, UNDOING = "ok", "failed", "not run", "started", "undoing"
ROLLED_BACK, ROLLBACK_FAILED, IRREVERSIBLE = "rolled back", "rollback failed", "not undone"


@dataclass
class StepOutcome:
    index: int
    status: str = NOT_RUN
    rc: int | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "status": self.status, "rc": self.rc, "detail": self.detail}


@dataclass
class Execution:
    plan: ActionPlan
    outcomes: list[StepOutcome]
    failed: int | None = None  # index of the step that failed
    # why the journal stopped taking lines mid-apply (a full disk): the apply stopped there
    # and what ran was rolled back; None when every line was written
    journal_error: str | None = None

    @property
    def status(self) -> str:
        return "applied" if self.failed is None else "failed"

    def summary(self) -> str:
        """Lines for the operator: what ran, what failed, what was rolled back."""
        lines = []
        for o, step in zip(self.outcomes, self.plan.steps, strict=True):
            why = f" ({o.detail})" if o.detail else ""  # an ok step's: it changed nothing
            lines.append(f"{o.index + 1:>2}. [{step.host}] {o.status}: {step.description}{why}")
        return "\n".join(lines)


async def run_step(runner: Runner, step: Step) -> CommandResult:
    if step.change is not None:
        return await runner.apply_change(step.change)
    return await runner.run(step.host, step.argv)


Progress = Callable[[int, Step, str], None]


async def execute(
    plan: ActionPlan,
    runner: Runner,
    progress: Progress | None = None,
    journal: Journal | None = None,
) -> Execution:
    """Run the steps; with ``journal``, each step's start and outcome is appended as it
    happens (the caller wrote the intent first: ``apply_plan``)."""
    outcomes = [StepOutcome(i) for i in range(len(plan.steps))]
    execution = Execution(plan, outcomes)
    note = _noter(plan, journal)
    quiet = _noter(plan, journal, quiet=True)  # while rolling back: the undo matters more
    for i, step in enumerate(plan.steps):
        if progress is not None:
            progress(i, step, "running")
        try:
            note(outcomes[i], STARTED)
        except JournalWriteError as exc:  # not run: the journal must say so first
            outcomes[i].detail = "not run: the journal could not be written"
            execution.failed, execution.journal_error = i, str(exc)
            await _roll_back(plan, outcomes[:i], runner, progress, quiet)
            break
        result = await run_step(runner, step)
        outcomes[i].rc = result.rc
        if result.ok:
            if step.change is not None:  # a model change says when it changed nothing
                outcomes[i].detail = result.detail()
            try:
                note(outcomes[i], OK)
            except JournalWriteError as exc:  # it ran, unrecorded: undone with the rest
                outcomes[i].detail = "ran, but the journal could not record it"
                execution.failed, execution.journal_error = i, str(exc)
                await _roll_back(plan, outcomes[: i + 1], runner, progress, quiet)
                break
            continue
        outcomes[i].detail = result.detail() or f"exit {result.rc}"
        quiet(outcomes[i], FAILED)
        execution.failed = i
        await _roll_back(plan, outcomes[:i], runner, progress, quiet)
        break
    return execution


def _noter(
    plan: ActionPlan, journal: Journal | None, *, quiet: bool = False
) -> Callable[[StepOutcome, str], None]:
    """Record a step's status (and journal it); ``quiet``: a journal that cannot take the
    line is not a reason to stop (a rollback goes on)."""

    def note(outcome: StepOutcome, status: str) -> None:
        if status not in (STARTED, UNDOING):
            outcome.status = status
        if journal is not None:
            record = {"id": plan.id, "event": "step", "index": outcome.index, "status": status}
            if status not in (STARTED, UNDOING):
                record.update(rc=outcome.rc, detail=outcome.detail)
            try:
                journal.append(record)
            except JournalWriteError:
                if not quiet:
                    raise

    return note


async def _roll_back(
    plan: ActionPlan,
    ran: list[StepOutcome],
    runner: Runner,
    progress: Progress | None,
    note: Callable[[StepOutcome, str], None],
) -> None:
    for outcome in reversed(ran):
        step = plan.steps[outcome.index]
        if not step.reversible:
            note(outcome, IRREVERSIBLE)
            continue
        if progress is not None:
            progress(outcome.index, step, "rolling back")
        note(outcome, UNDOING)
        result = await run_step(runner, step.inverse())
        if result.ok:
            note(outcome, ROLLED_BACK)
        else:
            outcome.detail = result.detail() or f"exit {result.rc}"
            note(outcome, ROLLBACK_FAILED)


async def apply_plan(
    plan: ActionPlan, runner: Runner, journal: Journal, progress: Progress | None = None
) -> Execution:
    """Write ahead, execute, journal. The intent (the plan with its undo steps and the
    prior state it was made on) is durable before the first step runs; each step's start
    and outcome follow as they happen; an ``end`` line closes the action. An action
    killed on the way has no end: ``history`` reads it as interrupted."""
    intent: dict[str, Any] = {
        "id": plan.id,
        "time": utc_now(),
        "event": "intent",
        "action": "rollback" if plan.rollback_of else "apply",
        "plan": plan.to_json(),
        "prior": plan.prior,
        "fingerprint": plan.fingerprint(),  # of prior: the state the plan was checked on
    }
    if plan.rollback_of:
        intent["rollback_of"] = plan.rollback_of
    # room for every line this action can write, taken before anything is touched
    journal.reserve(len(json.dumps(intent)) + (4 * len(plan.steps) + 4) * LINE_ROOM)
    journal.append(intent, sync_dir=True)
    execution = await execute(plan, runner, progress, journal)
    end = {"id": plan.id, "time": utc_now(), "event": "end", "status": execution.status}
    try:
        journal.append(end)
    except JournalWriteError as exc:  # the action is over; the journal reads it interrupted
        execution.journal_error = execution.journal_error or str(exc)
    return execution


def rollback_plan(action: Action) -> ActionPlan:
    """The plan that undoes what ``action`` may have changed, last first: the steps that
    finished, and those it was killed during (started, or being undone)."""
    original = action.plan
    steps, notes = [], []
    for i in sorted(action.may_have_changed(), reverse=True):
        step = original.steps[i]
        if step.reversible:
            steps.append(step.inverse())
        else:
            notes.append(f"step {i + 1} cannot be undone: {step.description}")
        if action.step_status(i) in ("started", "undoing"):
            notes.append(
                f"step {i + 1} was interrupted ({action.step_status(i)}): it may or may not "
                "have run; its undo sets the prior state either way"
            )
    return ActionPlan(
        kind="rollback",
        element=original.element,
        reason=f"undo {original.kind} {original.element} ({original.id})",
        steps=steps,
        context=original.context,
        notes=notes,
        rollback_of=original.id,
    )


@dataclass
class Verification:
    element: str
    gone: bool
    suspects: list[str] = field(default_factory=list)
    # the suspect (an element or a candidate set) that still holds the element
    held_by: str | None = None
    # why the rescan's window could not tell (it cannot vouch that the element is gone)
    inconclusive: list[str] = field(default_factory=list)
    # loss or delay the rescan found that no suspect explains: it may be the element's
    unlocalised: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"element": self.element, "gone": self.gone,
                               "suspects": self.suspects}  # fmt: skip
        if self.held_by is not None:
            out["held_by"] = self.held_by
        if self.inconclusive:
            out["inconclusive"] = self.inconclusive
        if self.unlocalised is not None:
            out["unlocalised"] = self.unlocalised
        return out

    def message(self) -> str:
        if self.gone:
            rest = f" (other suspects: {', '.join(self.suspects)})" if self.suspects else ""
            return f"verify: {self.element} is no longer a suspect{rest}"
        if self.held_by is not None and self.held_by != self.element:
            return (
                f"verify: {self.element} is still a suspect after the change: one of {self.held_by}"
            )
        if self.held_by is None and self.unlocalised is not None:
            return (
                f"verify: the rescan cannot vouch that {self.element} is gone: {self.unlocalised}"
            )
        if self.held_by is None and self.inconclusive:
            return (
                f"verify: the rescan could not tell whether {self.element} is gone "
                f"(inconclusive: {'; '.join(self.inconclusive)})"
            )
        return f"verify: {self.element} is still a suspect after the change"


def check_snapshot(snapshot: FabricSnapshot, element: str) -> Verification:
    """Gone only when no suspect is the element or a candidate set holding it, the rescan
    found no loss or delay that nothing explains (it could be the element's), and its
    window could tell (an inconclusive one vouches for nothing)."""
    names = [s.element for s in snapshot.suspects]
    held = next((s.element for s in snapshot.suspects if s.covers(element)), None)
    inconclusive = _could_not_tell(snapshot, element)
    lost = getattr(snapshot, "unlocalised", None)
    unexplained = str(lost.get("evidence", "unlocalised loss")) if lost else None
    gone = held is None and not inconclusive and unexplained is None
    if held is not None:
        inconclusive, unexplained = [], None
    return Verification(element, gone, names, held, inconclusive, unexplained)


def _could_not_tell(snapshot: FabricSnapshot, element: str) -> list[str]:
    """The rescan window's reasons it could not tell, unless the only elements it crossed
    too thinly are the ones steered around: the acted-on element and whatever shares a
    switch with it (a spine and its links; a link's spine, which the simulator's leaves
    all give up): meant to be crossed no more."""
    reasons = list(getattr(snapshot, "inconclusive", []) or [])
    window = snapshot.telemetry.get("window") if hasattr(snapshot, "telemetry") else None
    if not reasons or not isinstance(window, dict):
        return reasons
    few = window.get("pairs_per_peer", 0) < window.get("needed_pairs_per_peer", 0)
    switches = _switch_parts(element)
    steered = [n for n in window.get("thin", {}) if n == element or switches & _switch_parts(n)]
    if few or len(steered) < window.get("thin_elements", 0):
        return reasons
    return []


def _switch_parts(name: str) -> set[str]:
    """The switch names in an element's name (``leaf1-spine2``: both; a host, a NIC: none):
    the parts between hyphens that are a word then a number, with no ``/``."""
    return {p for p in name.split("-") if "/" not in p and p[:1].isalpha() and p[-1:].isdigit()}


async def verify(
    target: ActionTarget, element: str, *, duration_s: float | None = None
) -> Verification:
    """Rescan the target through a scan session on the same hosts: the simulator model
    the plan changed, or the inventory over SSH."""
    from dataclasses import replace

    from cwctl.session import ScanSession

    assert target.request is not None, "a verification rescans the request's fabric"
    # a verdict now, as a scan gives it: the quick budget unless --budget said otherwise
    request = target.request.at_budget(settings.BUDGET_QUICK)
    if duration_s is not None:
        request = replace(request, duration_s=duration_s)
    async with ScanSession(request, source=target.scan_source(request)) as session:
        return check_snapshot(await session.scan(), element)


def record_verification(journal: Journal, plan: ActionPlan, result: Verification) -> None:
    journal.append(
        {
            "id": plan.id,
            "time": utc_now(),
            "event": "verify",
            "status": "gone"
            if result.gone
            else "unvouched"
            if result.held_by is None
            else "still there",
            "verify": result.to_json(),
        }
    )
