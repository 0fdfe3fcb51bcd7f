"""The watch's log (issue 35, item 6): words an on-call person can tail, with levels the
journal reads, the verdict and its reasons, the hosts not reached and why, the jobs
hurt; JSON lines still (--log-format json); a bounded run exits as --once does; SIGHUP
says what it did even with nothing to read again."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.scan.snapshot import FabricSnapshot, HostReport, Suspect
from cwctl.watch.log import human, level_of, make_log
from cwctl.watch.rounds import Watch, _round_line


def unreached_round() -> dict[str, Any]:
    hosts = [
        HostReport(name=f"gpu-00{i}", status="unreachable", error=f"gpu-00{i}: refused")
        for i in (1, 2, 3)
    ]
    snapshot = FabricSnapshot(source="ssh", reference=None, duration_s=2.0, hosts=hosts, paths=[])
    return _round_line(4, snapshot, 2.5)


def suspect_round() -> dict[str, Any]:
    jobs = [{"id": "4100", "user": "ann", "name": "train", "nodes": [], "paths_hit": 3}]
    spine = Suspect("spine2", "switch", 0.93, "loss: 12 of 12 paths", jobs=jobs)
    hosts = [HostReport(name="gpu-001"), HostReport(name="gpu-002")]
    snapshot = FabricSnapshot(source="sim", reference="gpu-001", duration_s=2.0, hosts=hosts,
                              paths=[], suspects=[spine])  # fmt: skip
    return _round_line(5, snapshot, 1.0)


def test_a_round_that_reached_nobody_names_each_host_and_its_error() -> None:
    entry = unreached_round()
    assert entry["verdict"] == "problems" and entry["reasons"] == ["3 hosts unreachable"]
    assert entry["unreached"][0] == {"host": "gpu-001", "error": "gpu-001: refused"}
    assert level_of(entry) == "warning"
    line = human(entry)
    assert line.startswith("round 4 (2.5 s): problems: 0/3 hosts reached · 3 hosts unreachable")
    assert "not reached: gpu-001: refused, gpu-002: refused, gpu-003: refused" in line


def test_a_round_names_the_jobs_each_suspect_hurts() -> None:
    entry = suspect_round()
    assert entry["suspects"] == [
        {"element": "spine2", "kind": "switch", "score": 0.93, "jobs": ["4100"]}
    ]
    assert "suspects spine2 (switch, score 0.93, jobs hurt 4100)" in human(entry)


def test_levels() -> None:
    assert level_of({"event": "round", "healthy": True}) == "info"
    assert level_of({"event": "error", "kind": "scan"}) == "error"
    assert level_of({"event": "reload", "ok": False}) == "error"
    assert level_of({"event": "decision", "verb": "failed"}) == "error"
    assert level_of({"event": "decision", "verb": "acted"}) == "notice"


def test_json_lines_carry_the_level_and_the_time() -> None:
    out = io.StringIO()
    make_log("json", out)(unreached_round())
    entry = json.loads(out.getvalue())
    assert entry["level"] == "warning" and entry["time"].endswith("+00:00")
    assert entry["event"] == "round" and entry["unreached"][2]["host"] == "gpu-003"


def test_human_lines_carry_the_level_and_auto_is_json_into_a_file(tmp_path: Path) -> None:
    out = io.StringIO()
    make_log("human", out)({"event": "error", "kind": "scan", "error": "no hosts"})
    assert out.getvalue().rstrip().endswith("ERROR error: scan: no hosts")
    with (tmp_path / "log").open("w") as f:
        make_log("auto", f)({"event": "stop", "rounds": 2, "signal": False})
    assert json.loads((tmp_path / "log").read_text())["event"] == "stop"


def test_under_the_journal_each_line_has_its_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (tmp_path / "journal").open("w") as f:
        st = os.fstat(f.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        log = make_log("auto", f)
        log(unreached_round())
        log({"event": "error", "kind": "scan", "error": "no hosts"})
        log({"event": "round", "healthy": True, "round": 1, "hosts": 1, "reached": 1})
    lines = (tmp_path / "journal").read_text().splitlines()
    assert lines[0].startswith("<4>WARNING round 4")  # human, the journal stamps the time
    assert lines[1] == "<3>ERROR error: scan: no hosts"
    assert lines[2].startswith("<6>INFO round 1")


async def test_sighup_with_no_policy_and_no_inventory_says_so() -> None:
    logged: list[dict[str, Any]] = []
    watch = Watch(ScanRequest(sim=SimOptions(hosts=4)), log=logged.append)
    try:
        await watch.reload()
    finally:
        await watch.aclose()
    assert logged == [
        {
            "event": "reload",
            "what": "nothing",
            "ok": True,
            "note": "nothing to read again: no --policy, no inventory file",
        }
    ]
    assert human(logged[0]) == "reload: nothing to read again: no --policy, no inventory file"


DEAD = """[ssh]
connect_timeout = 2
""" + "".join(f'[[host]]\nname = "dead{i}"\naddress = "127.0.0.1"\nport = {i}\n' for i in (1, 2, 3))


def test_rounds_with_no_host_reached_exit_3_as_once_does(tmp_path: Path) -> None:
    inventory = tmp_path / "dead.toml"
    inventory.write_text(DEAD)
    args = ["watch", "-i", str(inventory), "--interval", "0", "--log-format", "json"]
    for bounded in (["--rounds", "2"], ["--once"]):
        result = CliRunner().invoke(app, [*args, *bounded])
        assert result.exit_code == 3, result.output
        rounds = [json.loads(x) for x in result.stderr.splitlines() if '"round"' in x]
        assert rounds and all(r["reached"] == 0 and r["unreached"] for r in rounds)
