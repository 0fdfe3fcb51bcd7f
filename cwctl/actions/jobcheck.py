"""The job's own pace after an action, beside the fabric's verification: its step logs
(``cwctl.jobs.stephook``) read on the hosts the action moved flows of, before and after.

Before the first step runs (``marks``), each log's last step is noted, in that host's own
clock, so no clock has to agree with this machine's; after the action (``job_pace``), the
logs are read again every ``POLL_S`` until every log has ``BACK_RUN`` steps in a row back
at its healthy pace, or ``wait_s`` has passed: a moved TCP connection resumes at its next
retransmission, which can be tens of seconds after the fault began (docs/workloads.md).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from cwctl.actions.plan import ActionPlan
from cwctl.actions.runners import Runner
from cwctl.jobs.steps import JobCheck, Pace, pace, parse, read_argv

if TYPE_CHECKING:
    from cwctl.inventory import Inventory

JOB_WAIT_S = 60.0
POLL_S = 2.0
Marks = dict[str, float]  # "host:path" -> the t of its last step before the action


def hosts_of(plan: ActionPlan, inv: Inventory) -> list[str]:
    """The inventory hosts whose flows the plan moves, else those its steps run on, else
    every host (a switch-side reroute: any of them may carry the job)."""
    names = {h.name for h in inv.hosts}
    moved = {m[k] for m in plan.steering.get("moves", []) for k in ("host", "peer")}
    stepped = {s.host for s in plan.steps}
    return sorted(moved & names or stepped & names or names)


async def _read(
    runner: Runner, inv: Inventory, hosts: list[str], pattern: str
) -> dict[str, list[tuple[float, float]]]:
    python = {h.name: inv.endpoint(h).python for h in inv.hosts}
    results = await asyncio.gather(*(runner.run(h, read_argv(python[h], pattern)) for h in hosts))
    out = {}
    for host, result in zip(hosts, results, strict=True):
        if result.ok:
            for path, steps in parse(result.stdout).items():
                out[f"{host}:{path}"] = steps
    return out


async def marks(runner: Runner, inv: Inventory, plan: ActionPlan, pattern: str) -> Marks:
    logs = await _read(runner, inv, hosts_of(plan, inv), pattern)
    return {name: steps[-1][0] + 1e-6 for name, steps in logs.items() if steps}


async def job_pace(
    runner: Runner, inv: Inventory, plan: ActionPlan, pattern: str, wait_s: float, before: Marks
) -> JobCheck:
    hosts = hosts_of(plan, inv)
    started = time.monotonic()
    while True:
        logs = await _read(runner, inv, hosts, pattern)
        paces: dict[str, Pace] = {
            name: pace(steps, before[name]) for name, steps in logs.items() if name in before
        }
        waited = time.monotonic() - started
        check = JobCheck.of(pattern, paces, waited)
        if check.back or not paces or waited >= wait_s:
            return check
        await asyncio.sleep(min(POLL_S, max(0.0, wait_s - waited)))
