"""Records that cannot be right (telemetry/consistency.py): left out, said in the report,
and the scan is never healthy (exit 3) (issue 24)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.records import ProbeTable, pack_column
from cwctl.scan.recordfile import read_collection, write_collection
from cwctl.session import analyse
from cwctl.telemetry.consistency import _duplicates
from tests.unit.test_recordfile import synthetic_collection

Lines = list[dict[str, Any]]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Lines:
    path = tmp_path_factory.mktemp("consistency") / "good.jsonl"
    collection = synthetic_collection(n_hosts=4, pairs=3)
    collection.status = {h: s for h, s in collection.status.items() if s.status == "ok"}
    write_collection(collection, path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, recs: Lines) -> Path:
    header = {**recs[0], "records": len(recs) - 1}
    path.write_text("".join(json.dumps(r) + "\n" for r in [header, *recs[1:]]))
    return path


def _column(batch: dict[str, Any], key: str) -> np.ndarray:
    from cwctl.records.probes import decode_probes

    return np.asarray(getattr(decode_probes(batch), key))


def _duplicated(recs: Lines) -> Lines:
    batches = [r for r in recs if r["type"] == "probes"]
    return [*recs, *batches * 50]


def _unknown(recs: Lines) -> Lines:
    out = []
    for r in recs:
        if r["type"] == "probes":
            r = {**r, "hosts": [f"ghost-{i}" for i in range(len(r["hosts"]))]}
        out.append(r)
    return out


def _backwards(recs: Lines) -> Lines:
    out = []
    for r in recs:
        if r["type"] == "probes":
            t4 = _column(r, "t4")
            t4 = np.where(t4 != 0, np.maximum(1, t4 - 84_000_000_000), 0)
            r = {**r, "t4": pack_column(t4)}
        out.append(r)
    return out


CASES: dict[str, tuple[Callable[[Lines], Lines], str, str]] = {
    "a file's probes lines fifty times over": (
        _duplicated,
        "duplicate_rows",
        r"[\d,]+ probe rows appear twice or more \(one copy of each kept\)",
    ),
    "probe rows naming hosts absent from the header": (
        _unknown,
        "unknown_hosts",
        r"[\d,]+ probe rows name 4 host\(s\) the scan does not list: ghost-0, ghost-1, "
        r"ghost-2 \(\+1 more\)",
    ),
    "t4 before t1": (
        _backwards,
        "time_backwards",
        r"[\d,]+ exchanges end before they start \(t4 before t1, or t3 before t2: a clock "
        r"stepped back, or the records were altered\)",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_inconsistent_file_is_never_healthy(good: Lines, tmp_path: Path, name: str) -> None:
    make, check, detail = CASES[name]
    path = _write(tmp_path / "bad.jsonl", make(good))
    snapshot = analyse(read_collection(path))
    assert not snapshot.healthy
    problem = next(p for p in snapshot.consistency if p["check"] == check)
    assert problem["rows_left_out"] > 0
    assert re.fullmatch(detail, problem["detail"]), problem["detail"]
    result = CliRunner().invoke(app, ["scan", "--replay", str(path)])
    assert result.exit_code == 3, result.output
    assert f"not healthy: records inconsistent ({check}): " in result.stdout
    report = json.loads(
        CliRunner().invoke(app, ["scan", "--replay", str(path), "--format", "json"]).stdout
    )
    assert check in [p["check"] for p in report["consistency"]]


def test_duplicates_are_left_out_so_the_figures_are_the_good_files(
    good: Lines, tmp_path: Path
) -> None:
    clean = analyse(read_collection(_write(tmp_path / "good.jsonl", good)))
    doubled = analyse(read_collection(_write(tmp_path / "dup.jsonl", _duplicated(good))))
    # nothing found (three pairs a peer are too few to call it healthy: inconclusive)
    assert not clean.found and clean.consistency == []
    assert [(p.src, p.dst, p.sent, p.received) for p in doubled.paths] == [
        (p.src, p.dst, p.sent, p.received) for p in clean.paths
    ]
    assert {h.name: h.offset_ns for h in doubled.hosts} == {
        h.name: h.offset_ns for h in clean.hosts
    }


def test_hosts_with_no_data_are_named(good: Lines, tmp_path: Path) -> None:
    """Rows naming only unknown hosts: every listed host is left with none."""
    snapshot = analyse(read_collection(_write(tmp_path / "none.jsonl", _unknown(good))))
    (problem,) = [p for p in snapshot.consistency if p["check"] == "no_data"]
    assert problem["detail"].startswith("4 reachable host(s) have no probe row at all")


def test_a_good_file_and_a_live_scan_have_no_problem() -> None:
    collection = synthetic_collection(n_hosts=4, pairs=3)
    snapshot = analyse(collection)
    assert snapshot.consistency == [] and "consistency" not in snapshot.to_json()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.integers(0, 2),
            st.integers(0, 3),
            st.integers(0, 1),
            st.integers(1, 4),
        ),
        max_size=40,
    )
)
def test_the_duplicates_are_every_repeat_of_an_earlier_row(rows: list[tuple[int, ...]]) -> None:
    """Rows drawn from a few values repeat often, with t1 shared by different rows too:
    every row equal (sender, receiver, pair, index, t1) to an earlier one, and only those."""
    cols = np.array(rows, np.int64).reshape(-1, 5).T
    table = ProbeTable(
        hosts=["a", "b", "c"], src=cols[0].astype(np.int32), dst=cols[1].astype(np.int32),
        sport=np.zeros(len(rows), np.int32), pair=cols[2], idx=cols[3].astype(np.int8),
        gap_ns=np.zeros(len(rows), np.int64), ts=np.zeros(len(rows), np.int8), t1=cols[4],
        t2=cols[4], t3=cols[4], t4=cols[4],
    )  # fmt: skip
    expected = [row in rows[:i] for i, row in enumerate(rows)]
    assert _duplicates(table).tolist() == expected
