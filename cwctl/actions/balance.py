"""Which wire port each elephant flow should carry so that parallel links carry equal load.

The pure core of rebalancing (docs/actions.md, "Rebalancing colliding flows"): no I/O, no
hash. A flow's options are what tracing showed: per candidate wire port, the load the
flow would put on each directed element (``directed("leaf1", "spine2")`` is
``leaf1>spine2``, the leaf's uplink to spine2; ``spine2>leaf3`` the spine's downlink into
leaf3). Moving a flow moves both of its directions, so an option names both.

``groups`` are sets of parallel elements that should carry equal load: a leaf's uplinks,
the downlinks from every spine into one leaf. A group's ratio is its max over its mean.

The objective. Per group ``g`` with mean ``m``, its *floor* is ``T = max(target * m,
big)``, where ``big`` is the least load the biggest flow that must cross ``g`` puts on
one of its elements: no plan gets ``g``'s max below that. Then

    phi = sum over groups, over their elements e, of (max(0, load_e - T) / M) ** 2

with ``M`` the mean of the groups' means (fixed at the start): the load above the
floors, in units of a typical link's load. ``phi`` is 0 exactly when every group is
within its target (or as near as its biggest flow allows). Squared, so that spreading
load from the hottest element onto a cooler one gains even when both stay above the
target; in absolute load, so that a group that carries only acknowledgements counts
for as little as it carries.

The plan is greedy. Each step looks at the elements above their group's floor, hottest
first (most load above the floor), and takes the move of one flow on the first of them
that gains most (ties: the smallest added cost, then the flow's and the port's order). A
move must lower ``phi`` by at least ``min_gain`` (and strictly), and may not lift any
group's max/mean above the worst group's now (or the target). So ``phi`` falls at every
step and the worst ratio never rises: the plan cannot oscillate, ends, and the same input
gives the same plan. Then each moved flow whose move no longer gains anything (a later
move did its work) goes home. The cost of a plan is the rate of the flows whose final
port differs from their current one (a flow moved twice counts once; moved back, not
at all). Against an exhaustive search on small fabrics, the gap is in
tests/unit/test_balance.py and docs/actions.md.

Never onto an element that touches ``avoid`` (a suspect: a switch, a link, a NIC by
name); never a ``pinned`` flow; never above an element's ``capacity``. Groups left above
the target are named in ``Balance.unbalanced`` with why (``TOO_BIG``, ``NO_ENTROPY``,
``PINNED``, ``AVOIDED``, ``NO_GAIN``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cwctl.actions.balancetypes import (
    AVOIDED,
    DEFAULT_MIN_GAIN,
    DEFAULT_TARGET,
    NO_ENTROPY,
    NO_GAIN,
    PINNED,
    SEP,
    TOO_BIG,
    Balance,
    Elephant,
    GroupLoad,
    Unbalanced,
    directed,
    group_loads,
    imbalance,
    loads,
    touches,
)
from cwctl.errors import InputError

__all__ = [
    "AVOIDED",
    "DEFAULT_MIN_GAIN",
    "DEFAULT_TARGET",
    "NO_ENTROPY",
    "NO_GAIN",
    "PINNED",
    "SEP",
    "TOO_BIG",
    "Balance",
    "Elephant",
    "GroupLoad",
    "Unbalanced",
    "directed",
    "group_loads",
    "imbalance",
    "loads",
    "rebalance",
    "touches",
]

_EPS = 1e-12  # a gain below this is no gain (float noise)
_ROUND = 9  # gains equal to this many decimals tie (then the cheaper move wins)


@dataclass
class _Problem:
    """The fixed part: flows by index, their allowed ports, the groups and floors."""

    flows: list[Elephant]
    allowed: list[tuple[int, ...]]  # per flow, ports it may take (its current one first)
    groups: list[tuple[str, ...]]
    groups_of: dict[str, list[int]]
    big: list[float]  # per group: the least the biggest flow that must cross it puts on one
    big_flow: list[str]
    target: float
    capacity: Mapping[str, float]
    pinned: frozenset[str]
    scale: float  # phi's unit: the mean of the groups' mean loads, with the current ports


def _allowed(e: Elephant, avoid: frozenset[str], pinned: frozenset[str]) -> tuple[int, ...]:
    if e.flow in pinned:
        return (e.port,)
    ok = [
        p
        for p in sorted(e.options)
        if p != e.port and not any(touches(el, s) for el in e.options[p] for s in avoid)
    ]
    return (e.port, *ok)


def _problem(
    elephants: Iterable[Elephant],
    groups: Sequence[tuple[str, ...]],
    avoid: frozenset[str],
    pinned: frozenset[str],
    target: float,
    capacity: Mapping[str, float] | None,
) -> _Problem:
    flows = sorted(elephants, key=lambda e: e.flow)
    seen: set[str] = set()
    for e in flows:
        if e.flow in seen:
            raise InputError(f"flow {e.flow} given twice")
        seen.add(e.flow)
        if e.port not in e.options:
            raise InputError(f"flow {e.flow}: its current port {e.port} is not among its options")
        bad = [b for o in e.options.values() for b in o.values() if not b >= 0]
        if bad:
            raise InputError(f"flow {e.flow}: a load of {bad[0]} bit/s (loads are >= 0)")
    if not target >= 1.0:
        raise InputError(f"target {target}: a max/mean ratio is at least 1")
    groups_of: dict[str, list[int]] = {}
    for gi, g in enumerate(groups):
        for el in g:
            groups_of.setdefault(el, []).append(gi)
    allowed = [_allowed(e, avoid, pinned) for e in flows]
    big = [0.0] * len(groups)
    big_flow = [""] * len(groups)
    for e, ports in zip(flows, allowed, strict=True):
        least: dict[int, float] = {}  # per group it always crosses: its least max load there
        for n, p in enumerate(ports):
            here: dict[int, float] = {}
            for el, bps in e.options[p].items():
                for gi in groups_of.get(el, ()):
                    here[gi] = max(here.get(gi, 0.0), bps)
            least = (
                here if n == 0 else {gi: min(v, here[gi]) for gi, v in least.items() if gi in here}
            )
        for gi, v in least.items():
            if v > big[gi]:
                big[gi], big_flow[gi] = v, e.flow
    means = [m.mean for m in group_loads(loads(flows), groups)]
    scale = sum(means) / len(means) if means and sum(means) > 0 else 1.0
    return _Problem(flows, allowed, [tuple(g) for g in groups], groups_of, big, big_flow,
                    target, capacity or {}, pinned, scale)  # fmt: skip


class _State:
    """The loads of a choice, the flows on each element, and per group its term of phi,
    its max/mean and a version that changes with its loads."""

    def __init__(self, pb: _Problem) -> None:
        self.pb = pb
        self.choice = [e.port for e in pb.flows]
        self.load: dict[str, float] = {}
        self.on: dict[str, set[int]] = {}
        for i, e in enumerate(pb.flows):
            for el, bps in e.options[e.port].items():
                self.load[el] = self.load.get(el, 0.0) + bps
                self.on.setdefault(el, set()).add(i)
        n = len(pb.groups)
        self.phi_g, self.ratio_g, self.version = [0.0] * n, [1.0] * n, [0] * n
        for gi in range(n):
            self.phi_g[gi], self.ratio_g[gi] = self.term(gi)
        # element -> what its last fruitless search saw (``_best_move``)
        self.failed: dict[str, tuple[tuple[int, float], ...]] = {}

    def term(self, gi: int, change: Mapping[str, float] | None = None) -> tuple[float, float]:
        """Group ``gi``'s term of phi and its max/mean, with ``change`` added to loads."""
        g, load = self.pb.groups[gi], self.load
        if change:
            values = [load.get(el, 0.0) + change.get(el, 0.0) for el in g]
        else:
            values = [load.get(el, 0.0) for el in g]
        mean = sum(values) / len(g)
        if mean <= 0:
            return 0.0, 1.0
        top = max(self.pb.target * mean, self.pb.big[gi])
        phi = hi = 0.0
        for v in values:
            hi = max(hi, v)
            if v > top:
                phi += (v - top) * (v - top)
        return phi / (self.pb.scale * self.pb.scale), hi / mean

    def worst(self) -> float:
        """The worst group's max/mean now."""
        return max(self.ratio_g, default=1.0)

    def hot(self) -> list[tuple[float, str]]:
        """Elements above their group's floor: (-excess, name), hottest first."""
        out = []
        for gi, g in enumerate(self.pb.groups):
            if self.phi_g[gi] <= 0:
                continue
            values = [self.load.get(el, 0.0) for el in g]
            mean = sum(values) / len(g)
            top = max(self.pb.target * mean, self.pb.big[gi])
            out += [(top - v, el) for el, v in zip(g, values, strict=True) if v > top]
        return sorted(out)

    def delta(self, i: int, port: int) -> dict[str, float]:
        e = self.pb.flows[i]
        change: dict[str, float] = {}
        for el, bps in e.options[self.choice[i]].items():
            change[el] = change.get(el, 0.0) - bps
        for el, bps in e.options[port].items():
            change[el] = change.get(el, 0.0) + bps
        return change

    def touched(self, elements: Iterable[str]) -> list[int]:
        return sorted({gi for el in elements for gi in self.pb.groups_of.get(el, ())})

    def gain(self, change: Mapping[str, float], ceiling: float) -> float | None:
        """How much phi falls with ``change``; None when it overloads a capacity or lifts a
        group's max/mean above ``ceiling`` (the worst group's now, or the target)."""
        cap = self.pb.capacity
        for el, d in change.items():
            if d > 0 and el in cap and self.load.get(el, 0.0) + d > cap[el]:
                return None
        gain = 0.0
        for gi in self.touched(change):
            new_phi, new_ratio = self.term(gi, change)
            if new_ratio > ceiling + _EPS:
                return None
            gain += self.phi_g[gi] - new_phi
        return gain

    def move(self, i: int, port: int) -> None:
        e = self.pb.flows[i]
        old = e.options[self.choice[i]]
        for el, bps in old.items():
            self.load[el] -= bps
            self.on[el].discard(i)
        for el, bps in e.options[port].items():
            self.load[el] = self.load.get(el, 0.0) + bps
            self.on.setdefault(el, set()).add(i)
        self.choice[i] = port
        for gi in self.touched([*old, *e.options[port]]):
            self.phi_g[gi], self.ratio_g[gi] = self.term(gi)
            self.version[gi] += 1

    def cost_of(self, i: int, port: int) -> float:
        """What moving flow ``i`` to ``port`` adds to the plan's cost (negative: back home)."""
        e = self.pb.flows[i]
        was = 0.0 if self.choice[i] == e.port else e.rate
        return (0.0 if port == e.port else e.rate) - was


