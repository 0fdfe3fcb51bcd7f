"""A job's own pace from its step logs: the hook a training script calls, the reader that
runs on a host, and the verdict beside an action (back at its healthy pace, and when)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cwctl.jobs.stephook import StepLog
from cwctl.jobs.steps import JobCheck, pace, parse, read_argv


def test_the_hook_writes_a_line_a_step_to_its_ranks_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CWCTL_STEP_LOG", str(tmp_path / "logs" / "steps-{rank}.jsonl"))
    monkeypatch.setenv("SLURM_PROCID", "3")
    log = StepLog()
    for _ in range(3):
        log.step(loss=0.5)
    log.close()
    lines = [json.loads(x) for x in (tmp_path / "logs" / "steps-3.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1, 2]
    assert all(x["loss"] == 0.5 and x["dt"] >= 0 for x in lines)
    assert lines[0]["t"] <= lines[1]["t"] <= lines[2]["t"]


def test_without_a_log_the_hook_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CWCTL_STEP_LOG", raising=False)
    log = StepLog()
    log.step()
    assert log.path == "" and log._file is None


def test_the_reader_returns_each_matching_files_last_lines(tmp_path: Path) -> None:
    for rank in (0, 1):
        (tmp_path / f"r{rank}.jsonl").write_text(
            "".join(json.dumps({"t": i, "dt": 0.1}) + "\n" for i in range(50)) + '{"t": 5'
        )
    argv = read_argv(sys.executable, str(tmp_path / "r*.jsonl"), 10)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    steps = parse(out)
    assert sorted(Path(p).name for p in steps) == ["r0.jsonl", "r1.jsonl"]
    assert [t for t, _ in steps[str(tmp_path / "r0.jsonl")]] == list(range(41, 50))


def _steps(healthy: float, stall_from: float, stall_s: float, after: float) -> list:
    out, t = [], 0.0
    while t < stall_from:
        t += healthy
        out.append((t, healthy))
    t += stall_s
    out.append((t, stall_s))
    for _ in range(20):
        t += after
        out.append((t, after))
    return out


def test_back_is_five_steps_in_a_row_within_ten_percent_after_the_action() -> None:
    steps = _steps(0.05, 10.0, 12.0, 0.052)
    got = pace(steps, since=15.0)
    assert got.healthy_s == pytest.approx(0.05)
    assert got.back_s == pytest.approx(22.0 + 0.052 - 15.0, abs=0.01)
    slow = pace(_steps(0.05, 10.0, 12.0, 0.08), since=15.0)
    assert slow.back_s is None and slow.recent_s == pytest.approx(0.08)


def test_the_slowest_log_decides_and_says_so_in_one_line() -> None:
    good = pace(_steps(0.05, 10.0, 2.0, 0.05), since=11.0)
    bad = pace(_steps(0.05, 10.0, 2.0, 0.2), since=11.0)
    both = JobCheck.of("/x/*.jsonl", {"a": good, "b": bad}, waited_s=30.0)
    assert (
        not both.back and both.message() == "job: not back after 30 s (healthy 50 ms, now 200 ms)"
    )
    one = JobCheck.of("/x/*.jsonl", {"a": good}, waited_s=3.0)
    assert one.back and "back within 10% of its pace (healthy 50 ms)" in one.message()
    assert "\n" not in one.message() and JobCheck.of("/y", {}, 0.0).message().startswith(
        "job: no step log matches /y"
    )


async def test_an_ask_with_a_job_log_plans_the_check_with_it() -> None:
    from cwctl.actions.session import ActionSession, Ask
    from cwctl.scan.request import ScanRequest, SimOptions

    request = ScanRequest(sim=SimOptions(hosts=16, hosts_per_leaf=8, spines=2))
    async with ActionSession(request, lock=False) as session:
        plan = await session.plan(Ask("reroute", "spine2", job_log="/var/tmp/steps-*.jsonl"))
        bare = await session.plan(Ask("reroute", "spine2"))
    assert plan.context["job_log"] == {"pattern": "/var/tmp/steps-*.jsonl", "wait_s": 60.0}
    assert "job_log" not in bare.context
