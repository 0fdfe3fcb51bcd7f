"""The actions API for a shell that is not the CLI (the TUI): prepare, show, apply.

    prepared = await prepare("reroute", "spine2", request, model=kept)   # reads hosts
    show(prepared.text)                                                   # the plan
    if confirmed:
        outcome = await prepared.apply(verify=True)                       # journalled
        show(outcome.message)
    await prepared.close()

``model`` is the caller's simulator model for ``--sim`` requests (e.g.
``transport.sim.kept_model(request)``), so changes show in its next scan; without it a
model is built for the request (with the state earlier actions saved). Applying takes
the action lock and journals, exactly as ``cwctl ... --apply --yes`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from cwctl.actions.executor import Execution, Verification, apply_plan, record_verification
from cwctl.actions.executor import verify as rescan
from cwctl.actions.journal import ActionLock, Journal
from cwctl.actions.plan import ActionPlan, format_plan, with_sudo
from cwctl.actions.planner import RouteOptions, Target, plan_drain, plan_reroute, plan_resume
from cwctl.actions.runners import Runner, SimRunner
from cwctl.actions.session import target_for

Kind = Literal["reroute", "drain", "resume"]


@dataclass
class Outcome:
    execution: Execution
    verification: Verification | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        good = self.verification is None or self.verification.gone
        return self.execution.failed is None and good

    @property
    def message(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Prepared:
    plan: ActionPlan
    target: Target
    runner: Runner

    @property
    def text(self) -> str:
        return format_plan(self.plan)

    async def apply(self, *, verify: bool = False, journal: Journal | None = None) -> Outcome:
        journal = journal or Journal()
        with ActionLock(journal.directory):
            execution = await apply_plan(self.plan, self.runner, journal)
        outcome = Outcome(execution, lines=[execution.summary()])
        if execution.failed is not None:
            step = self.plan.steps[execution.failed]
            outcome.lines.append(
                f"step {execution.failed + 1} failed on {step.host}; what ran before it was "
                "rolled back"
            )
            return outcome
        outcome.lines.append(f"applied {self.plan.id}; undo with: cwctl rollback {self.plan.id}")
        if verify:
            outcome.verification = await rescan(self.target, self.plan.element)
            record_verification(journal, self.plan, outcome.verification)
            outcome.lines.append(outcome.verification.message())
        return outcome

    async def close(self) -> None:
        await self.runner.close()


async def prepare(
    kind: Kind,
    element: str,
    request: Any,
    *,
    model: Any = None,
    reason: str = "cwctl",
    options: RouteOptions | None = None,
    sudo: bool = False,
) -> Prepared:
    """Plan ``kind`` on ``element`` for the hosts ``request`` describes."""
    runner: Runner
    if model is not None:
        target, runner = Target(model=model, request=request), SimRunner(model, request)
    else:
        target, runner = target_for(request)
    try:
        if kind == "reroute":
            plan = await plan_reroute(element, target, runner, options)
        elif kind == "drain":
            plan = plan_drain(element, target, reason=reason)
        else:
            plan = plan_resume(element, target, reason=reason)
    except BaseException:
        await runner.close()
        raise
    return Prepared(with_sudo(plan) if sudo else plan, target, runner)
