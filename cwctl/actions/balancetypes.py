"""The balancing core's data: elephants and their options, loads, groups, plans.

``balance.py`` plans with these and re-exports them; they are apart so that each module
holds one idea (the data and its arithmetic here, the search there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cwctl.errors import InputError

SEP = ">"  # a directed element: sender, then receiver
DEFAULT_TARGET = 1.2  # each group's max within this factor of its mean
# a move must lower phi (squared load above the floors, in mean group loads) by this
# much: taking a typical element from 1.25 to 1.2 of its mean gains 0.0025
DEFAULT_MIN_GAIN = 1e-3

# why a group stays above its target
TOO_BIG = "one flow too big"  # one flow alone puts more than target x mean on an element
NO_ENTROPY = "no free entropy"  # no flow on its hottest element has a port off it
PINNED = "pinned"  # flows that could leave its hottest element moved recently
AVOIDED = "only via a suspect"  # every port off its hottest element crosses a suspect
NO_GAIN = "no gain"  # every move off it overloads another element or gains < min_gain


def directed(sender: str, receiver: str) -> str:
    """A link's direction as an element name: ``leaf1>spine2`` (leaf1's uplink)."""
    return f"{sender}{SEP}{receiver}"


def touches(element: str, suspect: str) -> bool:
    """Whether a directed element crosses a suspect: either end (a switch, a host, a NIC)
    or the link they make (``leaf1-spine2``, either order)."""
    a, _, b = element.partition(SEP)
    return suspect in (element, a, b, f"{a}-{b}", f"{b}-{a}")


@dataclass(frozen=True)
class Elephant:
    """A connection that moves as a whole: changing its wire source port moves both
    directions."""

    flow: str  # a stable id, e.g. "gpu-001:41234>gpu-005:29500"
    port: int  # the wire port it carries now
    # wire port -> load (bit/s) it puts on each directed element with that port;
    # includes ``port``
    options: Mapping[int, Mapping[str, float]]

    @property
    def rate(self) -> float:
        """Its rate: the most it puts on one element now (bit/s)."""
        return max(self.options[self.port].values(), default=0.0)


@dataclass(frozen=True)
class GroupLoad:
    """One group's load: its max and mean element (bit/s) and their ratio."""

    group: tuple[str, ...]
    max: float
    mean: float

    @property
    def ratio(self) -> float:
        return self.max / self.mean if self.mean > 0 else 1.0


@dataclass(frozen=True)
class Unbalanced:
    """A group the plan leaves above its target, and why (``TOO_BIG``, ...)."""

    group: tuple[str, ...]
    ratio: float
    reason: str
    detail: str


@dataclass(frozen=True)
class Balance:
    """A plan: the flows that move and the loads before and after."""

    moves: Mapping[str, int]  # flow -> new wire port (only flows that move)
    before: Mapping[str, float]  # load per element with the current ports
    after: Mapping[str, float]  # load per element with the plan
    moved_bps: float  # the rate of the flows moved (the cost)
    groups_before: tuple[GroupLoad, ...] = ()  # per group, in the order given
    groups_after: tuple[GroupLoad, ...] = ()
    unbalanced: tuple[Unbalanced, ...] = ()  # groups left above the target, and why
    steps: int = 0  # greedy steps taken (a flow may move more than once)

    @property
    def imbalance_before(self) -> float:
        return max((g.ratio for g in self.groups_before), default=1.0)

    @property
    def imbalance_after(self) -> float:
        return max((g.ratio for g in self.groups_after), default=1.0)


def loads(
    elephants: Iterable[Elephant], choice: Mapping[str, int] | None = None
) -> dict[str, float]:
    """Load per element when each flow carries ``choice[flow]`` (else its current port);
    flows are summed in the order of their ids, so the sums do not depend on input order."""
    choice = choice or {}
    out: dict[str, float] = {}
    for e in sorted(elephants, key=lambda e: e.flow):
        port = choice.get(e.flow, e.port)
        if port not in e.options:
            raise InputError(f"flow {e.flow}: port {port} is none of its traced options")
        for element, bps in e.options[port].items():
            out[element] = out.get(element, 0.0) + bps
    return out


def group_loads(
    load: Mapping[str, float], groups: Sequence[tuple[str, ...]]
) -> tuple[GroupLoad, ...]:
    """Each group's max and mean (an element absent from ``load`` carries 0)."""
    out = []
    for g in groups:
        values = [load.get(e, 0.0) for e in g]
        out.append(GroupLoad(tuple(g), max(values, default=0.0), sum(values) / max(1, len(g))))
    return tuple(out)


def imbalance(load: Mapping[str, float], groups: Sequence[tuple[str, ...]]) -> float:
    """The worst group's max over mean (1.0 for no load)."""
    return max((g.ratio for g in group_loads(load, groups)), default=1.0)
