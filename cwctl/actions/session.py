"""The one front door for actions: every shell (the CLI, the TUI) plans and applies here.

    async with ActionSession(request, model=kept) as session:   # takes the action lock
        plan = await session.plan(Ask("reroute", "spine2"))     # reads the hosts
        show(format_plan(plan))
        if confirmed:
            outcome = await session.apply(plan, verify=True)    # journalled, write-ahead

The lock is taken before planning and held until the session closes, so the state a
plan reads cannot be changed by another cwctl action before it is applied; and before
applying, the state is read again and compared with what the plan was made on
(``prior.py``): a plan whose state has changed (by hand, by another tool) is refused
(``StalePlan``, exit 2) and nothing is applied. ``lock=False`` is for a dry run that will
not apply. ``ActionSession.rollback`` opens the session a journalled action needs (its
fabric, from the journal's context) with the plan that undoes it.

``model`` is the caller's simulator model for ``--sim`` requests (the TUI's, so its next
scan shows the change); without it the model is built for the request with the state
earlier actions saved.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple

from cwctl import settings
from cwctl.actions import prior, rebalance
from cwctl.actions.drainreason import DEFAULT_REASON
from cwctl.actions.executor import (
    ROLLBACK_FAILED,
    Execution,
    Verification,
    apply_plan,
    record_verification,
    rollback_plan,
    verify,
)
from cwctl.actions.executor import (
    Progress as StepProgress,
)
from cwctl.actions.history import Action, History, find, history
from cwctl.actions.jobcheck import JOB_WAIT_S, job_pace, marks
from cwctl.actions.jobs import plan_read, with_jobs
from cwctl.actions.journal import ActionLock, Journal, acting_user
from cwctl.actions.plan import ActionPlan, with_sudo
from cwctl.actions.planner import TARGETS, plan_drain, plan_reroute, plan_resume
from cwctl.actions.rebalance import RebalanceOptions
from cwctl.actions.runners import Runner
from cwctl.actions.steer import verify_steering
from cwctl.actions.target import ActionTarget, RouteOptions
from cwctl.errors import CwctlError, InputError
from cwctl.jobs.steps import JobCheck
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.sim.model import FabricModel

# "steer": a reroute by source port at the hosts (``reroute --at hosts``, steer.py);
# its options' ``steer`` says which ports (none needed on the simulator); "rebalance":
# colliding elephant flows spread over the spines (rebalance.py, its options ``balance``)
Kind = Literal["reroute", "steer", "drain", "resume", "rebalance"]


@dataclass(frozen=True)
class Ask:
    """What the operator asks for."""

    kind: Kind
    element: str
    options: RouteOptions | None = None  # reroute: prefix, gateways, NCCL file
    reason: str = DEFAULT_REASON  # drain / resume: for the scheduler
    evict: bool = False  # drain on Kubernetes
    sudo: bool = False
    suspect: str | None = None  # drain: the element that caused it (for the scheduler)
    # the job's own step logs on the hosts acted on (a glob; cwctl.jobs.stephook writes
    # them): after applying, the job's pace is judged beside the fabric's (jobcheck.py)
    job_log: str | None = None
    job_wait_s: float = JOB_WAIT_S
    balance: RebalanceOptions | None = None  # rebalance: target, min gain, avoid, pinned


class StalePlan(CwctlError):
    """The state a plan was made on has changed; nothing was applied."""


@dataclass
class Outcome:
    execution: Execution
    verification: Verification | None = None
    lines: list[str] = field(default_factory=list)
    job: JobCheck | None = None  # the job's own pace after it (Ask.job_log)
    # ``apply(..., undo_unless_gone=True)`` whose verification still found the element:
    # the rollback applied at once (its own outcome)
    undone: Outcome | None = None

    @property
    def ok(self) -> bool:
        good = self.verification is None or self.verification.gone
        return self.execution.failed is None and good

    @property
    def failed(self) -> bool:
        """A step failed (what ran before it was rolled back)."""
        return self.execution.failed is not None

    @property
    def message(self) -> str:
        return "\n".join(self.lines)


def build_target(
    request: ScanRequest, model: FabricModel | None = None, **ssh_options: Any
) -> tuple[ActionTarget, Runner]:
    """The target and runner for ``request``: the first kind of target that opens it
    (``planner.TARGETS``: the simulator's model, else the inventory's hosts over SSH)."""
    kind = next(k for k in TARGETS if k.opens(request, model))
    target: ActionTarget = kind.open(request, model, **ssh_options)
    return target, target.open_runner()


def request_from_context(context: dict[str, Any]) -> ScanRequest:
    """The ScanRequest a journalled plan ran against (rollback rebuilds it)."""
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


def failure_line(plan: ActionPlan, execution: Execution) -> str:
    """Which step failed where, and what became of the steps before it."""
    assert execution.failed is not None
    step = plan.steps[execution.failed]
    detail = execution.outcomes[execution.failed].detail
    undone = [o for o in execution.outcomes if o.status == ROLLBACK_FAILED]
    tail = (
        f"; rolling back failed for step(s) {', '.join(str(o.index + 1) for o in undone)}: "
        "check them by hand"
        if undone
        else "; the steps before it were rolled back"
    )
    if execution.journal_error is not None:  # a full state directory, mid-apply
        ran = (
            "the steps before it" if detail.startswith("not run") else "it and the steps before it"
        )
        tail = tail.replace("the steps before it", ran)
        return (
            f"stopped at step {execution.failed + 1}: {execution.journal_error}; {detail}"
            f"{tail} (journal {plan.id})"
        )
    return f"step {execution.failed + 1} failed on {step.host}: {detail}{tail} (journal {plan.id})"


class Rollback(NamedTuple):
    """``ActionSession.rollback``'s answer."""

    session: ActionSession
    plan: ActionPlan  # the undo
    action: Action  # what it undoes
    history: History  # the journal's, read once (its skipped lines: warnings)


