"""Host-side steering in the simulator: a steered pair's flows avoid the spine both ways,
other pairs keep their paths, the state round-trips and the undo restores it."""

from __future__ import annotations

import numpy as np

from cwctl.actions import simulated
from cwctl.actions.steerports import Avoided
from cwctl.scan.request import ProbeOverrides
from cwctl.sim import FabricModel
from cwctl.sim.model import SteerPairs
from cwctl.sim.state import state_from_json, state_to_json
from cwctl.sim.window import flow_paths


def _spines(model: FabricModel, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    ports = np.arange(model.params.ports, dtype=np.int64)
    ia, ib = model.model_index([a] * len(ports)), model.model_index([b] * len(ports))
    p = flow_paths(ia, ib, ports, model=model)
    return p.spine_fwd, p.spine_rev


def test_a_steered_pair_avoids_the_spine_and_others_do_not_move() -> None:
    model = FabricModel.leaf_spine(16, 4, 2, seed=5)
    spine2 = model.fabric.spines.index("spine2")
    fwd, rev = _spines(model, "gpu-001", "gpu-005")
    assert (fwd == spine2).any() or (rev == spine2).any()  # some flows crossed it
    other = _spines(model, "gpu-002", "gpu-006")
    model.apply(SteerPairs((("gpu-005", "gpu-001"),), "spine2"))
    fwd, rev = _spines(model, "gpu-001", "gpu-005")
    assert not (fwd == spine2).any() and not (rev == spine2).any()
    assert all(
        (x == y).all() for x, y in zip(other, _spines(model, "gpu-002", "gpu-006"), strict=True)
    )
    assert state_from_json(state_to_json(model.state)) == model.state
    model.apply(SteerPairs((("gpu-001", "gpu-005"),), None))
    assert model.state.steered == {}


def test_the_plan_step_steers_every_affected_pair_and_undoes_exactly() -> None:
    model = FabricModel.leaf_spine(16, 4, 2, seed=5)
    pairs = simulated.model_pairs(model.fabric, Avoided("leaf1-spine2", "spine2", "leaf1"))
    assert len(pairs) == 4 * 12 * 2  # leaf1's 4 hosts with the 12 elsewhere, both ways
    (step,) = simulated.steer_pairs_step(model, pairs, "spine2")
    before = state_to_json(model.state)
    model.apply(simulated.to_change(step.change or {}))
    assert len(model.state.steered) == 48
    assert simulated.steer_pairs_step(model, pairs, "spine2") == []  # already steered
    model.apply(simulated.to_change(step.undo_change or {}))
    assert state_to_json(model.state) == before


async def test_the_steer_ask_plans_applies_and_verifies_through_the_front_door(
    tmp_path, monkeypatch
) -> None:
    """What ``watch`` calls: ``Ask("steer", ELEMENT)`` through ``ActionSession``."""
    from cwctl.actions.journal import Journal
    from cwctl.actions.session import ActionSession, Ask
    from cwctl.scan.request import ScanRequest, SimOptions

    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    request = ScanRequest(
        sim=SimOptions(hosts=16, hosts_per_leaf=4, seed=3, faults=("switch:spine3:down",)),
        duration_s=0.3,
        overrides=ProbeOverrides(rate=100.0),
    )
    async with ActionSession(request, journal=Journal(tmp_path / "journal")) as session:
        plan = await session.plan(Ask("steer", "spine3"))
        assert plan.kind == "reroute" and plan.steering["method"] == "simulated"
        outcome = await session.apply(plan, check=True)
        assert outcome.ok and outcome.verification is not None and outcome.verification.gone
