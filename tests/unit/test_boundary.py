"""The core knows nothing of its shells: importing it never loads textual, typer or rich.

The core is every module of the package except the shells (``cwctl.cli``, ``cwctl.tui``,
``cwctl.report``, ``cwctl.cli.completions_gen``, ``cwctl.__main__``) and the watch (a front end
like the CLI and the TUI, which serves report's series live). It is imported in a fresh
interpreter, so nothing this test process has already imported can hide a violation. The
watch is held to the libraries' half of the rule on its own: it never loads textual,
typer or rich either.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHELLS = ("cwctl.cli", "cwctl.tui", "cwctl.report", "cwctl.cli.completions_gen", "cwctl.__main__")
WATCH = "cwctl.watch"
FORBIDDEN = ("textual", "typer", "rich")

_IMPORT_THE_CORE = """
import importlib, json, pkgutil, sys
import cwctl

shells = tuple(sys.argv[1].split(","))
imported, failed = [], {}

def is_shell(name):
    return any(name == s or name.startswith(s + ".") for s in shells)

def walk(path, prefix):
    # pkgutil.walk_packages would import the shell packages to look inside them.
    for info in pkgutil.iter_modules(path, prefix):
        if is_shell(info.name):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception as exc:
            failed[info.name] = f"{type(exc).__name__}: {exc}"
            continue
        imported.append(info.name)
        if info.ispkg:
            walk(module.__path__, info.name + ".")

walk(cwctl.__path__, "cwctl.")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[2].split(","))
shell_modules = sorted(m for m in sys.modules if is_shell(m))
print(json.dumps({"imported": imported, "failed": failed, "loaded": loaded,
                  "shells": shell_modules}))
"""


@pytest.fixture(scope="module")
def core_import() -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_THE_CORE, ",".join((*SHELLS, WATCH)), ",".join(FORBIDDEN)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_core_imports(core_import: dict) -> None:
    assert not core_import["failed"], core_import["failed"]
    for name in ("cwctl.inventory", "cwctl.records", "cwctl.fabric.topology", "cwctl.session"):
        assert name in core_import["imported"]


def test_the_core_never_loads_textual_typer_or_rich(core_import: dict) -> None:
    assert core_import["loaded"] == [], (
        f"importing the core loaded {core_import['loaded']}: keep shell libraries in "
        "cwctl.cli / cwctl.tui / cwctl.report (run lint-imports to see the chain)"
    )


def test_the_core_never_loads_the_shells(core_import: dict) -> None:
    assert core_import["shells"] == []


def test_the_watch_never_loads_the_shells_libraries() -> None:
    """Every module of cwctl.watch, imported in a fresh interpreter: none of textual, typer
    or rich comes with them (report's renderers it serves are free of them too)."""
    code = (
        "import importlib, pkgutil, sys, cwctl.watch as w\n"
        "for i in pkgutil.iter_modules(w.__path__, 'cwctl.watch.'):\n"
        "    importlib.import_module(i.name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout


def test_the_check_itself_can_fail() -> None:
    """The same probe sees typer once a shell is imported: the check is not vacuous."""
    code = "import sys, cwctl.cli; print('typer' in sys.modules)"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == "True", proc.stderr


def test_import_linter_contract_is_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    if not lint_imports.exists():
        pytest.skip("import-linter is not installed in this environment")
    proc = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "broken" in proc.stdout and "0 broken" in proc.stdout
