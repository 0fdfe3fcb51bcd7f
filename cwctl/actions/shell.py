"""One action from start to end for a command-line shell: plan, show, confirm (through
a callback the shell gives), apply, verify, journal, all through ``ActionSession``.

The CLI passes ``confirm`` (``typer.confirm``) and ``say`` (stderr) / ``show`` (stdout)
callbacks; nothing here prints or asks by itself. Exit codes (docs/actions.md): 0 shown
or applied (and verified), 2 refused or declined, 3 a step failed (what ran was rolled
back) or ``--verify`` still finds the suspect.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cwctl.actions.history import INTERRUPTED, Action
from cwctl.actions.plan import ActionPlan, Step, format_plan
from cwctl.actions.session import ActionSession, Ask
from cwctl.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE

ACTION_SCHEMA = "cwctl.action/1"


@dataclass
class Shell:
    """How the session talks to the operator."""

    show: Callable[[str], None]  # data: the plan (stdout)
    say: Callable[[str], None]  # messages (stderr)
    confirm: Callable[[ActionPlan], bool]
    full: bool = False  # show programs passed as arguments in full (-v)
    as_json: bool = False  # one cwctl.action/1 object on stdout instead of the text plan
    progress: Callable[[int, Step, str], None] | None = None  # each step as it starts
    # what it is doing while nothing else is said (planning reads the fabric: seconds);
    # a passing line, given way to by the next ``show`` or ``say``
    status: Callable[[str], None] | None = None


async def carry_out(
    session: ActionSession, plan: ActionPlan, shell: Shell, *, apply: bool, check: bool = False
) -> int:
    """Show the plan; with ``apply``, confirm, execute, journal, verify. The exit code.

    With ``shell.as_json`` the plan is not shown as text: one ``cwctl.action/1`` object is
    shown at the end instead (the plan, what happened to each step, the verification)."""
    report: dict[str, Any] = {"schema": ACTION_SCHEMA, "plan": plan.to_json(), "status": ""}
    if not shell.as_json:
        shell.show(format_plan(plan, full=shell.full))
    try:
        return await _carry_out(session, plan, shell, report, apply, check)
    finally:
        if shell.as_json:
            shell.show(json.dumps(report, indent=1) + "\n")


async def _carry_out(
    session: ActionSession,
    plan: ActionPlan,
    shell: Shell,
    report: dict[str, Any],
    apply: bool,
    check: bool,
) -> int:
    if not apply:
        report["status"] = "planned"
        shell.say("dry run: nothing changed (--apply carries the plan out)")
        return EXIT_OK
    if not plan.steps and not plan.rollback_of:  # (a rollback is journalled even when
        # empty: it closes an interrupted action that was killed before any step started)
        report["status"] = "nothing to apply"
        shell.say("nothing to apply")
        return EXIT_OK
    if not shell.confirm(plan):
        report["status"] = "declined"
        shell.say("not applied (declined)")
        return EXIT_USAGE
    outcome = await session.apply(plan, check=check, progress=shell.progress)
    execution = outcome.execution
    report["status"] = execution.status
    report["steps"] = [o.to_json() for o in execution.outcomes]
    shell.say("steps:\n" + outcome.lines[0])
    for line in outcome.lines[1:]:
        shell.say(line)
    if execution.failed is not None:
        return EXIT_PROBLEMS
    if outcome.job is not None:
        report["job"] = outcome.job.to_json()
    if outcome.verification is not None:
        report["verify"] = outcome.verification.to_json()
        return EXIT_OK if outcome.verification.gone else EXIT_PROBLEMS
    return EXIT_OK


def _warn_interrupted(shell: Shell, actions: list[Action]) -> None:
    for action in actions:
        shell.say(
            f"note: {action.plan.kind} {action.plan.element} ({action.id}) was interrupted; "
            f"cwctl rollback {action.id} undoes what it may have changed"
        )


async def act(
    ask: Ask, request: Any, shell: Shell, *, apply: bool, check: bool = False, **ssh: Any
) -> int:
    """Plan ``ask`` and carry it out. With ``apply`` all of it, from reading the current
    state to journalling, holds the action lock (``ActionSession``)."""
    async with ActionSession(request, lock=apply, **ssh) as session:
        _warn_interrupted(shell, session.interrupted())
        if shell.status is not None:
            shell.status(f"planning {ask.kind} {ask.element}: reading the fabric…")
        plan = await session.plan(ask)
        return await carry_out(session, plan, shell, apply=apply, check=check)


async def roll_back(action_id: str | None, shell: Shell, *, apply: bool, **ssh: Any) -> int:
    """Plan the undo of a journalled action; with ``apply`` carry it out (under the lock,
    so the same action cannot be rolled back twice, even by two processes at once)."""
    undo = ActionSession.rollback(action_id, lock=apply, **ssh)
    session, plan, action = undo.session, undo.plan, undo.action
    async with session:
        for line in undo.history.read.skipped:
            shell.say(line)
        if action.status == INTERRUPTED:
            shell.say(
                f"{action.id} was interrupted: undoing the {len(action.may_have_changed())} "
                "step(s) that may have changed"
            )
        return await carry_out(session, plan, shell, apply=apply)
