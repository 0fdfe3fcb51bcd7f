"""The simulated fabric behaves like the physics it claims (docs/simulator.md)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cwctl.records import ProbeTable, ProbeTableBuilder, decode_probe, encode_line, parse_line
from cwctl.scan.truthpaths import plain_truth
from cwctl.sim import FabricModel, SimParams
from cwctl.sim.window import flow_paths


def _model(hosts=16, per_leaf=4, spines=4, seed=7, faults=(), **knobs) -> FabricModel:
    """Rate 100 unless told: the physics are checked over windows of a second or less,
    with the volume of probes their statistics need."""
    params = SimParams(**{"rate": 100.0, **knobs})
    return FabricModel.leaf_spine(hosts, per_leaf, spines, params=params, seed=seed, faults=faults)


def _true_theta(model: FabricModel, table: ProbeTable) -> np.ndarray:
    """Clock of dst minus clock of src at each probe's send time (from the model's clocks)."""
    clocks = model.clocks
    t = (table.t1 - model.params.epoch_ns).astype(np.float64) - clocks.offset_ns[table.src]
    src, dst = table.src.astype(np.intp), table.dst.astype(np.intp)
    return (clocks.read(dst, t) - t) - (clocks.read(src, t) - t)


def _owd(model: FabricModel, table: ProbeTable) -> tuple[np.ndarray, np.ndarray]:
    """Measured forward and reverse one-way delays with the true clock offsets removed."""
    theta = _true_theta(model, table)
    fwd = (table.t2 - table.t1) - theta
    rev = (table.t4 - table.t3) + theta
    fwd[table.t2 == 0] = np.nan
    rev[table.t4 == 0] = np.nan
    return fwd, rev


def _paths(model: FabricModel, table: ProbeTable):
    port = table.sport.astype(np.int64) - model.params.base_port
    return flow_paths(table.src, table.dst, port, model=model)


def _binomial_ok(lost: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    return abs(lost - mean) <= sigmas * sd + 1


def test_without_load_or_faults_owd_is_propagation_plus_hw_noise():
    model = _model(load=0.0)
    table = model.probe(1.0).table
    assert table.complete.all()
    fwd, rev = _owd(model, table)
    paths = _paths(model, table)
    err_fwd, err_rev = fwd - paths.fwd_base_ns, rev - paths.rev_base_ns
    for err in (err_fwd, err_rev):
        assert abs(np.median(err)) < 3.0
        assert np.percentile(np.abs(err), 95) < 35.0  # two stamps of sigma 8 ns
        assert (
            np.percentile(np.abs(err), 99.9) < 2000.0
        )  # a packet now and then queued in the NIC after its TX stamp
    # the floor is the configured propagation: cables and switches, some 0.5..3 us
    assert np.min(paths.fwd_base_ns) > 300 and np.max(paths.fwd_base_ns) < 4000


def test_sw_timestamps_add_microseconds_with_a_heavy_tail():
    model = _model(load=0.0, timestamps="sw")
    table = model.probe(1.0).table
    assert set(table.ts.tolist()) == {1}  # "sw"
    fwd, _ = _owd(model, table)
    err = fwd - _paths(model, table).fwd_base_ns
    assert np.min(err) > 0  # a kernel stamp is never early on receive, nor late on send
    assert 1_500 < np.median(err) < 8_000
    assert np.percentile(err, 99.9) > 5 * np.median(err)


def test_load_raises_p99_but_not_the_floor():
    quiet = _model(load=0.0, seed=3)
    busy = _model(load=0.6, seed=3)
    t_quiet, t_busy = quiet.probe(1.0).table, busy.probe(1.0).table
    base = _paths(quiet, t_quiet).fwd_base_ns
    q_quiet = _owd(quiet, t_quiet)[0] - base
    q_busy = _owd(busy, t_busy)[0] - base
    assert abs(np.nanmin(q_busy) - np.nanmin(q_quiet)) < 60  # noise only
    assert np.nanpercentile(q_busy, 99) > np.nanpercentile(q_quiet, 99) + 2_000
    assert np.mean(q_busy < 40) > 0.01  # some probes still meet only empty queues


def test_a_down_spine_drops_exactly_what_ecmp_hashes_through_it():
    model = _model(faults=["switch:spine2:down"], seed=11)
    table = model.probe(1.0).table
    topo = model.topology
    names = table.hosts
    spine_of = {}
    for s, d, port in set(
        zip(table.src.tolist(), table.dst.tolist(), table.sport.tolist(), strict=True)
    ):
        path = model.path(names[s], names[d], port)
        spine_of[(s, d, port)] = (
            next((e for e in path["fwd"] if e.startswith("spine")), None),
            next((e for e in path["rev"] if e.startswith("spine")), None),
        )
    through = np.array(
        [
            "spine2" in spine_of[k]
            for k in zip(table.src.tolist(), table.dst.tolist(), table.sport.tolist(), strict=True)
        ]
    )
    assert np.array_equal(~table.complete, through)
    leaf = np.array([topo.leaf_of[h] for h in names])
    inter = leaf[table.src] != leaf[table.dst]
    assert table.complete[~inter].all()  # nothing within a leaf is lost
    # ~1/spines of the probes each way: an exchange is lost if either way crosses it
    loss = 1 - table.complete[inter].mean()
    assert abs(loss - (1 - (3 / 4) ** 2)) < 0.1
    fwd_lost = np.array([spine_of[k][0] == "spine2" for k in spine_of]).mean()
    assert abs(fwd_lost - 1 / 4) < 0.08


def test_a_lossy_link_loses_its_share_of_the_probes_crossing_it():
    model = _model(64, 8, 4, faults=["link:leaf1-spine2:lossy=0.01"], load=0.0, seed=5)
    table = model.probe(2.0).table
    paths = _paths(model, table)
    eid = model.fabric.names.index("leaf1-spine2")
    crossings = (paths.fwd_elements == eid).any(axis=1).astype(int) + (
        paths.rev_elements == eid
    ).any(axis=1)
    lost = ~table.complete
    assert not lost[crossings == 0].any()
    for c in (1, 2):
        sel = crossings == c
        assert sel.sum() > 1000
        assert _binomial_ok(int(lost[sel].sum()), int(sel.sum()), 1 - 0.99**c)


def test_drift_is_a_linear_trend_in_t2_minus_t1():
    model = _model(2, 2, 1, load=0.0, seed=21)
    window = model.probe(2.0)
    table = window.table.select(window.table.src == 0)
    x = (table.t1 - table.t1[0]).astype(np.float64)
    y = (table.t2 - table.t1).astype(np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    truth_ppb = window.truth["drift_ppb"][table.hosts[1]]
    assert abs(truth_ppb) > 1_000
    assert slope * 1e9 == pytest.approx(truth_ppb, abs=20.0)
    residual = y - (slope * x + intercept)
    assert np.median(np.abs(residual)) < 20.0


def test_truth_offsets_match_the_clocks_at_the_window_midpoint():
    model = _model(8, 4, 2, load=0.0)
    window = model.probe(1.0)
    truth = window.truth
    assert truth["reference"] == "gpu-001" and truth["offset_ns"]["gpu-001"] == 0.0
    err = model.clocks.error_ns(0.5e9)
    for i, host in enumerate(model.fabric.hosts):
        assert truth["offset_ns"][host] == pytest.approx(err[i] - err[0], abs=0.01)
        assert abs(truth["offset_ns"][host]) < 2e6
    assert truth["t_mid_ns"] == model.params.epoch_ns + 500_000_000
    json.dumps(plain_truth(truth))  # JSON-serialisable, its paths as the list of dicts


def test_a_fault_at_t_starts_at_t():
    model = _model(faults=["switch:spine1:down@0.5"], seed=2)
    table = model.probe(1.0).table
    t = (table.t1 - model.params.epoch_ns) - model.clocks.offset_ns[table.src]
    early, late = t < 0.49e9, t > 0.51e9
    assert table.complete[early].all()
    assert (~table.complete[late]).mean() > 0.2


def test_flap_alternates_down_and_up_half_periods():
    model = _model(faults=["switch:spine1:flap=0.4"], seed=2)
    table = model.probe(1.6).table
    t = (table.t1 - model.params.epoch_ns) - model.clocks.offset_ns[table.src]
    half = np.floor(t / 0.2e9).astype(int)
    margin = np.abs(t / 0.2e9 - np.round(t / 0.2e9)) > 0.05
    for k in range(8):
        loss = (~table.complete[(half == k) & margin]).mean()
        assert (loss > 0.2) if k % 2 == 0 else (loss == 0)


def test_slow_and_congested_show_on_the_paths_crossing_them():
    base = dict(load=0.1, seed=4)
    slow = _model(faults=["link:leaf2-spine3:slow=5000"], **base)
    table = slow.probe(1.0).table
    paths = _paths(slow, table)
    eid = slow.fabric.names.index("leaf2-spine3")
    crossing = (paths.fwd_elements == eid).any(axis=1)
    floor = _owd(slow, table)[0] - paths.fwd_base_ns
    assert np.nanmin(floor[crossing]) > 4_900 and np.nanmin(floor[~crossing]) < 100

    hot = _model(faults=["switch:spine3:congested"], **base)
    table = hot.probe(1.0).table
    paths = _paths(hot, table)
    via = paths.spine_fwd == hot.fabric.spines.index("spine3")
    excess = _owd(hot, table)[0] - paths.fwd_base_ns
    assert np.nanpercentile(excess[via], 99) > 5 * np.nanpercentile(excess[~via], 99)
    assert np.nanpercentile(excess[via], 50) > 2_000


def test_same_seed_same_records_bit_for_bit_and_another_seed_differs():
    a = _model(faults=["link:leaf1-spine2:lossy=0.05"], seed=9).probe(0.5)
    b = _model(faults=["link:leaf1-spine2:lossy=0.05"], seed=9).probe(0.5)
    c = _model(faults=["link:leaf1-spine2:lossy=0.05"], seed=10).probe(0.5)
    for column in ("src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4"):
        assert np.array_equal(getattr(a.table, column), getattr(b.table, column)), column
    assert json.dumps(plain_truth(a.truth)) == json.dumps(plain_truth(b.truth))
    assert not np.array_equal(a.table.t2, c.table.t2)
    assert a.truth["offset_ns"] != c.truth["offset_ns"]


def _round_trip(table: ProbeTable) -> ProbeTable:
    builder = ProbeTableBuilder(table.hosts)
    for i, rec in enumerate(table.iter_records()):
        builder.add(decode_probe(parse_line(encode_line(rec)), where=f"line {i}"))
    return builder.build()


@pytest.mark.parametrize("nics", [None, ("mlx5_0", "mlx5_1")])
def test_records_round_trip_through_the_agents_decoder(nics):
    names = [f"gpu-{i:03d}" for i in range(1, 9)]
    from cwctl.fabric.topology import leaf_spine

    _, topo = leaf_spine(8, 4, 2)
    model = FabricModel(
        names,
        topo,
        params=SimParams(timestamps="sw", rate=100.0),  # some of 0.2 s of probes lost
        faults=["link:leaf1-spine2:lossy=0.2"],
        nics={h: nics for h in names} if nics else None,
    )
    table = model.probe(0.2).table
    assert (~table.complete).any() and table.complete.any()
    again = _round_trip(table)
    assert again.hosts == table.hosts and again.nics == table.nics
    for column in (
        "src",
        "dst",
        "sport",
        "pair",
        "idx",
        "gap_ns",
        "ts",
        "t1",
        "t2",
        "t3",
        "t4",
        "nic",
    ):
        assert np.array_equal(getattr(again, column), getattr(table, column)), column
    if nics:
        assert set(again.nics) == set(nics)
    # like the agent: a lost exchange has t2, t3 and t4 all null
    lost = table.t4 == 0
    assert (table.t2[lost] == 0).all() and (table.t3[lost] == 0).all()


def test_records_follow_the_agents_schedule():
    params = SimParams(rate=50, ports=3, gap_ns=15_000, load=0.0)
    model = FabricModel.leaf_spine(8, 4, 2, params=params)
    table = model.probe(1.0).table
    edges = sum(len(p) for p in model.peers.values())
    assert len(table) == edges * 50 * 2
    assert set(table.sport.tolist()) == {40000, 40001, 40002}
    assert (table.sport == 40000 + table.pair % 3).all()
    assert (table.gap_ns == 15_000).all()
    first = table.select(table.idx == 0).t1
    second = table.select(table.idx == 1).t1
    assert np.median(second - first) == pytest.approx(15_000, abs=10)
    # pairs to one peer are 1/rate apart in the sender's clock
    one = table.select((table.src == 0) & (table.dst == table.dst[0]) & (table.idx == 0))
    assert np.median(np.diff(one.t1)) == pytest.approx(20_000_000, rel=1e-3)


def test_small_chunks_give_the_same_schedule_and_the_same_fault_pattern(monkeypatch):
    import cwctl.sim.exchanges as exchanges

    whole = _model(faults=["switch:spine3:down"], seed=12).probe(0.5)
    monkeypatch.setattr(exchanges, "CHUNK_ROWS", 1000)  # ~10 edges per chunk
    chunked = _model(faults=["switch:spine3:down"], seed=12).probe(0.5)
    for column in ("src", "dst", "sport", "pair", "idx"):
        assert np.array_equal(getattr(whole.table, column), getattr(chunked.table, column))
    assert np.array_equal(whole.table.complete, chunked.table.complete)  # down is not random
    assert [p["sent"] for p in whole.truth["paths"]] == [p["sent"] for p in chunked.truth["paths"]]