class ActionSession:
    def __init__(
        self,
        request: ScanRequest,
        *,
        model: FabricModel | None = None,
        journal: Journal | None = None,
        lock: bool = True,
        by: str = "cli",
        **ssh_options: Any,
    ) -> None:
        self.request = request
        self.by = by  # who asks: cli, tui or watch (the journal's BY column, with the user)
        self.journal = journal or Journal()
        self._lock = ActionLock(self.journal.directory)
        if lock:
            self._lock.__enter__()  # before anything is read: plan and apply under it
        try:
            self.target, self.runner = build_target(request, model, **ssh_options)
        except BaseException:
            self._lock.release()
            raise

    async def __aenter__(self) -> ActionSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @classmethod
    def rollback(
        cls,
        action_id: str | None,
        *,
        journal: Journal | None = None,
        lock: bool = True,
        request: ScanRequest | None = None,
        model: FabricModel | None = None,
        by: str = "cli",
        **ssh: Any,
    ) -> Rollback:
        """The session for undoing ``action_id`` (the latest apply when None), its plan,
        the action, and the journal's history (for its warnings). ``request`` and
        ``model``: the caller's fabric (``cwctl watch``'s), instead of the one the
        journal's context describes."""
        journal = journal or Journal()
        guard = ActionLock(journal.directory)
        if lock:
            guard.__enter__()  # so two rollbacks of one action cannot both run
        try:
            hist = history(journal)
            action = find(journal, action_id, hist)
            plan = rollback_plan(action)
            if request is None:
                request = request_from_context(plan.context)
            session = cls(request, model=model, journal=journal, lock=False, by=by, **ssh)
        except BaseException:
            guard.release()
            raise
        session._lock = guard
        return Rollback(session, plan, action, hist)

    def interrupted(self) -> list[Action]:
        return history(self.journal).interrupted()

    async def plan(self, ask: Ask) -> ActionPlan:
        """Plan ``ask`` on this session's target (reading the hosts through the runner),
        the scheduler read at the same time for the jobs the plan touches."""
        jobs = asyncio.ensure_future(plan_read(self.target, self.runner))
        try:
            plan = await self._plan(ask)
        except BaseException:
            jobs.cancel()
            with contextlib.suppress(BaseException):  # its own failure is not the news
                await jobs
            raise
        plan = with_jobs(plan, self.target, await jobs)
        if ask.job_log:
            plan.context["job_log"] = {"pattern": ask.job_log, "wait_s": ask.job_wait_s}
        return with_sudo(plan) if ask.sudo else plan

    async def _plan(self, ask: Ask) -> ActionPlan:
        if ask.kind == "rebalance":
            if self.target.inventory is None:
                raise InputError(
                    "rebalance reads the hosts' socket tables: give an inventory (-i), not --sim"
                )
            spread = replace(ask.balance or RebalanceOptions(), sudo=ask.sudo)
            context = self.target.context()
            return await rebalance.plan_rebalance(
                self.target.inventory, self.runner, spread, context
            )
        if ask.kind in ("reroute", "steer"):
            options = ask.options
            if ask.kind == "steer":
                options = replace(options or RouteOptions(), via="hosts")
            return await plan_reroute(ask.element, self.target, self.runner, options)
        if ask.kind == "drain":
            return plan_drain(
                ask.element, self.target, reason=ask.reason, evict=ask.evict, suspect=ask.suspect
            )
        return plan_resume(ask.element, self.target, reason=ask.reason)

    async def check_prior(self, plan: ActionPlan) -> None:
        """Refuse (``StalePlan``) a plan whose targets no longer read as they did."""
        if not plan.prior:
            return
        changed = prior.stale(plan, await prior.current(plan, self.target, self.runner))
        if changed:
            raise StalePlan(
                f"the state {plan.id} was planned on has changed since ({', '.join(changed)}): "
                "nothing applied; plan again"
            )

    async def apply(
        self,
        plan: ActionPlan,
        *,
        check: bool = False,
        progress: StepProgress | None = None,
        recheck: bool = True,
        verify_s: float | None = None,
        undo_unless_gone: bool = False,
    ) -> Outcome:
        """Apply ``plan`` (write-ahead journalled): the one way every front end (the CLI,
        the TUI, the watch) carries out an action.

        - ``check``: then verify and journal the verification (``verify``; for a rollback,
          a rescan of its element: is it clean now?), probing ``verify_s`` (None: the
          request's duration).
        - ``undo_unless_gone``: a change whose verification still finds the element is
          rolled back at once (``Outcome.undone``).
        - ``progress(i, step, what)`` hears of each step as it starts (and of each undo
          when a step fails).
        - ``recheck=False`` trusts the prior read at planning instead of reading it
          again: only for a plan made moments before in this session, under its lock
          (the watch, where connections in retransmission backoff wait on every second).
        """
        if not self._lock.held:
            self._lock.__enter__()
        job = plan.context.get("job_log") if plan.kind != "rollback" else None
        inv = self.target.inventory  # the job's step logs are read on real hosts
        before: dict[str, float] = {}

        async def prior_read() -> None:
            if recheck:
                await self.check_prior(plan)

        if job and inv is not None:  # the job's steps so far, read beside the prior
            before, _ = await asyncio.gather(
                marks(self.runner, inv, plan, job["pattern"]), prior_read()
            )
        else:
            await prior_read()
        plan.context = {**plan.context, "by": self.by, "user": acting_user()}
        execution = await apply_plan(plan, self.runner, self.journal, progress)
        outcome = Outcome(execution, lines=[execution.summary()])
        if execution.failed is not None:
            outcome.lines.append(failure_line(plan, execution))
            return outcome
        if plan.rollback_of:
            outcome.lines.append(f"rolled back {plan.rollback_of} (journal {plan.id})")
        else:
            outcome.lines.append(f"applied {plan.id}; undo with: cwctl rollback {plan.id}")
        if check:
            if plan.rollback_of:  # undone: is the element clean, now it carries traffic?
                checked = await verify(self.target, plan.element, duration_s=verify_s)
            else:
                checked = await self.verify(plan, duration_s=verify_s)
            outcome.verification = checked
            record_verification(self.journal, plan, checked)
            outcome.lines.append(checked.message())
            if undo_unless_gone and not checked.gone and not plan.rollback_of:
                outcome.undone = await self._undo(plan)
                return outcome
        if job and inv is not None:
            wait_s = float(job["wait_s"])
            outcome.job = await job_pace(self.runner, inv, plan, job["pattern"], wait_s, before)
            outcome.lines.append(outcome.job.message())
        return outcome

    async def _undo(self, plan: ActionPlan) -> Outcome:
        """Roll ``plan`` back at once (it was applied in this session, under its lock)."""
        return await self.apply(rollback_plan(find(self.journal, plan.id, history(self.journal))))

    async def verify(self, plan: ActionPlan, *, duration_s: float | None = None) -> Verification:
        """Is ``plan``'s element avoided now? Host steering on real hosts: its installed
        ports traced again both ways (a scan's probes are not steered); anything else, and
        steering on the simulator: a rescan of the same hosts or model."""
        inventory = self.target.inventory
        if inventory is not None and plan.kind == "rebalance":  # the uplinks' loads again
            return await rebalance.verify(plan, inventory, self.runner)
        if inventory is not None and (plan.steering.get("pools") or plan.steering.get("moves")):
            return await verify_steering(plan, inventory, self.runner)
        return await verify(self.target, plan.element, duration_s=duration_s)

    async def close(self) -> None:
        try:
            await self.runner.close()
        finally:
            self._lock.release()
