"""The typed getters of ``TomlChecker``: the value when it has the type, None (or an
empty table/array) with one ``must be WANT, not TYPE`` problem when it has not, nothing
said when the key is absent. A boolean is never a number."""

from __future__ import annotations

from typing import Any

import pytest

from cwctl.config.tomlcheck import TomlChecker

DOC = """\
[t]
s = "x"
i = 3
b = true
f = 2.5
n = ["a", "b"]
"""


def check(getter: str, key: str, value: Any, *extra: Any) -> tuple[Any, list[str]]:
    checker = TomlChecker("f.toml", DOC)
    got = getattr(checker, getter)({key: value}, "t", key, *extra)
    return got, checker.problems


@pytest.mark.parametrize(
    ("getter", "good", "bad", "says"),
    [
        ("string", "x", 1, "must be a string, not an integer"),
        ("integer", 3, True, "must be an integer, not a boolean"),
        ("integer", 3, 2.0, "must be an integer, not a float"),
        ("boolean", True, 1, "must be true or false, not an integer"),
        ("positive", 2.5, False, "must be a number, not a boolean"),
        ("positive", 3, "3", "must be a number, not a string"),
        ("names", ("a", "b"), "a", "must be an array of strings, not a string"),
    ],
)
def test_getters_take_their_type_and_name_the_wrong_one(
    getter: str, good: Any, bad: Any, says: str
) -> None:
    extra: tuple[Any, ...] = ()
    if getter == "integer":
        extra = (0,)
    elif getter == "names":
        import re

        extra = (re.compile(r"[a-z]+$"), "a name")
    value = list(good) if getter == "names" else good
    assert check(getter, "k", value, *extra) == (good, [])
    got, problems = check(getter, "k", bad, *extra)
    assert got is None
    assert problems == [f"f.toml:1: key 't.k': {says}"]
    absent = TomlChecker("f.toml", DOC)
    assert getattr(absent, getter)({}, "t", "k", *extra) is None and not absent.problems


def test_tables_and_arrays_of_tables_at_the_top() -> None:
    checker = TomlChecker("f.toml", DOC)
    assert checker.table({"t": {"a": 1}}, "t") == {"a": 1}
    assert checker.table({"t": 5}, "t") == {}
    assert checker.array_of_tables({"host": {"a": 1}}, "host") == []
    assert checker.array_of_tables({}, "host") == [] and checker.table({}, "ssh") == {}
    assert checker.problems == [
        "f.toml:1: key 't': must be a table ([t]), not an integer",
        "f.toml:1: key 'host': must be an array of tables ([[host]]), not a table",
    ]