def _best_move(st: _State, element: str, min_gain: float, ceiling: float) -> tuple[int, int] | None:
    """The move of one flow off ``element`` that gains most (ties: cheapest, then the
    flow's and the port's order), if it gains at least ``min_gain``.

    An element that had none keeps having none until a group its flows' options touch
    changes: the ceiling only falls, which only forbids more (``_State.failed``)."""
    pb = st.pb
    flows = sorted(st.on.get(element, ()))
    elements = {el for i in flows for p in pb.allowed[i] for el in pb.flows[i].options[p]}
    # what a verdict rests on: the groups' versions, the loads of capped elements outside
    seen = tuple((gi, st.version[gi]) for gi in st.touched(elements)) + tuple(
        (-1, st.load.get(el, 0.0))
        for el in sorted(elements)
        if el in pb.capacity and el not in pb.groups_of
    )
    if st.failed.get(element) == seen:
        return None
    best: tuple[float, float, int, int] | None = None
    for i in flows:
        for port in pb.allowed[i]:
            if port == st.choice[i] or element in pb.flows[i].options[port]:
                continue
            gain = st.gain(st.delta(i, port), ceiling)
            if gain is None or gain <= _EPS or gain < min_gain:
                continue
            key = (-round(gain, _ROUND), st.cost_of(i, port), i, port)
            if best is None or key < best:
                best = key
    if best is None:
        st.failed[element] = seen
        return None
    return best[2], best[3]


