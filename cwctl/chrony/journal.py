"""Each fed round of ``cwctl sync --apply`` as an action in the journal, written ahead.

The journal's write-ahead format (``cwctl/actions/history.py``): before any feeder hears
of a round, an ``intent`` (``action: "sync"``) with a plan of kind ``sync`` whose steps
are the hosts to feed (each says the socket, the offset and drift, the instant they hold
at); then ``step ... started`` for each; after the round's interval each step's outcome
(``ok`` with the samples sent, or ``failed`` with why) and an ``end``. A feed has no
undo command: stopping ``cwctl sync`` ends it (the feeders exit and chronyd sees the
refclock go quiet), so ``cwctl rollback`` of a sync has nothing to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cwctl.actions.journal import Journal
from cwctl.actions.plan import ActionPlan, Step, utc_now
from cwctl.chrony.rules import FeedDecision

UNDO = "stop cwctl sync: the feeder exits, chronyd sees the refclock go quiet"


def _step(d: FeedDecision) -> Step:
    offset = -(d.offset_ns or 0.0)
    return Step(
        host=d.host,
        description=(
            f"feed chronyd at {d.socket}: chrony offset {offset:+.1f} ns at t_ref_ns "
            f"{d.t_ref_ns}, drift {d.drift_ppb or 0.0:+.3f} ppb"
            + (" (beyond --max-offset, confirmed)" if d.step else "")
        ),
        undo_description=UNDO,
    )


class SyncJournal:
    """The journal lines of one ``cwctl sync --apply``, one action per fed round."""

    def __init__(self, journal: Journal, context: dict[str, Any]) -> None:
        self.journal = journal
        self.context = context
        self.open: dict[int, tuple[ActionPlan, list[FeedDecision]]] = {}
        self._first = True

    def intent(self, round_no: int, decisions: Sequence[FeedDecision]) -> None:
        """Before feeding: the plan of the round (the hosts to feed), then each step's start."""
        fed = [d for d in decisions if d.feeds]
        plan = ActionPlan(
            kind="sync",
            element="chronyd",
            reason=f"round {round_no}: feed {len(fed)} hosts' chronyd against "
            f"{self.context.get('reference')}",
            steps=[_step(d) for d in fed],
            context={**self.context, "round": round_no},
        )
        self.journal.append(
            {
                "id": plan.id,
                "time": utc_now(),
                "event": "intent",
                "action": "sync",
                "plan": plan.to_json(),
                "prior": {},
            },
            sync_dir=self._first,
        )
        self._first = False
        for i in range(len(fed)):
            self.journal.append({"id": plan.id, "event": "step", "index": i, "status": "started"})
        self.open[round_no] = (plan, fed)

    def outcome(self, round_no: int) -> None:
        """After the round: what each feeder sent, and the end of the action."""
        plan, fed = self.open.pop(round_no, (None, []))
        if plan is None:
            return
        for i, d in enumerate(fed):
            ok = d.action == "fed"
            detail = f"{d.samples} samples sent" if ok else (d.error or d.reason or "not fed")
            self.journal.append(
                {
                    "id": plan.id,
                    "event": "step",
                    "index": i,
                    "status": "ok" if ok else "failed",
                    "rc": 0 if ok else 1,
                    "detail": detail,
                }
            )
        status = "applied" if all(d.action == "fed" for d in fed) else "failed"
        self.journal.append({"id": plan.id, "time": utc_now(), "event": "end", "status": status})
