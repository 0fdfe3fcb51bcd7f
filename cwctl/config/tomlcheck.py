"""Checked reading of parsed TOML: typed getters that collect problems, one line each.

``tomllib`` says what a document holds but not where; ``key_lines`` finds the line of
each key in the raw text, so a problem can read ``FILE:LINE: key 'host[3].leaf': ...``.
``TomlChecker`` reads values with their expected type and range and records every
problem instead of stopping at the first. Key paths index arrays from 0 in file order.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_BARE = r"[A-Za-z0-9_-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_PART = rf"(?:{_BARE}|{_QUOTED})"
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_ARRAY_HEADER = re.compile(rf"^\s*\[\[\s*({_DOTTED})\s*\]\]")
_TABLE_HEADER = re.compile(rf"^\s*\[\s*({_DOTTED})\s*\]")
_KEY_LINE = re.compile(rf"^\s*({_DOTTED})\s*=")
_SPLIT_PART = re.compile(rf"\s*({_PART})\s*(?:\.|$)")


def _parts(dotted: str) -> list[str]:
    out = []
    for m in _SPLIT_PART.finditer(dotted.strip()):
        part = m.group(1)
        if part[:1] in "\"'":
            part = part[1:-1]
        out.append(part)
    return out


def key_lines(text: str) -> dict[str, int]:
    """Map each key path (``ssh.port``, ``host[2].leaf``) to the line that defines it.

    A best-effort scan for error messages, not a parser: it follows table headers,
    counts ``[[array]]`` entries and skips the inside of multi-line strings.
    """
    lines: dict[str, int] = {}
    counts: dict[str, int] = {}
    table = ""
    in_multiline: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if in_multiline is not None:
            if raw.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        if m := _ARRAY_HEADER.match(raw):
            parts = _parts(m.group(1))
            parent = _resolve(parts[:-1], counts)
            base = f"{parent}.{parts[-1]}" if parent else parts[-1]
            counts[base] = counts.get(base, 0) + 1
            table = f"{base}[{counts[base] - 1}]"
            lines.setdefault(base, lineno)
            lines.setdefault(table, lineno)
            continue
        if m := _TABLE_HEADER.match(raw):
            table = _resolve(_parts(m.group(1)), counts)
            lines.setdefault(table, lineno)
            continue
        if m := _KEY_LINE.match(raw):
            prefix = table
            for part in _parts(m.group(1)):
                prefix = f"{prefix}.{part}" if prefix else part
                lines.setdefault(prefix, lineno)
            rest = raw[m.end() :]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_multiline = quote
                    break
    return lines


def _resolve(parts: list[str], counts: Mapping[str, int]) -> str:
    """A header's key path, with the index of the latest entry of every array it crosses."""
    path = ""
    for part in parts:
        path = f"{path}.{part}" if path else part
        if path in counts:
            path = f"{path}[{counts[path] - 1}]"
    return path


def syntax_problem(label: str, text: str, exc: tomllib.TOMLDecodeError) -> str:
    """``tomllib``'s message as one problem line, with the line it places the error on."""
    message = str(exc)
    if m := re.search(r"\s*\(at line (\d+), column (\d+)\)$", message):
        line, detail = int(m.group(1)), f"{message[: m.start()]} (column {m.group(2)})"
    elif m := re.search(r"\s*\(at end of document\)$", message):
        line, detail = max(1, len(text.splitlines())), f"{message[: m.start()]} (at end of file)"
    else:  # another tomllib's wording: its lineno attribute where it has one (3.14+)
        line, detail = int(getattr(exc, "lineno", 0) or 1), message
    return f"{label}:{line}: TOML syntax error: {detail}"


MISSING = object()
MAX_EXACT_INT = 2**53  # past it an integer has no exact float (and past 1e308 none at all)


def _is(*types: type) -> Callable[[Any], bool]:
    """A test for a TOML value of one of ``types`` (a boolean is never a number)."""
    return lambda v: isinstance(v, types) and (bool in types or not isinstance(v, bool))


def toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class TomlChecker:
    """Collects every problem of one file, each as ``FILE:LINE: key 'K': message``."""

    def __init__(self, label: str, text: str) -> None:
        self.label = label
        self.lines = key_lines(text)
        self._found: list[tuple[int, str]] = []

    def line_of(self, key: str) -> int:
        probe = key
        while probe:
            if probe in self.lines:
                return self.lines[probe]
            cut = max(probe.rfind("."), probe.rfind("["))
            probe = probe[:cut] if cut > 0 else ""
        return 1

    def problem(self, key: str, message: str) -> None:
        line = self.line_of(key)
        self._found.append((line, f"{self.label}:{line}: key {key!r}: {message}"))

    @property
    def problems(self) -> list[str]:
        """Every problem recorded, in the order of their lines in the file."""
        return [text for _, text in sorted(self._found, key=lambda found: found[0])]

    def unknown_keys(
        self,
        table: Mapping[str, Any],
        where: str,
        allowed: tuple[str, ...],
        homes: Mapping[str, str] | None = None,
    ) -> None:
        """A problem for each key not in ``allowed``; ``homes`` says where a key belongs."""
        for key in table:
            if key in allowed:
                continue
            path = f"{where}.{key}" if where else key
            hint = did_you_mean(key, allowed)
            if not hint and homes:
                if key in homes:
                    hint = f" here (it belongs in {homes[key]})"
                elif close := difflib.get_close_matches(key, list(homes), n=1, cutoff=0.75):
                    hint = f" (did you mean {close[0]!r}, in {homes[close[0]]}?)"
            self.problem(path, f"unknown key{hint}")

    def required(self, table: Mapping[str, Any], where: str, key: str) -> bool:
        """Whether ``key`` is there; if not, record that it is missing."""
        if key in table:
            return True
        self.problem(where, f"missing required key {key!r}")
        return False

    # Typed getters: each returns the value, or None after recording a problem.

    def _typed(
        self, table: Mapping[str, Any], path: str, key: str, fits: Callable[[Any], bool], want: str
    ) -> Any:
        """``table[key]`` if ``fits(value)``; ``MISSING`` when absent, or when it does not
        fit (a problem names ``path``: ``must be WANT, not TYPE``)."""
        value = table.get(key, MISSING)
        if value is not MISSING and not fits(value):
            self.problem(path, f"must be {want}, not {toml_type(value)}")
            return MISSING
        return value

    def string(self, table: Mapping[str, Any], where: str, key: str) -> str | None:
        value = self._typed(table, f"{where}.{key}", key, _is(str), "a string")
        if value is MISSING:
            return None
        if not value.strip():
            self.problem(f"{where}.{key}", "must not be empty")
            return None
        odd = next((ch for ch in value if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F), None)
        if odd is not None:  # a NUL, a line break, an escape: no inventory value holds one
            self.problem(f"{where}.{key}", f"{value!r} holds a control character ({odd!r})")
            return None
        return value

    def matching(
        self, table: Mapping[str, Any], where: str, key: str, pattern: re.Pattern[str], what: str
    ) -> str | None:
        """A string that matches ``pattern``; ``what`` says in words what it should look like."""
        value = self.string(table, where, key)
        if value is not None and not pattern.match(value):
            self.problem(f"{where}.{key}", f"{value!r} is not {what}")
            return None
        return value

    def integer(
        self,
        table: Mapping[str, Any],
        where: str,
        key: str,
        lo: int,
        hi: int | None = None,
    ) -> int | None:
        value = self._typed(table, f"{where}.{key}", key, _is(int), "an integer")
        if value is MISSING:
            return None
        if value < lo or value > (MAX_EXACT_INT if hi is None else hi):
            bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            shown = (
                value if abs(value) <= MAX_EXACT_INT else f"a number of {len(str(value))} digits"
            )
            self.problem(f"{where}.{key}", f"must be {bound}, not {shown}")
            return None
        return value

    def boolean(self, table: Mapping[str, Any], where: str, key: str) -> bool | None:
        value = self._typed(table, f"{where}.{key}", key, _is(bool), "true or false")
        return None if value is MISSING else value

    def positive(
        self, table: Mapping[str, Any], where: str, key: str, hi: float | None = None
    ) -> float | None:
        """A number > 0 (and at most ``hi``, when given)."""
        value = self._typed(table, f"{where}.{key}", key, _is(int, float), "a number")
        if value is MISSING:
            return None
        if isinstance(value, int) and abs(value) > MAX_EXACT_INT:  # before any float()
            digits = len(str(abs(value)))
            why = f"must be a number below 2**53, not one of {digits} digits"
            self.problem(f"{where}.{key}", why)
            return None
        if not math.isfinite(value) or value <= 0 or (hi is not None and value > hi):
            bound = "> 0" if hi is None else f"> 0 and at most {hi:g}"
            self.problem(f"{where}.{key}", f"must be a number {bound}, not {value}")
            return None
        return float(value)

    def choice(
        self, table: Mapping[str, Any], where: str, key: str, choices: tuple[str, ...]
    ) -> str | None:
        value = self.string(table, where, key)
        if value is not None and value not in choices:
            self.problem(
                f"{where}.{key}",
                f"must be one of {' | '.join(choices)}, not {value!r}"
                f"{did_you_mean(value, choices)}",
            )
            return None
        return value

    def names(
        self, table: Mapping[str, Any], where: str, key: str, pattern: re.Pattern[str], what: str
    ) -> tuple[str, ...] | None:
        """An array of distinct strings, each matching ``pattern``."""
        base = f"{where}.{key}" if where else key  # a top-level key has no table before it
        value = self._typed(table, base, key, _is(list), "an array of strings")
        if value is MISSING:
            return None
        out: list[str] = []
        ok = True
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.problem(f"{base}[{i}]", f"must be a string, not {toml_type(item)}")
                ok = False
            elif not pattern.match(item):
                self.problem(f"{base}[{i}]", f"{item!r} is not {what}")
                ok = False
            elif item in out:
                self.problem(f"{base}[{i}]", f"{item!r} is listed twice")
                ok = False
            else:
                out.append(item)
        return tuple(out) if ok else None

    def table(self, doc: Mapping[str, Any], key: str) -> dict[str, Any]:
        value = self._typed(doc, key, key, _is(dict), f"a table ([{key}])")
        return {} if value is MISSING else value

    def array_of_tables(self, doc: Mapping[str, Any], key: str) -> list[tuple[str, dict[str, Any]]]:
        value = self._typed(doc, key, key, _is(list), f"an array of tables ([[{key}]])")
        if value is MISSING:
            return []
        out = []
        for i, item in enumerate(value):
            if isinstance(item, dict):
                out.append((f"{key}[{i}]", item))
            else:
                self.problem(f"{key}[{i}]", f"must be a table, not {toml_type(item)}")
        return out
