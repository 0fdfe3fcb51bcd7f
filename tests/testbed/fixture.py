"""pytest fixtures: one testbed per test module, faults cleared between tests.

Tests skip (saying why) only where namespaces cannot be made: not root, no ``ip``/``tc``,
no sshd. Each testbed takes a prefix made from the pid and a counter, so parallel runs
(and two testbeds in one run) never collide.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import clear
from tests.testbed.shell import missing_prerequisite

_COUNTER = itertools.count()
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def unique_prefix() -> str:
    """'t' + the pid in base 36 + a counter letter: at most 8 characters."""
    pid, text = os.getpid(), ""
    while pid:
        pid, d = divmod(pid, 36)
        text = _DIGITS[d] + text
    return f"t{text}{_DIGITS[next(_COUNTER) % 36]}"


def skip_without_namespaces() -> None:
    why = missing_prerequisite()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def testbed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Testbed]:
    """The fabric, up for the whole module (ICMP rate limit off: discovery stays fast).
    A module setting ``TESTBED_LEAVES = 3`` gets three leaves (2-4); the layout goes back
    to two leaves after it."""
    skip_without_namespaces()
    leaves = getattr(request.module, "TESTBED_LEAVES", 2)
    bed = Testbed(unique_prefix(), tmp_path_factory.mktemp("testbed"), leaves=leaves)
    try:
        bed.up(icmp_ratelimit_ms=0)
        yield bed
    finally:
        left = bed.down()
        L.set_leaves(2)
        assert not left, f"testbed left behind: {left}"


@pytest.fixture
def fabric(testbed: Testbed) -> Iterator[Testbed]:
    """The module's testbed with no fault on and its routes as built, before and after
    the test."""
    clear(testbed)
    testbed.reset_routes()
    yield testbed
    clear(testbed)
    testbed.reset_routes()
