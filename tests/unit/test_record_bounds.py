"""Record files from anywhere: read within stated bounds, every malformed one refused in
one line (exit 2), nothing from a file echoed into a report unless a known field, text
made safe before a terminal sees it (issue 24)."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench.bench_scale import child_cost
from cwctl.cli import app
from cwctl.errors import RecordError
from cwctl.records.bounds import (
    LINE_BASE_CHARS,
    MAX_DEPTH,
    ROWS_SLACK,
    line_max_chars,
    other_max_chars,
    printable,
    rows_max,
)
from cwctl.scan.recordfile import read_collection, write_collection
from cwctl.session import analyse
from tests.unit.test_recordfile import synthetic_collection

Lines = list[dict[str, Any]]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Lines:
    path = tmp_path_factory.mktemp("bounds") / "good.jsonl"
    write_collection(synthetic_collection(n_hosts=4, pairs=3), path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, recs: Lines, extra: list[str] = (), count: int | None = None) -> Path:  # type: ignore[assignment]
    header = dict(recs[0])
    header["records"] = len(recs) - 1 + len(extra) if count is None else count
    with path.open("w") as f:
        for rec in [header, *recs[1:]]:
            f.write(json.dumps(rec) + "\n")
        for line in extra:
            f.write(line + "\n")
    return path


def _header(**changes: Any) -> Callable[[Lines], tuple[Lines, list[str]]]:
    def make(recs: Lines) -> tuple[Lines, list[str]]:
        return [{**recs[0], **changes}, *recs[1:]], []

    return make


def _extra(*lines: str) -> Callable[[Lines], tuple[Lines, list[str]]]:
    return lambda recs: (recs, list(lines))


def _probes(recs: Lines) -> dict[str, Any]:
    return next(r for r in recs if r["type"] == "probes")


def _path(recs: Lines) -> dict[str, Any]:
    return next(r for r in recs if r["type"] == "path")


def _wide_t4(batch: dict[str, Any]) -> dict[str, Any]:
    """A batch whose ``t4`` is a list column holding 2^64 (a list, not a packed string)."""
    return {**batch, "t4": [2**64] * batch["n"]}


def _summary(**fields: Any) -> str:
    return json.dumps({"type": "summary", "v": 1, "host": "gpu-001", **fields})


def _amplified(recs: Lines) -> tuple[Lines, list[str]]:
    """The issue's 264-byte line: scalar columns, a million rows claimed."""
    amp = {
        "type": "probes", "v": 1, "n": 1 << 20, "src": recs[0]["hosts"][0]["name"],
        "hosts": [recs[0]["hosts"][1]["name"]], "dst": 0, "sport": 40000, "pair": 1,
        "idx": 0, "gap_ns": 20000, "ts": "sw", "t1": 1, "t2": 2, "t3": 3, "t4": 4,
    }  # fmt: skip
    return recs, [json.dumps(amp)] * 16


