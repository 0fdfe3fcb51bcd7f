"""The watch's rounds: scan, export, decide, act; the same session from round to round.

``Watch`` holds one ``ScanSession`` (``sliding=True``: the clock solve warm-starts from
the previous window, the source keeps its path cache and, for ``--sim``, its model),
scans it once per ``round``, hands the snapshot to the metrics, the decider (when a
policy is given) and carries out at most one action or restore per round (``act.py``).
A scan that fails (every host gone, an inventory that cannot be read) is an error of the
round, counted and logged; the next round tries again. ``reload`` (SIGHUP) reads the
inventory and the policy anew and takes each only when it validates.

Everything the watch says goes through ``log``: one dict per entry with an ``event`` of
``round``, ``decision``, ``error`` or ``reload`` (``cwctl.watch.log`` writes it to stderr
as words or as a JSON line, at its level).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from cwctl import settings
from cwctl.actions.jobs import job_reader
from cwctl.config import tomlfile
from cwctl.errors import CwctlError
from cwctl.inventory import load_inventory
from cwctl.runtime.allocator import trim
from cwctl.scan.request import ScanRequest
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import ScanSession
from cwctl.watch.act import Done, WatchTarget, act, left_behind, restore, undo_interrupted
from cwctl.watch.decide import Decider, Decision, seen_in
from cwctl.watch.metrics import WatchMetrics
from cwctl.watch.policy import Policy, load_policy
from cwctl.watch.rebalancing import Rebalancer

Log = Callable[[dict[str, Any]], None]
SCAN_ERRORS = (CwctlError, OSError, TimeoutError)


class Watch:
    def __init__(
        self,
        request: ScanRequest,
        *,
        policy: Policy | None = None,
        metrics: WatchMetrics | None = None,
        log: Log | None = None,
        session: ScanSession | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        fabric: WatchTarget | None = None,
    ) -> None:
        self.request = request
        self.session = session or _session(request)
        self.metrics = metrics or WatchMetrics()
        self.log: Log = log or (lambda _: None)
        self.clock, self.wall = clock, wall
        self.decider = Decider(policy) if policy is not None else None
        self.rebalancer: Rebalancer | None = None
        self._rebalancing(policy)
        self._fabric = fabric
        self.rounds = 0
        self._interrupted: list[tuple[dict[str, str], str]] = []  # for take_up
        self._inventory_text = _read(request.inventory)
        if self.decider is not None:
            self._adopt()
        self._publish_state()

    @property
    def policy(self) -> Policy | None:
        return self.decider.policy if self.decider is not None else None

    @property
    def fabric(self) -> WatchTarget:
        """What actions apply to: this session's hosts (for --sim, the model it probes)."""
        protect = self.policy.protect if self.policy is not None else ()
        job_log = self.policy.job_log if self.policy is not None else None
        if self._fabric is not None:
            return replace(self._fabric, protect=protect, job_log=job_log)
        return WatchTarget(self.request, model=self.session.model, protect=protect, job_log=job_log)

    async def scan(self) -> FabricSnapshot | None:
        """One scan of the session, its probes marked while a reroute the watch made is
        in place; a failure is logged and counted, not raised."""
        self._mark_probes()  # here, not in round(): the service's loop calls scan itself
        start = self.clock()
        snapshot: FabricSnapshot | None = None
        try:
            snapshot = await self.session.scan()
        except SCAN_ERRORS as exc:
            self.metrics.error("scan")
            self.log({"event": "error", "kind": "scan", "error": str(exc).splitlines()[0]})
        duration_s = self.clock() - start
        trim()  # the scan's freed arrays: their pages back, not held from round to round
        self.rounds += 1
        self.metrics.round_done(snapshot, finished_s=self.wall(), duration_s=duration_s)
        if snapshot is not None:
            self.log(_round_line(self.rounds, snapshot, duration_s))
        return snapshot

    async def decide(self, snapshot: FabricSnapshot) -> list[Decision]:
        """The policy's decisions on ``snapshot``, the first action among them carried
        out; every decision and outcome logged and counted."""
        if self.decider is None:
            return []
        decisions = self.decider.observe(self.clock(), seen_in(snapshot))
        for d in decisions:
            self._say(d)
        todo = next((d for d in decisions if d.verb in ("act", "restore")), None)
        if todo is not None:
            outcome = await self._carry_out(todo)
            decisions.append(outcome)
        elif self.rebalancer is not None and self.rebalancer.due(self.clock()):
            learnt = getattr(getattr(self.session.source, "paths", None), "paths", None)
            decisions += await self.rebalancer.round(
                self.clock(), self.fabric, snapshot, self.clock, self._say, learnt
            )
            self.metrics.set_uplinks(self.rebalancer.uplink_load)
        self._publish_state()
        return decisions

    def _rebalancing(self, policy: Policy | None) -> None:
        """The policy's ``[rebalance]`` (its moves remembered across a reload)."""
        rules = policy.rebalance if policy is not None else None
        if rules is None or policy is None:
            self.rebalancer = None
        elif self.rebalancer is None:
            self.rebalancer = Rebalancer(rules, policy.dry_run)
        else:
            self.rebalancer.rules, self.rebalancer.dry_run = rules, policy.dry_run

    async def round(self) -> FabricSnapshot | None:
        await self.take_up()
        snapshot = await self.scan()
        if snapshot is not None:
            await self.decide(snapshot)
        return snapshot

    async def _carry_out(self, d: Decision) -> Decision:
        assert self.decider is not None
        fabric = self.fabric
        try:
            done: Done = await (act(fabric, d) if d.verb == "act" else restore(fabric, d))
        except SCAN_ERRORS as exc:  # the hosts failed under it: the journal says what ran
            why = f"{str(exc).splitlines()[0]} (cwctl journal shows what ran)"
            done = Done(False, True, d.action_id, "error", why)
        now = self.clock()
        if done.applied and (done.moves_probes or self.session.simulated):
            self.session.fabric_changed()  # the paths learnt before no longer hold
        if d.verb == "act":
            verb = "acted" if done.ok else "failed"
            if done.ok:
                self.decider.acted(now, d, done.action_id)
            else:
                self.decider.failed(now, d, applied=done.applied)
        elif done.ok:
            verb = "restored"
            self.decider.restored(now, d.element)
        else:
            verb = "restore-failed"
            self.decider.restore_failed(now, d.element, done.action_id)
        if not done.ok and done.code in ("lock", "failed", "error"):
            self.metrics.error("action")
        outcome = Decision(
            now, verb, d.element, d.kind, d.action, done.code, done.why, d.score, done.action_id
        )
        self._say(outcome)
        return outcome

    def _adopt(self) -> None:
        """Take up the actions an earlier watch left in place on this fabric; note those
        it was killed during, for ``take_up``; skip (and say) marks no watch wrote."""
        assert self.decider is not None
        try:
            left = left_behind(WatchTarget(self.request))
        except CwctlError as exc:  # an unreadable journal: say so, start afresh
            self.metrics.error("journal")
            self.log({"event": "error", "kind": "journal", "error": str(exc).splitlines()[0]})
            return
        for line in left.skipped:
            self.metrics.error("journal")
            self.log({"event": "error", "kind": "journal", "error": line})
        for why, action_id in left.adopt:
            self.decider.adopt(self.clock(), why["element"], why["kind"], why["action"], action_id)
            self.log({"event": "adopted", "action_id": action_id, **why})
        self._interrupted = left.undo

    async def take_up(self) -> None:
        """Roll back what an earlier watch's automatic actions, cut short by its death
        (kill -9, a power cut), may have changed: the fabric as before them. Each is one
        decision ``taken-up`` (code ``rolled-back``, or why not) in the log and metrics."""
        pending, self._interrupted = self._interrupted, []
        for why, action_id in pending:
            done = await undo_interrupted(self.fabric, action_id)
            if done.applied:
                self.session.fabric_changed()
            if not done.ok:
                self.metrics.error("action")
            element, kind, action = why["element"], why["kind"], why["action"]
            said = f"{action_id} was cut short: {done.why}"
            taken = Decision(self.clock(), "taken-up", element, kind, action, done.code, said)
            self._say(replace(taken, action_id=done.action_id))

    def _mark_probes(self) -> None:
        """While a reroute the watch made is in place, its probes carry the mark that the
        leaves route by the routes as they were (``switchroute.observe_steps``): the rounds
        keep crossing the avoided element, and restore once it probes clean. The checks
        of an action (``self.fabric``'s rescans) stay unmarked: they see the reroute."""
        acted = self.decider.acted_on.values() if self.decider is not None else ()
        tos = settings.PROBE_OBSERVE_TOS if any(a.action == "reroute" for a in acted) else 0
        if self.session.request.probe_tos != tos:
            self.session.request = replace(self.session.request, probe_tos=tos)

    def _say(self, d: Decision) -> None:
        self.metrics.count(d)
        self.log(d.to_json())

    def _publish_state(self) -> None:
        acted = {e: a.action for e, a in self.decider.acted_on.items()} if self.decider else {}
        self.metrics.set_state(acted, self.policy.dry_run if self.policy is not None else None)

    # --- SIGHUP ----------------------------------------------------------------------------
    async def reload(self) -> None:
        """Read the policy and the inventory anew; each replaces the one in use only when
        it validates (else the old one stays, and the log says why)."""
        policy = self.policy
        if (policy is None or policy.path is None) and self.request.inventory is None:
            note = "nothing to read again: no --policy, no inventory file"
            self.log({"event": "reload", "what": "nothing", "ok": True, "note": note})
            return
        if policy is not None and policy.path is not None:
            try:
                fresh = load_policy(policy.path)
            except Exception as exc:  # nothing a reload reads ends the watch
                self._reload_failed("policy", policy.path, exc)
            else:
                assert self.decider is not None
                self.decider.policy = fresh
                self._rebalancing(fresh)
                self._publish_state()
                self.log(
                    {"event": "reload", "what": "policy", "path": str(policy.path), "ok": True}
                )
        path = self.request.inventory
        if path is None:
            return
        text = _read(path)
        if text == self._inventory_text:
            self.log(
                {
                    "event": "reload",
                    "what": "inventory",
                    "path": str(path),
                    "ok": True,
                    "changed": False,
                }
            )
            return
        try:
            load_inventory(path)
        except Exception as exc:  # as the policy
            self._reload_failed("inventory", path, exc)
            return
        old = self.session
        self.session = _session(self.request)
        self._inventory_text = text
        await old.aclose()
        self.log(
            {"event": "reload", "what": "inventory", "path": str(path), "ok": True, "changed": True}
        )

    def _reload_failed(self, what: str, path: Path, exc: Exception) -> None:
        """The old ``what`` kept; a CwctlError says why in its first line, anything else
        (a bug the loader let through) by its type as well."""
        error = str(exc).splitlines()[0] if str(exc) else ""
        if not isinstance(exc, CwctlError):
            error = f"{type(exc).__name__}: {error}"[:300]
        self.metrics.error("reload")
        self.log(
            {
                "event": "reload",
                "what": what,
                "path": str(path),
                "ok": False,
                "error": error,
                "kept": f"the {what} loaded before",
            }
        )

    async def aclose(self) -> None:
        await self.session.aclose()


