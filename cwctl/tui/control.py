"""The TUI's bridge to ``cwctl.actions``: plan a reroute or a drain, apply it on yes.

``plan_action`` plans through ``cwctl.actions.session.ActionSession`` (the CLI's front
door too) on the hosts the source scans (for ``--sim``, on the very model the source
probes, so the next scan shows the change). When no plan can be made (a source without
hosts, an element the planner refuses, another action holding the lock), the
``PlannedAction`` says why and its ``apply`` is ``None``: the TUI shows the text and
applies nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from cwctl.actions.plan import LOCAL, format_plan
from cwctl.actions.planner import RouteOptions
from cwctl.actions.session import ActionSession, Ask
from cwctl.actions.steer import SteerOptions
from cwctl.errors import CwctlError

ActionKind = Literal["reroute", "drain", "rebalance"]


@dataclass(frozen=True)
class PlannedAction:
    kind: ActionKind
    target: str
    title: str
    text: str
    apply: Callable[[], Awaitable[str]] | None  # None: cannot be applied from here
    close: Callable[[], Awaitable[None]] | None = None  # release what planning opened
    targets: tuple[str, ...] = ()  # every host or switch a step changes, in step order

    @property
    def available(self) -> bool:
        return self.apply is not None

    async def discard(self) -> None:
        if self.close is not None:
            await self.close()


def unavailable(kind: ActionKind, target: str, why: str) -> PlannedAction:
    asked = {
        "reroute": f"reroute traffic around {target}",
        "drain": f"drain {target} from the scheduler",
        "rebalance": "spread colliding flows over the leaves' uplinks",
    }[kind]
    text = (
        f"Actions are unavailable: {why}.\n"
        "Nothing will be applied.\n\n"
        f"What was asked: {asked}.\n"
        f"From a shell: cwctl {kind}{'' if kind == 'rebalance' else ' ' + target}  "
        "(prints the plan; --apply carries it out)"
    )
    return PlannedAction(kind, target, f"{kind} {target}: unavailable", text, None)


async def plan_action(
    kind: ActionKind,
    target: str,
    source: Any,
    *,
    suspect: str | None = None,
    steer: SteerOptions | None = None,
    job_log: str | None = None,
) -> PlannedAction:
    """The plan for ``kind`` on ``target`` with the hosts ``source`` scans, made through
        the actions' one front door (``ActionSession``: the CLI's too). The session holds the
        action lock from planning until the plan is applied or discarded, and refuses to
        apply a plan whose state has changed meanwhile. ``suspect``: for a drain, the element
        that caused it (the scheduler's reason names it). ``steer``: a reroute steered by
        source port at the hosts (``reroute --at hosts``) with these options. ``job_log``: the
    job's step logs, judged after applying (the notice says when its steps came back)."""
    request = getattr(source, "request", None)
    if request is None:
        return unavailable(kind, target, "these snapshots come from no hosts to act on")
    model = getattr(source, "model", None)
    try:
        session = ActionSession(request, model=model, by="tui")
    except CwctlError as exc:
        return PlannedAction(kind, target, f"{kind} {target}: no plan", str(exc), None)
    try:
        options = None if steer is None else RouteOptions(via="hosts", steer=steer)
        ask = Ask(
            kind, target, options=options, reason="cwctl tui", suspect=suspect, job_log=job_log
        )
        plan = await session.plan(ask)
    except CwctlError as exc:
        await session.close()
        return PlannedAction(kind, target, f"{kind} {target}: no plan", str(exc), None)
    except BaseException:
        await session.close()
        raise

    async def apply() -> str:
        try:
            outcome = await session.apply(plan)
        finally:
            await session.close()
        if not outcome.ok:
            raise ActionFailed(outcome.message)
        return outcome.message

    targets = tuple(dict.fromkeys(step_target(step) for step in plan.steps))
    title = f"{kind} {target}: apply this plan?"
    return PlannedAction(kind, target, title, format_plan(plan), apply, session.close, targets)


# A scheduler's command changes the scheduler, wherever it runs: named for what it changes.
SCHEDULERS = {"scontrol": "slurmctld", "kubectl": "the Kubernetes API"}
SIMULATED = " (simulated)"


def step_target(step: Any) -> str:
    """What a step changes, by name: the host or switch it runs on; for a scheduler's
    command the scheduler (``slurmctld``, and the host its CLI runs on unless this
    machine); for a simulator step the element its change names (``leaf1``,
    ``gpu-003/mlx5_1``), marked simulated."""
    change = step.change or {}
    for key in ("leaf", "switch", "nic", "host", "node"):
        if isinstance(change.get(key), str):
            return f"{change[key]}{SIMULATED}"
    tool = next((SCHEDULERS[a] for a in step.argv if a in SCHEDULERS), None)
    if tool is not None:
        return tool if step.host == LOCAL else f"{tool} (via {step.host})"
    return str(step.host)


class ActionFailed(CwctlError):
    """A step failed; what ran before it was rolled back (the message says which)."""
