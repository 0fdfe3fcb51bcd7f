"""``TruthPaths``: a simulated window's true per-path figures as columns read as the
list of dicts they stand for, and write the same JSON bytes as those dicts."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.report import render_bytes
from cwctl.scan.recordfile import read_collection, write_collection
from cwctl.scan.request import SimOptions
from cwctl.scan.truthpaths import TruthPaths, plain_truth
from cwctl.session import analyse
from cwctl.transport.sim import simulate

HOSTS = ["a", 'b"', "é"]
row = st.tuples(
    st.integers(0, 2),
    st.integers(0, 2),
    st.integers(0, 500),
    st.integers(0, 500),
    st.floats(0, 1),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=3, max_size=3),
)


def _columns(rows: list[Any]) -> TruthPaths:
    return TruthPaths(
        HOSTS,
        np.array([r[:2] for r in rows], np.int64).reshape(-1, 2),
        np.array([r[2:4] for r in rows], np.int64).reshape(-1, 2),
        np.array([r[4] for r in rows], np.float64),
        np.array([r[5] for r in rows], np.float64).reshape(-1, 3),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(row, max_size=10))
def test_the_columns_write_what_their_dicts_write(rows: list[Any]) -> None:
    paths = _columns(rows)
    dicts = paths.to_json()
    same = orjson.dumps  # dicts compared as JSON: a NaN figure is null on both sides
    assert paths.json_text() == same(dicts)
    assert same(list(paths)) == same(dicts) and len(paths) == len(rows)
    for i in range(-len(rows), len(rows)):
        assert same(paths[i]) == same(dicts[i])
    assert same(paths[1:3]) == same(dicts[1:3]) and same(paths[::2]) == same(dicts[::2])
    if not any(np.isnan(r[5]).any() for r in rows):  # NaN == NaN is False, in a dict too
        assert paths == dicts
    for (s, d, _, got, _, _), out in zip(rows, dicts, strict=True):
        assert (out["src"], out["dst"]) == (HOSTS[s], HOSTS[d])
        assert (out["owd_min_ns"] is None) == (got == 0)
    with pytest.raises(IndexError):
        paths[len(rows)]


def test_a_scans_truth_is_the_same_in_its_report_its_dicts_and_its_record_file(
    tmp_path: Any,
) -> None:
    collection = simulate(SimOptions(hosts=24, faults=("link:leaf1-spine2:lossy=0.2",)), 0.4)
    assert collection.truth is not None
    truth_paths = collection.truth["paths"]
    assert isinstance(truth_paths, TruthPaths) and len(truth_paths) > 50
    records = tmp_path / "r.jsonl"
    write_collection(collection, records)
    read = read_collection(records).truth
    assert read is not None and read["paths"] == truth_paths  # a plain list read back
    snap = analyse(collection)
    assert snap.truth is not None
    written = orjson.loads(b"".join(render_bytes(snap, "json")))
    assert written["truth"] == plain_truth(snap.truth) == snap.to_json()["truth"]
    indented = orjson.loads(b"".join(render_bytes(snap, "json", pretty=True)))
    assert indented == written
    assert any(p["loss"] > 0 for p in written["truth"]["paths"])
