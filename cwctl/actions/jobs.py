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

from cwctl.actions.naming import resolve
from cwctl.actions.plan import LOCAL, ActionPlan
from cwctl.actions.runners import LocalRunner, Runner, SSHRunner
from cwctl.actions.target import ActionTarget
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
from cwctl.scan.collection import Collection
from cwctl.scan.request import ScanRequest
from cwctl.session import JobReader, default_jobs

JOBS_UNKNOWN = "the running jobs are not known"  # a plan's note when the scheduler failed


def job_reader(request: ScanRequest, **ssh_options: Any) -> JobReader | None:
    """What a scan of ``request`` reads its jobs from (None: nothing to read): the
    inventory's scheduler where the hosts are the inventory's, else what the session
    reads by itself (the simulated job set)."""
    if request.source not in ("ssh", "slurm", "local") or request.inventory is None:
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


async def plan_read(target: ActionTarget, runner: Runner) -> JobRead | None:
    """The jobs running on a plan's target: the simulated set, or the scheduler's."""
    return await target.read_jobs(runner)


def touched(plan: ActionPlan, target: ActionTarget, read: JobRead) -> list[tuple[Job, str]]:
    """The jobs ``plan`` touches and how (none for a resume or a plan with no steps)."""
    if plan.kind not in ("drain", "reroute") or not plan.steps:
        return []
    jobs, shape = read.map, target.shape()
    if plan.kind == "drain" or plan.element in shape.leaf_of:  # (a reroute of a host
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
    if element.kind == "link" and not shape.groups_per_leaf:
        assert element.leaf is not None
        leaves, what = [element.leaf], f"traffic of {element.leaf} avoids {element.name}"
    else:
        leaves, what = shape.serves(spine), f"every leaf avoids {spine}"
    return flows_move(jobs, leaves=leaves, spine=spine, leaf_of=dict(shape.leaf_of), what=what)


def with_jobs(plan: ActionPlan, target: ActionTarget, read: JobRead | None) -> ActionPlan:
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
