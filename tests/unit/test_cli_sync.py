"""``cwctl sync`` on the simulator (a dry run: no chronyd there) and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

SIM = ["sync", "--sim", "--hosts", "8", "--duration", "0.5", "--rate", "100", "--interval", "0.5"]


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    return CliRunner()


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["--max-uncertainty", "5 parsecs"], "'--max-uncertainty': '5 parsecs' is not a duration"),
        (["--max-uncertainty", "-2us"], "--max-uncertainty"),
        (["--max-offset", "0ms"], "--max-offset"),
        (["--interval", "0"], "'--interval': '0' is out of range: give 500ms to 24h"),
        (["--count", "0"], "--count 0"),
        (["--sample-period", "0.001"], "--sample-period"),
        (["--socket", "relative.sock"], "--socket 'relative.sock'"),
        (["--socket", "/run/{x}.sock"], "placeholder"),
        (["--socket", "/" + "d" * 110 + ".sock"], "at most 107"),
        (["--reference", "gpu-999"], "--reference gpu-999: no such host"),
        (["--apply"], "--apply needs real hosts"),
        (["--replay", "x"], "no such option"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_work(runner, args, culprit):
    result = runner.invoke(app, [*SIM, *args])
    assert result.exit_code == 2, result.output
    assert culprit in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1  # usage errors too (cli/usage.py)
    assert result.stdout == ""
    assert not (Path("state") / "journal.jsonl").exists()


def test_check_needs_real_hosts(runner):
    result = runner.invoke(app, ["sync", "check", "--local", "3", "--socket", "x.sock"])
    assert result.exit_code == 2 and "--socket 'x.sock'" in result.stderr
    result = runner.invoke(app, ["sync", "check", "--local", "3", "--reference", "gpu-1"])
    assert result.exit_code == 2 and "--reference" in result.stderr and "gpu-1" in result.stderr
    result = runner.invoke(app, ["sync", "check", "--sim"])
    assert result.exit_code == 2


def test_a_dry_run_says_what_it_would_feed_one_json_object_per_round(runner):
    result = runner.invoke(
        app, [*SIM, "--count", "2", "--format", "json", "--reference", "gpu-003"]
    )
    assert result.exit_code in (0, 3), result.output
    rounds = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["feed"]["round"] for r in rounds] == [1, 2]
    r = rounds[0]
    assert r["schema"] == "cwctl.scan/1" and r["reference"] == "gpu-003"  # additions only
    assert r["feed"]["mode"] == "dry-run" and r["feed"]["reference"] == "gpu-003"
    assert r["feed"]["max_offset_ns"] == 1e6 and r["feed"]["max_uncertainty_ns"] == 1e3
    truth = r["truth"]["offset_ns"]
    for h in r["hosts"]:
        f = h["feed"]
        if h["name"] == "gpu-003":
            assert f["action"] == "skip" and "reference" in f["reason"]
            continue
        if abs(h["offset_ns"]) > 1e6:
            assert f["action"] == "skip" and "--max-offset" in f["reason"]
            continue
        assert f["action"] == "feed" and f["socket"] == "/run/chrony/cwctl.sock"
        # chrony's offset is true minus host time: the negation of the host's offset
        # against gpu-003, which the simulator's truth gives independently
        true_host_minus_ref = truth[h["name"]] - truth["gpu-003"]
        assert f["offset_s"] == pytest.approx(-true_host_minus_ref * 1e-9, abs=1e-6)
        assert f["t_ref_ns"] == r["t_ref_ns"]
        assert "samples" not in f  # nothing was sent
    assert sum(h["feed"]["action"] == "feed" for h in r["hosts"]) == r["feed"]["fed"] > 0
    assert not (Path("state") / "journal.jsonl").exists()  # a dry run journals nothing


def test_the_table_shows_every_host_and_why_not(runner):
    result = runner.invoke(app, [*SIM, "--count", "1", "--max-uncertainty", "1ns"])
    assert result.exit_code == 3  # hosts not fed: problems
    lines = result.stdout.splitlines()
    assert "dry run: nothing fed" in lines[0]
    body = [ln for ln in lines if ln.startswith("gpu-")]
    assert len(body) == 8
    assert sum("not under --max-uncertainty" in ln for ln in body) == 7


def test_step_without_yes_is_not_confirmed_when_nobody_can_answer(runner):
    result = runner.invoke(
        app, [*SIM, "--count", "1", "--step", "--max-offset", "100us", "--format", "json"]
    )
    r = json.loads(result.stdout)
    big = [
        h
        for h in r["hosts"]
        if h["feed"]["action"] == "skip" and "not confirmed" in (h["feed"]["reason"] or "")
    ]
    assert big  # some simulated offsets are beyond 100 us: asked, nobody said yes
    yes = runner.invoke(
        app, [*SIM, "--count", "1", "--step", "--yes", "--max-offset", "100us", "--format", "json"]
    )
    r = json.loads(yes.stdout)
    stepped = [h for h in r["hosts"] if h["feed"]["step"]]
    assert stepped and all(h["feed"]["action"] == "feed" for h in stepped)


def no_chronyd(tmp_path: Path) -> list[str]:
    """Sockets where no chronyd answers (private paths: another chronyd on this machine
    must not answer for these hosts)."""
    return ["--socket", f"{tmp_path}/{{host}}.sock",
            "--chronyc-socket", f"{tmp_path}/cmd/{{host}}.sock"]  # fmt: skip


def test_a_dry_run_promises_no_feed_chronyd_cannot_take(runner, tmp_path):
    result = runner.invoke(app, ["sync", "--local", "3", "--reference", "local-01", "--count",
                                 "1", "--duration", "0.5", *no_chronyd(tmp_path)])  # fmt: skip
    assert result.exit_code == 3, result.output  # like sync check: problems found
    for host in ("local-02", "local-03"):
        line = next(line for line in result.stdout.splitlines() if line.startswith(host))
        assert "chronyd not ready" in line and "would feed" not in line, line
    check = runner.invoke(app, ["sync", "check", "--local", "3", "--reference", "local-01",
                                *no_chronyd(tmp_path)])  # fmt: skip
    assert check.exit_code == 3
    last = check.stdout.rstrip().splitlines()[-1]
    assert last.strip().startswith(f"refclock SOCK {tmp_path}/local-03.sock refid CWC poll")
    assert "start chronyd on local-02, local-03" in check.stdout