def _read(path: Path | None) -> str | None:
    """The inventory's text, to tell whether a reload changed it (None: unreadable, which
    ``load_inventory`` then says why); bounded as every file the watch reads."""
    if path is None:
        return None
    try:
        return tomlfile.read_text(Path(path), "inventory file", tomlfile.INVENTORY_LIMIT)
    except tomlfile.TomlFileError:
        return None


def _round_line(n: int, snapshot: FabricSnapshot, duration_s: float) -> dict[str, Any]:
    """The round in the log: its verdict and why, the hosts not reached and their error,
    the suspects and the jobs each hurts (``cwctl.watch.log`` writes it)."""
    reached = sum(1 for h in snapshot.hosts if h.status == "ok")
    line: dict[str, Any] = {
        "event": "round",
        "round": n,
        "duration_s": round(duration_s, 3),
        "hosts": len(snapshot.hosts),
        "reached": reached,
        "records": snapshot.records,
        "budget": (snapshot.telemetry.get("budget") or {}).get("name"),
        "suspects": [_suspect(s) for s in snapshot.suspects[:10]],
        "healthy": snapshot.healthy,
        "verdict": snapshot.verdict,
    }
    if not snapshot.healthy:
        line["reasons"] = snapshot.verdict_reasons()
    unreached = [
        {"host": h.name, "error": (h.error or h.status).splitlines()[0][:200]}
        for h in snapshot.unreachable[:UNREACHED_LOGGED]
    ]
    if unreached:
        line["unreached"] = unreached
    return line


UNREACHED_LOGGED = 20  # hosts not reached named per round line (the count is "reached")


def _suspect(s: Any) -> dict[str, Any]:
    out = {"element": s.element, "kind": s.kind, "score": round(s.score, 4)}
    if s.jobs is not None:  # a scheduler was read: the jobs it hurts, [] for none
        out["jobs"] = [j["id"] for j in s.jobs]
    return out


def _session(request: ScanRequest) -> ScanSession:
    """The watch's scan session: sliding, reading the running jobs each round where the
    inventory names a scheduler (or ``--sim --jobs N``), so that suspects name them."""
    return ScanSession(request, sliding=True, jobs=job_reader(request))
