"""The probe record format: encode/decode round trips, garbage refused, table round trip."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.errors import RecordError
from cwctl.records import (
    TS_SOURCES,
    ProbeRecord,
    ProbeTable,
    ProbeTableBuilder,
    concat_tables,
    decode_probe,
    encode_line,
    parse_line,
)

NAMES = st.sampled_from(["gpu-001", "gpu-002", "gpu-003", "local-01", "node-x", "h"])
STAMP = st.integers(1, 2**62)


@st.composite
def probe_records(draw: st.DrawFn) -> ProbeRecord:
    src = draw(NAMES)
    dst = draw(NAMES.filter(lambda d: d != src))
    answered = draw(st.sampled_from(["none", "t2", "all"]))
    t2 = draw(STAMP) if answered != "none" else None
    t3 = draw(STAMP) if answered == "all" else None
    t4 = draw(STAMP) if answered == "all" else None
    return ProbeRecord(
        src=src,
        dst=dst,
        sport=draw(st.integers(0, 65535)),
        pair=draw(st.integers(0, 2**62)),
        idx=draw(st.integers(0, 1)),
        gap_ns=draw(st.integers(0, 10**9)),
        ts=draw(st.sampled_from(TS_SOURCES)),
        t1=draw(STAMP),
        t2=t2,
        t3=t3,
        t4=t4,
        nic=draw(st.none() | st.sampled_from(["mlx5_0", "mlx5_1"])),
    )


def load(line: str | bytes) -> dict[str, Any]:
    """What every consumer does with a line: parse it, and decode it if it is a probe."""
    rec = parse_line(line, where="test line 1")
    if rec["type"] == "probe":
        decode_probe(rec, where="test line 1")
    return rec


@settings(max_examples=200, deadline=None)
@given(probe_records())
def test_probe_record_round_trip(rec: ProbeRecord) -> None:
    line = encode_line(rec.to_json())
    assert "\n" not in line
    assert decode_probe(parse_line(line)) == rec


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_arbitrary_text_is_a_record_or_a_record_error(line: str | bytes) -> None:
    try:
        rec = load(line)
    except RecordError as exc:
        assert "test line 1" in str(exc)
    else:
        assert isinstance(rec, dict)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
PROBE_KEYS = ["v", "src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4"]


@settings(max_examples=150, deadline=None)
@given(probe_records(), st.sampled_from([*PROBE_KEYS, "nic"]), JSON_VALUES)
def test_a_probe_with_any_field_replaced_decodes_or_raises_record_error(
    rec: ProbeRecord, key: str, value: Any
) -> None:
    raw = rec.to_json()
    raw[key] = value
    try:
        line = json.dumps(raw)
    except ValueError:
        return
    try:
        load(line)
    except RecordError as exc:
        assert "test line 1" in str(exc)


@settings(max_examples=200, deadline=None)
@given(probe_records(), st.data())
def test_a_cut_or_mangled_line_is_never_a_crash(rec: ProbeRecord, data: st.DataObject) -> None:
    line = encode_line(rec.to_json())
    cut = data.draw(st.integers(0, len(line) - 1))
    mangled = data.draw(st.sampled_from([line[:cut], line[:cut] + "}" + line[cut + 1 :]]))
    with contextlib.suppress(RecordError):
        load(mangled)


def test_garbage_examples_are_refused_with_their_line() -> None:
    for line in ["", "not json", "[1, 2]", '{"type": "bogus"}', '{"type": "probe"}', "\x00\xff"]:
        try:
            load(line)
        except RecordError as exc:
            assert "test line 1" in str(exc)
        else:
            raise AssertionError(f"{line!r} was accepted")


@settings(max_examples=50, deadline=None)
@given(st.lists(probe_records(), max_size=40))
def test_probe_table_round_trip_through_iter_records(records: list[ProbeRecord]) -> None:
    builder = ProbeTableBuilder()
    for rec in records:
        builder.add(rec)
    table = builder.build()
    assert [decode_probe(r) for r in table.iter_records()] == records
    again = ProbeTableBuilder(table.hosts)
    for r in table.iter_records():
        again.add_record(parse_line(encode_line(r)))
    rebuilt = again.build()
    for name in ("src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4"):
        np.testing.assert_array_equal(getattr(rebuilt, name), getattr(table, name))
    assert rebuilt.hosts == table.hosts
    assert len(concat_tables([table, rebuilt])) == 2 * len(records)


def test_select_keeps_constant_columns_broadcast_and_values_equal() -> None:
    n = 10
    t = np.arange(1, n + 1, dtype=np.int64)
    table = ProbeTable(
        hosts=["a", "b"],
        src=np.zeros(n, np.int32),
        dst=np.ones(n, np.int32),
        sport=np.full(n, 40000, np.int32),
        pair=np.arange(n, dtype=np.int64),
        idx=np.zeros(n, np.int8),
        gap_ns=np.broadcast_to(np.int64(5000), (n,)),
        ts=np.broadcast_to(np.int8(1), (n,)),
        t1=t,
        t2=t + 1,
        t3=t + 2,
        t4=t + 3,
    )
    for pick in (t % 3 == 0, np.array([7, 1, 4])):
        part = table.select(pick)
        assert part.gap_ns.strides == (0,) and part.ts.strides == (0,)
        assert part.gap_ns.tolist() == table.gap_ns.copy()[pick].tolist()
        assert part.ts.tolist() == table.ts.copy()[pick].tolist()
        assert part.t1.tolist() == t[pick].tolist()
    assert len(table.select(np.zeros(n, bool)).gap_ns) == 0
