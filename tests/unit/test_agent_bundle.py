"""The agent bundle: which modules go, that each can run on a host's old Python with the
standard library alone, and that the far side rebuilds them under their real names from
stdin while leaving the rest of stdin to the agent."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from cwctl.probe import assembler, bootstrap
from cwctl.probe.bootstrap import (
    AGENT_MAIN,
    AGENT_MODULES,
    BOOTSTRAP_CODE,
    agent_payload,
    agent_sources,
    bootstrap_argv,
    bootstrap_command,
)

ASSEMBLER = Path(assembler.__file__).read_bytes()
SHIPPED = {"cwctl.probe.assembler": ASSEMBLER, **agent_sources()}


def imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports: say the real name"
            assert node.module is not None
            names.append(node.module)
    return names


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_module_is_python_3_8_and_stdlib_only(name: str) -> None:
    tree = ast.parse(SHIPPED[name], feature_version=(3, 8))
    stdlib = set(sys.stdlib_module_names)
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Match)
        if isinstance(node, ast.keyword):
            assert node.arg != "strict", "zip(strict=) is Python 3.10+"
        elif isinstance(node, ast.Attribute):
            assert node.attr not in {"removeprefix", "removesuffix"}, "3.9+"
        elif isinstance(node, ast.FunctionDef):  # evaluated at run time on 3.8 (no PEP 604)
            assert node.returns is None, node.name
            assert all(a.annotation is None for a in node.args.args), node.name
        assert not isinstance(node, ast.AnnAssign)
    for module in imported_modules(tree):
        root = module.split(".")[0]
        if root == "cwctl":
            assert module in AGENT_MODULES, f"{name} imports {module}, not in the bundle"
        else:
            assert root in stdlib | {"__future__", "pynvml"}, f"{name} imports {module}"
            assert root != "__future__", "no __future__ imports in the agent"


def test_bundle_order_runs_each_module_after_what_it_imports() -> None:
    for position, name in enumerate(AGENT_MODULES):
        earlier = set(AGENT_MODULES[:position])
        for module in imported_modules(ast.parse(agent_sources()[name])):
            if module.startswith("cwctl."):
                assert module in earlier, f"{name} needs {module} earlier in AGENT_MODULES"
        parent = name.rpartition(".")[0]
        if parent in AGENT_MODULES:
            assert parent in earlier, f"package {parent} must come before {name}"
    assert AGENT_MODULES[-1] == AGENT_MAIN


def test_every_probe_module_that_runs_remotely_is_in_the_bundle() -> None:
    here = Path(bootstrap.__file__).parent
    # not bundle modules: local, or shipped on their own (assembler, before the bundle;
    # srunstub, the srun step's per-node stub: cwctl/transport/slurm.py; hosttrace, the
    # port tracer steering runs as one command: cwctl/actions/steer.trace_argv)
    local_only = {
        "cwctl.probe",
        "cwctl.probe.bootstrap",
        "cwctl.probe.assembler",
        "cwctl.probe.srunstub",
        "cwctl.probe.hosttrace",
    }
    modules = set()
    for path in here.rglob("*.py"):
        parts = path.relative_to(here.parent.parent).with_suffix("").parts
        modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert modules - local_only == set(AGENT_MODULES)


def test_bootstrap_is_one_line() -> None:
    assert "\n" not in BOOTSTRAP_CODE
    assert "\n" not in bootstrap_command("/opt/py/bin/python3")
    assert bootstrap_command("python3").startswith("python3 -c ")


def frame(name: str, source: str) -> bytes:
    data = zlib.compress(source.encode())
    return f"{name} {len(data)}\n".encode() + data


def run_bootstrap(stdin: bytes, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter, isolated (-I -S) in ``cwd``: cwctl is not importable there."""
    argv = [sys.executable, "-I", "-S", *bootstrap_argv("python3")[1:]]
    env = {"PATH": "/usr/bin:/bin"}
    return subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd, env=env, timeout=60)


def test_fresh_interpreter_cannot_import_cwctl(tmp_path: Path) -> None:
    """The premise of the tests below: only the bundle can bring cwctl there."""
    argv = [sys.executable, "-I", "-S", "-c", "import cwctl"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode != 0 and "No module named 'cwctl'" in proc.stderr


def test_assembler_creates_modules_under_real_names_and_leaves_stdin(tmp_path: Path) -> None:
    main = """
import sys
import pkg.sub.low
from pkg.sub import low
def main():
    print(__name__, low.VALUE, low.__name__, sys.modules["pkg.sub"].low is low,
          pkg.sub.low is low, "pkg.sub" in sys.modules, hasattr(sys.modules["pkg"], "sub"))
    print(sys.stdin.buffer.read().decode())
"""
    stream = frame("pkg.sub.low", "VALUE = 42\n") + frame("pkg.sub.top", main)
    stdin = f"{len(ASSEMBLER)}\n".encode() + ASSEMBLER + stream
    proc = run_bootstrap(stdin + b"run pkg.sub.top\nthe rest of stdin\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    first, rest = proc.stdout.decode().splitlines()[:2]
    assert first == "pkg.sub.top 42 pkg.sub.low True True True True"
    assert rest == "the rest of stdin"


def test_assembler_refuses_a_truncated_bundle(tmp_path: Path) -> None:
    whole = frame("pkg.mod", "def main():\n    print('ran')\n")
    stdin = f"{len(ASSEMBLER)}\n".encode() + ASSEMBLER + whole[:-3]
    proc = run_bootstrap(stdin, tmp_path)
    assert proc.returncode != 0 and "ran" not in proc.stdout.decode()
    assert "bundle cut short" in proc.stderr.decode()


def test_bundle_runs_the_agent_in_a_fresh_interpreter(tmp_path: Path) -> None:
    params = {"host": "a", "bind": "127.0.0.2", "ports": 1, "deadline_s": 20}
    proc = run_bootstrap(agent_payload(params) + b'{"type": "stop"}\n', tmp_path)
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["type"] for r in recs] == ["hello", "gpu", "summary"]
    assert recs[0]["host"] == "a" and recs[0]["address"] == "127.0.0.2"
    assert recs[1]["status"] == "no-gpu" or recs[1]["gpus"]
    assert recs[-1]["reason"] == "stopped"
    assert list(tmp_path.iterdir()) == []  # nothing written on the far side
