"""The committed completion scripts are current, and the bash one really completes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cwctl.cli.completions_gen import FILES, main, write_completions

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "completions"


def test_committed_completions_are_current(tmp_path: Path) -> None:
    written = write_completions(tmp_path)
    assert sorted(p.name for p in written) == sorted(FILES.values())
    for path in written:
        committed = COMMITTED / path.name
        assert committed.exists(), f"{committed} is missing: run `make completions`"
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale: run `make completions` and commit the result"
        )


def test_scripts_call_back_into_cwctl() -> None:
    for shell, name in FILES.items():
        text = (COMMITTED / name).read_text()
        assert f"_CWCTL_COMPLETE=complete_{shell}" in text
    assert (COMMITTED / "cwctl.zsh").read_text().startswith("#compdef cwctl\n")


def test_main_needs_a_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def _cwctl_env() -> dict[str, str]:
    """PATH with this interpreter's scripts first, so the scripts find this `cwctl`."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "cwctl").exists():
        pytest.skip("the cwctl console script is not installed next to this interpreter")
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("cwctl sc", {"scan"}),
        ("cwctl dr", {"drain"}),
        ("cwctl inventory ch", {"check"}),
        ("cwctl scan --form", {"--format"}),
    ],
)
def test_bash_script_completes_through_the_app(words: str, expected: set[str]) -> None:
    script = (COMMITTED / "cwctl.bash").read_text()
    n_words = len(words.split())
    driver = (
        f"{script}\n"
        f"COMP_WORDS=({words}); COMP_CWORD={n_words - 1}\n"
        "_cwctl_completion cwctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver],
        env=_cwctl_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) == expected, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_script_completes_choices() -> None:
    proc = subprocess.run(
        ["cwctl"],
        env={
            **_cwctl_env(),
            "COMP_WORDS": "cwctl scan --format ",
            "COMP_CWORD": "3",
            "_CWCTL_COMPLETE": "complete_bash",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert set(proc.stdout.split()) == {"table", "json", "prom"}, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh")
def test_zsh_script_parses() -> None:
    proc = subprocess.run(["zsh", "-n", str(COMMITTED / "cwctl.zsh")], capture_output=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish")
def test_fish_script_parses() -> None:
    proc = subprocess.run(["fish", "-n", str(COMMITTED / "cwctl.fish")], capture_output=True)
    assert proc.returncode == 0, proc.stderr


def test_every_command_has_a_docs_page_with_real_output() -> None:
    """docs/commands/ (made by docs/commands/generate.py): one page per top-level command,
    each with at least one command line and its exit code."""
    import typer

    from cwctl.cli import app

    pages = Path(__file__).resolve().parents[2] / "docs" / "commands"
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in commands:
        page = pages / f"{name}.md"
        assert page.exists(), f"no docs/commands/{name}.md"
        text = page.read_text()
        assert f"$ cwctl {name}" in text and "\nexit " in text, name


def test_the_docs_pages_show_the_command_lines_the_generator_runs() -> None:
    """Each page's ``$ cwctl ...`` lines are exactly its examples in generate.py's PAGES,
    in order (a generator edited without regenerating the pages fails here)."""
    import importlib.util
    import shlex

    pages = Path(__file__).resolve().parents[2] / "docs" / "commands"
    spec = importlib.util.spec_from_file_location("generate", pages / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    for name, _, examples in generate.PAGES:
        shown = [
            line.removeprefix("$ cwctl ")
            for line in (pages / f"{name}.md").read_text().splitlines()
            if line.startswith("$ cwctl ")
        ]
        wanted = [shlex.join(args) for note, args in examples if note != generate.SETUP]
        assert shown == wanted, name


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("cwctl scan --sim --fault ", {"switch:", "link:", "nic:", "host:"}),
        ("cwctl scan --sim --hosts 16 --fault link:leaf2",
         {"link:leaf2-spine1", "link:leaf2-spine2", "link:leaf2-spine3", "link:leaf2-spine4"}),
        ("cwctl scan --sim --spines 2 --fault switch:sp", {"switch:spine1", "switch:spine2"}),
        ("cwctl scan --sim --fault switch:spine2:lo", {"switch:spine2:lossy=0.02"}),
        ("cwctl reroute --sim --hosts 16 sp", {"spine1", "spine2", "spine3", "spine4"}),
        ("cwctl drain gpu-001 --sim --suspect gpu-001/", {"gpu-001/mlx5_0", "gpu-001/mlx5_1"}),
        ("cwctl reroute -i inventory.example.toml leaf1-", {"leaf1-spine1", "leaf1-spine2"}),
    ],
)  # fmt: skip
def test_fault_specs_and_suspect_names_complete(words: str, expected: set[str]) -> None:
    n = len(words.split()) + (1 if words.endswith(" ") else 0)
    proc = subprocess.run(
        ["cwctl"],
        env={**_cwctl_env(), "COMP_WORDS": words, "COMP_CWORD": str(n - 1),
             "_CWCTL_COMPLETE": "complete_bash"},
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert set(proc.stdout.split()) == expected, proc.stdout + proc.stderr