def _prune(st: _State) -> None:
    """Send home each moved flow (biggest first) whose move no longer gains anything:
    a later move may have done its work."""
    pb = st.pb
    moved = [i for i, e in enumerate(pb.flows) if st.choice[i] != e.port]
    for i in sorted(moved, key=lambda i: (-pb.flows[i].rate, i)):
        gain = st.gain(st.delta(i, pb.flows[i].port), max(pb.target, st.worst()))
        if gain is not None and gain >= -_EPS:
            st.move(i, pb.flows[i].port)


def _why(st: _State, gi: int, ratio: float) -> Unbalanced:
    """Why group ``gi`` stays above the target."""
    pb, g = st.pb, st.pb.groups[gi]
    mean = sum(st.load.get(el, 0.0) for el in g) / len(g)
    if pb.big[gi] > pb.target * mean:
        detail = (f"{pb.big_flow[gi]} alone puts {pb.big[gi]:.3g} bit/s on one of its "
                  f"links, above {pb.target:g} x the mean {mean:.3g}")  # fmt: skip
        return Unbalanced(g, ratio, TOO_BIG, detail)
    hottest = max(g, key=lambda el: (st.load.get(el, 0.0), el))
    on = sorted(st.on.get(hottest, ()))
    free = [i for i in on if any(hottest not in pb.flows[i].options[p] for p in pb.allowed[i])]
    could = [i for i in on if any(hottest not in o for o in pb.flows[i].options.values())]
    if not free and any(pb.flows[i].flow in pb.pinned for i in could):
        return Unbalanced(g, ratio, PINNED, f"the flows that could leave {hottest} are pinned")
    if not free and could:
        detail = f"every traced port off {hottest} of its flows crosses a suspect"
        return Unbalanced(g, ratio, AVOIDED, detail)
    if not free:
        detail = f"none of the {len(on)} flow(s) on {hottest} has a traced port off it"
        return Unbalanced(g, ratio, NO_ENTROPY, detail)
    detail = (f"every move off {hottest} overloads a link, lifts another group above the "
              "worst, or gains too little")  # fmt: skip
    return Unbalanced(g, ratio, NO_GAIN, detail)


