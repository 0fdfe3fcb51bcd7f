"""Is the state a plan was made on still the state now? (A plan is refused if not.)

Planning records what it read in ``plan.prior``, per target:

- ``"route:HOST"`` / ``"nccl:HOST"``: ``{"host", "read": argv, "seen": stdout}``, the
  command planning ran on the host and what it printed;
- ``"sim"``: the simulator model's state (``cwctl.sim.state.state_to_json``);
- ``"SWITCH"`` (a ``kind = "linux"`` switch of the inventory): ``{dst: route}``, the
  routes of its table the plan changes, as ``ip -j route show`` printed them
  (``switchroute.py``).

Before applying, under the action lock, the session reads each again (the same argv on
the same host; the simulator state saved for the request, which is what another cwctl
process would have changed) and compares: ``stale`` names the targets that differ.
``ActionPlan.fingerprint`` is the short hash of ``prior`` shown in plans and the journal.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cwctl.actions import nccl, switchroute
from cwctl.actions.plan import ActionPlan
from cwctl.actions.runners import Runner
from cwctl.actions.target import ActionTarget


async def current(plan: ActionPlan, target: ActionTarget, runner: Runner) -> dict[str, Any]:
    """``plan.prior`` as it reads now."""
    out: dict[str, Any] = {}
    reads = {k: v for k, v in plan.prior.items() if isinstance(v, dict) and "read" in v}
    results = await asyncio.gather(*(runner.run(v["host"], v["read"]) for v in reads.values()))
    for (key, was), result in zip(reads.items(), results, strict=True):
        seen = result.stdout if result.ok else f"<unreadable: {result.detail() or result.rc}>"
        out[key] = {**was, "seen": seen}
    inventory = target.inventory
    switches = {
        s.name
        for s in (inventory.switches if inventory is not None else ())
        if s.kind is not None and s.name in plan.prior
    }
    tables = await switchroute.read_tables(runner, sorted(switches)) if switches else {}
    for name, table in tables.items():
        by_dst = {str(r.get("dst", "")): r for r in table}
        out[name] = {dst: by_dst.get(dst) for dst in plan.prior[name]}
    out.update({k: v for k, v in target.state_now().items() if k in plan.prior})
    return out


def stale(plan: ActionPlan, now: dict[str, Any]) -> list[str]:
    """The targets whose state differs from what the plan was made on (an NCCL file's
    by its existence and value only: ``nccl.file_state``)."""
    return sorted(k for k in plan.prior if _compared(k, now.get(k)) != _compared(k, plan.prior[k]))


def _compared(key: str, entry: Any) -> Any:
    if key.startswith("nccl:") and isinstance(entry, dict):
        return {**entry, "seen": nccl.file_state(str(entry.get("seen", "")))}
    return entry
