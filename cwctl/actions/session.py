"""One action from start to end, for the shells: build the target and runner, plan,
show, confirm (through a callback the shell gives), apply, verify, journal.

The CLI passes ``confirm`` (``typer.confirm``) and ``say`` (stderr) / ``show`` (stdout)
callbacks; nothing here prints or asks by itself. Exit codes (docs/actions.md): 0 shown
or applied (and verified), 2 refused or declined, 3 a step failed (what ran was rolled
back) or ``--verify`` still finds the suspect.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cwctl import settings
from cwctl.actions.executor import (
    ROLLBACK_FAILED,
    apply_plan,
    record_verification,
    rollback_plan,
    verify,
)
from cwctl.actions.history import INTERRUPTED, find, history
from cwctl.actions.journal import ActionLock, Journal
from cwctl.actions.plan import ActionPlan, format_plan
from cwctl.actions.planner import Target
from cwctl.actions.runners import Runner, SimRunner, SSHRunner
from cwctl.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, InputError


@dataclass
class Shell:
    """How the session talks to the operator."""

    show: Callable[[str], None]  # data: the plan (stdout)
    say: Callable[[str], None]  # messages (stderr)
    confirm: Callable[[ActionPlan], bool]
    full: bool = False  # show programs passed as arguments in full (-v)
    as_json: bool = False  # one cwctl.action/1 object on stdout instead of the text plan


def sim_target(request: Any) -> tuple[Target, Runner]:
    """The simulator's model for ``request`` (with the state saved by earlier actions)."""
    from cwctl.actions.simulated import restore_saved_state
    from cwctl.transport.sim import model_for

    model = model_for(request)
    restore_saved_state(model, request)
    return Target(model=model, request=request), SimRunner(model, request)


def inventory_target(request: Any, **ssh_options: Any) -> tuple[Target, Runner]:
    from cwctl.inventory import load_inventory

    inventory = load_inventory(request.inventory)
    target = Target(inventory=inventory, request=request, ssh_options=dict(ssh_options))
    return target, SSHRunner(inventory, **ssh_options)


def target_for(request: Any, **ssh_options: Any) -> tuple[Target, Runner]:
    return (
        sim_target(request) if request.sim is not None else inventory_target(request, **ssh_options)
    )


def request_from_context(context: dict[str, Any]) -> Any:
    """The ScanRequest a journalled plan ran against (rollback rebuilds it)."""
    from cwctl.pipeline import ScanRequest, SimOptions

    inventory = Path(context["inventory"]) if context.get("inventory") else None
    if context.get("source") == "sim":
        sim = context.get("sim") or {}
        options = SimOptions(
            hosts=int(sim.get("hosts", settings.SIM_HOSTS)),
            hosts_per_leaf=int(sim.get("hosts_per_leaf", settings.SIM_HOSTS_PER_LEAF)),
            spines=int(sim.get("spines", settings.SIM_SPINES)),
            seed=int(sim.get("seed", settings.SIM_SEED)),
        )
        return ScanRequest(sim=options, inventory=inventory)
    if inventory is None:
        raise InputError("the journal entry does not say which inventory it ran on")
    return ScanRequest(inventory=inventory)


ACTION_SCHEMA = "cwctl.action/1"


async def carry_out(
    plan: ActionPlan,
    target: Target,
    runner: Runner,
    shell: Shell,
    *,
    apply: bool,
    check: bool = False,
    journal: Journal | None = None,
) -> int:
    """Show the plan; with ``apply``, confirm, execute, journal, verify. The exit code.

    With ``shell.as_json`` the plan is not shown as text: one ``cwctl.action/1`` object is
    shown at the end instead (the plan, what happened to each step, the verification)."""
    report: dict[str, Any] = {"schema": ACTION_SCHEMA, "plan": plan.to_json(), "status": ""}
    if not shell.as_json:
        shell.show(format_plan(plan, full=shell.full))
    try:
        return await _carry_out(plan, target, runner, shell, report, apply, check, journal)
    finally:
        if shell.as_json:
            shell.show(json.dumps(report, indent=1) + "\n")


async def _carry_out(
    plan: ActionPlan,
    target: Target,
    runner: Runner,
    shell: Shell,
    report: dict[str, Any],
    apply: bool,
    check: bool,
    journal: Journal | None,
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
    journal = journal or Journal()
    execution = await apply_plan(plan, runner, journal)
    report["status"] = execution.status
    report["steps"] = [o.to_json() for o in execution.outcomes]
    shell.say("steps:\n" + execution.summary())
    if execution.failed is not None:
        step = plan.steps[execution.failed]
        detail = execution.outcomes[execution.failed].detail
        undone = [o for o in execution.outcomes if o.status == ROLLBACK_FAILED]
        tail = (
            f"; rolling back failed for step(s) {', '.join(str(o.index + 1) for o in undone)}: "
            "check them by hand"
            if undone
            else "; the steps before it were rolled back"
        )
        shell.say(
            f"step {execution.failed + 1} failed on {step.host}: {detail}{tail} (journal {plan.id})"
        )
        return EXIT_PROBLEMS
    if plan.rollback_of:
        shell.say(f"rolled back {plan.rollback_of} (journal {plan.id})")
    else:
        shell.say(f"applied {plan.id}; undo with: cwctl rollback {plan.id}")
    if check and plan.kind != "rollback":
        result = await verify(target, plan.element)
        record_verification(journal, plan, result)
        report["verify"] = result.to_json()
        shell.say(result.message())
        return EXIT_OK if result.gone else EXIT_PROBLEMS
    return EXIT_OK


async def act(
    make_plan: Callable[[Target, Runner], Awaitable[ActionPlan]],
    request: Any,
    shell: Shell,
    *,
    apply: bool,
    check: bool = False,
    **ssh_options: Any,
) -> int:
    """Plan (reading the hosts through the runner) and carry out. With ``apply`` all of
    it, from reading the current state to journalling, holds the action lock, so two
    actions never plan from the same state (a simulator change saved meanwhile, say)."""

    async def go() -> int:
        _warn_interrupted(shell)
        target, runner = target_for(request, **ssh_options)
        try:
            plan = await make_plan(target, runner)
            return await carry_out(plan, target, runner, shell, apply=apply, check=check)
        finally:
            await runner.close()

    if apply:
        with ActionLock():
            return await go()
    return await go()


def _warn_interrupted(shell: Shell) -> None:
    for action in history(Journal()).interrupted():
        shell.say(
            f"note: {action.plan.kind} {action.plan.element} ({action.id}) was interrupted; "
            f"cwctl rollback {action.id} undoes what it may have changed"
        )


async def roll_back(action_id: str | None, shell: Shell, *, apply: bool, **ssh_options: Any) -> int:
    """Plan the undo of a journalled action; with ``apply`` carry it out (under the lock,
    so the same action cannot be rolled back twice, even by two processes at once)."""
    journal = Journal()

    async def go() -> int:
        hist = history(journal)
        for line in hist.read.skipped:
            shell.say(line)
        action = find(journal, action_id, hist)
        if action.status == INTERRUPTED:
            shell.say(
                f"{action.id} was interrupted: undoing the {len(action.may_have_changed())} "
                "step(s) that may have changed"
            )
        plan = rollback_plan(action)
        target, runner = target_for(request_from_context(plan.context), **ssh_options)
        try:
            return await carry_out(plan, target, runner, shell, apply=apply, journal=journal)
        finally:
            await runner.close()

    if apply:
        with ActionLock(journal.directory):
            return await go()
    return await go()
