"""Localisation on the simulator's hidden hash: the true element, from discovered paths.

The simulator routes with per-switch secret seeds the localiser never sees (an
import-linter contract keeps ``cwctl.telemetry`` away from ``cwctl.sim``); every
assertion compares the top suspect with the simulator's own truth (``truth.faults``),
never with anything the localiser computes. A fast subset of bench/bench_localize.py:
each fault kind at 96 hosts, two seeds.
"""

from __future__ import annotations

from collections import Counter

import pytest
from typer.testing import CliRunner

from cwctl import settings
from cwctl.cli import app
from cwctl.fabric.topology import leaf_spine
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from cwctl.transport.sim import run_model

HOSTS = 96
NICS = ("mlx5_0", "mlx5_1")
# The window these cases were written for (the watch budget's rate, 10 s): path discovery
# under the switches' ICMP limits learns the spines a flow crosses within it. A quick
# scan's 2 s learns too few for a slow spine from one fresh scan (docs/sync.md, issue 27).
RATE = settings.BUDGETS[settings.BUDGET_WATCH].rate
WINDOW_S = 10.0


def _model(faults: list[str], seed: int, **params: object) -> FabricModel:
    names, topo = leaf_spine(HOSTS, 8, 4)
    return FabricModel(
        names,
        topo,
        params=SimParams(**{"rate": RATE, **params}),  # type: ignore[arg-type]
        seed=seed,
        faults=faults,
        nics={h: NICS for h in names},
    )


def _scan(faults: list[str], seed: int, **params: object) -> tuple[FabricSnapshot, dict]:
    collection = run_model(_model(faults, seed, **params), WINDOW_S)
    truth = collection.truth or {}
    return build_snapshot(collection, solve(collection.table)), truth


@pytest.mark.parametrize("seed", [3, 8])
@pytest.mark.parametrize(
    "fault",
    [
        "switch:spine3:down",
        "switch:spine2:congested",
        "link:leaf5-spine1:lossy=0.02",
        "link:leaf9-spine4:congested",
        "nic:gpu-042/mlx5_1:down",
        "host:gpu-017:slow=3000",
        "switch:spine4:slow",
    ],
)
def test_the_true_element_is_named_top(fault: str, seed: int) -> None:
    snap, truth = _scan([fault], seed)
    (element,) = truth["faults"]
    assert snap.suspects, f"{fault}: no suspect"
    top = snap.suspects[0]
    assert top.element == element and not top.candidates, (top.element, top.evidence)
    assert not snap.healthy


def test_healthy_fabrics_have_no_suspect_and_are_healthy() -> None:
    for seed in (21, 22):
        snap, truth = _scan([], seed, load=0.4, timestamps="sw")
        assert truth["faults"] == []
        assert snap.suspects == [], [s.element for s in snap.suspects]
        assert snap.unlocalised is None and snap.healthy


def test_a_link_losing_half_a_percent_is_named_in_one_default_scan() -> None:
    snap, truth = _scan(["link:leaf7-spine2:lossy=0.005"], 4)
    assert [s.element for s in snap.suspects[:1]] == truth["faults"]


def test_without_discovery_the_candidates_hold_the_truth_and_the_scan_is_not_healthy() -> None:
    snap, truth = _scan(["switch:spine2:down"], 5, discovery=False)
    top = snap.suspects[0]
    assert truth["faults"][0] in top.candidates and len(top.candidates) > 1
    assert "paths unknown" in top.evidence
    assert not snap.healthy


