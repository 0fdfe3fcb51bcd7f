"""Actions apply to the simulated fabric: a rescan of the same model shows their effect."""

from __future__ import annotations

import numpy as np
import pytest

from cwctl.errors import InputError
from cwctl.fabric.topology import leaf_spine
from cwctl.sim import (
    DrainHost,
    ExcludeNic,
    FabricModel,
    IncludeNic,
    ResumeHost,
    SetEcmpWeight,
    SimParams,
)
from cwctl.sim.window import flow_paths


def _inter_leaf(model: FabricModel, table) -> np.ndarray:
    leaf = model.fabric.host_leaf
    return leaf[table.src] != leaf[table.dst]


def test_weight_zero_on_a_down_spine_removes_its_loss():
    model = FabricModel.leaf_spine(16, 4, 4, seed=3, faults=["switch:spine2:down"])
    before = model.probe(0.5).table
    inter = _inter_leaf(model, before)
    assert (~before.complete[inter]).mean() > 0.25
    model.apply(SetEcmpWeight("spine2", 0))
    window = model.probe(0.5)
    after = window.table
    assert after.complete.all()
    assert window.truth["state"]["ecmp_weight"] == {f"leaf{i}-spine2": 0 for i in range(1, 5)}
    # spine2 carries nothing now; the other spines share its flows
    spines = flow_paths(after.src, after.dst, after.sport.astype(np.int64) - 40000, model=model)
    used = set(spines.spine_fwd[_inter_leaf(model, after)].tolist())
    assert used == {0, 2, 3}
    model.apply(SetEcmpWeight("spine2", 1))
    assert not model.probe(0.5).table.complete.all()  # and back


def test_weights_move_flows_in_proportion():
    model = FabricModel.leaf_spine(64, 8, 2, seed=1)
    model.apply(SetEcmpWeight("spine1", 3, leaf="leaf1"))
    table = model.probe(0.1).table
    from_leaf1 = (model.fabric.host_leaf[table.src] == 0) & _inter_leaf(model, table)
    paths = flow_paths(table.src, table.dst, table.sport.astype(np.int64) - 40000, model=model)
    share = (paths.spine_fwd[from_leaf1] == 0).mean()
    assert 0.6 < share < 0.9  # about 3/4


def test_excluding_a_faulty_nic_moves_probes_to_the_other_nic():
    names, topo = leaf_spine(8, 4, 2)
    nics = {h: ("mlx5_0", "mlx5_1") for h in names}
    params = SimParams(rate=100.0)  # half-second windows with volume to count on
    model = FabricModel(
        names, topo, params=params, nics=nics, seed=2, faults=["nic:gpu-001/mlx5_1:down"]
    )
    table = model.probe(0.5).table
    touches = (table.src == 0) | (table.dst == 0)
    assert (~table.complete[touches]).mean() > 0.2
    assert table.complete[~touches].all()
    model.apply(ExcludeNic("gpu-001/mlx5_1"))
    table = model.probe(0.5).table
    assert table.complete.all()
    mine = table.select(table.src == 0)
    assert set(mine.nics[c] for c in set(mine.nic.tolist())) == {"mlx5_0"}
    model.apply(IncludeNic("gpu-001/mlx5_1"))
    assert not model.probe(0.5).table.complete.all()


def test_excluding_every_nic_of_a_host_cuts_it_off():
    model = FabricModel.leaf_spine(8, 4, 2, seed=2)
    model.apply(ExcludeNic("gpu-003/mlx5_0"))
    table = model.probe(0.2).table
    touches = (table.src == 2) | (table.dst == 2)
    assert not table.complete[touches].any() and table.complete[~touches].all()


def test_draining_a_congested_host_quiets_its_links():
    params = SimParams(load=0.1)
    model = FabricModel.leaf_spine(
        8, 4, 2, seed=5, params=params, faults=["host:gpu-003:congested"]
    )

    def p99_excess(table) -> float:
        sel = (table.dst == 2) & table.complete
        return float(np.percentile((table.t4 - table.t1)[sel] - (table.t3 - table.t2)[sel], 99))

    hot = p99_excess(model.probe(0.5).table)
    model.apply(DrainHost("gpu-003"))
    quiet = p99_excess(model.probe(0.5).table)
    assert quiet < hot / 3
    assert model.state.drained_hosts == {"gpu-003"}
    model.apply(ResumeHost("gpu-003"))
    assert p99_excess(model.probe(0.5).table) > quiet * 3


def test_windows_follow_each_other_and_clocks_drift_on():
    model = FabricModel.leaf_spine(8, 4, 2, seed=8)
    first, second = model.probe(1.0), model.probe(1.0)
    assert (first.start_s, second.start_s) == (0.0, 1.0)
    assert second.truth["t_mid_ns"] - first.truth["t_mid_ns"] == 1_000_000_000
    host = "gpu-005"
    moved = second.truth["offset_ns"][host] - first.truth["offset_ns"][host]
    assert moved == pytest.approx(first.truth["drift_ppb"][host], abs=30)  # 1 s of drift
    assert second.table.t1.min() > first.table.t1.max() - 3_000_000  # later in time


def test_state_snapshot_and_restore():
    model = FabricModel.leaf_spine(8, 4, 2)
    saved = model.snapshot_state()
    model.apply(SetEcmpWeight("spine1", 0), DrainHost("gpu-001"))
    assert model.state.ecmp_weight[("leaf1", "spine1")] == 0
    model.restore_state(saved)
    assert model.state.ecmp_weight == {} and model.state.drained_hosts == set()


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (SetEcmpWeight("spine9", 0), "no spine named 'spine9'"),
        (SetEcmpWeight("spine1", 0, leaf="leaf9"), "no leaf named 'leaf9'"),
        (SetEcmpWeight("spine1", -1), ">= 0"),
        (ExcludeNic("gpu-001/mlx5_9"), "no NIC named"),
        (DrainHost("gpu-999"), "no host named 'gpu-999'"),
    ],
)
def test_changes_naming_unknown_elements_are_input_errors(change, needle):
    model = FabricModel.leaf_spine(8, 4, 2)
    with pytest.raises(InputError, match=needle):
        model.apply(change)


def test_clocks_let_go_of_past_wander_and_read_the_same() -> None:
    def windows(forget: bool) -> tuple[list[np.ndarray], int]:
        model = FabricModel.leaf_spine(16, 8, 2, seed=4)
        if not forget:
            model.clocks.forget_before = lambda t_ns: None  # type: ignore[method-assign]
        stamps = [model.probe(9.0).table.t2.copy() for _ in range(8)]
        return stamps, model.clocks._grid.shape[1]

    kept, grid_kept = windows(forget=False)
    let_go, grid_let_go = windows(forget=True)
    assert all((a == b).all() for a, b in zip(kept, let_go, strict=True))
    assert grid_let_go < 350 < grid_kept  # a block and a window, not the whole session
