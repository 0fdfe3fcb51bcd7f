"""What an action acts on: one protocol, two targets, one registry of mechanisms.

A plan is made on an ``ActionTarget``: ``InventoryTarget`` (the inventory's hosts over
SSH, ``inventorytarget.py``) or ``SimTarget`` (the simulator's model, ``simulated.py``).
Each gives what planning, applying and verifying need, so no code above it asks which
one it has:

- ``shape()``: the fabric's names (hosts, leaves, spines, NICs, uplinks), for naming
  elements and for the jobs a plan touches;
- ``context()``: what the journal records of the fabric (a rollback rebuilds it);
- ``open_runner()``: what carries out the steps (SSH, or the model's ``apply_change``);
- ``scan_source(request)``: what a verification rescans;
- ``read_jobs(runner)``, ``state_now()``, ``plan_scheduler(...)``, ``check_options``;
- ``kind``: the key of its reroute mechanisms in ``MECHANISMS``.

A reroute mechanism (switch ECMP groups, host routes, NCCL, moving flows at the hosts;
in the model, ECMP weights, a NIC excluded, pairs steered) registers itself with
``@mechanism(kind, name, serves)`` beside the code that plans it; ``choose`` picks the
one mechanism of the target's kind that serves an element under the options. Their
``serves`` predicates do not overlap: two that both serve are a bug, said at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from cwctl.actions import nccl
from cwctl.actions.naming import Element, FabricShape
from cwctl.actions.plan import ActionPlan, Step
from cwctl.actions.runners import Runner
from cwctl.actions.steerports import SteerOptions

if TYPE_CHECKING:
    from cwctl.inventory import Inventory
    from cwctl.jobs import JobRead
    from cwctl.scan.request import ScanRequest, Source


@dataclass
class RouteOptions:
    prefix: str | None = None
    gateways: dict[str, str] = field(default_factory=dict)  # gateway address -> switch
    nccl_conf: str = nccl.DEFAULT_CONF
    via: str = "auto"  # "hosts": steer by source ports at the hosts (steer.py)
    steer: SteerOptions = field(default_factory=SteerOptions)


PlanSteps = Callable[[Element, Any, Runner, RouteOptions, ActionPlan], Awaitable[list[Step]]]


class Mechanism(NamedTuple):
    """One way to reroute: ``serves(element, options)``, then ``plan(...)`` its steps."""

    kind: str  # the target kind it acts on: "ssh" or "sim"
    name: str
    serves: Callable[[Element, RouteOptions], bool]
    plan: PlanSteps


MECHANISMS: dict[str, list[Mechanism]] = {}


def mechanism(
    kind: str, name: str, serves: Callable[[Element, RouteOptions], bool]
) -> Callable[[PlanSteps], PlanSteps]:
    """Register the decorated planner as target ``kind``'s mechanism ``name``."""

    def register(plan: PlanSteps) -> PlanSteps:
        MECHANISMS.setdefault(kind, []).append(Mechanism(kind, name, serves, plan))
        return plan

    return register


def choose(kind: str, element: Element, options: RouteOptions) -> Mechanism | None:
    """The one mechanism of ``kind`` that serves ``element`` (None: none does)."""
    found = [m for m in MECHANISMS.get(kind, ()) if m.serves(element, options)]
    if len(found) > 1:
        names = ", ".join(m.name for m in found)
        raise AssertionError(f"{kind} mechanisms overlap on {element.name}: {names}")
    return found[0] if found else None


class ActionTarget(Protocol):
    kind: ClassVar[str]

    @property
    def request(self) -> ScanRequest | None: ...
    @property
    def inventory(self) -> Inventory | None:  # real hosts' (a job's step logs); None: the model
        ...

    def shape(self) -> FabricShape: ...
    def context(self) -> dict[str, Any]: ...
    def open_runner(self) -> Runner: ...
    def scan_source(self, request: ScanRequest) -> Source: ...
    async def read_jobs(self, runner: Runner) -> JobRead | None: ...
    def state_now(self) -> dict[str, Any]: ...
    def check_options(self, options: RouteOptions) -> None: ...
    def plan_scheduler(
        self, plan: ActionPlan, *, reason: str, evict: bool, suspect: str | None
    ) -> None: ...


def same_fabric(context: Mapping[str, Any]) -> tuple[Any, ...]:
    """A context's fabric, comparable: the sim's shape and seed, or the inventory."""
    if context.get("source") == "sim":
        sim = context.get("sim") or {}
        return ("sim", *(sim.get(k) for k in ("hosts", "hosts_per_leaf", "spines", "seed")))
    return ("ssh", context.get("inventory"))
