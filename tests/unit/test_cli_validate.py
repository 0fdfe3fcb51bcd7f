"""Everything checked before any work: one line on stderr naming the culprit, exit 2, no
traceback, nothing written; usage errors in one line; real metavars; an example per
command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cwctl.cli import app


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    return CliRunner()


@pytest.fixture
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "scan.jsonl"
    result = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "8", "--duration", "0.2",
                                      "--save-records", str(path)])  # fmt: skip
    assert result.exit_code in (0, 3), result.output
    return path


CASES = [
    (["scan", "--sim", "--reference", "gpu-999"],
     "cwctl: --reference gpu-999: no such host (64 hosts: gpu-001, gpu-002, gpu-003, ...)"),
    (["tui", "--sim", "--hosts", "8", "--reference", "nosuch"],
     "cwctl: --reference nosuch: no such host (8 hosts: gpu-001, gpu-002, gpu-003, ...)"),
    (["scan", "--local", "3", "--reference", "local-09"],
     "cwctl: --reference local-09: no such host (3 hosts: local-01, local-02, local-03)"),
    (["scan", "--hosts", "8"], "cwctl: --hosts needs --sim (it shapes the simulated fabric)"),
    (["tui", "--load", "0.5", "--local", "3"],
     "cwctl: --load needs --sim (it shapes the simulated fabric)"),
    (["scan", "--sim", "--hosts", "4", "--hosts-per-leaf", "8"],
     "cwctl: --hosts-per-leaf 8 is more than --hosts 4"),
    (["scan", "--sim", "--prom-paths"],
     "cwctl: --prom-paths needs --format prom (the format is table)"),
    (["scan", "--sim", "--pretty", "--format", "prom"],
     "cwctl: --pretty needs --format json (the format is prom)"),
    (["scan", "--sim", "--heatmap-max", "2ms"], "cwctl: --heatmap-max needs --heatmap FILE.png"),
    (["scan", "--fromat", "json"],
     "cwctl: scan: no such option: --fromat (Possible options: --format, --prom-paths, "
     "--rate) (cwctl scan -h for help)"),
    (["scna"], "cwctl: no such command 'scna'. Did you mean 'scan'? (cwctl -h for help)"),
    (["drain"], "cwctl: drain: missing argument 'HOST'. (cwctl drain -h for help)"),
    (["scan", "--sim", "--heatmap-max", "3xs"],
     "cwctl: scan: invalid value for '--heatmap-max': '3xs' is not a duration: give 500ms, "
     "5s, 2m, 100us or a bare number of seconds (cwctl scan -h for help)"),
    (["scan", "--sim", "--duration", "5x"],
     "cwctl: scan: invalid value for '--duration': '5x' is not a duration: give 500ms, "
     "5s, 2m, 100us or a bare number of seconds (cwctl scan -h for help)"),
    (["sync", "--sim", "--interval", "5 parsecs"],
     "cwctl: sync: invalid value for '--interval': '5 parsecs' is not a duration: give "
     "500ms, 5s, 2m, 100us or a bare number of seconds (cwctl sync -h for help)"),
    (["scan", "--sim", "--heatmap", "h.jpg"],
     "cwctl: --heatmap h.jpg: cwctl draws PNG only; name the file .png"),
    (["scan", "--sim", "--offsets-plot", "o.JPEG"],
     "cwctl: --offsets-plot o.JPEG: cwctl draws PNG only; name the file .png"),
    (["scan", "--sim", "--duration", "50ms"],
     "cwctl: scan: invalid value for '--duration': '50ms' is out of range: give 100ms to "
     "1h (cwctl scan -h for help)"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "line"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(runner: CliRunner, args: list[str], line: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr == line + "\n"
    assert result.stdout == ""


def test_replay_rejects_flags_it_would_ignore(runner: CliRunner, records: Path,
                                              tmp_path: Path) -> None:  # fmt: skip
    dur = runner.invoke(app, ["scan", "--replay", str(records), "--duration", "2"])
    assert dur.exit_code == 2
    assert dur.stderr == (
        "cwctl: --duration does nothing with --replay: the saved records set the duration\n"
    )
    rate = runner.invoke(app, ["scan", "--replay", str(records), "--rate", "100"])
    assert rate.exit_code == 2
    assert rate.stderr == (
        "cwctl: --rate does nothing with --replay: the saved records were probed already\n"
    )
    again = tmp_path / "again.jsonl"
    out = tmp_path / "report.json"
    save = runner.invoke(app, ["scan", "--replay", str(records), "--save-records", str(again),
                               "--out", str(out)])  # fmt: skip
    assert save.exit_code == 2 and save.stderr.startswith("cwctl: --save-records with --replay")
    assert not again.exists() and not out.exists()  # nothing half done
    ref = runner.invoke(app, ["scan", "--replay", str(records), "--reference", "gpu-042"])
    assert ref.exit_code == 2
    assert ref.stderr.startswith("cwctl: --reference gpu-042: no such host (8 hosts:")
    good = runner.invoke(app, ["scan", "--replay", str(records), "--reference", "gpu-003"])
    assert good.exit_code in (0, 3), good.output


def test_a_bad_reference_in_an_inventory_is_found_before_connecting(
    runner: CliRunner, tmp_path: Path
) -> None:
    inv = tmp_path / "inventory.toml"
    inv.write_text('[[host]]\nname = "a"\naddress = "192.0.2.1"\n'
                   '[[host]]\nname = "b"\naddress = "192.0.2.2"\n')  # fmt: skip
    result = runner.invoke(app, ["scan", "-i", str(inv), "--reference", "c"])
    assert result.exit_code == 2  # TEST-NET addresses: a connection attempt would hang
    assert result.stderr == "cwctl: --reference c: no such host (2 hosts: a, b)\n"


def test_no_traceback_even_verbose_free(runner: CliRunner) -> None:
    for args, _ in CASES:
        result = runner.invoke(app, args)
        assert "Traceback" not in result.output and "Usage:" not in result.output


def _commands() -> list[tuple[str, object]]:
    root = typer.main.get_command(app)
    found = []

    def walk(cmd: object, path: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, f"{path} {name}")
        found.append((path, cmd))

    walk(root, "cwctl")
    return found


def test_help_shows_real_metavars_and_an_example_per_command(runner: CliRunner) -> None:
    commands = _commands()
    assert len(commands) >= 10
    for path, _ in commands:
        result = runner.invoke(app, [*path.split()[1:], "-h"])
        assert result.exit_code == 0, path
        text = result.stdout
        placeholder = re.search(r"<[a-z][^>]*>", text)  # <str>, <float>, <int range>, <path>
        assert placeholder is None, f"{path}: metavar {placeholder} in\n{text}"
        assert "Example: cwctl " in text or "Commands:" in text, f"{path} -h has no example"
