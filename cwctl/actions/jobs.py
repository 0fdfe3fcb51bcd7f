"""The running jobs for the shells' scans and for plans, read through the action runners.

``job_reader(request)`` is what a scan session reads each scan (``cwctl.session``'s
``JobReader``): the scheduler of the inventory (``[scheduler]``, where its CLI runs,
through the same runner ``scontrol update`` goes through), the simulated job set of
``--sim --jobs N``, or None (no scheduler: no job columns, as before).
``touched(plan, target, read)`` says which jobs a plan touches and how: a drain, the
jobs that lose the node; a reroute, the jobs whose flows move; a NIC exclusion, the jobs
on that host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cwctl.actions.plan import LOCAL, ActionPlan
from cwctl.actions.runners import LocalRunner, Runner, SSHRunner
from cwctl.collection import Collection
from cwctl.jobs import Job, JobRead
from cwctl.jobs.affected import (
    flows_move,
    flows_steered,
    loses_node,
    protected_in,
    touched_json,
    uses_nic,
)
from cwctl.jobs.read import read_jobs, scheduler_of
from cwctl.jobs.simjobs import sim_jobs
from cwctl.session import JobReader, default_jobs

JOBS_UNKNOWN = "the running jobs are not known"  # a plan's note when the scheduler failed


def job_reader(request: Any, **ssh_options: Any) -> JobReader | None:
    """What a scan of ``request`` reads its jobs from (None: nothing to read)."""
    if request.sim is not None or request.inventory is None or request.replay is not None:
        return default_jobs(request)
    from cwctl.inventory import load_inventory

    inventory = load_inventory(request.inventory)
    found = scheduler_of(inventory)
    if found is None:
        return None

    async def read(collection: Collection) -> JobRead | None:
        runner: Runner = LocalRunner() if found[1] == LOCAL else SSHRunner(inventory, **ssh_options)
        try:
            return await read_jobs(inventory, runner)
        finally:
            await runner.close()

    return read


async def plan_read(target: Any, runner: Runner) -> JobRead | None:
    """The jobs running on a plan's target: the simulated set, or the scheduler's."""
    if target.model is not None:
        sim = target.request.sim if target.request is not None else None
        if sim is None or sim.jobs <= 0:
            return None
        return sim_jobs(list(target.model.fabric.hosts), sim.jobs, sim.seed)
    return await read_jobs(target.inventory, runner)


def _leaf_of(target: Any) -> dict[str, str | None]:
    if target.model is not None:
        f = target.model.fabric
        return {h: f.leaves[int(i)] for h, i in zip(f.hosts, f.host_leaf, strict=True)}
    return {h.name: h.leaf for h in target.inventory.hosts}


def _serves(target: Any, spine: str) -> list[str]:
    """The leaves with an uplink to ``spine``."""
    if target.model is not None:
        f = target.model.fabric
        return [
            leaf
            for leaf, ups in zip(f.leaves, f.uplinks, strict=True)
            if spine in {f.spines[s] for s in ups}
        ]
    return [s.name for s in target.inventory.switches if s.role == "leaf" and spine in s.uplinks]


def touched(plan: ActionPlan, target: Any, read: JobRead) -> list[tuple[Job, str]]:
    """The jobs ``plan`` touches and how (none for a resume or a plan with no steps)."""
    from cwctl.actions.planner import resolve

    if plan.kind not in ("drain", "reroute") or not plan.steps:
        return []
    jobs = read.map
    if plan.kind == "drain" or plan.element in _leaf_of(target):  # (a reroute of a host
        # is its drain)
        return loses_node(jobs, plan.element)
    steered = plan.steering.get("pools") or plan.steering.get("roce")
    if steered:  # host-side steering (steer.py): the pairs it steers
        pairs = [(str(s["host"]), str(s["peer"])) for s in steered]
        return flows_steered(jobs, pairs, str(plan.steering.get("suspect", plan.element)))
    element = resolve(plan.element, target)
    if element.kind == "nic":
        assert element.host is not None and element.nic is not None
        return uses_nic(jobs, element.host, element.nic)
    if element.kind == "link" and element.host is not None:  # an access link: drained
        return loses_node(jobs, element.host)
    spine = element.spine or element.name
    simulated = target.model is not None  # the simulator's groups are per leaf: every
    # leaf stops using the spine, whichever link of it is named
    if element.kind == "link" and not simulated:
        assert element.leaf is not None
        leaves, what = [element.leaf], f"traffic of {element.leaf} avoids {element.name}"
    else:
        leaves, what = _serves(target, spine), f"every leaf avoids {spine}"
    return flows_move(jobs, leaves=leaves, spine=spine, leaf_of=_leaf_of(target), what=what)


def with_jobs(plan: ActionPlan, target: Any, read: JobRead | None) -> ActionPlan:
    """``plan`` with the jobs it touches (``plan.jobs``) in ``read`` (``plan_read``), or
    a note saying why they are not known; untouched when there is no scheduler to ask."""
    if read is None:
        return plan
    if read.error is not None:
        plan.notes.append(f"{JOBS_UNKNOWN}: {read.error}")
        return plan
    plan.jobs = touched_json(touched(plan, target, read))
    return plan


def refuse_protected(plan: ActionPlan, rules: Sequence[str]) -> str | None:
    """Why ``plan`` must not be applied under protection ``rules`` (None: it may): it
    touches a protected job, or its jobs could not be read (not known is not safe)."""
    if not rules:
        return None
    if any(n.startswith(JOBS_UNKNOWN) for n in plan.notes):
        return f"{JOBS_UNKNOWN}, and the policy protects jobs: not applied"
    hit = protected_in(plan.jobs or (), rules)
    if hit:
        return f"the plan touches protected job(s) {', '.join(hit[:5])}: not applied"
    return None
