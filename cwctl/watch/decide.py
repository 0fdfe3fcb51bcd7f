"""What the watch decides, from what each round saw and a clock: pure, no I/O.

``Decider.observe(now, seen)`` takes one round's suspects (``seen_in(snapshot)``) and
returns its decisions: at most one ``act`` or ``restore`` (one action at a time), and a
``held`` for each suspect a rule allows but a guard rail holds back, saying which. The
caller carries the action out and reports back (``acted``, ``failed``, ``restored``,
``restore_failed``); in a dry-run policy the decider records what it would have done
itself (``would-act``, ``would-restore``), so its log tells the same story.

The guard rails, in the order they are checked:

- an ``[[allow]]`` fits the suspect (kind and name), and its name is not ambiguous;
- it was named in ``rounds`` consecutive rounds with a score of at least ``min_score``;
- no action on the same element in the last hold period (``hold_for``: ``hold_s``,
  doubled each time the element flapped, up to 8x), so an intermittent fault causes
  at most one action per hold period;
- fewer than ``max_per_hour`` actions in the last 3 600 s;
- nothing else acts this round.

Restore: an element acted on and not named since for its hold period is rolled back
(when ``restore`` is on, and when the hour's budget still has room to re-apply should the
rollback's verify find the fault there). The caller's clock is any monotonic seconds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from cwctl.actions.naming import covering_switch
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.watch.policy import Policy

HOUR_S: Final = 3600.0
MAX_BACKOFF: Final = 3  # the hold doubles per flap, at most 2**3 times


@dataclass(frozen=True)
class Seen:
    """One suspect as a round named it; kind ``gpu`` is a host whose GPU verdict is fail."""

    element: str
    kind: str
    score: float


def seen_in(snapshot: FabricSnapshot) -> list[Seen]:
    """The suspects of a snapshot, and its hosts whose GPU verdict is fail. A suspect the
    data cannot pin down (``candidates``) is seen as the one switch that all of them are
    or end on (a one-way down link also silences the traces that would cross it: the
    candidates are a spine and its links), else as the ambiguous set it is."""
    out = []
    for s in snapshot.suspects:
        switch = covering_switch(s.candidates) if s.candidates else None
        if switch is not None:
            out.append(Seen(switch, "switch", float(s.score)))
        else:
            out.append(Seen(s.element, s.kind, float(s.score)))
    out += [Seen(h.name, "gpu", 1.0) for h in snapshot.hosts if h.gpu_verdict == "fail"]
    return out


@dataclass(frozen=True)
class Decision:
    """One line of the decision log (JSON on stderr) and one count in the metrics.

    ``verb``: act, would-act, restore, would-restore, held (decided); acted, failed,
    restored, restore-failed (what came of it); taken-up (an earlier watch's action cut
    short, rolled back at start). ``code`` is a short, bounded reason (a
    metric label); ``why`` says it in words."""

    t: float
    verb: str
    element: str
    kind: str = ""
    action: str = ""
    code: str = ""
    why: str = ""
    score: float | None = None
    action_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": "decision", "verb": self.verb, "element": self.element}
        for key in ("kind", "action", "code", "why", "action_id"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.score is not None:
            out["score"] = round(self.score, 4)
        return out


@dataclass
class Acted:
    """An element the watch acted on, and since when the rounds have not named it."""

    element: str
    kind: str
    action: str
    action_id: str | None
    at: float
    clean_since: float | None = None


@dataclass
class Decider:
    policy: Policy
    _streak: dict[str, int] = field(default_factory=dict)
    _acted: dict[str, Acted] = field(default_factory=dict)
    _last_act: dict[str, float] = field(default_factory=dict)
    _restored_at: dict[str, float] = field(default_factory=dict)
    _flaps: dict[str, int] = field(default_factory=dict)
    _times: deque[float] = field(default_factory=deque)

    # --- what the metrics and tests read -------------------------------------------------
    @property
    def acted_on(self) -> dict[str, Acted]:
        return dict(self._acted)

    def hold_for(self, element: str) -> float:
        return self.policy.hold_s * 2 ** min(self._flaps.get(element, 0), MAX_BACKOFF)

    def actions_last_hour(self, now: float) -> int:
        while self._times and self._times[0] <= now - HOUR_S:
            self._times.popleft()
        return len(self._times)

    # --- one round -----------------------------------------------------------------------
    def observe(self, now: float, seen: list[Seen]) -> list[Decision]:
        named = {s.element for s in seen}
        best: dict[str, Seen] = {}
        for s in seen:
            if s.element not in best or s.score > best[s.element].score:
                best[s.element] = s
        strong = {e for e, s in best.items() if s.score >= self.policy.min_score}
        self._streak = {e: self._streak.get(e, 0) + 1 for e in strong}
        self._note_clean(now, named)
        decisions: list[Decision] = []
        busy: str | None = None
        for s in sorted(best.values(), key=lambda s: (-s.score, s.element)):
            d = self._consider(now, s, busy)
            if d is None:
                continue
            if d.verb in ("act", "would-act"):
                busy = s.element
            decisions.append(d)
            if d.verb == "would-act":
                self.acted(now, d, None)
        if busy is None:
            restore = self._due_restore(now)
            if restore is not None:
                decisions.append(restore)
                if restore.verb == "would-restore":
                    self.restored(now, restore.element)
        return decisions

    def _note_clean(self, now: float, named: set[str]) -> None:
        for e, a in self._acted.items():
            if e in named:
                a.clean_since = None
            elif a.clean_since is None:
                a.clean_since = now
        for e, at in list(self._restored_at.items()):
            if e in named:
                continue
            if now - at >= self.hold_for(e):  # clean for a hold after its restore: settled
                del self._restored_at[e]
                self._flaps.pop(e, None)

    def _consider(self, now: float, s: Seen, busy: str | None) -> Decision | None:
        p = self.policy
        action = p.action_for(s.kind, s.element)
        if action is None or s.element in self._acted:
            return None  # not the policy's to act on, or acted on already

        def held(code: str, why: str) -> Decision:
            return Decision(now, "held", s.element, s.kind, action, code, why, s.score)

        if "|" in s.element:
            return held("ambiguous", f"the data cannot tell which of {s.element} it is")
        if s.score < p.min_score:
            return held("score", f"score {s.score:.2f} is under min_score {p.min_score:g}")
        streak = self._streak.get(s.element, 0)
        if streak < p.rounds:
            return held("rounds", f"named in {streak} of {p.rounds} consecutive rounds")
        last = self._last_act.get(s.element)
        hold = self.hold_for(s.element)
        if last is not None and now - last < hold:
            return held(
                "hold", f"acted on {now - last:.0f} s ago; the next action waits {hold:.0f} s"
            )
        if self.actions_last_hour(now) >= p.max_per_hour:
            return held("rate", f"max_per_hour {p.max_per_hour} actions taken in the last hour")
        if busy is not None:
            return held("busy", f"one action at a time: {busy} goes first")
        verb = "would-act" if p.dry_run else "act"
        why = f"named in {streak} consecutive rounds, score {s.score:.2f}"
        return Decision(now, verb, s.element, s.kind, action, "policy", why, s.score)

    def _due_restore(self, now: float) -> Decision | None:
        if not self.policy.restore:
            return None
        for e, a in sorted(self._acted.items(), key=lambda item: item[1].at):
            hold = self.hold_for(e)
            if a.clean_since is None or now - a.clean_since < hold or now - a.at < hold:
                continue
            if self.actions_last_hour(now) >= self.policy.max_per_hour:
                why = "no action left this hour to re-apply with, should its verify fail"
                return Decision(now, "held", e, a.kind, a.action, "restore-rate", why)
            verb = "would-restore" if self.policy.dry_run else "restore"
            why = f"not named for {now - a.clean_since:.0f} s (hold {hold:.0f} s)"
            return Decision(now, verb, e, a.kind, a.action, "clean", why, None, a.action_id)
        return None

    def adopt(self, now: float, element: str, kind: str, action: str, action_id: str) -> None:
        """An action a previous watch applied and left in place: taken up as if acted
        on ``now`` (its hold starts again; its restore follows as any other)."""
        self._acted[element] = Acted(element, kind, action, action_id, now)
        self._last_act[element] = now

    # --- what came of it (the caller reports) --------------------------------------------
    def acted(self, now: float, decision: Decision, action_id: str | None) -> None:
        """``decision`` was carried out (and verified) as ``action_id``."""
        e = decision.element
        restored = self._restored_at.pop(e, None)
        if restored is not None and now - restored < self.hold_for(e):
            self._flaps[e] = self._flaps.get(e, 0) + 1  # back within a hold: it flaps
        self._acted[e] = Acted(e, decision.kind, decision.action, action_id, now)
        self._last_act[e] = now
        self._times.append(now)
        self._streak.pop(e, None)

    def failed(self, now: float, decision: Decision, *, applied: bool) -> None:
        """``decision`` came to nothing: refused, or applied and rolled back (``applied``:
        it counts against the hour). Either way the element waits a hold period."""
        self._last_act[decision.element] = now
        self._streak.pop(decision.element, None)
        if applied:
            self._times.append(now)

    def restored(self, now: float, element: str) -> None:
        """The action on ``element`` was rolled back and the rescan found it clean."""
        self._acted.pop(element, None)
        self._restored_at[element] = now

    def restore_failed(self, now: float, element: str, action_id: str | None) -> None:
        """The rescan after the rollback named ``element`` again: the action was applied
        anew (``action_id``; None when it could not be), and the element's hold doubles."""
        self._flaps[element] = self._flaps.get(element, 0) + 1
        a = self._acted.get(element)
        if a is None:
            return
        if action_id is None:
            del self._acted[element]
            self._last_act[element] = now
            return
        self._acted[element] = Acted(element, a.kind, a.action, action_id, now)
        self._last_act[element] = now
        self._times.append(now)
