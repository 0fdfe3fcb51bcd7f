"""Wide bad input: generated TOML documents and key sets never crash the loader.

The loader may accept a document or reject it, but it raises nothing other than
``InventoryError`` (an ``InputError``), and every problem names the file and a line,
and (unless it is a TOML syntax error) the key.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.inventory import Inventory, InventoryError, load_inventory, parse_inventory
from cwctl.inventory.load import (
    _HOST_KEYS,
    _PROBE_KEYS,
    _SCHEDULER_KEYS,
    _SSH_KEYS,
    _SWITCH_KEYS,
)

LABEL = "fuzz.toml"
PROBLEM = re.compile(
    rf"""^{re.escape(LABEL)}:(\d+): (key (?:'.*'|".*"): .+|TOML syntax error: .+)$"""
)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- a small TOML writer for generated documents ---------------------------------------


def _string(s: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    body = "".join(
        f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ord(ch) == 0x7F or ch in '"\\' else ch for ch in s
    )
    return f'"{body}"'


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _string(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"


def _is_tables(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def to_toml(doc: dict[str, Any]) -> str:
    """Scalars first, then ``[table]`` sections, then ``[[array]]`` entries."""
    out = [
        f"{_key(k)} = {_value(v)}"
        for k, v in doc.items()
        if not (isinstance(v, dict) or _is_tables(v))
    ]
    for k, v in doc.items():
        if isinstance(v, dict):
            out.append(f"\n[{_key(k)}]")
            out += [f"{_key(sk)} = {_value(sv)}" for sk, sv in v.items()]
    for k, v in doc.items():
        if _is_tables(v):
            for entry in v:
                out.append(f"\n[[{_key(k)}]]")
                out += [f"{_key(sk)} = {_value(sv)}" for sk, sv in entry.items()]
    return "\n".join(out) + "\n"


# --- strategies ---------------------------------------------------------------------------

NAMES = ["gpu-001", "gpu-002", "leaf1", "leaf2", "spine1", "spine2", "10.0.0.1", "", " ", "a/b"]
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
scalar = st.one_of(
    st.sampled_from(NAMES),
    text,
    st.integers(-3, 70000),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(["slurm", "k8s", "none", "leaf", "spine", "python3"]),
)
value = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=2),
    max_leaves=6,
)


def _entry(keys: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    key = st.sampled_from(keys) | text
    return st.dictionaries(key, value, max_size=len(keys) + 1)


def _host() -> st.SearchStrategy[dict[str, Any]]:
    required = st.fixed_dictionaries(
        {"name": st.sampled_from(NAMES[:6]), "address": st.sampled_from(NAMES[:7])}
    )
    return st.tuples(required, _entry(_HOST_KEYS)).map(lambda p: {**p[0], **p[1]})


documents = st.fixed_dictionaries(
    {},
    optional={
        "ssh": _entry(_SSH_KEYS),
        "probe": _entry(_PROBE_KEYS),
        "scheduler": _entry(_SCHEDULER_KEYS),
        "switch": st.lists(_entry(_SWITCH_KEYS), max_size=4),
        "host": st.lists(_host() | _entry(_HOST_KEYS), max_size=5),
    },
).flatmap(lambda d: st.dictionaries(text, value, max_size=2).map(lambda extra: {**extra, **d}))

TOKENS = [*"[]{}=\".,\n #'\\", "[[host]]", "[ssh]", "name", "address", "port", "1", "a"]
toml_ish = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)


def _check(text_: str) -> Inventory | None:
    try:
        inv = parse_inventory(text_, label=LABEL)
    except InventoryError as exc:
        n_lines = max(1, len(text_.splitlines()))
        assert exc.problems, "an InventoryError with no problem"
        for problem in exc.problems:
            m = PROBLEM.match(problem)
            assert m, problem
            assert 1 <= int(m.group(1)) <= n_lines, (problem, n_lines)
            assert "\n" not in problem
        return None
    assert inv.hosts
    assert len({h.name for h in inv.hosts}) == len(inv.hosts)
    assert all(h.name and h.address for h in inv.hosts)
    return inv


@SETTINGS
@given(documents)
def test_generated_documents_are_accepted_or_rejected_with_keys(doc: dict[str, Any]) -> None:
    source = to_toml(doc)
    inv = _check(source)
    if inv is None:
        return
    # Whatever was accepted holds what the document said.
    assert [h.name for h in inv.hosts] == [h["name"] for h in doc["host"]]


@SETTINGS
@given(toml_ish)
def test_toml_like_text_never_crashes(source: str) -> None:
    _check(source)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inv.toml"
        path.write_bytes(data)
        try:
            load_inventory(path)
        except InventoryError as exc:
            assert all(p.startswith(f"{path}:") for p in exc.problems), exc.problems


@settings(max_examples=15, deadline=None)
@given(documents)
def test_inventory_check_never_tracebacks(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inv.toml"
        path.write_text(to_toml(doc))
        result = CliRunner().invoke(app, ["inventory", "check", "-i", str(path)])
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.stdout == ""
        assert all(line.startswith(f"cwctl: {path}:") for line in result.stderr.splitlines())
