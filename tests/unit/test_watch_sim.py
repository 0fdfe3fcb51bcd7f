"""The watch's rounds on the simulated fabric, acting through the real front door: the
sim model is what the actions change (and what the next round probes), the journal is
the real one. The policy's clock is a fake that moves 10 s per round, so holds of
minutes pass in a few rounds; the probing is real simulated probing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cwctl.actions.history import history
from cwctl.actions.journal import ActionLock, Journal
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.sim.state import saved_state_json
from cwctl.watch.decide import Decision
from cwctl.watch.policy import Allow, Policy
from cwctl.watch.rounds import Watch

STEP_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def watch_on(
    *faults: str, policy: Policy | None, spines: int = 4
) -> tuple[Watch, Clock, list[Any]]:
    request = ScanRequest(sim=SimOptions(hosts=32, spines=spines, faults=faults), duration_s=1.0)
    clock, log = Clock(), []
    return Watch(request, policy=policy, log=log.append, clock=clock), clock, log


async def run(watch: Watch, clock: Clock, rounds: int) -> list[Decision]:
    out: list[Decision] = []
    for _ in range(rounds):
        clock.t += STEP_S
        snapshot = await watch.scan()
        assert snapshot is not None
        out += await watch.decide(snapshot)
    return out


def routed(model: Any) -> dict[Any, int]:
    """The model's ECMP weights that are not plain ECMP (absent and 1 route alike)."""
    return {k: w for k, w in model.state.ecmp_weight.items() if w != 1}


def seen(decisions: list[Decision]) -> list[tuple[str, str, str]]:
    return [(d.verb, d.element, d.code) for d in decisions if d.verb != "held"]


LINKS = Policy(rounds=2, hold_s=30.0, allow=(Allow("link", "reroute", ("leaf*-spine*",)),))


async def test_a_persistent_link_fault_is_rerouted_verified_journalled_then_restored() -> None:
    watch, clock, log = watch_on("link:leaf1-spine2:down", policy=LINKS)
    try:
        first = await run(watch, clock, 3)
        assert seen(first) == [
            ("act", "leaf1-spine2", "policy"),
            ("acted", "leaf1-spine2", "verified"),
        ]
        acted = first[-1]
        assert [(d.verb, d.code) for d in first[:1]] == [("held", "rounds")]
        model = watch.session.model
        assert 0 in model.state.ecmp_weight.values()  # the change, in the model probed
        # journalled as a manual apply is: intent, steps, end, verify
        action = next(a for a in history(Journal()).actions if a.id == acted.action_id)
        assert action.event == "apply" and action.status == "applied"
        verify = [e for e in Journal().read().entries if e.get("event") == "verify"]
        assert verify and verify[-1]["status"] == "gone"
        # rerouted: clean rounds; the fault is repaired; the hold passes; restored
        model.faults = []
        later = await run(watch, clock, 5)
        assert seen(later) == [
            ("restore", "leaf1-spine2", "clean"),
            ("restored", "leaf1-spine2", "clean"),
        ]
        # rolled back exactly: every weight plain ECMP again (absent or 1)
        assert set(model.state.ecmp_weight.values()) <= {1}
        assert watch.decider is not None and watch.decider.acted_on == {}
        assert watch.metrics.actions[("reroute", "acted")] == 1
        assert watch.metrics.actions[("reroute", "restored")] == 1
        assert any(line.get("verb") == "restored" for line in log)
    finally:
        await watch.aclose()


async def test_a_restore_that_finds_the_fault_applies_the_reroute_again() -> None:
    watch, clock, _ = watch_on("link:leaf1-spine2:down", policy=LINKS)
    try:
        await run(watch, clock, 3)
        later = await run(watch, clock, 5)  # the fault is never repaired
        assert seen(later) == [
            ("restore", "leaf1-spine2", "clean"),
            ("restore-failed", "leaf1-spine2", "reapplied"),
        ]
        assert 0 in watch.session.model.state.ecmp_weight.values()  # rerouted again
        assert watch.decider is not None and watch.decider.hold_for("leaf1-spine2") == 60.0
    finally:
        await watch.aclose()


async def test_a_host_fault_that_persists_is_drained_and_stays_drained() -> None:
    policy = Policy(rounds=2, hold_s=20.0, allow=(Allow("host", "drain"),))
    watch, clock, _ = watch_on("link:gpu-003-leaf1:down", policy=policy)
    try:
        out = await run(watch, clock, 8)
        assert seen(out) == [("act", "gpu-003", "policy"), ("acted", "gpu-003", "applied")]
        assert watch.session.model.state.drained_hosts == {"gpu-003"}
        # still named (a drain does not mend the host): never restored, never drained twice
        assert watch.decider is not None and "gpu-003" in watch.decider.acted_on
    finally:
        await watch.aclose()