def test_without_discovery_the_cli_exits_3_with_the_candidates_in_json() -> None:
    import json

    result = CliRunner().invoke(
        app,
        ["scan", "--sim", "--hosts", "32", "--no-discovery", "--fault", "switch:spine2:down",
         "--format", "json"],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    top = json.loads(result.stdout)["suspects"][0]
    assert "spine2" in top["candidates"] and top["element"] == "|".join(top["candidates"])


def test_a_dead_host_is_one_suspect_not_lossy_paths() -> None:
    snap, truth = _scan(["host:gpu-030:down"], 6)
    assert [(s.element, s.kind) for s in snap.suspects] == [(truth["faults"][0], "host")]
    assert "dead host" in snap.suspects[0].evidence
    assert snap.unlocalised is None


def test_a_silent_spine_leaves_its_hops_unknown_and_its_link_is_still_found() -> None:
    model = _model(["switch:spine3:silent", "link:leaf2-spine3:lossy=0.02"], 2)
    collection = run_model(model, WINDOW_S)
    assert collection.topology is not None
    spine3 = {a for a, s in collection.topology.switch_of_address.items() if s == "spine3"}
    answered = [h for p in collection.paths for h in p.hops if h is not None]
    assert answered and not spine3 & set(answered)
    snap = build_snapshot(collection, solve(collection.table))
    assert [s.element for s in snap.suspects[:1]] == ["leaf2-spine3"]


def test_discovered_hops_name_the_spine_the_simulator_routed_through() -> None:
    model = _model([], 9)
    collection = run_model(model, 2.0)
    topo = collection.topology
    assert topo is not None
    checked = 0
    for p in collection.paths:
        named = [topo.switch_of_address[h] for h in p.hops if h is not None]
        if not named:
            continue
        prober, answerer = (p.host, p.peer) if p.role == "probe" else (p.peer, p.host)
        truth = model.path(prober, answerer, p.flow_port)
        leg = truth["fwd"] if p.role == "probe" else truth["rev"]
        assert named == [e for e in leg if e.startswith("spine")]
        checked += 1
    assert checked > 500


def test_spines_answer_each_nic_within_the_linux_rate_limit() -> None:
    params = SimParams()
    collection = run_model(_model([], 10), 2.0)
    topo = collection.topology
    assert topo is not None
    answers = Counter(
        (p.src, topo.switch_of_address[h]) for p in collection.paths for h in p.hops if h
    )
    # a full bucket (icmp_burst) and one token per icmp_ratelimit_ms over the window
    most = params.icmp_burst + int(2.0 * 1000 / params.icmp_ratelimit_ms)
    assert max(answers.values()) <= most
    assert max(answers.values()) >= params.icmp_burst  # and the budget is used
    unlimited = run_model(_model([], 10, icmp_ratelimit_ms=1.0, icmp_msgs_per_sec=1e6), 2.0)
    known = sum(p.known for p in unlimited.paths)
    assert known > 2 * sum(answers.values())


def test_a_kept_model_learns_more_paths_each_window_and_retraces_after_a_change() -> None:
    from cwctl.sim.model import SetEcmpWeight

    model = _model([], 11)

    def spines_known(window_paths: list) -> int:
        return sum(p.known for p in window_paths if len(p.hops) == 3)

    first, second = model.probe(2.0).paths, model.probe(2.0).paths
    assert spines_known(second) > 1.4 * spines_known(first)
    assert any(p.cached for p in second) and not any(p.cached for p in first)
    topo = model.published_topology()
    assert topo is not None
    for p in second:  # a cached path is still the path the flow takes
        if p.cached and p.known:
            prober, answerer = (p.host, p.peer) if p.role == "probe" else (p.peer, p.host)
            leg = model.path(prober, answerer, p.flow_port)["fwd" if p.role == "probe" else "rev"]
            assert topo.switch_of_address[p.hops[1]] in leg
    model.apply(SetEcmpWeight("spine2", 0))
    assert not any(p.cached for p in model.probe(2.0).paths)


@pytest.mark.parametrize("seed", [3, 8])
def test_a_dead_spine_is_named_in_a_short_scan_at_the_default_rate(seed: int) -> None:
    """2 s at 2 pairs/s per peer: one exchange or two a flow, too few for any flow's loss
    to be improbable at the overall loss rate. That rate (a quarter of the cross-leaf
    flows lost) is no background: the spine is named, and the scan is not healthy."""
    collection = run_model(_model(["switch:spine2:down"], seed), 2.0)
    snap = build_snapshot(collection, solve(collection.table))
    assert [s.element for s in snap.suspects[:1]] == ["spine2"]
    assert not snap.healthy
