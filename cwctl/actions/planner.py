"""From a suspect element to a plan: which mechanism, which hosts, which steps.

The element is named in the target's fabric (``naming.py``); a host, or its access link,
is drained instead (no other way round it); a leaf is refused (its hosts have no other
way in: drain them). Anything else is rerouted by the one mechanism of the target's kind
that serves it (``target.choose``): the table of real mechanisms is in
``inventorytarget.py``, the simulator's in ``simulated.py``.
"""

from __future__ import annotations

from cwctl.actions import inventorytarget, simulated
from cwctl.actions.drainreason import DEFAULT_REASON, suspect_reason, with_suspect
from cwctl.actions.naming import Element, covering, resolve
from cwctl.actions.plan import ActionPlan, new_plan_id
from cwctl.actions.runners import Runner
from cwctl.actions.target import ActionTarget, RouteOptions, choose
from cwctl.errors import InputError

# the kinds of target, each module registering its mechanisms: the first that opens a
# request is its target (build_target)
TARGETS = (simulated.SimTarget, inventorytarget.InventoryTarget)

__all__ = ["RouteOptions", "covering", "plan_drain", "plan_reroute", "plan_resume", "resolve"]


def check_at_hosts(element: Element, options: RouteOptions) -> None:
    """``--at hosts`` steers around a spine or a leaf-spine link, nothing else."""
    if options.via == "hosts" and (element.kind == "nic" or element.spine is None):
        raise InputError(
            f"--at hosts steers around a spine or a leaf-spine link, not {element.kind} "
            f"{element.name}"
        )


async def plan_reroute(
    name: str, target: ActionTarget, runner: Runner, options: RouteOptions | None = None
) -> ActionPlan:
    options = options or RouteOptions()
    target.check_options(options)
    covered: list[Element] = []
    if "|" in name:  # a candidate set: act on the element that covers it
        element, covered = covering(name, target)
    else:
        element = resolve(name, target)
    if element.kind == "host" or (element.kind == "link" and element.host is not None):
        host = element.host or element.name
        why = f"{element.name} carries all of {host}'s traffic: no other way round it"
        plan = plan_drain(host, target, reason=suspect_reason(element.name), suspect=element.name)
        plan.kind, plan.element = "reroute", element.name
        plan.notes.insert(0, f"{why}; draining {host} instead")
        return plan
    if element.kind == "switch" and element.leaf is not None:
        within = f"the candidate set {name!r} is covered by {element.name}; " if covered else ""
        raise InputError(
            f"{within}{element.name} is a leaf: its hosts have no other way in; drain them "
            "(cwctl drain HOST) or repair the switch"
        )
    check_at_hosts(element, options)
    plan = ActionPlan(
        kind="reroute",
        element=element.name,
        reason=f"steer traffic around suspect {element.kind} {element.name}",
        steps=[],
        context=target.context(),
        id=new_plan_id(),
    )
    if covered:
        plan.notes.append(
            f"the candidate set {name} is covered by {element.name}: steering around "
            f"{element.name} avoids every candidate ({', '.join(e.name for e in covered)})"
        )
    found = choose(target.kind, element, options)
    if found is None:
        raise InputError(f"no mechanism reroutes {element.kind} {element.name} here")
    plan.steps = await found.plan(element, target, runner, options, plan)
    if not plan.steps and not plan.notes:  # every mechanism reads the state first
        plan.notes.append(f"nothing to change: {element.name} is already avoided")
    return plan


# --- drain / resume ----------------------------------------------------------------------


def plan_drain(
    host: str,
    target: ActionTarget,
    *,
    reason: str,
    evict: bool = False,
    suspect: str | None = None,
) -> ActionPlan:
    """Drain ``host``; the scheduler records ``reason`` and the ``suspect`` that caused it
    (Slurm: in ``Reason=``; Kubernetes: annotations and a taint)."""
    plan = ActionPlan(
        kind="drain",
        element=host,
        reason=with_suspect(reason, suspect),
        steps=[],
        context=target.context(),
    )
    target.plan_scheduler(plan, reason=plan.reason, evict=evict, suspect=suspect)
    return plan


def plan_resume(host: str, target: ActionTarget, *, reason: str = DEFAULT_REASON) -> ActionPlan:
    plan = ActionPlan(
        kind="resume", element=host, reason=reason, steps=[], context=target.context()
    )
    target.plan_scheduler(plan, reason=reason, evict=False, suspect=None)
    return plan