async def test_never_the_last_path_the_planner_refuses_and_nothing_changes() -> None:
    policy = Policy(rounds=1, allow=(Allow("switch", "reroute"),))
    faults = ("switch:spine1:down", "switch:spine2:lossy=0.2@6")  # spine2 from the 6th s
    watch, clock, _ = watch_on(*faults, policy=policy, spines=2)
    try:
        out = await run(watch, clock, 6)
        assert seen(out)[:2] == [("act", "spine1", "policy"), ("acted", "spine1", "verified")]
        refused = [d for d in out if d.verb == "failed"]
        assert refused and refused[0].code == "refused" and "last spine" in refused[0].why
        zeroed = {s for (_, s), w in watch.session.model.state.ecmp_weight.items() if w == 0}
        assert len(zeroed) == 1  # the first spine only: the other is the last path
    finally:
        await watch.aclose()


async def test_one_at_a_time_another_action_holding_the_lock_holds_the_watch() -> None:
    policy = Policy(rounds=1, allow=(Allow("link", "reroute"),))
    watch, clock, _ = watch_on("link:leaf1-spine2:down", policy=policy)
    lock = ActionLock(Journal().directory)
    try:
        with lock:
            out = await run(watch, clock, 1)
        assert seen(out) == [("act", "leaf1-spine2", "policy"), ("failed", "leaf1-spine2", "lock")]
        assert "another cwctl action is running" in out[-1].why
        assert 0 not in watch.session.model.state.ecmp_weight.values()
        assert watch.metrics.errors["action"] == 1
    finally:
        await watch.aclose()


async def test_a_dry_run_policy_logs_what_it_would_do_and_changes_nothing() -> None:
    policy = Policy(dry_run=True, rounds=2, allow=LINKS.allow)
    watch, clock, log = watch_on("link:leaf1-spine2:down", policy=policy)
    try:
        out = await run(watch, clock, 4)
        assert seen(out) == [("would-act", "leaf1-spine2", "policy")]
        assert 0 not in watch.session.model.state.ecmp_weight.values()
        assert Journal().read().entries == []
        assert [line["verb"] for line in log if line.get("event") == "decision"].count(
            "would-act"
        ) == 1
        assert "leaf1" not in str(saved_state_json(watch.request))
    finally:
        await watch.aclose()


async def test_without_a_policy_it_only_watches() -> None:
    watch, clock, log = watch_on("link:leaf1-spine2:down", policy=None)
    try:
        assert await run(watch, clock, 3) == []
        assert [line["event"] for line in log] == ["round"] * 3
        assert watch.metrics.rounds == 3 and watch.metrics.suspects["link"] == 1
    finally:
        await watch.aclose()


@pytest.mark.parametrize(("bad", "line"), [("[act]\nrounds = 0\n", 2), ("[act\n", 1)])
async def test_reload_keeps_the_old_policy_when_the_new_file_is_bad(
    tmp_path: Path, bad: str, line: int
) -> None:
    from cwctl.watch.policy import load_policy

    path = tmp_path / "policy.toml"
    path.write_text('[[allow]]\nkind = "link"\naction = "reroute"\n')
    watch, _, log = watch_on(policy=load_policy(path))
    try:
        path.write_text(bad)
        await watch.reload()
        assert watch.policy is not None and watch.policy.allow == (Allow("link", "reroute"),)
        (said,) = [x for x in log if x["event"] == "reload"]
        assert said["ok"] is False and said["error"].startswith(f"{path}:{line}: ")
        assert watch.metrics.errors["reload"] == 1
        path.write_text("dry_run = true\n")
        await watch.reload()
        assert watch.policy.dry_run and watch.policy.allow == ()
        assert watch.metrics.dry_run is True
    finally:
        await watch.aclose()


async def test_host_side_steering_by_policy_is_applied_verified_and_restored() -> None:
    policy = Policy(rounds=1, hold_s=20.0, allow=(Allow("link", "steer"),))
    watch, clock, _ = watch_on("link:leaf1-spine2:down", policy=policy)
    try:
        out = await run(watch, clock, 1)
        assert seen(out) == [
            ("act", "leaf1-spine2", "policy"),
            ("acted", "leaf1-spine2", "verified"),
        ]
        model = watch.session.model
        assert model.state.steered and set(model.state.steered.values()) == {"spine2"}
        assert 0 not in model.state.ecmp_weight.values()  # the hosts steer, not the switches
        model.faults = []
        later = await run(watch, clock, 4)
        assert seen(later) == [
            ("restore", "leaf1-spine2", "clean"),
            ("restored", "leaf1-spine2", "clean"),
        ]
        assert not model.state.steered
    finally:
        await watch.aclose()


