"""``cwctl sync``: scan, decide, (feed), report, every ``interval_s``, ``count`` times.

A round: one scan against the chosen reference; one ``FeedDecision`` per host
(``rules.decide``); offsets beyond the bound are confirmed one by one (``confirm``);
with ``apply``, the journal gets the round's intent (hosts, offsets, sockets) *before*
any feeder hears of it, then every qualifying host's feeder gets its estimate and the
others a ``withdraw``; the round is reported a round later (or at the end), with the
samples each feeder really sent with its estimate, all of them counted by then (a dry
run reports at once and feeds nothing).

Stopping (``count`` reached, Ctrl-C, an error) closes every feeder: the agents exit,
chronyd keeps its other sources and sees the ``CWC`` refclock go quiet. Each
stretch of rounds feeding the same hosts is one journalled action (``journal.py``); a
round cut short still gets its outcome.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from cwctl.chrony.feeders import Feeders, FeederSettings
from cwctl.chrony.fleet import Fleet
from cwctl.chrony.journal import SyncJournal
from cwctl.chrony.rules import FeedDecision, FeedRules, decide, socket_path
from cwctl.errors import EXIT_OK, EXIT_PROBLEMS
from cwctl.scan.request import Progress
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import ScanSession


@dataclass(frozen=True)
class SyncPlan:
    apply: bool
    interval_s: float
    count: int | None  # None: until stopped
    rules: FeedRules
    socket_template: str
    feeder: FeederSettings = field(default_factory=FeederSettings)


@dataclass
class SyncRound:
    number: int
    time: str  # when the round started, UTC ISO 8601
    apply: bool
    reference: str
    reference_why: str
    snapshot: FabricSnapshot
    decisions: list[FeedDecision]
    rules: dict[str, Any] = field(default_factory=dict)  # the limits it was decided by

    @property
    def problems(self) -> bool:
        """A host other than the reference that was not (or would not be) fed."""
        return any(
            d.action in ("skip", "failed") and d.host != self.reference for d in self.decisions
        )


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SyncRun:
    """One ``cwctl sync``: its plan, fleet, reference, feeders and journal."""

    def __init__(
        self,
        request: Any,
        plan: SyncPlan,
        fleet: Fleet,
        reference: str,
        reference_why: str,
        *,
        confirm: Callable[[FeedDecision], bool],
        on_round: Callable[[SyncRound], None],
        journal: Any = None,
        progress: Progress | None = None,
        unready: dict[str, str] | None = None,
        on_fed: Callable[[SyncRound], None] | None = None,
    ) -> None:
        self.request = replace(request, reference=reference)
        # hosts whose chronyd cannot take samples (``sync check``'s problems): never
        # promised a feed, in a dry run either, and the round has problems (exit 3)
        self.unready = dict(unready or {})
        self.plan = plan
        self.fleet = fleet
        self.reference = reference
        self.reference_why = reference_why
        self.confirm = confirm
        self.on_round = on_round
        # a fed round is reported a round later (its samples counted); this hears of it
        # as it is fed, so the operator is not left an interval without a word
        self.on_fed = on_fed
        self.journal = (
            SyncJournal(journal, {"source": fleet.source, "reference": reference})
            if journal is not None and plan.apply
            else None
        )
        self.progress = progress
        self.session: ScanSession | None = None  # opened by the first round's scan
        # fed rounds not yet settled: a round's last samples may still be on their way
        # while the next estimate travels, so it is settled one round later
        self.open: list[SyncRound] = []
        self.sockets = {h: socket_path(plan.socket_template, h) for h in fleet.names}
        self.feeders = Feeders(fleet.launch, fleet.hosts, plan.feeder) if plan.apply else None

    async def scan(self) -> FabricSnapshot:
        """One round's scan, through the loop's one session: its source keeps what carries
        over between rounds (the simulator's model, the discovered paths over SSH)."""
        if self.session is None:
            self.session = ScanSession(self.request, progress=self.progress)
        return await self.session.scan()

    async def round(self, number: int) -> SyncRound:
        """Scan, decide, confirm, journal the intent, send the estimates."""
        started = _now()
        snapshot = await self.scan()
        decisions = decide(
            snapshot,
            self.plan.rules,
            reference=self.reference,
            apply=self.plan.apply,
            sockets=self.sockets,
        )
        for d in decisions:
            why = self.unready.get(d.host)
            if d.feeds and why is not None:
                d.action, d.reason = "skip", f"chronyd not ready: {why} (cwctl sync check)"
        for d in decisions:
            if d.feeds and d.step and not self.confirm(d):
                d.action, d.reason = "skip", "beyond --max-offset and not confirmed"
        rules = self.plan.rules
        rnd = SyncRound(
            number,
            started,
            self.plan.apply,
            self.reference,
            self.reference_why,
            snapshot,
            decisions,
            rules={
                "max_uncertainty_ns": rules.max_uncertainty_ns,
                "max_offset_ns": rules.max_offset_ns,
                "step": rules.step,
            },
        )
        if self.feeders is not None:
            while self.open and self.open[0].number < number - 1:
                self.settle(self.open.pop(0))  # its feeders moved on a round ago
            if self.journal is not None:
                self.journal.intent(number, decisions)
            self.open.append(rnd)
            await self.feeders.feed(decisions, number)
            if self.on_fed is not None:
                self.on_fed(rnd)
        else:
            self.on_round(rnd)
        return rnd

    def settle(self, rnd: SyncRound) -> None:
        """A round later (or when cwctl stops): what each feeder sent with this round's
        estimate, into the decisions, the journal and the report."""
        if self.feeders is None:
            return
        self.feeders.tally(rnd.decisions, rnd.number)
        if self.journal is not None:
            self.journal.outcome(rnd.number, rnd.decisions)
        self.on_round(rnd)

    async def run(self) -> int:
        """Every round until ``count``; the exit code of the last round. A fed round is
        reported a round later, when every sample it gave is counted; the last is fed one
        more whole interval, then reported."""
        loop = asyncio.get_running_loop()
        rnd: SyncRound | None = None
        try:
            number = 0
            while self.plan.count is None or number < self.plan.count:
                number += 1
                t0 = loop.time()
                rnd = await self.round(number)
                last = self.plan.count is not None and number >= self.plan.count
                if self.plan.apply and last:  # the last estimate gets a whole interval
                    await asyncio.sleep(self.plan.interval_s)
                elif not last:
                    await asyncio.sleep(max(0.0, t0 + self.plan.interval_s - loop.time()))
        finally:
            if self.feeders is not None:
                await asyncio.shield(self.feeders.close())
                while self.open:  # the feeders are closed: every count is final
                    self.settle(self.open.pop(0))
                if self.journal is not None:
                    self.journal.close()
            if self.session is not None:  # the rounds' source, opened by the first scan
                await self.session.aclose()
        return EXIT_PROBLEMS if rnd is None or rnd.problems else EXIT_OK
