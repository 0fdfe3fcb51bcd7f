"""The API the TUI can drive: prepare a plan on the caller's simulator model, apply it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cwctl.actions.api import prepare
from cwctl.actions.history import history
from cwctl.actions.journal import Journal
from cwctl.pipeline import ScanRequest, SimOptions, analyse
from cwctl.transport.sim import model_for, run_model


async def test_prepare_and_apply_on_the_callers_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    options = SimOptions(hosts=16, hosts_per_leaf=4, faults=("switch:spine3:down",))
    request = ScanRequest(sim=options, duration_s=0.5)
    model = model_for(request)
    prepared = await prepare("reroute", "spine3", request, model=model)
    assert "ECMP weight of spine3 1 -> 0" in prepared.text
    assert model.state.ecmp_weight == {}  # planning changed nothing
    outcome = await prepared.apply(verify=True)
    await prepared.close()
    assert outcome.ok and "no longer a suspect" in outcome.message
    assert all(w == 0 for w in model.state.ecmp_weight.values())
    assert analyse(run_model(model, 0.5)).suspects == []  # the caller's next scan sees it
    (action,) = history(Journal(tmp_path)).actions
    assert action.id == prepared.plan.id and action.status == "applied"
    assert action.verify == "gone"