def rebalance(
    elephants: Iterable[Elephant],
    groups: Sequence[tuple[str, ...]],
    *,
    avoid: frozenset[str] = frozenset(),
    pinned: frozenset[str] = frozenset(),
    min_gain: float = DEFAULT_MIN_GAIN,
    target: float = DEFAULT_TARGET,
    capacity: Mapping[str, float] | None = None,
) -> Balance:
    """The wire port each flow should carry (module docstring: objective and greedy)."""
    pb = _problem(elephants, groups, avoid, pinned, target, capacity)
    st = _State(pb)
    before = dict(st.load)
    steps = 0
    limit = 10 * len(pb.flows) + 10  # phi falls each step; this only bounds float mishaps
    while steps < limit:
        move = None
        ceiling = max(target, st.worst())  # no move makes the worst group worse
        for _, element in st.hot():
            move = _best_move(st, element, min_gain, ceiling)
            if move is not None:
                break
        if move is None:
            break
        st.move(*move)
        steps += 1
    _prune(st)
    moves = {e.flow: p for e, p in zip(pb.flows, st.choice, strict=True) if p != e.port}
    after = loads(pb.flows, moves)
    groups_after = group_loads(after, pb.groups)
    unbalanced = tuple(
        _why(st, gi, gl.ratio) for gi, gl in enumerate(groups_after) if gl.ratio > target + _EPS
    )
    return Balance(
        moves=moves,
        before=before,
        after=after,
        moved_bps=sum(e.rate for e in pb.flows if e.flow in moves),
        groups_before=group_loads(before, pb.groups),
        groups_after=groups_after,
        unbalanced=unbalanced,
        steps=steps,
    )
