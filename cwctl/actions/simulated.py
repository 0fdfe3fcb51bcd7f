"""Actions on the simulator: model changes as data, plans for ``--sim``, saved state.

A change is a dict (``{"op": "ecmp_weight", "leaf": "leaf1", "spine": "spine2",
"weight": 0}``, ``exclude_nic``/``include_nic`` with ``nic``, ``drain_host``/
``resume_host`` with ``host``) so plans stay JSON; ``to_change`` makes the model's
``SetEcmpWeight`` / ``ExcludeNic`` / ... from it.

What an applied change leaves behind for later runs is the simulator's own business:
``cwctl.sim.state`` saves the model's state, and the sim source restores it.
"""

from __future__ import annotations

from typing import Any

from cwctl.actions.plan import SIM, Step
from cwctl.errors import InputError
from cwctl.sim.model import (
    Change,
    DrainHost,
    ExcludeNic,
    FabricModel,
    IncludeNic,
    ResumeHost,
    SetEcmpWeight,
    SteerPairs,
)


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
