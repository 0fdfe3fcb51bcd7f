"""The watch's decisions on scripted rounds and a fake clock: every guard rail, restore,
dry run and no flapping, with the world's answer to each action played by a small model
(a rerouted element is not named; a restore's rescan names it while the fault is on)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from cwctl.watch.decide import Decider, Decision, Seen
from cwctl.watch.policy import Allow, Policy

LINK = "leaf1-spine2"
REROUTE_LINKS = (Allow("link", "reroute"),)


def policy(**kw: object) -> Policy:
    base: dict[str, object] = {
        "rounds": 3,
        "min_score": 0.5,
        "max_per_hour": 4,
        "hold_s": 60.0,
        "allow": REROUTE_LINKS,
    }
    return Policy(**{**base, **kw})  # type: ignore[arg-type]


def link(score: float = 0.9, element: str = LINK) -> Seen:
    return Seen(element, "link", score)


@dataclass
class World:
    """Runs a decider against a fault that is on when ``fault(t)`` says so; carries out
    its decisions as the real loop does (acted / restored / restore_failed)."""

    decider: Decider
    fault: Callable[[float], bool]
    interval_s: float = 5.0
    rerouted: bool = False
    log: list[Decision] = field(default_factory=list)
    ids: int = 0

    def round(self, t: float) -> list[Decision]:
        named = [link()] if self.fault(t) and not self.rerouted else []
        out = self.decider.observe(t, named)
        self.log += out
        for d in out:
            if d.verb == "act":
                self.ids += 1
                self.rerouted = True
                self.decider.acted(t, d, f"a{self.ids}")
            elif d.verb == "restore":
                self.rerouted = False
                if self.fault(t):  # the verify rescan names it again: apply anew
                    self.ids += 1
                    self.rerouted = True
                    self.decider.restore_failed(t, d.element, f"a{self.ids}")
                    self.log.append(Decision(t, "reapplied", d.element))
                else:
                    self.decider.restored(t, d.element)
        return out

    def run(self, until_s: float) -> None:
        t = 0.0
        while t <= until_s:
            self.round(t)
            t += self.interval_s

    def times(self, *verbs: str) -> list[float]:
        return [d.t for d in self.log if d.verb in verbs]


def verbs(ds: list[Decision]) -> list[tuple[str, str]]:
    return [(d.verb, d.code) for d in ds]


def test_acts_only_after_n_consecutive_rounds_at_the_score() -> None:
    d = Decider(policy())
    assert verbs(d.observe(0, [link()])) == [("held", "rounds")]
    assert verbs(d.observe(5, [link()])) == [("held", "rounds")]
    assert verbs(d.observe(10, [])) == []  # a clean round breaks the streak
    assert verbs(d.observe(15, [link()])) == [("held", "rounds")]
    assert verbs(d.observe(20, [link(0.4)])) == [("held", "score")]  # under min_score
    d.observe(25, [link()])
    d.observe(30, [link()])
    acted = d.observe(35, [link()])
    assert verbs(acted) == [("act", "policy")]
    assert acted[0].action == "reroute" and "3 consecutive" in acted[0].why


def test_nothing_is_acted_on_that_no_allow_fits() -> None:
    d = Decider(policy(allow=(Allow("link", "reroute", ("leaf2-*",)),)))
    for t in range(0, 100, 5):
        assert d.observe(t, [link(), Seen("spine2", "switch", 1.0)]) == []
    d.policy = policy(allow=())
    assert d.observe(200, [link()]) == []


def test_ambiguous_suspects_are_held() -> None:
    d = Decider(policy(rounds=1))
    out = d.observe(0, [link(element="leaf1-spine1|leaf1-spine2")])
    assert verbs(out) == [("held", "ambiguous")]


def test_at_most_k_actions_per_hour_and_one_at_a_time() -> None:
    d = Decider(policy(rounds=1, max_per_hour=2))
    elements = [f"leaf{i}-spine1" for i in range(1, 6)]
    out = d.observe(0, [link(0.9 - i / 100, e) for i, e in enumerate(elements)])
    assert verbs(out)[0] == ("act", "policy") and out[0].element == "leaf1-spine1"
    assert {v for v in verbs(out)[1:]} == {("held", "busy")}
    d.acted(0, out[0], "a1")
    out = d.observe(5, [link(0.9, e) for e in elements[1:]])
    d.acted(5, out[0], "a2")
    out = d.observe(10, [link(0.9, e) for e in elements[2:]])
    assert {v for v in verbs(out)} == {("held", "rate")}
    # an hour after the first: room for one more
    out = d.observe(3601, [link(0.9, e) for e in elements[2:]])
    assert verbs(out)[0] == ("act", "policy")


def test_a_refused_or_rolled_back_action_waits_a_hold() -> None:
    d = Decider(policy(rounds=1))
    out = d.observe(0, [link()])
    d.failed(0, out[0], applied=True)
    assert verbs(d.observe(5, [link()])) == [("held", "hold")]
    assert d.actions_last_hour(5) == 1  # applied, then rolled back: it counts
    assert verbs(d.observe(61, [link()])) == [("act", "policy")]


def test_restore_after_clean_for_the_hold_then_not_before_a_fresh_streak() -> None:
    w = World(Decider(policy()), fault=lambda t: t < 30)
    w.run(300)
    assert w.times("act") == [10.0]  # named at 0, 5, 10
    # rerouted at 10, clean from 15: restored once clean for 60 s
    assert w.times("restore") == [75.0]
    assert w.decider.acted_on == {}
    assert w.times("reapplied") == []


def test_restore_that_finds_the_fault_applies_again_and_doubles_the_hold() -> None:
    w = World(Decider(policy()), fault=lambda t: True)  # a fault that never clears
    w.run(1000)
    restores = w.times("restore")
    assert restores[:3] == [75.0, 200.0, 445.0]  # clean from +5, hold 60, 120, 240
    assert len(w.times("reapplied")) == len(restores)
    assert w.decider.hold_for(LINK) == 480.0  # capped at 8x
    assert LINK in w.decider.acted_on


def test_restore_off_keeps_the_action() -> None:
    w = World(Decider(policy(restore=False)), fault=lambda t: t < 30)
    w.run(1000)
    assert w.times("act") == [10.0] and w.times("restore") == []


def test_restore_waits_when_the_hour_has_no_room_to_reapply() -> None:
    d = Decider(policy(rounds=1, max_per_hour=1, hold_s=10.0))
    out = d.observe(0, [link()])
    d.acted(0, out[0], "a1")
    assert d.observe(5, []) == []
    assert verbs(d.observe(20, [])) == [("held", "restore-rate")]
    restore = d.observe(3601, [])
    assert verbs(restore) == [("restore", "clean")] and restore[0].action_id == "a1"


def test_intermittent_fault_causes_at_most_one_action_per_hold_period() -> None:
    """On 20 s, off 20 s, for two hours; rounds every 5 s."""
    for hold in (60.0, 120.0, 300.0):
        w = World(Decider(policy(rounds=2, hold_s=hold)), fault=lambda t: t % 40 < 20)
        w.run(7200)
        acts = sorted(w.times("act", "reapplied"))
        assert acts, "the fault was never acted on"
        gaps = [b - a for a, b in itertools.pairwise(acts)]
        assert all(g >= hold for g in gaps), (hold, acts)
        per_hour = max(sum(1 for t in acts if s <= t < s + 3600) for s in acts)
        assert per_hour <= 4


def test_an_element_that_flaps_after_its_restore_gets_a_longer_hold() -> None:
    # the fault returns 10 s after each restore: each return is a flap
    w = World(Decider(policy(rounds=1, hold_s=30.0)), fault=lambda t: t < 5 or 60 <= t < 80)
    w.run(100)
    assert w.times("act") == [0.0, 60.0]  # restored at 35, back 25 s later: a flap
    assert w.decider.hold_for(LINK) == 60.0
    w.interval_s, w.log = 5.0, []
    for t in range(105, 300, 5):
        w.round(float(t))
    assert w.times("restore") == [125.0]  # clean from 65 for the doubled hold
    assert w.decider.hold_for(LINK) == 30.0  # then clean a hold after it: settled


def test_dry_run_says_what_it_would_do_and_does_nothing() -> None:
    d = Decider(policy(dry_run=True, rounds=2, hold_s=30.0))
    log: list[Decision] = []
    for t in range(0, 200, 5):
        log += d.observe(float(t), [link()] if t < 60 else [])
    would = [(x.verb, x.t) for x in log if x.verb.startswith("would")]
    assert would == [("would-act", 5.0), ("would-restore", 90.0)]
    assert not any(x.verb in ("act", "restore") for x in log)


def test_gpu_failures_and_host_faults_drain_when_allowed() -> None:
    d = Decider(policy(rounds=2, allow=(Allow("gpu", "drain"),)))
    gpu = Seen("gpu-003", "gpu", 1.0)
    d.observe(0, [gpu, Seen("gpu-004", "host", 1.0)])
    out = d.observe(5, [gpu, Seen("gpu-004", "host", 1.0)])
    assert [(x.verb, x.element, x.action) for x in out] == [("act", "gpu-003", "drain")]
    d.acted(5, out[0], "d1")
    for t in range(10, 1000, 5):  # a drained host still fails its GPU: never restored
        assert all(x.verb != "restore" for x in d.observe(float(t), [gpu]))


def test_decisions_read_as_json_lines() -> None:
    d = Decider(policy(rounds=1))
    (act,) = d.observe(0, [link(0.87654)])
    assert act.to_json() == {
        "event": "decision",
        "verb": "act",
        "element": LINK,
        "kind": "link",
        "action": "reroute",
        "code": "policy",
        "why": "named in 1 consecutive rounds, score 0.88",
        "score": 0.8765,
    }


def test_a_candidate_set_of_one_spine_and_its_links_is_that_spine() -> None:
    from cwctl.actions.naming import covering_switch

    assert covering_switch(["spine2", "leaf1-spine2", "leaf2-spine2"]) == "spine2"
    assert covering_switch(["leaf1-spine2", "leaf2-spine2"]) == "spine2"
    assert covering_switch(["leaf1-spine1", "leaf1-spine2"]) is None
    assert covering_switch(["gpu-001-leaf1", "leaf1"]) == "leaf1"  # the planner refuses a leaf
    assert covering_switch(["gpu-001", "gpu-002"]) is None
