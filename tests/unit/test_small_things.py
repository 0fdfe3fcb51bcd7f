"""The small things of issue 35, item 13: cwctl's own words for typer's checks, duration
defaults in their grammar, the version with its commit, one label prefix, and the
packaging (LICENSE, CHANGELOG, no dead dependency, a systemd unit whose documentation
exists)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.cli.manpage import manpage
from cwctl.inventory import Host, Inventory
from cwctl.transport.k8s import agent_pods

ROOT = Path(__file__).resolve().parents[2]


def test_usage_errors_are_cwctls_words_not_pydantics() -> None:
    for args, said in (
        (["scan", "--sim", "--hosts", "1"], "invalid value for '--hosts': must be at least 2"),
        (["scan", "--sim", "--hosts", "x"], "invalid value for '--hosts': must be a whole number"),
        (["scan", "--sim", "--load", "2"], "invalid value for '--load': must be at most 1"),
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2
        assert said in result.stderr and "Input should" not in result.stderr, result.stderr


def test_help_shows_defaults_one_way() -> None:
    def words(args: list[str]) -> str:
        return " ".join(CliRunner().invoke(app, args).stdout.split())

    watch, sync = words(["watch", "--help"]), words(["sync", "--help"])
    assert "From one round's start to the next. [default: 30s]" in watch
    assert "[default: 1us]" in sync and "[default: (" not in sync
    assert "[default: 10.0]" not in sync and "[default: 10s]" in sync  # --interval


def test_version_names_the_commit() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert result.stdout.startswith(f"cwctl 0.1.0 (commit {head}")


def test_pods_and_drains_share_one_label_prefix() -> None:
    inv = Inventory(hosts=(Host("gpu-001", "10.0.0.1"),))
    (pod,) = agent_pods(inv, scan_id="s1")["items"]
    ours = [k for k in {**pod["metadata"]["labels"], **pod["metadata"]["annotations"]}
            if "cwctl" in k and not k.startswith("app.kubernetes.io/")]  # fmt: skip
    assert ours and all(k.startswith("cwctl.io/") for k in ours), ours


def test_packaging_says_what_it_is() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert "## Unreleased" in (ROOT / "CHANGELOG.md").read_text()
    assert not [d for d in project["dependencies"] if d.startswith("tomli")]  # 3.11+: tomllib


def test_the_systemd_units_documentation_is_one_cwctl_makes() -> None:
    unit = (ROOT / "docs" / "systemd" / "cwctl-watch.service").read_text()
    docs = re.findall(r"^Documentation=(.+)$", unit, re.M)
    assert docs == ["man:cwctl(1)"]
    assert manpage().startswith(".TH CWCTL 1") or ".TH CWCTL 1" in manpage()[:500]