async def test_reload_takes_a_valid_new_inventory_and_keeps_a_broken_one_out(
    tmp_path: Path,
) -> None:
    repo = Path(__file__).resolve().parents[2]
    text = (repo / "inventory.example.toml").read_text()
    path = tmp_path / "inventory.toml"
    path.write_text(text)
    request = ScanRequest(sim=SimOptions(), inventory=path, duration_s=0.5)
    log: list[Any] = []
    watch = Watch(request, log=log.append)
    try:
        first = await watch.scan()
        assert first is not None
        before = watch.session
        await watch.reload()  # unchanged: the same session (its warm solve kept)
        assert watch.session is before and log[-1]["changed"] is False
        path.write_text(text + "\n[[host]]\nname = 'gpu-001'\n")
        await watch.reload()
        assert watch.session is before
        assert log[-1]["ok"] is False and log[-1]["error"].startswith(f"{path}:")
        kept = await watch.scan()  # the old inventory still scans
        assert kept is not None and len(kept.hosts) == len(first.hosts)
        hosts = [line for line in text.splitlines() if line.startswith("[[host]]")]
        cut = text.rindex("[[host]]")  # one host fewer
        path.write_text(text[:cut])
        await watch.reload()
        assert watch.session is not before and log[-1]["ok"] is True
        fewer = await watch.scan()
        assert fewer is not None and len(fewer.hosts) == len(hosts) - 1
    finally:
        await watch.aclose()


async def test_a_restarted_watch_adopts_the_action_it_left_and_restores_it() -> None:
    first, clock, _ = watch_on("link:leaf1-spine2:down", policy=LINKS)
    try:
        acted = [d for d in await run(first, clock, 3) if d.verb == "acted"]
    finally:
        await first.aclose()
    assert len(acted) == 1
    # a new process on the same fabric (its saved state keeps the reroute); the fault mended
    second, clock, log = watch_on(policy=LINKS)
    try:
        (adopted,) = [x for x in log if x["event"] == "adopted"]
        assert adopted["action_id"] == acted[0].action_id and adopted["element"] == "leaf1-spine2"
        assert second.decider is not None and "leaf1-spine2" in second.decider.acted_on
        later = await run(second, clock, 5)
        assert seen(later) == [
            ("restore", "leaf1-spine2", "clean"),
            ("restored", "leaf1-spine2", "clean"),
        ]
        assert set(second.session.model.state.ecmp_weight.values()) <= {1}
    finally:
        await second.aclose()
    third, _, log = watch_on(policy=LINKS)  # rolled back: nothing left to adopt
    await third.aclose()
    assert not [x for x in log if x["event"] == "adopted"]


async def test_a_verify_that_cannot_vouch_rolls_the_reroute_back_exactly_and_journals_it() -> None:
    """The rescan after the reroute probes too briefly to tell (3 coded pairs a peer, under
    the window's least): an inconclusive verify vouches for nothing, so the reroute is
    rolled back at once; the model's routes are as before, the journal holds the apply,
    the verify and the rollback, and the element waits its hold."""
    from cwctl.session import ScanSession
    from cwctl.watch.act import WatchTarget

    request = ScanRequest(
        sim=SimOptions(hosts=32, spines=4, faults=("link:leaf1-spine2:down",)), duration_s=1.0
    )
    session = ScanSession(request, sliding=True)
    fabric = WatchTarget(request, model=session.model, verify_s=0.03)  # quick rate: 3 pairs a peer
    clock, log = Clock(), []
    watch = Watch(
        request, policy=LINKS, log=log.append, clock=clock, session=session, fabric=fabric
    )
    model = session.model
    try:
        weights = routed(model)
        assert weights == {}  # plain ECMP: no weight other than 1
        out = await run(watch, clock, 2)
        assert seen(out) == [
            ("act", "leaf1-spine2", "policy"),
            ("failed", "leaf1-spine2", "verify"),
        ]
        failed = out[-1]
        assert "could not tell" in failed.why or "inconclusive" in failed.why, failed.why
        assert "rolled back" in failed.why and "ROLLBACK FAILED" not in failed.why
        # the routes exactly as before the action (a weight back to 1 is plain ECMP again)
        assert routed(model) == weights
        saved = saved_state_json(request)  # what the next cwctl process would load
        assert all(w == 1 for *_, w in saved["ecmp_weight"]) and not saved["steered"]
        # journalled: the apply, its verify (unvouched), and the rollback that undid it
        entries = Journal().read().entries
        verify = [e for e in entries if e.get("event") == "verify"]
        assert [e["status"] for e in verify] == ["unvouched"]
        assert verify[0]["id"] == failed.action_id
        hist = history(Journal())
        undo = hist.undone_by(failed.action_id)
        assert undo is not None
        assert watch.decider is not None and watch.decider.acted_on == {}
        assert watch.metrics.actions[("reroute", "failed")] == 1
        assert watch.metrics.errors["action"] == 0  # a failed verify is not a broken action
        # the element waits its hold (30 s): two more rounds of 10 s change nothing
        later = await run(watch, clock, 2)
        assert {d.verb for d in later} == {"held"} and ("held", "hold") in {
            (d.verb, d.code) for d in later
        }
        assert routed(model) == weights
    finally:
        await watch.aclose()
