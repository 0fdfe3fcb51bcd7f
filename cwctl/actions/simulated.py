"""Actions on the simulator: model changes as data, plans for ``--sim``, saved state.

A change is a dict (``{"op": "ecmp_weight", "leaf": "leaf1", "spine": "spine2",
"weight": 0}``, ``exclude_nic``/``include_nic`` with ``nic``, ``drain_host``/
``resume_host`` with ``host``) so plans stay JSON; ``to_change`` makes the model's
``SetEcmpWeight`` / ``ExcludeNic`` / ... from it.

Saved state: after every applied change the model's ``ModelState`` is written to
``$CWCTL_STATE_DIR/sim/<key>.json``, the key being the fabric's shape (hosts, hosts per
leaf, spines, or the inventory file). ``transport/sim.py`` restores it into a fresh
model (``restore_saved_state``), so ``cwctl reroute spine2 --sim --apply`` followed by
``cwctl scan --sim`` sees the reroute. The seed, faults, load and timestamps are not in
the key: they describe the fabric's conditions, not what the operator changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cwctl.actions.plan import SIM, Step
from cwctl.actions.state import state_dir
from cwctl.atomic import PRIVATE_MODE, write_text
from cwctl.errors import InputError
from cwctl.sim.model import (
    Change,
    DrainHost,
    ExcludeNic,
    FabricModel,
    IncludeNic,
    ModelState,
    ResumeHost,
    SetEcmpWeight,
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


# --- saved state ------------------------------------------------------------------------


def sim_key(shape: dict[str, Any]) -> str:
    text = json.dumps(shape, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shape_of(request: Any) -> dict[str, Any]:
    """What identifies a simulated fabric across runs (see the module docstring)."""
    if request.inventory is not None:
        return {"inventory": str(Path(request.inventory).absolute())}
    sim = request.sim
    return {"hosts": sim.hosts, "hosts_per_leaf": sim.hosts_per_leaf, "spines": sim.spines}


def state_path(request: Any) -> Path:
    return state_dir() / "sim" / f"{sim_key(shape_of(request))}.json"


def state_to_json(state: ModelState) -> dict[str, Any]:
    return {
        "ecmp_weight": [[leaf, spine, w] for (leaf, spine), w in sorted(state.ecmp_weight.items())],
        "excluded_nics": sorted(state.excluded_nics),
        "drained_hosts": sorted(state.drained_hosts),
    }


def state_from_json(data: dict[str, Any]) -> ModelState:
    return ModelState(
        ecmp_weight={(str(a), str(b)): int(w) for a, b, w in data.get("ecmp_weight", [])},
        excluded_nics={str(n) for n in data.get("excluded_nics", [])},
        drained_hosts={str(h) for h in data.get("drained_hosts", [])},
    )


def save_state(model: FabricModel, request: Any) -> Path:
    path = state_path(request)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"shape": shape_of(request), "state": state_to_json(model.state)}
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    write_text(path, text, mode=PRIVATE_MODE, option="simulator state")
    return path


def saved_state_json(request: Any) -> dict[str, Any]:
    """The state saved for ``request``'s fabric, as ``state_to_json`` writes it (the
    default state when none was saved or it cannot be read)."""
    try:
        data = json.loads(state_path(request).read_text())
        return state_to_json(state_from_json(data["state"]))
    except (OSError, ValueError, KeyError, TypeError):
        return state_to_json(ModelState())


def restore_saved_state(model: FabricModel, request: Any) -> bool:
    """Load the state saved for ``request``'s fabric into ``model``; False when none.
    A state file that no longer fits the model (names it lacks) is ignored."""
    if request.sim is None:
        return False
    path = state_path(request)
    try:
        data = json.loads(path.read_text())
        state = state_from_json(data["state"])
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    fabric = model.fabric
    fits = (
        all(leaf in fabric.leaves and spine in fabric.spines for leaf, spine in state.ecmp_weight)
        and all(fabric.has("nic", n) for n in state.excluded_nics)
        and all(h in fabric.hosts for h in state.drained_hosts)
    )
    if not fits:
        return False
    model.restore_state(state)
    return True
