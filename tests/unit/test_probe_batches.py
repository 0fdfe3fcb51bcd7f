"""``probes`` batch records: round trips against ``probe`` records, garbage refused by column."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.errors import RecordError
from cwctl.probe.batch import Batch
from cwctl.records import (
    TS_SOURCES,
    ProbeTable,
    ProbeTableBuilder,
    decode_probes,
    encode_line,
    pack_column,
    parse_line,
)
from cwctl.scan.collection import HostInfo
from cwctl.transport.hostrun import Collector, HostRun

HOSTS = ["gpu-001", "gpu-002", "gpu-003", "node-x", "h"]
NICS = ["mlx5_0", "mlx5_1", "eth0"]
STAMP = 1_700_000_000_000_000_000
COLUMNS = ("src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4", "nic")


@st.composite
def tables(draw: st.DrawFn, max_rows: int = 60) -> ProbeTable:
    """A random ProbeTable: any hosts, lost and half-answered exchanges, NICs or none."""
    n = draw(st.integers(0, max_rows))
    ints = st.integers
    src = np.array(draw(st.lists(ints(0, len(HOSTS) - 1), min_size=n, max_size=n)), np.int32)
    step = np.array(draw(st.lists(ints(1, len(HOSTS) - 1), min_size=n, max_size=n)), np.int32)
    answered = np.array(draw(st.lists(ints(0, 2), min_size=n, max_size=n)), np.int64)
    t1 = np.array(draw(st.lists(ints(1, 2**62), min_size=n, max_size=n)), np.int64)
    later = [draw(st.lists(ints(1, 2**62), min_size=n, max_size=n)) for _ in range(3)]
    t2, t3, t4 = (np.array(x, np.int64) for x in later)
    with_nics = draw(st.booleans())
    return ProbeTable(
        hosts=list(HOSTS),
        src=src,
        dst=((src + step) % len(HOSTS)).astype(np.int32),
        sport=np.array(draw(st.lists(ints(0, 65535), min_size=n, max_size=n)), np.int32),
        pair=np.array(draw(st.lists(ints(0, 2**62), min_size=n, max_size=n)), np.int64),
        idx=np.array(draw(st.lists(ints(0, 1), min_size=n, max_size=n)), np.int8),
        gap_ns=np.array(draw(st.lists(ints(0, 10**9), min_size=n, max_size=n)), np.int64),
        ts=np.array(draw(st.lists(ints(0, 2), min_size=n, max_size=n)), np.int8),
        t1=t1,
        t2=np.where(answered >= 1, t2, 0),  # 1: B stamped the probe, the reply was lost
        t3=np.where(answered == 2, t3, 0),
        t4=np.where(answered == 2, t4, 0),
        nic=np.array(draw(st.lists(ints(-1, 2), min_size=n, max_size=n)), np.int16)
        if with_nics
        else np.full(n, -1, np.int16),
        nics=list(NICS) if with_nics else [],
    )


def assert_same_table(a: ProbeTable, b: ProbeTable) -> None:
    assert a.hosts == b.hosts
    for name in COLUMNS[:-1]:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    names_a = [a.nics[i] if i >= 0 else None for i in a.nic.tolist()]
    assert names_a == [b.nics[i] if i >= 0 else None for i in b.nic.tolist()]


def through_lines(table: ProbeTable, rows: int) -> ProbeTable:
    builder = ProbeTableBuilder(table.hosts)
    for i, rec in enumerate(table.iter_batches(rows)):
        assert 1 <= rec["n"] <= rows
        builder.add_batch(parse_line(encode_line(rec)), where=f"line {i + 1}")
    return builder.build()


@settings(max_examples=80, deadline=None)
@given(tables(), st.integers(1, 70))
def test_table_to_batches_and_back_is_the_same_table(table: ProbeTable, rows: int) -> None:
    again = through_lines(table, rows)
    assert_same_table(table, again)
    if (table.nic >= 0).any():  # batches that use NICs name them all, in the table's order
        assert again.nics == table.nics


@settings(max_examples=60, deadline=None)
@given(tables(max_rows=30), st.integers(1, 40))
def test_probe_records_and_batches_decode_to_the_same_table(table: ProbeTable, rows: int) -> None:
    single = ProbeTableBuilder(table.hosts)
    for rec in table.iter_records():
        single.add_record(parse_line(encode_line(rec)))
    assert_same_table(single.build(), through_lines(table, rows))


@settings(max_examples=60, deadline=None)
@given(tables(max_rows=30), st.integers(1, 40))
def test_packed_columns_decode_like_lists(table: ProbeTable, rows: int) -> None:
    builder = ProbeTableBuilder(table.hosts)
    for rec in table.iter_batches(rows):
        for key in ("dst", "sport", "pair", "idx", "gap_ns", "t1", "t2", "t3", "t4"):
            if isinstance(rec[key], list):
                rec[key] = pack_column(rec[key])
        builder.add_batch(parse_line(encode_line(rec)))
    assert_same_table(table, builder.build())


@settings(max_examples=40, deadline=None)
@given(tables(max_rows=40), st.integers(1, 50))
def test_single_rows_and_batches_keep_their_arrival_order(table: ProbeTable, cut: int) -> None:
    """Rows added one by one, then a batch, then rows again: the table is in that order."""
    records = list(table.iter_records())
    builder = ProbeTableBuilder(table.hosts)
    for rec in records[:cut]:
        builder.add_record(rec)
    builder.add_batch(table.select(np.arange(cut, min(2 * cut, len(table))))._batch_record())
    for rec in records[2 * cut :]:
        builder.add_record(rec)
    assert_same_table(table, builder.build())


@pytest.mark.parametrize("pack", [True, False])
def test_the_agents_batches_decode_to_its_rows(pack: bool) -> None:
    batch = Batch("gpu-001", ["gpu-002", "gpu-003"], 20_000, pack)
    rows = [
        ("gpu-002", 40001, 0, 0, "sw", STAMP, STAMP + 10, STAMP + 20, STAMP + 30),
        ("gpu-003", 40002, 0, 1, "sw", STAMP + 5, 0, 0, 0),
        ("gpu-002", 40001, 1, 0, "user", STAMP + 9, STAMP + 19, STAMP + 29, STAMP + 39),
    ]
    for row in rows:
        batch.add(*row)
    rec = json.loads(json.dumps(batch.take()))
    assert len(batch) == 0 and rec["n"] == 3
    assert isinstance(rec["t1"], str) == pack
    builder = ProbeTableBuilder(["gpu-001", "gpu-002", "gpu-003"])
    builder.add_batch(rec)
    keys = ("dst", "sport", "pair", "idx", "ts", "t1", "t2", "t3", "t4")
    got = [tuple(r[k] or 0 for k in keys) for r in builder.build().iter_records()]
    assert got == rows


def good_batch() -> dict[str, Any]:
    return {
        "type": "probes",
        "v": 1,
        "n": 3,
        "src": "gpu-001",
        "hosts": ["gpu-002", "gpu-003"],
        "dst": [0, 1, 0],
        "sport": [40001, 40002, 40001],
        "pair": [7, 7, 8],
        "idx": [0, 0, 1],
        "gap_ns": 20_000,
        "ts": ["sw", "sw", "user"],
        "t1": [STAMP, STAMP + 1, STAMP + 2],
        "t2": [STAMP + 10, 0, None],
        "t3": [STAMP + 20, 0, None],
        "t4": [STAMP + 30, 0, None],
    }


def test_the_example_batch_decodes() -> None:
    batch = decode_probes(good_batch())
    assert len(batch) == 3
    assert batch.hosts == ["gpu-002", "gpu-003", "gpu-001"]
    assert batch.src_names == {"gpu-001"}
    assert batch.t2.tolist() == [STAMP + 10, 0, 0]  # null and 0 both mean missing
    assert [TS_SOURCES[c] for c in batch.ts.tolist()] == ["sw", "sw", "user"]


@pytest.mark.parametrize(
    ("change", "column", "message"),
    [
        ({"t2": [STAMP, STAMP]}, "t2", "2 values, but 'n' is 3"),
        ({"sport": [1, 2, 3, 4]}, "sport", "4 values"),
        ({"pair": [1, "2", 3]}, "pair", "must hold integers, got '2'"),
        ({"pair": [1, 2.5, 3]}, "pair", "must hold integers, got 2.5"),
        ({"idx": [0, True, 1]}, "idx", "must hold integers, got True"),
        ({"t1": [STAMP, None, STAMP]}, "t1", "must hold integers, got None"),
        ({"t1": {"a": 1}}, "t1", "must be a list of 3 integers"),
        ({"idx": [0, 2, 1]}, "idx", r"row 1: 2 is not in \[0, 1\]"),
        ({"sport": [1, 70000, 3]}, "sport", "row 1: 70000"),
        ({"t1": [STAMP, -5, STAMP]}, "t1", "row 1: -5"),
        ({"t1": [STAMP, 0, STAMP]}, "t1", "row 1: 0"),
        ({"t4": [STAMP, 2**64, STAMP]}, "t4", "an integer beyond 64 bits"),
        ({"gap_ns": 10**10}, "gap_ns", "10000000000 is not in"),
        ({"t2": [STAMP, 0, 0], "t3": [STAMP, STAMP, 0]}, "t3", "row 1: .* 't2' is not"),
        ({"t4": [STAMP, STAMP, 0]}, "t4", "row 1: .* 't3' is not"),
        ({"dst": [0, 2, 0]}, "dst", "row 1: 2 is the sender itself"),
        ({"dst": [0, 3, 0]}, "dst", r"row 1: 3 is not in \[0, 2\]"),
        ({"src": 5}, "src", "must be a host name or indices"),
        ({"src": [0, 1, 0], "dst": [1, 0, 0]}, "dst", "row 2: 0 is the sender itself"),
        ({"hosts": ["a", "a"]}, "hosts", "holds a name twice"),
        ({"hosts": "gpu-002"}, "hosts", "must be a list of non-empty names"),
        ({"ts": ["sw", "ns", "sw"]}, "ts", "got 'ns'"),
        ({"ts": ["sw", ["x"], "sw"]}, "ts", r"got \['x'\]"),
        ({"ts": "gps"}, "ts", "must be hw, sw, user or a list"),
        ({"t1": "not base64!"}, "t1", "not base64"),
        ({"t1": pack_column([STAMP, STAMP])}, "t1", "packs 2 values, but 'n' is 3"),
        ({"t1": pack_column([STAMP, -1, STAMP])}, "t1", "row 1: -1"),
        ({"nic": [0, 1, -1]}, "nics", "must be a list of non-empty names"),
        ({"nic": [0, 1, -1], "nics": ["mlx5_0"]}, "nic", r"row 1: 1 is not in \[-1, 0\]"),
    ],
)
def test_a_malformed_batch_names_the_column(change: dict[str, Any], column: str, message: str):
    rec = {**good_batch(), **change}
    with pytest.raises(RecordError, match=rf"^scan line 9: probes column '{column}': .*{message}"):
        decode_probes(parse_line(json.dumps(rec), where="scan line 9"), where="scan line 9")


@pytest.mark.parametrize(
    ("change", "message"),
    [({"n": -1}, "key 'n'"), ({"n": "3"}, "key 'n'"), ({"v": 2}, "version 2")],
)
def test_a_batch_with_a_bad_header_key_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RecordError, match=f"line 4: .*{message}"):
        decode_probes({**good_batch(), **change}, where="line 4")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([*good_batch(), "nic", "nics"]), JSON_VALUES)
def test_any_field_replaced_decodes_or_raises_record_error(key: str, value: Any) -> None:
    rec = {**good_batch(), key: value}
    try:
        line = json.dumps(rec)
    except ValueError:
        return
    builder = ProbeTableBuilder()
    try:
        builder.add_batch(parse_line(line, where="line 2"), where="line 2")
    except RecordError as exc:
        assert str(exc).startswith("line 2: ")
        assert len(builder) == 0  # nothing of a bad batch is kept
    else:
        assert len(builder) == rec["n"]


def test_a_malformed_batch_marks_its_host_with_the_line_and_the_scan_keeps_the_rest() -> None:
    collector = Collector(["gpu-001", "gpu-002", "gpu-003"], None)
    run = HostRun(HostInfo("gpu-001", "10.0.0.1"), collector)
    run.handle(encode_line(good_batch()).encode())
    bad = {**good_batch(), "idx": [0, 5, 1]}
    run.handle(encode_line(bad).encode())
    assert collector.records == 3 and len(collector.builder) == 3
    assert run.status.status == "error"
    assert "gpu-001 line 2: probes column 'idx': row 1" in (run.status.error or "")


def test_a_batch_from_another_host_is_refused() -> None:
    collector = Collector(["gpu-001", "gpu-002", "gpu-003"], None)
    run = HostRun(HostInfo("gpu-002", "10.0.0.2"), collector)
    run.handle(encode_line(good_batch()).encode())
    assert len(collector.builder) == 0
    assert "gpu-002 line 1: probes from 'gpu-001', not this host" in (run.status.error or "")


@settings(max_examples=25, deadline=None)
@given(tables(max_rows=30), st.integers(1, 40))
def test_the_orchestrator_takes_both_forms_to_the_same_table(table: ProbeTable, rows: int):
    """One host's rows, as ``probe`` lines (an agent with ``batch`` 0) or as batches."""
    mine = table.select(table.src == 0)
    tables = []
    for lines in (
        [encode_line(r) for r in mine.iter_records()],
        [encode_line(r) for r in mine.iter_batches(rows)],
    ):
        collector = Collector(table.hosts, None)
        run = HostRun(HostInfo(table.hosts[0], "10.0.0.1"), collector)
        for line in lines:
            run.handle(line.encode())
        assert run.status.status == "ok", run.status.error
        assert collector.records == len(mine)
        tables.append(collector.builder.build())
    assert_same_table(tables[0], tables[1])
    assert_same_table(mine, tables[1])
