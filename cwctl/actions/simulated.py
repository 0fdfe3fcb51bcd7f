"""The simulator's model as an action target: its mechanisms, model changes as data.

``SimTarget`` is what ``--sim`` acts on; its runner (``SimRunner``) applies a
step's change to the model. Its reroute mechanisms (``MECHANISMS["sim"]``):

=============================  ===============================================
spine or link                  "ecmp": weight 0 in every leaf's group (the
                               simulator's groups are per leaf, not per
                               destination: see ``_link_note``)
spine or link, ``--at hosts``  "hosts": the pairs steered in the model
NIC ``gpu-001/mlx5_1``         "nic": the NIC excluded
=============================  ===============================================

A change is a dict (``{"op": "ecmp_weight", "leaf": "leaf1", "spine": "spine2",
"weight": 0}``, ``exclude_nic``/``include_nic`` with ``nic``, ``drain_host``/
``resume_host`` with ``host``) so plans stay JSON; ``to_change`` makes the model's
``SetEcmpWeight`` / ``ExcludeNic`` / ... from it.

What an applied change leaves behind for later runs is the simulator's own business:
``cwctl.sim.state`` saves the model's state, and the sim source restores it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from cwctl.actions import steerports as sp
from cwctl.actions.naming import Element, FabricShape
from cwctl.actions.plan import SIM, ActionPlan, Step
from cwctl.actions.runners import CommandResult, Runner
from cwctl.actions.steerports import Avoided
from cwctl.actions.target import RouteOptions, mechanism
from cwctl.errors import InputError
from cwctl.jobs.simjobs import sim_jobs
from cwctl.sim import state as sim_state
from cwctl.sim.model import (
    Change,
    DrainHost,
    ExcludeNic,
    FabricModel,
    IncludeNic,
    ModelState,
    ResumeHost,
    SetEcmpWeight,
    SteerPairs,
)

if TYPE_CHECKING:
    from cwctl.jobs import JobRead
    from cwctl.scan.request import ScanRequest, Source
    from cwctl.sim.fabric import Fabric

KIND = "sim"


def to_change(data: dict[str, Any]) -> Change:
    op = data.get("op")
    if op == "ecmp_weight":
        return SetEcmpWeight(str(data["spine"]), int(data["weight"]), data.get("leaf"))
    if op == "exclude_nic":
        return ExcludeNic(str(data["nic"]))
    if op == "include_nic":
        return IncludeNic(str(data["nic"]))
    if op == "drain_host":
        return DrainHost(str(data["host"]))
    if op == "resume_host":
        return ResumeHost(str(data["host"]))
    if op == "steer_pairs":
        pairs = tuple((str(a), str(b)) for a, b in data["pairs"])
        spine = data.get("spine")
        return SteerPairs(pairs, None if spine is None else str(spine))
    raise InputError(f"not a simulator change: {data!r}")


# --- plans ------------------------------------------------------------------------------


def ecmp_steps(model: FabricModel, spine: str, leaves: list[str]) -> list[Step]:
    """Weight 0 for ``spine`` in the ECMP group of each of ``leaves`` (undo: the old weight)."""
    fabric = model.fabric
    steps = []
    for leaf in leaves:
        li = fabric.leaves.index(leaf)
        ups = [fabric.spines[s] for s in fabric.uplinks[li]]
        if spine not in ups:
            continue
        weights = {s: model.state.ecmp_weight.get((leaf, s), 1) for s in ups}
        old = weights[spine]
        if old == 0:
            continue
        if not any(w > 0 for s, w in weights.items() if s != spine):
            raise InputError(
                f"{leaf}: {spine} is its last spine with weight > 0; taking it out would "
                "cut the leaf off"
            )
        dead = down_next_hops(model, leaf)
        if not any(w > 0 and s not in dead for s, w in weights.items() if s != spine):
            raise InputError(
                f"{leaf}: {spine} is its last healthy spine (the others, "
                f"{', '.join(sorted(s for s in weights if s != spine))}, are out or down); "
                "taking it out would cut the leaf off"
            )
        steps.append(
            Step(
                host=SIM,
                description=f"{leaf}: ECMP weight of {spine} {old} -> 0",
                change={"op": "ecmp_weight", "leaf": leaf, "spine": spine, "weight": 0},
                undo_change={"op": "ecmp_weight", "leaf": leaf, "spine": spine, "weight": old},
                undo_description=f"{leaf}: ECMP weight of {spine} 0 -> {old}",
            )
        )
    return steps


def down_next_hops(model: FabricModel, leaf: str) -> set[str]:
    """The spines ``leaf``'s routers would flag ``linkdown`` (``switchroute.healthy``):
    a spine that is down, or this leaf's link to it. A router sees its own ports, not
    loss or delay further on: a lossy or congested spine still counts as up."""
    out = set()
    for fault, _ in model.faults:
        if fault.mode != "down":
            continue
        if fault.kind == "switch":
            out.add(fault.name)
        elif fault.kind == "link" and fault.name.startswith(f"{leaf}-"):
            out.add(fault.name.split("-", 1)[1])
    return out


def exclude_nic_step(model: FabricModel, nic: str) -> list[Step]:
    host, _, name = nic.partition("/")
    index = model.fabric.hosts.index(host)
    active = [n for n in model.fabric.nics[index] if f"{host}/{n}" not in model.state.excluded_nics]
    if name not in active:
        return []
    others = [a for a in active if a != name]
    if not others:
        raise InputError(f"{nic} is the last NIC {host} uses: drain the host instead")
    return [
        Step(
            host=SIM,
            description=f"{host}: exclude NIC {name} (traffic leaves by {', '.join(others)})",
            change={"op": "exclude_nic", "nic": nic},
            undo_change={"op": "include_nic", "nic": nic},
            undo_description=f"{host}: use NIC {name} again",
        )
    ]


def drain_step(model: FabricModel, host: str, *, resume: bool = False) -> list[Step]:
    drained = host in model.state.drained_hosts
    if drained != resume:
        return []
    drain = {"op": "drain_host", "host": host}
    back = {"op": "resume_host", "host": host}
    return [
        Step(
            host=SIM,
            description=f"{'resume' if resume else 'drain'} {host} in the simulated scheduler",
            change=back if resume else drain,
            undo_change=drain if resume else back,
            undo_description=f"{'drain' if resume else 'resume'} {host}",
        )
    ]


def steer_pairs_step(model: FabricModel, pairs: list[tuple[str, str]], spine: str) -> list[Step]:
    """Host-side steering in the model: each pair's flows leave from source ports whose
    hash avoids ``spine``; the undo puts back what each pair had (steered or not)."""
    wanted = sorted({(min(a, b), max(a, b)) for a, b in pairs})
    todo = [p for p in wanted if model.state.steered.get(p) != spine]
    if not todo:
        return []
    other = [
        f"{a}-{b} ({model.state.steered[(a, b)]})" for a, b in todo if (a, b) in model.state.steered
    ]
    if other:
        raise InputError(
            f"host pair(s) already steered off another spine: {', '.join(other[:4])}; "
            "roll that action back first"
        )
    return [
        Step(
            host=SIM,
            description=f"{len(todo)} host pair(s): new flows leave from source ports off {spine}",
            change={"op": "steer_pairs", "pairs": [list(p) for p in todo], "spine": spine},
            undo_change={"op": "steer_pairs", "pairs": [list(p) for p in todo], "spine": None},
            undo_description=f"{len(todo)} host pair(s): source ports as before",
        )
    ]


# --- the runner --------------------------------------------------------------------------


ALREADY = "already so: nothing changed (the simulated fabric had it; a sim reset since?)"


def _effect(state: ModelState) -> tuple[Any, ...]:
    """What a model state does to traffic (an ECMP weight of 1 is no weight at all)."""
    weights = {k: w for k, w in state.ecmp_weight.items() if w != 1}
    return weights, state.excluded_nics, state.drained_hosts, state.steered


class SimRunner:
    """Model changes applied to the target's ``FabricModel`` (built on the first change:
    a plan that only names hosts reads no saved state); its state saved after each
    change when the target has a request (so the next ``cwctl scan --sim`` starts from it)."""

    def __init__(self, target: SimTarget) -> None:
        self.target = target
        self.request = target.request

    @property
    def model(self) -> FabricModel:
        return self.target.model

    async def run(self, host: str, argv: Sequence[str]) -> CommandResult:
        return CommandResult(2, "", f"{host}: a command step cannot run on the simulator")

    async def apply_change(self, change: dict[str, Any]) -> CommandResult:
        before = copy.deepcopy(self.model.state)
        try:
            self.model.apply(to_change(change))
        except InputError as exc:
            return CommandResult(2, "", str(exc))
        if _effect(before) == _effect(self.model.state):  # e.g. undone by `cwctl sim reset`
            return CommandResult(0, ALREADY)
        if self.request is not None:
            try:
                sim_state.save_state(self.model, self.request)
            except OSError as exc:  # not saved, so not done: the model as it was
                self.model.state = before
                self.model.path_cache.clear()
                return CommandResult(1, "", f"cannot save the simulator state: {exc.strerror}")
        return CommandResult(0)

    async def close(self) -> None:
        return None


# --- the target --------------------------------------------------------------------------


class SimTarget:
    """The simulator's model: the caller's (the TUI's), else built for ``request`` with
    the state earlier actions saved, on first use."""

    kind: ClassVar[str] = KIND
    inventory = None  # no hosts to log in to

    def __init__(self, model: FabricModel | None = None, request: ScanRequest | None = None):
        if model is None and (request is None or request.sim is None):
            raise ValueError("a SimTarget needs a model or a --sim request")
        self._model = model
        self.request = request
        self._shape: FabricShape | None = None
        self._bare: FabricModel | None = None

    @staticmethod
    def opens(request: ScanRequest, model: FabricModel | None) -> bool:
        """Whether a request acts on the simulator: it says --sim, or a model is given."""
        return model is not None or request.sim is not None

    @classmethod
    def open(cls, request: ScanRequest, model: FabricModel | None, **ssh: Any) -> SimTarget:
        """The target for ``request``: the caller's long-lived model (the TUI's), brought
        to the state saved for its fabric, or one built with that state on first use."""
        if model is not None and request.sim is not None:
            catch_up(model, request)
        return cls(model, request)

    @property
    def model(self) -> FabricModel:
        if self._model is None:
            from cwctl.transport.sim import SimSource

            assert self.request is not None
            self._model = SimSource(self.request).model
        return self._model

    def shape(self) -> FabricShape:
        if self._shape is None:
            self._shape = self._read_shape()
        return self._shape

    def _fabric(self) -> Fabric:
        """The fabric's names: the model's, else a bare model's, built without reading the
        state earlier actions saved (naming hosts needs none, and ``job-env`` may read
        another user's journal where the state is not its to read)."""
        if self._model is not None:
            return self._model.fabric
        if self._bare is None:
            from cwctl.transport.sim import model_for

            self._bare = model_for(self.request)
        return self._bare.fabric

    def _read_shape(self) -> FabricShape:
        f = self._fabric()
        return FabricShape(
            hosts=tuple(f.hosts),
            leaves=tuple(f.leaves),
            spines=tuple(f.spines),
            nics={h: tuple(n) for h, n in zip(f.hosts, f.nics, strict=True)},
            leaf_of={h: f.leaves[int(i)] for h, i in zip(f.hosts, f.host_leaf, strict=True)},
            uplinks={
                leaf: frozenset(f.spines[s] for s in ups)
                for leaf, ups in zip(f.leaves, f.uplinks, strict=True)
            },
            where="the simulated fabric",
            groups_per_leaf=True,
            hidden=frozenset(x for x in f.leaves if not f.has("switch", x)),
        )

    def context(self) -> dict[str, Any]:
        out = self.request.fabric_context() if self.request is not None else {}
        if out.get("source") == "sim":
            return out
        inventory = out.get("inventory")
        return {"source": "sim", **({"inventory": inventory} if inventory else {})}

    def open_runner(self) -> Runner:
        return SimRunner(self)

    def scan_source(self, request: ScanRequest) -> Source:
        from cwctl.transport.sim import SimSource

        return SimSource(request, model=self.model)

    async def read_jobs(self, runner: Runner) -> JobRead | None:
        sim = self.request.sim if self.request is not None else None
        if sim is None or sim.jobs <= 0:
            return None
        return sim_jobs(list(self.shape().hosts), sim.jobs, sim.seed)

    def state_now(self) -> dict[str, Any]:
        """The model's state as the next plan will find it: saved by the last change (by
        any cwctl process) when the request names a simulated fabric."""
        if self.request is not None and self.request.sim is not None:
            return {"sim": sim_state.saved_state_json(self.request)}
        return {"sim": sim_state.state_to_json(self.model.state)}

    def check_options(self, options: RouteOptions) -> None:
        if options.gateways:
            raise InputError(
                "--gateway: in the simulated fabric the leaves choose the spine (ECMP), the "
                "hosts have no next hops to reweight; leave --gateway out"
            )
        if options.via == "hosts" and options.steer.roce:
            raise InputError("--roce traces real hosts: give an inventory (-i), not --sim")

    def plan_scheduler(
        self, plan: ActionPlan, *, reason: str, evict: bool, suspect: str | None
    ) -> None:
        host = plan.element
        if host not in self.model.fabric.hosts:
            raise InputError(f"no host named {host!r} in the simulated fabric")
        plan.prior = {"sim": sim_state.state_to_json(self.model.state)}
        plan.steps = drain_step(self.model, host, resume=plan.kind == "resume")
        if not plan.steps:
            state = "drained" if plan.kind == "drain" else "in service"
            plan.notes.append(f"nothing to change: {host} is already {state}")


def catch_up(model: FabricModel, request: ScanRequest) -> None:
    """Bring the caller's long-lived model (the TUI's) to the state saved for its
    fabric, which other cwctl processes may have changed since (a CLI reroute, a
    rollback, ``cwctl sim reset``): the saved state is the one every plan is checked on."""
    from cwctl.sim.model import ModelState

    if sim_state.state_to_json(model.state) != sim_state.saved_state_json(
        request
    ) and not sim_state.restore_saved_state(model, request):
        model.restore_state(ModelState())


# --- mechanisms ---------------------------------------------------------------------------


def model_pairs(fabric: Fabric, suspect: sp.Avoided) -> list[tuple[str, str]]:
    """The pairs a suspect affects in the simulator's fabric (``cwctl.sim.fabric``)."""
    leaf_of = {
        h: fabric.leaves[int(i)] for h, i in zip(fabric.hosts, fabric.host_leaf, strict=True)
    }
    uplinks = {
        leaf: [fabric.spines[s] for s in ups]
        for leaf, ups in zip(fabric.leaves, fabric.uplinks, strict=True)
    }
    return sp.plan_pairs(leaf_of, uplinks, suspect)


def _link_note(element: Element) -> str:
    return (
        f"the simulator's ECMP groups are per leaf, not per destination: to keep traffic "
        f"to and from {element.leaf} off {element.name}, every leaf stops using {element.spine}"
    )


def _at_hosts(element: Element, options: RouteOptions) -> bool:
    return options.via == "hosts"


@mechanism(KIND, "hosts", _at_hosts)
async def _steer_steps(
    element: Element, target: SimTarget, runner: Runner, options: RouteOptions, plan: ActionPlan
) -> list[Step]:
    assert element.spine is not None  # planner.check_at_hosts
    model = target.model
    suspect = Avoided(element.name, element.spine, element.leaf)
    plan.prior = {"sim": sim_state.state_to_json(model.state)}
    pairs = model_pairs(model.fabric, suspect)
    plan.steering = {"method": "simulated", "suspect": element.name, "pairs": len(pairs)}
    return steer_pairs_step(model, pairs, suspect.spine)


def _nic(element: Element, options: RouteOptions) -> bool:
    return element.kind == "nic" and options.via != "hosts"


@mechanism(KIND, "nic", _nic)
async def _nic_steps(
    element: Element, target: SimTarget, runner: Runner, options: RouteOptions, plan: ActionPlan
) -> list[Step]:
    plan.prior = {"sim": sim_state.state_to_json(target.model.state)}
    return exclude_nic_step(target.model, element.name)


def _ecmp(element: Element, options: RouteOptions) -> bool:
    return element.kind != "nic" and options.via != "hosts"


@mechanism(KIND, "ecmp", _ecmp)
async def _ecmp_steps(
    element: Element, target: SimTarget, runner: Runner, options: RouteOptions, plan: ActionPlan
) -> list[Step]:
    model = target.model
    plan.prior = {"sim": sim_state.state_to_json(model.state)}
    steps = ecmp_steps(model, element.spine or element.name, list(model.fabric.leaves))
    if element.kind == "link":
        plan.notes.append(_link_note(element))
    return steps
