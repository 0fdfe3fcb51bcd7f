"""The one front door (``ActionSession``): plan and apply under one lock, on the
caller's simulator model; a plan whose state changed meanwhile is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cwctl.actions.history import history
from cwctl.actions.journal import ActionLock, Journal, LockHeld
from cwctl.actions.session import ActionSession, Ask, StalePlan
from cwctl.actions.shell import Shell, act
from cwctl.errors import CwctlError
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.session import analyse
from cwctl.sim.model import DrainHost
from cwctl.sim.state import save_state
from cwctl.transport.sim import model_for, run_model


@pytest.fixture
def request_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ScanRequest:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    options = SimOptions(hosts=16, hosts_per_leaf=4, faults=("switch:spine3:down",))
    return ScanRequest(sim=options, duration_s=5.0)  # 10 pairs a peer: a rescan can tell


async def test_plan_and_apply_on_the_callers_model(tmp_path: Path, request_: ScanRequest) -> None:
    model = model_for(request_)
    async with ActionSession(request_, model=model) as session:
        plan = await session.plan(Ask("reroute", "spine3"))
        assert any("ECMP weight of spine3 1 -> 0" in s.description for s in plan.steps)
        assert model.state.ecmp_weight == {}  # planning changed nothing
        outcome = await session.apply(plan, check=True)
    assert outcome.ok and "no longer a suspect" in outcome.message
    assert all(w == 0 for w in model.state.ecmp_weight.values())
    assert analyse(run_model(model, 0.5)).suspects == []  # the caller's next scan sees it
    (action,) = history(Journal(tmp_path)).actions
    assert action.id == plan.id and action.status == "applied" and action.verify == "gone"


async def test_a_plan_whose_state_changed_is_refused_and_nothing_applied(
    tmp_path: Path, request_: ScanRequest
) -> None:
    async with ActionSession(request_) as session:
        plan = await session.plan(Ask("reroute", "spine3"))
        assert plan.prior and plan.fingerprint()
        # meanwhile the saved fabric state changes outside this session (a hand edit,
        # or a cwctl that did not respect the lock)
        other = model_for(request_)
        other.apply(DrainHost("gpu-002"))
        save_state(other, request_)
        with pytest.raises(StalePlan, match="has changed since \\(sim\\): nothing applied"):
            await session.apply(plan)
    assert history(Journal(tmp_path)).actions == []  # refused before the intent
    model = model_for(request_)
    assert model.state.ecmp_weight == {}


async def test_planning_holds_the_lock_until_the_session_closes(
    tmp_path: Path, request_: ScanRequest
) -> None:
    """The TUI's confirmation dialog sits between plan and apply: meanwhile no other
    action (a CLI apply here) can plan from, or change, the same state."""
    said: list[str] = []
    shell = Shell(show=lambda _: None, say=said.append, confirm=lambda _: True)
    session = ActionSession(request_)
    await session.plan(Ask("drain", "gpu-001"))
    with pytest.raises(CwctlError, match="another cwctl action is running"):
        await act(Ask("drain", "gpu-003"), request_, shell, apply=True)
    await session.close()
    assert await act(Ask("drain", "gpu-003"), request_, shell, apply=True) == 0
    with ActionLock(tmp_path):  # released after each
        pass


async def test_every_action_notes_an_interrupted_one_first(
    tmp_path: Path, request_: ScanRequest
) -> None:
    said: list[str] = []
    shell = Shell(show=lambda _: None, say=said.append, confirm=lambda _: True)
    async with ActionSession(request_, lock=False) as session:
        plan = await session.plan(Ask("drain", "gpu-001"))
    intent = {"id": plan.id, "event": "intent", "action": "apply", "plan": plan.to_json()}
    Journal(tmp_path).append(intent)  # an apply killed right after its intent
    assert await act(Ask("drain", "gpu-002"), request_, shell, apply=False) == 0
    assert any(f"drain gpu-001 ({plan.id}) was interrupted" in s for s in said), said


async def test_a_long_lived_model_catches_up_with_changes_other_processes_saved(
    tmp_path: Path, request_: ScanRequest
) -> None:
    """The TUI keeps its model across scans; a CLI action meanwhile changes the saved
    state. The TUI's next plan starts from that state, so it is not refused as stale."""
    kept = model_for(request_)
    said: list[str] = []
    shell = Shell(show=lambda _: None, say=said.append, confirm=lambda _: True)
    assert await act(Ask("drain", "gpu-003"), request_, shell, apply=True) == 0  # the CLI
    assert kept.state.drained_hosts == set()
    async with ActionSession(request_, model=kept) as session:
        assert kept.state.drained_hosts == {"gpu-003"}
        plan = await session.plan(Ask("reroute", "spine3"))
        outcome = await session.apply(plan)
    assert outcome.ok and kept.state.drained_hosts == {"gpu-003"}
    assert all(w == 0 for w in kept.state.ecmp_weight.values()) and kept.state.ecmp_weight


async def test_a_change_the_verify_cannot_vouch_for_is_undone_by_the_door_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``undo_unless_gone``: a rescan too brief to tell (3 coded pairs a peer) vouches for
    nothing, so the session rolls the reroute back at once; the model is as before and
    the journal holds the apply, its verify and the rollback."""
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    request = ScanRequest(
        sim=SimOptions(hosts=32, spines=4, faults=("link:leaf1-spine2:down",)), duration_s=1.0
    )
    model = model_for(request)
    async with ActionSession(request, model=model) as session:
        plan = await session.plan(Ask("reroute", "leaf1-spine2"))
        outcome = await session.apply(plan, check=True, verify_s=0.03, undo_unless_gone=True)
    assert outcome.verification is not None and not outcome.verification.gone
    assert outcome.undone is not None and not outcome.undone.failed and not outcome.ok
    assert all(w == 1 for w in model.state.ecmp_weight.values())
    hist = history(Journal(tmp_path))
    undo = hist.undone_by(plan.id)
    assert undo is not None and undo.id == outcome.undone.execution.plan.id


async def test_a_rollback_checked_is_a_rescan_of_its_element_now_it_carries_traffic(
    tmp_path: Path, request_: ScanRequest
) -> None:
    """Undoing a reroute while the fault is still there: the element's traffic is back
    on it, and the rescan finds it (the watch's restore then applies the action anew)."""
    model = model_for(request_)
    async with ActionSession(request_, model=model) as session:
        plan = await session.plan(Ask("reroute", "spine3"))
        assert (await session.apply(plan, check=True)).ok
    undo = ActionSession.rollback(plan.id, model=model)
    assert undo.plan.rollback_of == plan.id and undo.action.id == plan.id
    async with undo.session:
        outcome = await undo.session.apply(undo.plan, check=True)
    assert not outcome.failed and outcome.verification is not None
    assert outcome.verification.element == "spine3" and not outcome.verification.gone


def test_a_held_lock_is_its_own_error_type(tmp_path: Path, request_: ScanRequest) -> None:
    with ActionLock(tmp_path), pytest.raises(LockHeld, match="another cwctl action is running"):
        ActionSession(request_)
