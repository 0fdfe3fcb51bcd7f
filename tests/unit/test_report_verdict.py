"""The report leads with its verdict and ends with what to run next (issue 35, items 5
and 11); in a pipe its lines of words stay whole and no line ends in padding (item 13)."""

from __future__ import annotations

from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.cli.hints import source_args
from cwctl.cli.options import SourceFlags
from cwctl.report import render
from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport, Suspect


def fleet(*, unreachable: int = 0, suspect: Suspect | None = None) -> FabricSnapshot:
    names = [f"gpu-{i:03d}" for i in range(1, 4)]
    hosts = [
        HostReport(name=n, status="unreachable", error="ssh: connection refused")
        if i < unreachable
        else HostReport(name=n, leaf="leaf1", offset_ns=0.0, uncertainty_ns=10.0)
        for i, n in enumerate(names)
    ]
    ok = [h.name for h in hosts if h.status == "ok"]
    paths = [
        PathReport(a, b, 100, 100, 1_000.0, 1_100.0, 1_300.0) for a in ok for b in ok if a != b
    ]
    return FabricSnapshot(
        source="ssh", reference=ok[0] if ok else None, duration_s=2.0, hosts=hosts,
        paths=paths, suspects=[suspect] if suspect else [],
    )  # fmt: skip


def test_all_hosts_unreachable_leads_with_problems_never_no_suspects() -> None:
    text = render(fleet(unreachable=3), "table", color=False)
    lines = text.splitlines()
    assert lines[0] == (
        "verdict: problems (exit 3): 3 hosts unreachable (gpu-001, gpu-002, gpu-003)"
    )
    assert "No suspects: no element explains" not in text
    assert "No suspect element, but not healthy: 3 hosts unreachable." in text


def test_a_healthy_report_says_so_first() -> None:
    text = render(fleet(), "table", color=False, source="--sim")
    assert (
        text.splitlines()[0] == "verdict: healthy (exit 0): no element explains any loss or delay"
    )
    assert "No suspects: no element explains any loss or delay." in text
    assert "Next:" not in text  # nothing to do


def test_next_names_the_reroute_and_the_tui_with_the_same_hosts() -> None:
    spine = Suspect("spine2", "switch", 0.9, "loss: 12 of 12 paths through spine2")
    text = render(fleet(suspect=spine), "table", color=False, source="--sim --fault x:y")
    tail = text.splitlines()[-3:]
    assert tail[0] == "Next:"
    assert tail[1].startswith("  cwctl reroute spine2 --sim --fault x:y   # plan")
    assert tail[2].startswith("  cwctl tui --sim --fault x:y   # watch it live")
    host = Suspect("gpu-002", "host", 0.9, "loss: its paths")
    text = render(fleet(suspect=host), "table", color=False, source="-i inv.toml")
    assert "  cwctl drain gpu-002 -i inv.toml   # plan its drain" in text
    text = render(fleet(unreachable=1), "table", color=False, source="-i inv.toml")
    assert "  cwctl inventory check -i inv.toml   # what scan needs of each host" in text
    assert "Next:" not in render(fleet(suspect=spine), "table", color=False)  # a replay


def test_source_args_repeat_the_flags_that_named_the_hosts() -> None:
    flags = SourceFlags(sim=True, hosts=16, fault=["switch:spine2:down"])
    assert source_args(flags) == "--sim --hosts 16 --fault switch:spine2:down"
    assert source_args(SourceFlags(local=3)) == "--local 3"
    assert source_args(SourceFlags()) == ""
    from pathlib import Path

    assert source_args(SourceFlags(inventory=Path("my inv.toml"))) == "-i 'my inv.toml'"
    assert source_args(SourceFlags(replay=Path("r.cwrec"))) is None


def test_in_a_pipe_lines_are_whole_and_never_padded() -> None:
    spine = Suspect("spine2", "switch", 0.9, "loss: " + "12 of 12 paths through spine2 " * 4)
    snapshot = fleet(unreachable=1, suspect=spine)
    piped = render(snapshot, "table", color=False, width=80, source="--sim", fold=False)
    assert all(line == line.rstrip() for line in piped.splitlines())
    verdict = piped.splitlines()[0]
    assert verdict.startswith("verdict: problems (exit 3): 1 suspects, first spine2; 1 hosts")
    folded = render(snapshot, "table", color=False, width=40, source="--sim")
    assert all(len(line) <= 40 for line in folded.splitlines()[:3])  # a terminal: folded


def test_scan_in_a_pipe_leads_with_the_verdict_and_ends_with_next() -> None:
    result = CliRunner().invoke(
        app, ["scan", "--sim", "--hosts", "16", "--fault", "switch:spine2:down",
              "--duration", "0.5"],
        env={"COLUMNS": None},  # a pipe's: no width said (a test before may have set one)
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("verdict: problems (exit 3): 1 suspects, first ")
    assert "Next:" in lines
    reroute = next(line for line in lines if line.startswith("  cwctl reroute "))
    assert "--sim --hosts 16 --fault switch:spine2:down   # plan" in reroute  # one line