CASES = {
    "a line nested past the recursion limit": (
        _extra("[" * 100_000 + "]" * 100_000),
        r"line \d+: not a JSON record \(nested too deep\)",
    ),
    "a record nested past the stated depth": (
        _extra('{"type": "gpu", "host": "gpu-001", "x": ' + "[" * 40 + "]" * 40 + "}"),
        rf"line \d+: nested deeper than {MAX_DEPTH} levels",
    ),
    "a header nested deep": (
        _header(x=json.loads("[" * 900 + "]" * 900)),
        rf"line 1: nested deeper than {MAX_DEPTH} levels",
    ),
    "hosts as ints": (_header(hosts=[1, 2]), r"line 1: header 'hosts' entry 1: not a name"),
    "a host name as an int": (
        _header(hosts=[{"name": 7}]),
        r"line 1: header 'hosts' entry 7: not a name",
    ),
    "table hosts as ints": (
        _header(table_hosts=[1, 2, 3, 4]),
        r"line 1: header 'table_hosts' must be a list of names",
    ),
    "duration a string": (
        _header(duration_s="x"),
        r"line 1: header 'duration_s' must be a number in \[0, 3600\], got 'x'",
    ),
    "duration 1e308": (_header(duration_s=1e308), r"header 'duration_s' must be a number in"),
    "params a list": (_header(params=[1]), r"line 1: header 'params' must be an object, got list"),
    "peers an int": (_header(peers=3), r"line 1: header 'peers' must be an object, got int"),
    "status a list": (_header(status=[1]), r"line 1: header 'status' must be an object, got list"),
    "status error an int": (
        _header(status={"gpu-001": {"status": "error", "error": 5}}),
        r"header 'status' of 'gpu-001': error must be a string",
    ),
    "records a bool": (_header(records=True), r"header 'records' missing or not a int"),
    "an empty host list": (_header(hosts=[]), r"line 1: header 'hosts' lists no host"),
    "a newline and an escape in a host name": (
        _header(hosts=[{"name": "gpu-001\x1b[31m\nhosts ok 8/8"}]),
        r"header 'hosts' entry 'gpu-001\\x1b\[31m\\nhosts ok 8/8': not a name",
    ),
    "an integer of 2^64 in a truth record": (
        _extra(json.dumps({"type": "truth", "v": 1, "offset_ns": {"gpu-001": 2**64}})),
        r"line \d+: an integer beyond 64 bits \(18446744073709551616\.\.\.\)",
    ),
    # orjson reads these lines fast but for the wide integers (beyond int64 it gives a
    # float or an unsigned integer): json reads them again, the words are json's
    "2^63 in a summary": (
        _extra(_summary(sent=2**63)),
        r"line \d+: an integer beyond 64 bits \(9223372036854775808\.\.\.\)",
    ),
    "-2^63 - 1 in a path record's unknown key": (
        lambda recs: (recs, [json.dumps({**_path(recs), "x": -(2**63) - 1})]),
        r"line \d+: an integer beyond 64 bits \(-9223372036854775809\.\.\.\)",
    ),
    "2^64 in a probes list column": (
        lambda recs: (recs, [json.dumps(_wide_t4(_probes(recs)))]),
        r"line \d+: probes column 't4': an integer beyond 64 bits",
    ),
    "NaN in a path record": (
        lambda recs: (recs, [json.dumps({**_path(recs), "x": float("nan")})]),
        r"line \d+: a number that is not finite \(nan\)",
    ),
    "NaN in a summary": (_extra(_summary(cost={"cpu_s": float("nan")})), r"not finite \(nan\)"),
    "1e400 in a gpu record": (
        _extra('{"type": "gpu", "host": "gpu-001", "x": 1e400}'),
        r"a number that is not finite \(inf\)",
    ),
    "a 100 000-digit integer": (
        _extra('{"type": "gpu", "host": "gpu-001", "x": ' + "9" * 100_000 + "}"),
        r"line \d+: not a JSON record \(ValueError\)",
    ),
    "a summary without a printable host": (
        _extra(json.dumps({"type": "summary", "host": "a\nb"})),
        r"summary record without a 'host' \(a printable name\)",
    ),
    "the amplification file": (_amplified, r"line \d+: more probe rows \(1,048,\d+ so far\)"),
    "a header announcing too many records": (
        _header(records=10**9),
        r"line 1: the header announces 1,000,000,000 records, more than a scan",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_malformed_record_file_is_one_line_and_exit_2(
    good: Lines, tmp_path: Path, name: str
) -> None:
    make, message = CASES[name]
    recs, extra = make(good)
    count = recs[0]["records"] if "records" in name else None
    path = _write(tmp_path / "bad.jsonl", recs, extra, count)
    with pytest.raises(RecordError, match=message):
        read_collection(path)
    result = CliRunner().invoke(app, ["scan", "--replay", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"cwctl: {path}") and "\x1b" not in line and "Traceback" not in line


def test_a_summary_of_the_wrong_types_reads_as_unknown_fields(good: Lines, tmp_path: Path) -> None:
    bad = {
        "type": "summary", "v": 1, "host": good[0]["hosts"][0]["name"], "sent": "x",
        "cost": {"cpu_s": "x", "probe_wall_s": [1], "tx_packets": {"a": 1}, "starved": 5},
        "dropped": {"bad_mac": "3", "replay": 2, "\x1b[2J": 9}, "trace": {"flows": 1, "x": 2},
    }  # fmt: skip
    recs = [r for r in good if not (r["type"] == "summary" and r["host"] == bad["host"])]
    path = _write(tmp_path / "types.jsonl", recs, [json.dumps(bad)])
    host = next(h for h in analyse(read_collection(path)).hosts if h.name == bad["host"])
    assert host.agent is not None
    assert host.agent["cpu_s"] is None and host.agent["tx_packets"] is None
    assert host.agent["dropped"] == {"replay": 2} and host.agent["trace"] == {"flows": 1}
    result = CliRunner().invoke(app, ["scan", "--replay", str(path), "--format", "json"])
    assert result.exit_code in (0, 3), result.output


def test_only_a_truth_records_known_keys_reach_the_report(good: Lines, tmp_path: Path) -> None:
    truth = {"type": "truth", "v": 1, "offset_ns": {"gpu-001": 0.0}, "junk": "A" * 1000}
    recs = [r for r in good if r["type"] != "truth"]
    path = _write(tmp_path / "truth.jsonl", recs, [json.dumps(truth)])
    result = CliRunner().invoke(app, ["scan", "--replay", str(path), "--format", "json"])
    assert result.exit_code in (0, 3), result.output
    report = json.loads(result.stdout)
    assert report["truth"] == {"offset_ns": {"gpu-001": 0.0}}
    assert "AAAA" not in result.stdout


@pytest.fixture(scope="module")
def deflated(good: Lines, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The good file and a truth line of 1 GiB, in a gzip of about 1 MB."""
    path = tmp_path_factory.mktemp("bounds") / "big.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write((json.dumps({**good[0], "records": len(good)}) + "\n").encode())
        for rec in good[1:]:
            f.write((json.dumps(rec) + "\n").encode())
        f.write(b'{"type": "truth", "v": 1, "junk": "')
        chunk = b"A" * (1 << 20)
        for _ in range(1024):
            f.write(chunk)
        f.write(b'"}\n')
    return path


def test_a_1_gib_line_in_a_1_mb_gzip_is_refused_at_its_bound(good: Lines, deflated: Path) -> None:
    assert deflated.stat().st_size < 8 << 20
    bound = line_max_chars(len(good[0]["hosts"]))
    with pytest.raises(RecordError, match=rf"line {len(good) + 1}: longer than {bound:,} char"):
        read_collection(deflated)


def test_text_from_a_file_reaches_the_terminal_escaped(good: Lines, tmp_path: Path) -> None:
    forged = "sim\x1b[2J\x1b[31m\nhosts ok 8/8"
    recs = [{**good[0], "source": forged}, *good[1:]]
    path = _write(tmp_path / "source.jsonl", recs)
    result = CliRunner().invoke(app, ["scan", "--replay", str(path)])
    assert "\x1b" not in result.output and "\nhosts ok 8/8" not in result.output
    assert printable(forged) in result.output  # shown, escaped: sim\x1b[2J...
    assert printable("a\x1b[2J\nb\u2028c") == "a\\x1b[2J\\nb\\u2028c"


def test_the_bounds_follow_the_header() -> None:
    peers = {"a": ["b", "c"], "b": ["a"]}
    assert rows_max(3, peers, 10.0, 2.0) == 2 * (2 * 10 * 2 * 3) + ROWS_SLACK
    assert rows_max(3, {}, 10.0, 2.0) == 2 * (2 * 10 * 2 * 6) + ROWS_SLACK  # every other host
    assert rows_max(3, peers, "x", 1.0) == rows_max(3, peers, 1e300, 1.0)  # the highest rate
    assert line_max_chars(0) == LINE_BASE_CHARS < line_max_chars(1000)


def _peak_rss_kib(args: list[str]) -> tuple[int, int]:
    """(exit status, peak RSS in KiB) of ``cwctl ARGS``, forked from a fresh interpreter,
    not from this worker: a child's ``ru_maxrss`` keeps the peak of the process it was
    forked from, so under make test's workers (grown to a gigabyte) both runs read the
    worker's peak and ``peak < 2 * base`` could not fail."""
    status, _cpu_s, peak, _out = child_cost([sys.executable, "-m", "cwctl", *args])
    return status, peak


def test_peak_rss_reading_the_amplification_files_stays_under_twice_a_good_files(
    good: Lines, deflated: Path, tmp_path: Path
) -> None:
    """Before: 16 scalar-column lines claiming a million rows each reached 5.7 GB, and a
    1 MB gzip holding a 1 GiB truth line 5.1 GB. Now each is refused at its bound, with
    the memory of reading the same file without them (its rows: what it needs)."""
    plain = _write(tmp_path / "good.jsonl", good)
    recs, extra = _amplified(good)
    amplified = _write(tmp_path / "amp.jsonl", recs, extra)
    code, base = _peak_rss_kib(["scan", "--replay", str(plain)])
    assert code in (0, 3)
    for path in (amplified, deflated):
        code, peak = _peak_rss_kib(["scan", "--replay", str(path)])
        assert code == 2 and peak < 2 * base, (path.name, peak, base)


def test_gpu_records_of_the_wrong_types_are_read_as_unknown(good: Lines, tmp_path: Path) -> None:
    """Found by the fuzz loop: ``"gpus": 1.5`` was a TypeError (exit 1)."""
    host = good[0]["hosts"][0]["name"]
    odd = [
        {"type": "gpu", "v": 1, "host": host, "gpus": 1.5},
        {"type": "gpu", "v": 1, "host": host, "gpus": [{"uuid": [1], "xid": 3, "throttle": [{}]}]},
        {"type": "gpu", "v": 1, "host": host, "status": "error", "error": "x\x1b[2J\ny"},
    ]
    path = _write(tmp_path / "gpu.jsonl", good, [json.dumps(r) for r in odd])
    result = CliRunner().invoke(app, ["scan", "--replay", str(path), "--format", "json"])
    assert result.exit_code in (0, 3), result.output
    (reported,) = [h for h in json.loads(result.stdout)["hosts"] if h["name"] == host]
    assert reported["gpu_reason"] == "GPU sampling failed: x\\x1b[2J\\ny"


def test_a_gpu_entrys_unknown_keys_never_reach_the_report(good: Lines, tmp_path: Path) -> None:
    host = good[0]["hosts"][0]["name"]
    rec = {"type": "gpu", "v": 1, "host": host, "status": "ok", "source": "nvml",
           "gpus": [{"index": 0, "name": "H100", "junk": "A" * 5000}]}  # fmt: skip
    path = _write(tmp_path / "gpu.jsonl", good, [json.dumps(rec)])
    result = CliRunner().invoke(app, ["scan", "--replay", str(path), "--format", "json"])
    assert result.exit_code in (0, 3), result.output
    (reported,) = [h for h in json.loads(result.stdout)["hosts"] if h["name"] == host]
    assert reported["gpus"][0]["name"] == "H100" and "junk" not in reported["gpus"][0]


def test_a_switch_name_with_an_escape_in_the_topology_is_refused(
    good: Lines, tmp_path: Path
) -> None:
    topology = json.loads(json.dumps(good[0]["topology"]))
    leaf = next(iter(topology["uplinks"]))
    topology["uplinks"][leaf] = ["spine1\x1b[2J"]
    path = _write(tmp_path / "topo.jsonl", [{**good[0], "topology": topology}, *good[1:]])
    with pytest.raises(RecordError, match=r"line 1: header 'topology' is malformed"):
        read_collection(path)


def test_many_large_records_other_than_probe_rows_are_refused_at_their_total(
    good: Lines, tmp_path: Path
) -> None:
    """Each line under its own bound, but 40 gpu records of 1 MB (a gzip of ~100 KB): the
    reader keeps those as parsed, so their total has a bound of its own."""
    host = good[0]["hosts"][0]["name"]
    big = json.dumps({"type": "gpu", "v": 1, "host": host, "status": "ok", "x": "A" * (1 << 20)})
    path = tmp_path / "gpus.jsonl.gz"
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(json.dumps({**good[0], "records": len(good) - 1 + 40}) + "\n")
        for rec in good[1:]:
            f.write(json.dumps(rec) + "\n")
        for _ in range(40):
            f.write(big + "\n")
    bound = other_max_chars(len(good[0]["hosts"]))
    with pytest.raises(RecordError, match=rf"more than {bound:,} characters of records other"):
        read_collection(path)


def test_a_live_agents_summary_of_huge_or_odd_numbers_still_encodes() -> None:
    """A compromised host's agent can print any summary: 2^64 counts are left out, a
    non-finite cost reads as unknown, and the JSON report still encodes (orjson's bound)."""
    from cwctl.report.jsonenc import encode

    collection = synthetic_collection(n_hosts=4, pairs=3)
    name = collection.host_names[0]
    collection.summaries[name] = {
        "type": "summary", "host": name, "cost": {"cpu_s": 2**64, "tx_bytes": float("inf")},
        "dropped": {"replay": 2**64, "bad_mac": 3}, "trace": {"flows": -1, "paths": 2},
    }  # fmt: skip
    snapshot = analyse(collection)
    agent = next(h.agent for h in snapshot.hosts if h.name == name)
    assert agent is not None
    assert agent["dropped"] == {"bad_mac": 3} and agent["trace"] == {"paths": 2}
    assert json.loads(encode(snapshot.to_json()))["hosts"]
