"""``cwctl sync --apply`` in the journal: one action per stretch of feeding, written ahead.

A sync runs for days at one round every few seconds; an action per round would grow
the journal by a line per host per round. So an action covers a *stretch*: the rounds
that feed the same hosts. A stretch starts when the set of fed hosts changes (the first
round, a host qualifying or dropping out) or when a round feeds an offset beyond
``--max-offset`` (``--step``, confirmed: each gets its own action); it ends when the
next stretch starts or cwctl stops.

In the journal's write-ahead format (``cwctl/actions/history.py``): before any feeder
hears of the stretch's first round, an ``intent`` (``action: "sync"``) with a plan of
kind ``sync`` whose steps are the hosts to feed (each says the socket and that round's
offset, drift and instant), then ``step ... started`` for each; when the stretch ends
and all its rounds are counted, each step's outcome (``ok`` with the samples sent and
the rounds, or ``failed`` with why) and an ``end``. The per-round offsets are in the
report. A feed has no undo command: stopping ``cwctl sync`` ends it (the feeders exit
and chronyd sees the refclock go quiet), so ``cwctl rollback`` of a sync runs nothing.
A sync killed outright leaves its last stretch ``interrupted``, which is what it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cwctl.actions.journal import Journal, acting_user
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
            + ", then each round's estimate"
        ),
        undo_description=UNDO,
    )


@dataclass
class Stretch:
    """One journalled action: the rounds that fed the same hosts."""

    plan: ActionPlan
    hosts: tuple[str, ...]
    rounds: set[int] = field(default_factory=set)
    settled: set[int] = field(default_factory=set)
    samples: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    step: bool = False  # a --step feed: never continued by a later round

    @property
    def counted(self) -> bool:
        return self.rounds == self.settled


class SyncJournal:
    """The journal lines of one ``cwctl sync --apply``."""

    def __init__(self, journal: Journal, context: dict[str, Any]) -> None:
        self.journal = journal
        self.context = context
        self.stretches: list[Stretch] = []  # the last one is current
        self._first = True

    def intent(self, round_no: int, decisions: Sequence[FeedDecision]) -> None:
        """Before feeding round ``round_no``: continue the current stretch, or journal
        the intent of a new one (and end the old one once its rounds are counted)."""
        fed = [d for d in decisions if d.feeds]
        hosts = tuple(d.host for d in fed)
        step = any(d.step for d in fed)
        current = self.stretches[-1] if self.stretches else None
        if current is not None and current.hosts == hosts and not step and not current.step:
            current.rounds.add(round_no)
            return
        plan = ActionPlan(
            kind="sync",
            element="chronyd",
            reason=f"from round {round_no}: feed {len(fed)} hosts' chronyd against "
            f"{self.context.get('reference')}",
            steps=[_step(d) for d in fed],
            context={**self.context, "round": round_no, "by": "cli", "user": acting_user()},
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
        self.stretches.append(Stretch(plan, hosts, {round_no}, step=step))
        self._end_counted()

    def outcome(self, round_no: int, decisions: Sequence[FeedDecision]) -> None:
        """Round ``round_no`` counted: its samples (and failures) go to its stretch."""
        for s in self.stretches:
            if round_no in s.rounds:
                for d in decisions:
                    if d.host in s.hosts:
                        s.samples[d.host] = s.samples.get(d.host, 0) + d.samples
                        if d.action == "failed":
                            s.errors[d.host] = d.error or d.reason or "not fed"
                s.settled.add(round_no)
        self._end_counted()

    def close(self) -> None:
        """cwctl stops: every stretch ends (its rounds counted or not)."""
        for s in self.stretches:
            self._end(s)
        self.stretches = []

    def _end_counted(self) -> None:
        """End the stretches before the current one whose rounds are all counted."""
        for s in [s for s in self.stretches[:-1] if s.counted]:
            self._end(s)
            self.stretches.remove(s)

    def _end(self, s: Stretch) -> None:
        pid = s.plan.id
        rounds = f"rounds {min(s.rounds)}-{max(s.rounds)}" if s.rounds else "no round"
        all_ok = True
        for i, host in enumerate(s.hosts):
            error = s.errors.get(host)
            ok = error is None and s.samples.get(host, 0) > 0
            all_ok &= ok
            detail = f"{s.samples.get(host, 0)} samples sent, {rounds}"
            entry = {"id": pid, "event": "step", "index": i, "status": "ok" if ok else "failed"}
            entry.update(rc=0 if ok else 1, detail=detail if error is None else error)
            self.journal.append(entry)
        # a stretch of rounds that fed no host applied nothing: said so, not "applied"
        status = "nothing-fed" if not s.hosts else "applied" if all_ok else "failed"
        self.journal.append({"id": pid, "time": utc_now(), "event": "end", "status": status})
