"""Localisation: the incidence matches the topology's routes, faults are found, healthy is quiet."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cwctl.fabric.topology import leaf_spine
from cwctl.scan.collection import HostStatus
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.telemetry import build_snapshot
from cwctl.telemetry.explain import explain
from cwctl.transport.sim import run_model
from tests.unit.telemetry_synth import Synth, make


def test_explain_picks_the_one_element_that_covers_the_failures() -> None:
    # 9 flows over elements 0..3; element 2 is on flows 0, 1, 2 which lose 30%
    rows = [[0, 2], [1, 2], [0, 2, 3], [0, 3], [1, 3], [1], [0], [3], [0, 1]]
    data = [(f, e) for f, es in enumerate(rows) for e in es]
    m = sp.csr_matrix(
        (np.ones(len(data)), ([f for f, _ in data], [e for _, e in data])), shape=(9, 4)
    )
    trials = np.full(9, 1000.0)
    failures = np.array([300.0, 290, 310, 1, 0, 2, 0, 1, 0])
    fit = explain(m, trials, failures)
    assert list(fit.rates) == [2]
    assert abs(fit.rates[2] - 0.3) < 0.02


@pytest.mark.parametrize(
    ("faults", "expected", "kind"),
    [
        ({"loss": {"spine2": 1.0}}, "spine2", "switch"),
        ({"loss": {"leaf2-spine3": 0.05}}, "leaf2-spine3", "link"),
        ({"delay_ns": {"spine1": 6000.0}}, "spine1", "switch"),
        ({"loss": {"gpu-005": 0.05}}, "gpu-005", "host"),
        ({"loss": {"leaf3": 0.3}}, "leaf3", "switch"),
    ],
)
def test_synthetic_fault_is_the_top_suspect(faults: dict, expected: str, kind: str) -> None:
    collection, solution = make(Synth(**faults))
    snap = build_snapshot(collection, solution)
    assert snap.suspects, "a fault must give a suspect"
    top = snap.suspects[0]
    assert (top.element, top.kind) == (expected, kind)
    assert 0.0 < top.score <= 1.0
    assert expected in top.evidence


def test_healthy_synthetic_fabric_has_no_suspects() -> None:
    for seed in range(3):
        collection, solution = make(Synth(seed=seed, queue_ns=800.0))
        assert build_snapshot(collection, solution).suspects == []


def test_without_topology_a_bad_host_is_the_suspect() -> None:
    collection, solution = make(Synth(loss={"gpu-009": 0.2}, topology=False))
    snap = build_snapshot(collection, solution)
    assert [s.element for s in snap.suspects[:1]] == ["gpu-009"]
    assert snap.suspects[0].kind == "host"


def test_unreachable_host_is_reported_not_suspected() -> None:
    collection, solution = make(Synth(loss={"gpu-011": 1.0}))
    collection.status["gpu-011"] = HostStatus("unreachable", "connection refused")
    snap = build_snapshot(collection, solution)
    assert snap.suspects == []
    host = next(h for h in snap.hosts if h.name == "gpu-011")
    assert host.status == "unreachable" and not snap.healthy


def test_failed_gpu_makes_its_host_a_suspect() -> None:
    collection, solution = make(Synth(n_hosts=16))
    collection.gpu["gpu-003"] = [
        {"type": "gpu", "v": 1, "source": "nvml", "gpus": [{"index": 0, "lost": True}]}
    ]
    collection.gpu["gpu-004"] = [
        {"type": "gpu", "v": 1, "source": "nvml", "gpus": [{"index": 0, "name": "H200"}]}
    ]
    snap = build_snapshot(collection, solution)
    by_name = {h.name: h for h in snap.hosts}
    assert by_name["gpu-003"].gpu_verdict == "fail"
    assert by_name["gpu-004"].gpu_verdict == "ok"
    assert [(s.element, s.kind) for s in snap.suspects] == [("gpu-003", "host")]
    assert "lost" in snap.suspects[0].evidence


def _sim_snapshot(faults: tuple[str, ...], seed: int, **kw: object):
    from cwctl.sync import solve

    names, topo = leaf_spine(32, 8, 4)
    model = FabricModel(
        names,
        topo,
        params=SimParams(**{"rate": 100.0, **kw}),  # type: ignore[arg-type]
        seed=seed,
        faults=faults,
        nics={h: ("mlx5_0", "mlx5_1") for h in names},
    )
    collection = run_model(model, 0.5)  # half a second at rate 100: the volume it needs
    return build_snapshot(collection, solve(collection.table))


@pytest.mark.parametrize(
    "fault",
    [
        "switch:spine2:congested",
        "link:leaf3-spine1:lossy=0.05",
        "nic:gpu-010/mlx5_1:down",
        "host:gpu-020:lossy=0.05",
    ],
)
def test_simulated_fault_is_the_top_suspect(fault: str) -> None:
    snap = _sim_snapshot((fault,), seed=5)
    element = fault.split(":")[1]
    assert snap.suspects and snap.suspects[0].element == element


def test_simulated_healthy_fabric_at_load_0_4_is_quiet() -> None:
    for seed in (1, 2):
        snap = _sim_snapshot((), seed=seed, load=0.4, timestamps="sw")
        assert snap.suspects == [], [s.element for s in snap.suspects]


def test_diffuse_background_loss_is_no_suspect_but_a_fault_above_it_is() -> None:
    diffuse = {f"leaf{i}": 0.002 for i in range(1, 5)}  # every flow loses ~0.6%
    quiet, solution = make(Synth(loss=diffuse, seed=1))
    snap = build_snapshot(quiet, solution)
    assert snap.suspects == []
    assert 0.003 < snap.telemetry["background_loss"] < 0.012
    faulty, solution = make(Synth(loss={**diffuse, "spine3": 0.05}, seed=1))
    snap = build_snapshot(faulty, solution)
    assert [s.element for s in snap.suspects] == ["spine3"]
    assert abs(snap.telemetry["rates"]["spine3"]["loss"] - 0.05) < 0.015


def test_without_topology_one_bad_pair_is_a_pair_suspect() -> None:
    collection, solution = make(Synth(topology=False, seed=2))
    table = collection.table
    a, b = int(table.src[0]), int(table.dst[0])
    pair = ((table.src == a) & (table.dst == b)) | ((table.src == b) & (table.dst == a))
    lose = pair & (np.random.default_rng(0).random(len(table)) < 0.3)
    for col in (table.t2, table.t3, table.t4):
        col[lose] = 0
    snap = build_snapshot(collection, solution)
    names = table.hosts
    assert [(s.element, s.kind) for s in snap.suspects] == [(f"{names[a]}-{names[b]}", "link")]
