"""The watch's ``[rebalance]``: colliding elephant flows spread, with guard rails.

Not a fault and not a suspect: every ``every_s`` (when no other action ran this round)
the uplinks are measured through the actions' one door (``ActionSession.plan`` of a
``rebalance``: the hosts' socket counters, each flow's traced path) and, when a leaf's
links are further apart than ``target``, the plan's moves are applied, verified by
measuring again, and rolled back at once when the gain is not there. Guard rails:

- ``min_gain``: no plan whose max/mean falls by less (``balance.rebalance`` holds it);
- ``flow_hold_s``: a flow moved is pinned for that long, and a flow a cwctl table
  translates already is never moved again while the table stands (so a flow moves at
  most once per hold, and never back and forth: no oscillation);
- after a rebalance that failed or was undone, none for ``flow_hold_s``;
- never onto a suspect: the round's suspects (and their candidates) are ``avoid``-ed.

Rebalances are not restored on their own (there is nothing to heal: undoing one would
bring the collision back); ``cwctl rollback`` undoes one like any action, and the
translation of a flow that has ended does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from cwctl.actions.rebalance import ELEMENT, RebalanceOptions
from cwctl.actions.session import ActionSession, Ask
from cwctl.errors import CwctlError
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.watch.decide import Decision
from cwctl.watch.policy import Rebalancing
from cwctl.watch.probequeue import KEY as PROBES
from cwctl.watch.probequeue import probe_queueing, with_probes

ACTION: Final = "rebalance"
KIND = "uplinks"


def suspects_of(snapshot: FabricSnapshot | None) -> frozenset[str]:
    """The spines and leaf-spine links a round names (candidates too): never moved onto."""
    if snapshot is None:
        return frozenset()
    out: set[str] = set()
    for s in snapshot.suspects:
        out.update(m for m in s.members if "/" not in m)
    return frozenset(out)


@dataclass
class Rebalancer:
    rules: Rebalancing
    dry_run: bool = False
    moved: dict[str, float] = field(default_factory=dict)  # flow id -> when it moved
    last: float | None = None  # the last measurement
    quiet_until: float = float("-inf")  # after a failed or undone rebalance
    uplink_load: dict[str, Any] = field(default_factory=dict)  # the last measurement's
    _paths: Any = None  # this round's discovered paths (``round``'s ``paths``)

    def due(self, now: float) -> bool:
        return now >= self.quiet_until and (
            self.last is None or now - self.last >= self.rules.every_s
        )

    def options(self, now: float, snapshot: FabricSnapshot | None) -> RebalanceOptions:
        """The plan's options now: the flows moved within their hold pinned (the rest
        forgotten), the round's suspects avoided."""
        self.moved = {f: t for f, t in self.moved.items() if now - t < self.rules.flow_hold_s}
        pinned = set(self.moved)
        return RebalanceOptions(
            interval_s=self.rules.interval_s,
            target=self.rules.target,
            min_gain=self.rules.min_gain,
            avoid=suspects_of(snapshot),
            pinned=frozenset(pinned),
        )

    async def round(
        self,
        now: float,
        fabric: Any,
        snapshot: FabricSnapshot | None,
        clock: Callable[[], float],
        say: Callable[[Decision], None],
        paths: Any = None,
    ) -> list[Decision]:
        """Measure, plan and (unless a dry run) apply one rebalance: its decisions, each
        said as it is taken (the ``act`` before the apply, as the decider's are).
        ``paths``: the scan's discovered paths (``records.path.PathTable``), for the
        probes' queueing beside each link's load."""
        out: list[Decision] = []

        def early(d: Decision) -> None:
            say(d)
            out.append(d)

        self._paths = paths
        for d in await self._round(now, fabric, snapshot, clock, early):
            early(d)
        return out

    async def _round(
        self,
        now: float,
        fabric: Any,
        snapshot: FabricSnapshot | None,
        clock: Callable[[], float],
        early: Callable[[Decision], None],
    ) -> list[Decision]:
        self.last = now
        options = self.options(now, snapshot)
        try:
            session = ActionSession(
                fabric.request, model=fabric.model, journal=fabric.journal, by="watch"
            )
        except CwctlError as exc:
            return [self._decision(now, "held", "lock", str(exc).splitlines()[0])]
        try:
            try:
                plan = await session.plan(Ask(ACTION, ELEMENT, balance=options))
            except CwctlError as exc:
                self.quiet_until = now + self.rules.flow_hold_s
                return [self._decision(now, "failed", "refused", str(exc).splitlines()[0])]
            inv = session.target.inventory
            probes = (
                probe_queueing(
                    snapshot,
                    self._paths,
                    inv.switch_of_address(),
                    {h.name: h.leaf for h in inv.hosts},
                )
                if inv is not None
                else {}
            )
            self.uplink_load = with_probes(dict(plan.steering.get("uplink_load") or {}), probes)
            found = "; ".join(self.uplink_load.get("imbalance") or []) or "balanced"
            found += _probes_said(self.uplink_load)
            if not plan.steps:
                return [self._decision(now, "held", "balanced", plan.notes[-1] if plan.notes
                                       else found)]  # fmt: skip
            said = self._decision(now, "would-act" if self.dry_run else "act", "imbalance", found)
            if self.dry_run:
                return [said]
            early(said)
            outcome = await session.apply(plan, recheck=False, check=True, undo_unless_gone=True)
        finally:
            await session.close()
        done = clock()
        ids = [m["flow"] for m in plan.steering.get("moves", [])]
        if outcome.failed or outcome.undone is not None:
            self.quiet_until = done + self.rules.flow_hold_s
            why = outcome.message.splitlines()[-1]
            return [self._decision(done, "failed", "verify", why, plan.id)]
        for flow in ids:
            self.moved[flow] = done
        checked = outcome.verification
        if checked is not None:
            self.uplink_load = dict(getattr(checked, "uplink_load", {}) or self.uplink_load)
        why = checked.message() if checked is not None else f"applied {plan.id}"
        moved = f"{len(ids)} flow(s) moved; {why}"
        return [self._decision(done, "acted", "verified", moved, plan.id)]

    def _decision(
        self, now: float, verb: str, code: str, why: str, action_id: str | None = None
    ) -> Decision:
        return Decision(now, verb, ELEMENT, KIND, ACTION, code, why, None, action_id)


def _probes_said(uplink_load: dict[str, Any]) -> str:
    """The busiest link's probe queueing, where the round's scan has it."""
    rows = [r for r in uplink_load.get("links") or [] if r.get(PROBES) is not None]
    if not rows:
        return ""
    hot = max(rows, key=lambda r: float(r.get("load_bps") or 0))
    return f" (the probes through {hot['link']}: queueing p50 {hot[PROBES]:.0f} us)"
