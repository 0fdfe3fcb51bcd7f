"""The balancing core: which wire port each elephant carries (cwctl/actions/balance.py).

Small fabrics written out by hand for each rule, hypothesis for the invariants, and the
greedy plan against an exhaustive search over every port choice (the gap docs/actions.md
states)."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.actions import balance as bal
from cwctl.actions.balance import Elephant, directed, imbalance, loads, rebalance
from cwctl.errors import InputError

ACK = 0.02  # the reverse direction of a one-way elephant: its acknowledgements


def uplinks(leaf: str, spines: list[str]) -> tuple[str, ...]:
    return tuple(directed(leaf, s) for s in spines)


def downlinks(leaf: str, spines: list[str]) -> tuple[str, ...]:
    return tuple(directed(s, leaf) for s in spines)


def option(a: str, b: str, fwd: str, rev: str, rate: float) -> dict[str, float]:
    """What a flow from leaf a to leaf b puts on each element: forward via spine ``fwd``,
    its acknowledgements back via ``rev``."""
    out: dict[str, float] = {}
    for el, v in (
        (directed(a, fwd), rate),
        (directed(fwd, b), rate),
        (directed(b, rev), rate * ACK),
        (directed(rev, a), rate * ACK),
    ):
        out[el] = out.get(el, 0.0) + v
    return out


def groups_of(leaves: list[str], spines: list[str]) -> list[tuple[str, ...]]:
    return [uplinks(x, spines) for x in leaves] + [downlinks(x, spines) for x in leaves]


def elephant(
    name: str, a: str, b: str, rate: float, spines: list[tuple[str, str]], port: int = 1000
) -> Elephant:
    """A flow whose port ``1000 + k`` takes ``spines[k]`` (forward, reverse)."""
    opts = {1000 + k: option(a, b, f, r, rate) for k, (f, r) in enumerate(spines)}
    return Elephant(name, port, opts)


SPINES = ["spine1", "spine2"]
GROUPS = groups_of(["leaf1", "leaf2"], SPINES)
BOTH = [("spine1", "spine1"), ("spine2", "spine2")]


def test_two_colliding_elephants_split_and_the_smaller_one_moves() -> None:
    flows = [
        elephant("big", "leaf1", "leaf2", 10.0, BOTH),
        elephant("small", "leaf1", "leaf2", 8.0, BOTH),
    ]
    plan = rebalance(flows, GROUPS)
    assert plan.imbalance_before == pytest.approx(2.0)
    assert plan.moves == {"small": 1001}  # the same gain (both within target), cheaper
    assert plan.moved_bps == 8.0
    assert plan.after["leaf1>spine1"] == 10.0 and plan.after["leaf1>spine2"] == 8.0
    assert plan.imbalance_after == pytest.approx(10 / 9)
    assert plan.unbalanced == ()


def test_a_balanced_fabric_moves_nothing() -> None:
    flows = [
        elephant("a", "leaf1", "leaf2", 5.0, BOTH),
        elephant("b", "leaf1", "leaf2", 5.0, BOTH, port=1001),
    ]
    plan = rebalance(flows, GROUPS)
    assert plan.moves == {} and plan.moved_bps == 0.0 and plan.steps == 0
    assert plan.after == plan.before


def test_never_onto_a_suspect_never_a_pinned_flow() -> None:
    three = [("spine1", "spine1"), ("spine2", "spine2"), ("spine3", "spine3")]
    spines = ["spine1", "spine2", "spine3"]
    flows = [elephant(f"f{i}", "leaf1", "leaf2", 4.0, three) for i in range(3)]
    groups = groups_of(["leaf1", "leaf2"], spines)
    free = rebalance(flows, groups)
    assert sorted(free.moves.values()) == [1001, 1002]  # one flow per spine
    off = rebalance(flows, groups, avoid=frozenset({"spine2"}))
    assert set(off.moves.values()) == {1002}  # only spine3 is allowed: one flow goes there
    assert off.after.get("leaf1>spine2", 0.0) == 0.0
    link = rebalance(flows, groups, avoid=frozenset({"leaf2-spine3"}))
    assert set(link.moves.values()) == {1001}
    held = rebalance(flows, groups, pinned=frozenset({"f0", "f1"}))
    assert set(held.moves) == {"f2"}


def test_one_flow_bigger_than_the_fair_share_is_named_not_fought() -> None:
    flows = [
        elephant("huge", "leaf1", "leaf2", 30.0, BOTH[:1]),  # one traced port
        elephant("m1", "leaf1", "leaf2", 2.0, BOTH),
        elephant("m2", "leaf1", "leaf2", 2.0, BOTH),
    ]
    plan = rebalance(flows, GROUPS)
    # the small ones leave the huge one's uplink; the group stays at 30 / 17
    assert set(plan.moves) == {"m1", "m2"}
    up = plan.groups_after[0]
    assert up.max == 30.0 and up.ratio == pytest.approx(30 / 17)
    reasons = {u.group: u.reason for u in plan.unbalanced}
    assert reasons[GROUPS[0]] == bal.TOO_BIG
    assert "huge" in next(u.detail for u in plan.unbalanced if u.group == GROUPS[0])


def test_no_free_entropy_pinned_and_suspects_are_told_apart() -> None:
    stuck = [elephant(f"f{i}", "leaf1", "leaf2", 4.0, BOTH[:1]) for i in range(2)]
    plan = rebalance(stuck, GROUPS)
    assert plan.moves == {} and plan.unbalanced[0].reason == bal.NO_ENTROPY
    two = [elephant(f"f{i}", "leaf1", "leaf2", 4.0, BOTH) for i in range(2)]
    pinned = rebalance(two, GROUPS, pinned=frozenset({"f0", "f1"}))
    assert pinned.moves == {} and pinned.unbalanced[0].reason == bal.PINNED
    avoided = rebalance(two, GROUPS, avoid=frozenset({"spine2"}))
    assert avoided.moves == {} and avoided.unbalanced[0].reason == bal.AVOIDED


def test_capacity_is_never_exceeded_by_a_move() -> None:
    flows = [elephant(f"f{i}", "leaf1", "leaf2", 4.0, BOTH) for i in range(2)]
    capped = rebalance(flows, GROUPS, capacity={"leaf1>spine2": 3.0})
    assert capped.moves == {} and capped.unbalanced[0].reason == bal.NO_GAIN
    assert rebalance(flows, GROUPS, capacity={"leaf1>spine2": 4.0}).moves == {"f0": 1001}


def test_min_gain_stops_small_moves() -> None:
    # uplinks 6 and 4: 1.2 of the mean, at the target; a 1.0 flow would even them out
    flows = [elephant("a", "leaf1", "leaf2", 5.0, BOTH), elephant("b", "leaf1", "leaf2", 1.0, BOTH)]
    flows.append(elephant("c", "leaf1", "leaf2", 4.0, BOTH, port=1001))
    assert rebalance(flows, GROUPS, target=1.2).moves == {}
    assert rebalance(flows, GROUPS, target=1.0, min_gain=0.0).moves == {"b": 1001}
    # the move gains 2 x (1 / 2.55) ** 2 = 0.31 (the unit: the mean of the 4 groups means)
    assert rebalance(flows, GROUPS, target=1.0, min_gain=0.3).moves == {"b": 1001}
    assert rebalance(flows, GROUPS, target=1.0, min_gain=0.32).moves == {}


def test_bad_input_is_one_line_naming_the_flow() -> None:
    with pytest.raises(InputError, match="flow x: its current port 7"):
        rebalance([Elephant("x", 7, {1: {"a>b": 1.0}})], GROUPS)
    with pytest.raises(InputError, match="flow x given twice"):
        rebalance([elephant("x", "leaf1", "leaf2", 1.0, BOTH)] * 2, GROUPS)
    with pytest.raises(InputError, match="flow x: a load of -1"):
        rebalance([Elephant("x", 1, {1: {"a>b": -1.0}})], GROUPS)
    with pytest.raises(InputError, match=r"target 0\.5"):
        rebalance([], GROUPS, target=0.5)
    with pytest.raises(InputError, match="flow x: port 9"):
        loads([elephant("x", "leaf1", "leaf2", 1.0, BOTH)], {"x": 9})


def test_touches_names_ends_and_links_either_way() -> None:
    assert bal.touches("leaf1>spine2", "spine2") and bal.touches("spine2>leaf1", "leaf1-spine2")
    assert bal.touches("leaf1>spine2", "spine2-leaf1") and not bal.touches("leaf1>spine2", "spine1")


# --- random fabrics ------------------------------------------------------------------


def random_case(rng: random.Random, dense: bool) -> tuple[list[Elephant], list[tuple[str, ...]]]:
    """Flows between the leaves of a small fabric, each with a few traced ports whose
    spines (each direction) are drawn at random, as an unknown hash spreads them."""
    n_leaves = 2 if dense else rng.randint(2, 3)
    spines = [f"spine{j + 1}" for j in range(rng.randint(2, 4))]
    leaves = [f"leaf{i + 1}" for i in range(n_leaves)]
    n = rng.randint(4, 7) if dense else rng.randint(2, 7)
    k = rng.randint(2, 3) if dense else rng.randint(2, 4)
    flows = []
    for f in range(n):
        a, b = rng.sample(leaves, 2)
        rate = rng.choice([1.0, 1.0, 2.0, 0.5, round(rng.uniform(0.2, 3.0), 3)])
        ways = [(rng.choice(spines), rng.choice(spines)) for _ in range(k)]
        flows.append(elephant(f"f{f}", a, b, rate, ways))
    return flows, groups_of(leaves, spines)


def exhaustive(
    flows: list[Elephant], groups: list[tuple[str, ...]], target: float
) -> tuple[float, float | None]:
    """Over every port choice: the least imbalance, and the least cost within target."""
    best, cheapest = float("inf"), None
    for combo in itertools.product(*[sorted(e.options) for e in flows]):
        choice = {e.flow: p for e, p in zip(flows, combo, strict=True)}
        imb = imbalance(loads(flows, choice), groups)
        cost = sum(e.rate for e, p in zip(flows, combo, strict=True) if p != e.port)
        best = min(best, imb)
        if imb <= target + 1e-9 and (cheapest is None or cost < cheapest):
            cheapest = cost
    return best, cheapest


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from([1.0, 1.2, 1.5]))
def test_plans_never_worsen_and_are_what_they_say(seed: int, dense: bool, target: float) -> None:
    rng = random.Random(seed)
    flows, groups = random_case(rng, dense)
    suspect = frozenset({rng.choice(["spine1", "spine2", "leaf1-spine2"])} if seed % 3 else ())
    pinned = frozenset(e.flow for e in flows if rng.random() < 0.2)
    plan = rebalance(flows, groups, avoid=suspect, pinned=pinned, target=target, min_gain=0.0)
    assert plan.imbalance_after <= plan.imbalance_before + 1e-9
    assert plan.before == pytest.approx(loads(flows))
    assert plan.after == pytest.approx(loads(flows, plan.moves))
    by_name = {e.flow: e for e in flows}
    assert plan.moved_bps == pytest.approx(sum(by_name[f].rate for f in plan.moves))
    for f, port in plan.moves.items():
        assert f not in pinned and port != by_name[f].port
        assert not any(bal.touches(el, s) for el in by_name[f].options[port] for s in suspect)
    for u in plan.unbalanced:
        assert u.ratio > target and u.reason in (bal.TOO_BIG, bal.NO_ENTROPY, bal.PINNED,
                                                 bal.AVOIDED, bal.NO_GAIN)  # fmt: skip
    # the same flows in another order: the same plan
    shuffled = list(flows)
    rng.shuffle(shuffled)
    again = rebalance(shuffled, groups, avoid=suspect, pinned=pinned, target=target, min_gain=0.0)
    assert again.moves == plan.moves and again.steps == plan.steps


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_never_better_than_the_exhaustive_optimum_and_reaches_what_one_move_reaches(
    seed: int,
) -> None:
    flows, groups = random_case(random.Random(seed), dense=True)
    plan = rebalance(flows, groups, min_gain=0.0)
    best, _ = exhaustive(flows, groups, bal.DEFAULT_TARGET)
    assert plan.imbalance_after >= best - 1e-9
    # a fabric one move from balance is balanced
    for e in flows:
        for port in e.options:
            if imbalance(loads(flows, {e.flow: port}), groups) <= 1.0 + 1e-9:
                assert plan.imbalance_after <= bal.DEFAULT_TARGET + 1e-9


def test_the_greedy_against_the_exhaustive_optimum() -> None:
    """The gap docs/actions.md states, over 150 seeded random fabrics (2 leaves, 2-4
    spines, 4-7 flows of 2-3 traced ports each): 1.5 % worse imbalance than the optimum
    on average (the worst case 1.48x), the target reached in 16 of the 17 cases where
    any choice reaches it, with 0.2 of a flow's rate moved beyond the cheapest plan."""
    rng = random.Random(37)
    ratios, reachable, reached, extra = [], 0, 0, []
    for _ in range(150):
        flows, groups = random_case(rng, dense=True)
        plan = rebalance(flows, groups, min_gain=0.0)
        best, cheapest = exhaustive(flows, groups, bal.DEFAULT_TARGET)
        ratios.append(plan.imbalance_after / best)
        if cheapest is not None:
            reachable += 1
            if plan.imbalance_after <= bal.DEFAULT_TARGET + 1e-9:
                reached += 1
                extra.append(plan.moved_bps - cheapest)
    print(f"greedy/optimum imbalance: mean {statistics.mean(ratios):.3f}, "
          f"max {max(ratios):.3f}; target reachable {reachable}, reached {reached}; "
          f"extra bit/s moved: mean {statistics.mean(extra):.3f}")  # fmt: skip
    assert statistics.mean(ratios) < 1.03
    assert statistics.median(ratios) == pytest.approx(1.0)
    assert max(ratios) < 1.5
    assert reached >= 0.85 * reachable and reachable >= 10
    assert statistics.mean(extra) < 0.25  # in units of a typical flow's rate (1.0)
