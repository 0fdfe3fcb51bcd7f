"""Hostile input, fuzzed (issue 24): a seeded mutation loop over a valid record file and
the example inventory (``hostile_fuzz.py``), several hundred cases through the CLI in
one child process. No exit other than 0, 2 or 3, no traceback, no "internal error",
no case past its alarm, and the child's peak memory bounded.

Issue 34, by hypothesis: what a running watch reads again and again. A policy is a
Policy or a PolicyError naming its file; an inventory on SIGHUP is taken or refused,
never an exception out of ``Watch.reload``; any journalled watch mark is adopted or
skipped, and a scrape answers; any squeue output (rows or --json) is jobs and warnings,
never a failed read."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cwctl.cli import app

ROOT = Path(__file__).resolve().parents[2]
CASES = 300  # half record files (replayed in every format), half inventories
PEAK_RSS_KIB = 1 << 20  # a GiB: the loop itself needs ~120 MB


def test_mutated_record_files_and_inventories_never_crash_the_cli(tmp_path: Path) -> None:
    for seed in (2026,):  # one seed: a new one per change would be a flaky test
        work = tmp_path / str(seed)
        work.mkdir()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.unit.hostile_fuzz",
                str(seed),
                str(CASES),
                str(work),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        result = json.loads(out.stdout)
        assert result["cases"] == CASES
        assert result["broken"] == [], result["broken"][:5]
        assert set(result["codes"]) <= {"0", "2", "3"}, result["codes"]
        # the mutations reach past the reader: some cases run to a report
        assert result["codes"].get("0", 0) + result["codes"].get("3", 0) > 10, result["codes"]
        assert result["peak_rss_kib"] < PEAK_RSS_KIB, result["peak_rss_kib"]


# --- the files and outputs the watch reads again and again (issue 34), by hypothesis ---

HOSTILE_TOML = st.one_of(
    st.integers().map(str),
    st.integers(min_value=10**15, max_value=10**600).map(str),  # past 2**53, past floats
    st.sampled_from(["inf", "nan", "-inf", "1e308", "-0.0", "true", "[]", "{}", '""']),
    st.sampled_from(["[" * 3000 + "]" * 3000, "9" * 5000, '"\\u0000"', '"a\\nb"', "[[1]]"]),
    st.text(max_size=30).map(lambda t: '"' + t.replace("\\", "").replace('"', "") + '"'),
)
POLICY_KEYS = st.sampled_from(
    ["dry_run", "protect", "rounds", "min_score", "max_per_hour", "hold_s", "restore",
     "kind", "action", "match", "nonsense"]
)  # fmt: skip


def _toml(rows: list[tuple[str, str, str]]) -> str:
    """``(table, key, value)`` rows as TOML text: "" top level, "act", "[[allow]]"."""
    out = []
    for table, key, value in rows:
        header = {"": "", "act": "[act]\n", "allow": "[[allow]]\n"}[table]
        out.append(f"{header}{key} = {value}\n")
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["", "act", "allow"]), POLICY_KEYS, HOSTILE_TOML),
                max_size=6))  # fmt: skip
def test_a_hostile_policy_is_a_policy_error_or_a_policy(rows: list[tuple[str, str, str]]) -> None:
    from cwctl.watch.policy import Policy, PolicyError, parse_policy

    try:
        assert isinstance(parse_policy(_toml(rows), label="p.toml"), Policy)
    except PolicyError as exc:
        assert exc.problems and all(p.startswith("p.toml:") for p in exc.problems)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["ssh", "probe"]),
                          st.sampled_from(["port", "connect_timeout", "concurrency", "duration",
                                           "rate", "peers", "ports", "gap_us", "x"]),
                          HOSTILE_TOML), max_size=4))  # fmt: skip
def test_a_hostile_inventory_on_reload_never_ends_the_watch(
    rows: list[tuple[str, str, str]],
) -> None:
    from cwctl.scan.request import ScanRequest, SimOptions
    from cwctl.watch.metrics import WatchMetrics
    from cwctl.watch.rounds import Watch

    work = Path(tempfile.mkdtemp(prefix="cwctl-reload-"))
    inv = work / "inv.toml"
    hosts = "".join(f'[[host]]\nname = "h{i}"\naddress = "10.0.0.{i}"\n' for i in (1, 2))
    inv.write_text(hosts)
    said: list[dict[str, Any]] = []
    metrics = WatchMetrics()
    watch = Watch(ScanRequest(sim=SimOptions(hosts=2), inventory=inv), metrics=metrics,
                  log=said.append)  # fmt: skip
    text = "".join(f"[{table}]\n{key} = {value}\n" for table, key, value in rows) + hosts
    inv.write_text(text)
    asyncio.run(watch.reload())  # raises nothing, whatever the file holds
    (line,) = [x for x in said if x["event"] == "reload"]
    assert line["ok"] or (line["error"] and metrics.errors["reload"] == 1)
    asyncio.run(watch.aclose())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8,
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mark=st.one_of(JSON, st.fixed_dictionaries(
    {"element": JSON, "kind": st.sampled_from(["switch", "link", 7, None]),
     "action": st.sampled_from(["reroute", "drain", "steer", ""])})))  # fmt: skip
def test_any_journalled_watch_mark_is_adopted_or_skipped_and_scrapes_answer(mark: Any) -> None:
    from prometheus_client import generate_latest

    from cwctl.scan.request import ScanRequest, SimOptions
    from cwctl.settings import state_dir
    from cwctl.watch.act import valid_mark
    from cwctl.watch.metrics import WatchMetrics, registry_of
    from cwctl.watch.policy import Policy
    from cwctl.watch.rounds import Watch

    journal = state_dir() / "journal.jsonl"
    if not journal.exists():  # one real apply, whose mark each example replaces
        done = CliRunner().invoke(app, ["reroute", "--sim", "spine2", "--apply", "--yes"])
        assert done.exit_code == 0, done.output
        _PRISTINE[str(journal)] = journal.read_text()
    entries = [json.loads(x) for x in _PRISTINE[str(journal)].splitlines()]
    for e in entries:
        if e["event"] == "intent":
            e["plan"]["context"]["watch"] = mark
    journal.write_text("".join(json.dumps(e) + "\n" for e in entries))
    said: list[dict[str, Any]] = []
    metrics = WatchMetrics()
    watch = Watch(ScanRequest(sim=SimOptions()), policy=Policy(), metrics=metrics,
                  log=said.append)  # fmt: skip
    adopted = [x for x in said if x["event"] == "adopted"]
    assert len(adopted) == (1 if valid_mark(mark) else 0)
    assert generate_latest(registry_of(metrics))  # a scrape never fails
    asyncio.run(watch.aclose())


_PRISTINE: dict[str, str] = {}
SQUEUE_TEXT = st.lists(
    st.one_of(
        st.text(alphabet=st.sampled_from("01x_+\x1f\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029[]-,"),
                max_size=40),
        st.builds("\x1f".join, st.lists(st.text(max_size=8), min_size=6, max_size=7)),
    ),
    max_size=8,
).map("\n".join)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(text=SQUEUE_TEXT)
def test_any_squeue_output_is_jobs_and_warnings_never_a_failed_read(text: str) -> None:
    from cwctl.jobs.slurm import _JOB_ID, parse_squeue

    jobs, warnings = parse_squeue(text, {})
    ids = [j.id for j in jobs]
    assert len(ids) == len(set(ids))  # an id on two rows is neither
    assert all(_JOB_ID.match(i) for i in ids)
    assert all("\n" not in w.split(": ", 1)[0] for w in warnings)


SQUEUE_JOB = st.fixed_dictionaries(
    {"job_id": JSON, "job_state": st.sampled_from(["RUNNING", ["RUNNING"], "PENDING", 3]),
     "user_name": JSON, "nodes": st.sampled_from(["n[1-3]", "x[0-999][0-999][0-99]", "n[", 5]),
     "name": JSON, "comment": JSON, "array_task_id": JSON, "array_job_id": JSON}
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(doc=st.one_of(JSON, st.fixed_dictionaries({"jobs": st.lists(JSON | SQUEUE_JOB)})))
def test_any_squeue_json_is_jobs_and_warnings_or_one_input_error(doc: Any) -> None:
    from cwctl.errors import InputError
    from cwctl.jobs.slurm import parse_squeue_json

    try:
        jobs, _ = parse_squeue_json(json.dumps(doc), {})
    except InputError as exc:
        assert str(exc).startswith("squeue --json: ")
    else:
        assert all(isinstance(j.id, str) and isinstance(j.name, str) for j in jobs)
