"""Flag conventions: global flags after the subcommand too, one duration grammar for
every flag that takes a time, and no complaint about a flag nobody typed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.cli.durations import Duration
from cwctl.units import DURATION_EXAMPLES, fmt_duration, parse_ns, parse_seconds

SIM4 = ["--sim", "--hosts", "4", "--duration", "300ms"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("5s", 5.0), ("2m", 120.0), ("5", 5.0), ("0.25", 0.25), ("100us", 1e-4),
     ("1.5 ms", 1.5e-3), ("800ns", 8e-7), ("2µs", 2e-6), ("1h", 3600.0), ("1e-3", 1e-3)],
)  # fmt: skip
def test_one_grammar_units_or_bare_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == pytest.approx(seconds)
    assert parse_ns(text) == pytest.approx(seconds * 1e9)


@pytest.mark.parametrize("text", ["5x", "-1s", "1 parsec", "nan", "inf s", "s", "", "1..2s"])
def test_one_error_text(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_ns(text)
    assert str(caught.value) == f"{text!r} is not a duration: give {DURATION_EXAMPLES}"


@pytest.mark.parametrize("seconds", [2.0, 0.5, 1e-4, 120.0, 0.1, 1.5, 3600.0, 1.25e-5])
def test_durations_are_written_as_they_are_read(seconds: float) -> None:
    assert parse_seconds(fmt_duration(seconds)) == pytest.approx(seconds)


def test_ranges_say_the_range_in_the_same_grammar() -> None:
    assert Duration(low=0.5, high=86_400).range_text() == "500ms to 24h"
    assert Duration(low=0.05, high=64).range_text() == "50ms to 64s"
    assert Duration(low=0.1).range_text() == "at least 100ms"


@pytest.mark.parametrize(
    ("args", "flag"),
    [(["scan", *SIM4[:3], "--duration", "5x"], "--duration"),
     (["scan", "--sim", "--heatmap", "h.png", "--heatmap-max", "5x"], "--heatmap-max"),
     (["sync", "--sim", "--interval", "5x"], "--interval"),
     (["sync", "--sim", "--sample-period", "5x"], "--sample-period"),
     (["sync", "--sim", "--max-offset", "5x"], "--max-offset"),
     (["tui", "--sim", "--interval", "5x"], "--interval"),
     (["inventory", "pods", "--deadline", "5x"], "--deadline")],
)  # fmt: skip
def test_every_duration_flag_says_the_same(args: list[str], flag: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert f"invalid value for '{flag}': '5x' is not a duration: give {DURATION_EXAMPLES}" in (
        result.stderr
    )


def test_units_reach_the_scan_in_seconds() -> None:
    result = CliRunner().invoke(app, ["scan", *SIM4, "--format", "json"])
    assert result.exit_code in (0, 3), result.output
    assert json.loads(result.stdout)["duration_s"] == pytest.approx(0.3)
    bare = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "4", "--duration", "0.3",
                                    "--format", "json"])  # fmt: skip
    assert json.loads(bare.stdout)["duration_s"] == pytest.approx(0.3)


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_flags_after_the_subcommand(where: str) -> None:
    scan = ["scan", *SIM4, "--format", "json"]
    args = ["-v", *scan] if where == "before" else [*scan, "-v"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 3), result.output
    assert "cwctl: done ok=4 of=4" in result.stderr  # -v: every progress event, a line each
    quiet = CliRunner().invoke(app, [*scan, "-q", "--no-color"])
    assert quiet.exit_code in (0, 3) and quiet.stderr == ""


def test_global_flags_after_a_nested_subcommand() -> None:
    result = CliRunner().invoke(app, ["inventory", "check", "-i", "nosuch.toml", "-v"])
    assert "no such option" not in result.stderr
    assert result.exit_code == 2


def test_few_hosts_need_no_hosts_per_leaf() -> None:
    result = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "2", "--duration", "0.3",
                                      "--format", "json"])  # fmt: skip
    assert result.exit_code in (0, 3), result.stderr
    report = json.loads(result.stdout)
    assert [h["name"] for h in report["hosts"]] == ["gpu-001", "gpu-002"]
    typed = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "2", "--hosts-per-leaf", "8"])
    assert typed.exit_code == 2
    assert typed.stderr == "cwctl: --hosts-per-leaf 8 is more than --hosts 2\n"
