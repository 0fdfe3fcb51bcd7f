"""`cwctl sync --apply` reports a fed round a round later (its samples counted): it says
so when it feeds, so the operator is not left an interval without a word (issue 35,
item 8)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cwctl.cli import app


def test_an_applied_round_says_it_is_feeding_before_its_table(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    args = ["sync", "--local", "3", "--apply", "--count", "1", "--duration", "0.5",
            "--interval", "0.5", "--reference", "local-01",
            "--socket", f"{tmp_path}/{{host}}.sock",
            "--chronyc-socket", f"{tmp_path}/c/{{host}}.sock"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 3), result.output
    said = [line for line in result.stderr.splitlines() if "sync round 1: feeding" in line]
    assert said == [
        "cwctl: sync round 1: feeding 0 of 2 hosts' chronyd; its table follows when their "
        "samples are counted, an interval from now"
    ], result.stderr
    assert "cwctl sync round 1 (apply)" in result.stdout  # the table, once counted
