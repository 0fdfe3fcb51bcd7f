"""``PathReports``: a scan's paths as columns are the same reports as the objects they
stand for. Their JSON, made from the columns, is byte for byte the objects' own; joined
and put in host order they are the objects joined and sorted; figures read as columns
are the objects' figures (NaN for None)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.scan.pathreports import (
    FLOATS,
    PathReport,
    PathReports,
    PortColumns,
    json_chunks,
    path_column,
)
from cwctl.scan.request import SimOptions
from cwctl.session import analyse
from cwctl.transport.sim import simulate

HOSTS = ["h0", "h1", 'h"2', "h\\3", "é4"]  # names JSON must escape, or write as UTF-8
_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS

figure = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.floats(min_value=0, max_value=1e7),
    st.sampled_from([float("nan"), 0.0, 0.1 + 0.2, 1 / 3]),
)
port = st.tuples(
    st.integers(0, 65535),
    st.integers(0, 1000),
    st.integers(0, 1000),
    st.floats(0, 1),
    figure,
    figure,
)
path = st.tuples(
    st.integers(0, len(HOSTS) - 1),
    st.integers(0, len(HOSTS) - 1),
    st.integers(0, 2000),
    st.integers(0, 2000),
    st.lists(figure, min_size=len(FLOATS), max_size=len(FLOATS)),
    st.lists(port, max_size=4),
)


def _columns(paths: list[Any]) -> PathReports:
    """Columns of drawn paths (a path's drawn counts are its own; its ports are drawn
    apart)."""
    ints = np.array([p[:4] for p in paths], np.int64).reshape(-1, 4)
    floats = np.array([p[4] for p in paths], np.float64).reshape(-1, len(FLOATS))
    sizes = [len(p[5]) for p in paths]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    rows = [r for p in paths for r in p[5]]
    ports = PortColumns(
        np.array([r[:3] for r in rows], np.int32).reshape(-1, 3),
        np.array([r[3:] for r in rows], np.float64).reshape(-1, 3),
    )
    return PathReports(HOSTS, ints, floats, bounds, ports)


def _json(items: Any) -> bytes:
    return orjson.dumps(list(items), option=_OPTIONS)


def json_items(paths: Any, size: int = 4096, *, text: bool = False) -> list[Any]:
    """The paths' JSON items (``text``: fragments of several items' text each)."""
    return [item for chunk in json_chunks(paths, size, text=text) for item in chunk]


@settings(max_examples=150, deadline=None)
@given(st.lists(path, max_size=12), st.integers(1, 5))
def test_json_from_columns_is_the_reports_own(paths: list[Any], chunk: int) -> None:
    columns = _columns(paths)
    reports = list(_columns(paths))  # made as objects
    from_objects = _json(p.to_json() for p in reports)
    assert _json(json_items(columns, chunk)) == from_objects
    assert _json(json_items(columns, chunk, text=True)) == from_objects
    assert len(columns) == len(paths) and columns._reports is None  # never made
    assert _json(json_items(reports, chunk, text=True)) == from_objects  # a plain list


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(path, max_size=6), max_size=4))
def test_joined_in_host_order_are_the_reports_joined_and_sorted(parts: list[Any]) -> None:
    joined = PathReports.joined([_columns(p) for p in parts]).in_host_order()
    objects = [r for p in parts for r in _columns(p)]
    index = {h: i for i, h in enumerate(HOSTS)}
    objects.sort(key=lambda r: (index[r.src], index[r.dst]))  # stable, as one pass
    assert list(joined) == objects
    assert _json(json_items(PathReports.joined([_columns(p) for p in parts]).in_host_order())) == (
        _json(r.to_json() for r in objects)
    )
    for name in FLOATS:
        np.testing.assert_array_equal(path_column(joined, name), path_column(objects, name))


def test_a_scans_columns_write_what_its_reports_write() -> None:
    faults = ("link:leaf1-spine2:lossy=0.1", "host:gpu-003:down")
    snap = analyse(simulate(SimOptions(hosts=16, faults=faults), 0.5), release=True)
    paths = snap.paths
    assert isinstance(paths, PathReports) and len(paths) > 100
    from_columns = _json(json_items(paths))
    as_text = _json(json_items(paths, 100, text=True))
    assert paths._reports is None  # the JSON made no report object
    from_objects = _json(p.to_json() for p in paths.reports())
    assert from_columns == from_objects and as_text == from_objects
    assert _json(json_items(paths)) == from_objects  # and from the objects, once made
    assert _json(json_items(paths, 100, text=True)) == from_objects
    assert any(p.owd_p50_ns is None for p in paths)  # the dead host's paths: None, not NaN
    assert any(len(p.ports or ()) > 1 for p in paths)


def test_the_columns_are_a_sequence_of_reports() -> None:
    columns = _columns(
        [
            (0, 1, 10, 9, [1.0, 2.0, 3.0, 4.0, 0.5, float("nan"), float("nan")], []),
            (1, 0, 10, 0, [float("nan")] * len(FLOATS), [(40000, 10, 0, 1.0, 2.0, 3.0)]),
        ]
    )
    first = columns[0]
    assert isinstance(first, PathReport) and first.src == "h0" and first.owd_p99_ns == 3.0
    assert first.port_p50_spread_ns is None and columns[1].owd_min_ns is None
    assert columns[1].loss == 1.0 and columns[-1] is columns[1]
    assert columns[0:1] == [first] and columns == list(columns) and columns != [first]
    assert repr(columns) == "PathReports(2 paths)"
    assert len(PathReports.empty(HOSTS)) == 0 and list(PathReports.joined([])) == []
    np.testing.assert_array_equal(path_column(columns, "owd_p50_ns"), [2.0, np.nan])
