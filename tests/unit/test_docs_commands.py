"""Every command the README's tour and docs/commands show is run, so no example can
fail unnoticed.

docs/commands: each page's examples are run again as ``generate.py`` runs them (its own
setup: files, a private state directory) and each must end with the exit code the page
shows. README: each ``cwctl`` line of "A quick tour" is run after the rewrites README.md
lists under the tour (``REWRITES``, here in the same order): the lines that need real
hosts run against this machine's loopback agents or the simulator instead, and must
not be refused (exit 0, or 3: problems found).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ROOT / "docs" / "commands"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", COMMANDS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = generator()


def shown_exits(page: Path) -> list[tuple[str, int]]:
    """(command line, exit code) of each example a page shows, in order."""
    text = page.read_text()
    return [
        (m.group(1), int(m.group(2)))
        for m in re.finditer(r"```\n\$ (cwctl [^\n]*)\n.*?```\n\nexit (\d+)", text, re.S)
    ]


def run(
    args: list[str], env: dict[str, str], cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, int]:
    """One command in this process (no interpreter start per example), as the docs ran it."""
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, args, env={k: env[k] for k in ENV_KEYS if k in env})
    return result.output, result.exit_code


ENV_KEYS = ("CWCTL_STATE_DIR", "NO_COLOR", "COLUMNS")


def test_every_docs_commands_example_exits_as_its_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pages in order, in one directory and state, as generate.py makes them (the
    journal page lists what the reroute page applied)."""
    env = GENERATE.prepare(tmp_path)
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    for page, _, examples in GENERATE.PAGES:
        shown = shown_exits(COMMANDS / f"{page}.md")
        ran = []
        for note, args in examples:
            out, code = run(args, env, tmp_path, monkeypatch)
            if note != GENERATE.SETUP:
                ran.append((args, code, out))
        assert len(ran) == len(shown), f"{page}.md is stale: run docs/commands/generate.py"
        for (args, code, out), (line, expected) in zip(ran, shown, strict=True):
            assert line == "cwctl " + shlex.join(args).replace(str(tmp_path) + "/", ""), line
            assert code == expected, f"{line}: exit {code}, {page}.md shows {expected}\n{out}"
            assert "Traceback" not in out and "internal error" not in out, out


def tour_lines() -> list[str]:
    """The ``cwctl`` commands of the README's tour, comments dropped, ``;`` split."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## A quick tour", 1)[1].split("```", 2)[1]
    lines = []
    for raw in block.splitlines():
        code = raw.split("  #", 1)[0].strip()
        lines += [part.strip() for part in code.split(";") if part.strip().startswith("cwctl ")]
    return lines


# The README's rewrites (listed under its tour), as (pattern, replacement), in order.
LOCAL = "--local 3"
NO_CHRONYD = "--socket {tmp}/{host}.sock --chronyc-socket {tmp}/c/{host}.sock"
REWRITES = [
    (
        r"^cwctl inventory check -i inventory\.toml",
        "cwctl inventory check -i inventory.example.toml",
    ),
    (r"^cwctl (scan|sync check|sync) -i inventory\.toml", rf"cwctl \1 {LOCAL}"),
    (
        r"^cwctl reroute (\S+) -i inventory\.toml --prefix \S+ (--gateway \S+ ?)+",
        r"cwctl reroute \1 --sim --hosts 16 --hosts-per-leaf 4",
    ),
    (r"^cwctl (drain \S+ .*--apply)$", r"cwctl \1 --sim --hosts 32 --yes"),
    (r"^cwctl rollback --apply$", "cwctl rollback --apply --yes"),
    (r"--out /var/lib/node_exporter/", "--out "),
    (
        r"^(cwctl sync .*--apply)$",
        r"\1 --count 1 --duration 0.5 --reference local-01 " + NO_CHRONYD,
    ),
    (r"^(cwctl sync check .*)$", r"\1 " + NO_CHRONYD),
    (r"^(cwctl scan (?!--replay).*)$", r"\1 --duration 0.5"),
    (r"^cwctl watch -i inventory\.toml", "cwctl watch --sim --hosts 16 --hosts-per-leaf 4"),
    (r"docs/watch-policy\.example\.toml", "policy.toml"),
    (r"^(cwctl watch .*)$", r"\1 --rounds 1 --interval 0"),
]


def rewritten(line: str, tmp: Path) -> str:
    for pattern, replacement in REWRITES:
        line = re.sub(pattern, replacement.replace("{tmp}", str(tmp)), line)
    return line


def test_the_readme_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = GENERATE.prepare(tmp_path)
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    lines = tour_lines()
    assert len(lines) >= 15 and any(line.startswith("cwctl reroute") for line in lines)
    assert any(line.startswith("cwctl watch") for line in lines)  # the service, and
    assert any("--at hosts" in line for line in lines)  # steering at the hosts
    for line in lines:
        args = shlex.split(rewritten(line, tmp_path))[1:]
        if args[0] == "tui":  # a terminal UI: its flags and source are checked, then it
            args.append("--readonly")  # stops at the terminal check (no tty here)
        said, code = run(args, env, tmp_path, monkeypatch)
        assert "Traceback" not in said and "internal error" not in said, (line, said)
        if args[0] == "tui":
            assert code == 2 and "needs a terminal" in said, (line, said)
            continue
        assert code in (0, 3), f"{line}\n-> {shlex.join(args)}\n{said}"
