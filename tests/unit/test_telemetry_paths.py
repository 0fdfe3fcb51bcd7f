"""Per-path statistics: grouping, quantiles, loss semantics, jitter, the per-port split."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.records import TS_CODE, ProbeTable
from cwctl.telemetry.paths import (
    group_ids,
    group_stats,
    observations,
    path_reports,
    path_table,
    sorted_quantiles,
)
from tests.unit.telemetry_synth import Synth, make

T0 = 1_800_000_000_000_000_000


def _table(rows: list[tuple[int, int, int, int, int, int, int]]) -> ProbeTable:
    """Rows of (src, dst, sport, t1, t2, t3, t4) over hosts a, b, c."""
    a = np.array(rows, np.int64).reshape(-1, 7)
    n = len(a)
    return ProbeTable(
        hosts=["a", "b", "c"],
        src=a[:, 0].astype(np.int32),
        dst=a[:, 1].astype(np.int32),
        sport=a[:, 2].astype(np.int32),
        pair=np.arange(n, dtype=np.int64),
        idx=np.zeros(n, np.int8),
        gap_ns=np.full(n, 20_000, np.int64),
        ts=np.full(n, TS_CODE["hw"], np.int8),
        t1=a[:, 3],
        t2=a[:, 4],
        t3=a[:, 5],
        t4=a[:, 6],
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.floats(-1e6, 1e6, allow_nan=False)),
        min_size=1,
        max_size=60,
    )
)
def test_sorted_quantiles_match_numpy_per_group(items: list[tuple[int, float]]) -> None:
    group = np.array([g for g, _ in items], np.int64)
    values = np.array([v for _, v in items])
    qs = (0.0, 0.5, 0.9, 0.99, 1.0)
    got = sorted_quantiles(values, group, 5, qs)
    for g in range(5):
        sel = values[group == g]
        for q, col in zip(qs, got, strict=True):
            if len(sel):
                assert np.isclose(col[g], np.quantile(sel, q), rtol=1e-9, atol=1e-6)
            else:
                assert np.isnan(col[g])


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 70_000), st.integers(-2, 5)),
        min_size=1,
        max_size=80,
    )
)
def test_group_ids_agree_with_unique_rows(rows: list[tuple[int, int, int]]) -> None:
    cols = np.array(rows, np.int64).T
    ids, keys = group_ids(*cols)
    expected, inverse = np.unique(cols.T, axis=0, return_inverse=True)
    # same partition of the rows, and each group's key is its rows' values
    assert len(keys) == len(expected)
    assert np.array_equal(keys[ids], cols.T)
    assert len(set(zip(ids.tolist(), inverse.ravel().tolist(), strict=True))) == len(keys)


def test_loss_semantics_forward_reverse_and_unknown_delays() -> None:
    ok = (0, 1, 40000, T0, T0 + 1000, T0 + 5000, T0 + 6500)
    lost_probe = (0, 1, 40000, T0 + 10, 0, 0, 0)
    lost_reply = (0, 1, 40001, T0 + 20, T0 + 1020, 0, 0)  # b stamped, the reply vanished
    table = _table([ok, ok, lost_probe, lost_reply])
    fwd = np.array([1000.0, 1000.0, np.nan, 1000.0])
    rev = np.array([1500.0, 1500.0, np.nan, np.nan])
    obs = observations(table, fwd, rev)
    pt = path_table(obs)
    reports = {(p.src, p.dst): p for p in path_reports(pt)}
    ab, ba = reports[("a", "b")], reports[("b", "a")]
    assert (ab.sent, ab.received) == (4, 3)  # t2 == 0: the probe was lost
    assert (ba.sent, ba.received) == (3, 2)  # t2 != 0, t4 == 0: the reply was lost
    assert ab.owd_min_ns == 1000.0 and ba.owd_p50_ns == 1500.0
    assert ab.ports is not None
    ports = {p["sport"]: p for p in ab.ports.to_json()}
    assert ports[40000]["sent"] == 3 and ports[40000]["received"] == 2
    assert ports[40001]["loss"] == 0.0


def test_jitter_is_mean_absolute_step_in_send_order() -> None:
    delays = [100.0, 300.0, 200.0, 600.0]
    rows = [(0, 1, 40000, T0 + 1000 * i, T0 + 1000 * i + 1, 0, 0) for i in range(4)]
    table = _table(rows[::-1])  # arrival order differs from send order
    obs = observations(table, np.array(delays[::-1]), np.full(4, np.nan))
    stats = group_stats(obs, np.zeros(len(obs), np.int64), 1)
    assert stats.jitter_ns[0] == (200 + 100 + 400) / 3


def test_synthetic_fabric_delays_and_loss_are_recovered() -> None:
    base, queue = 2_000.0, 300.0
    collection, solution = make(Synth(base_ns=base, queue_ns=queue, loss={"spine2": 1.0}))
    from cwctl.sync import one_way_delays

    fwd, rev = one_way_delays(collection.table, solution)
    reports = path_reports(path_table(observations(collection.table, fwd, rev)))
    healthy = [p for p in reports if p.loss == 0 and p.received > 100]
    assert healthy
    p50 = np.median([p.owd_p50_ns for p in healthy])
    # exponential queueing: the median adds ln 2 * mean
    assert abs(p50 - (base + np.log(2) * queue)) < 40
    assert min(p.owd_min_ns for p in healthy) >= base - 1
    # paths that hash some flows through spine2 lose exactly those flows. A port's row on
    # path a->b pools two 5-tuples of equal size (a's probes from that port, and the
    # replies to b's probes from that port), which this model's leaves hash apart: each
    # is lost whole or not at all, so a port loses none, half or all of its probes.
    split = [p for p in reports if 0 < p.loss < 1 and p.ports is not None and len(p.ports) == 4]
    assert split
    for p in split:
        assert p.ports is not None
        losses = sorted(x["loss"] for x in p.ports.to_json())
        assert set(losses) <= {0.0, 0.5, 1.0}
        assert losses[0] == 0.0 and losses[-1] > 0.0
        assert p.port_loss_spread == losses[-1] - losses[0]
