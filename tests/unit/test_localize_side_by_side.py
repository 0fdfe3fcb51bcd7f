"""Stages worked side by side (``localize.SideBySide``) find what one thread finds: the
same suspects, words and figures, whichever chain ends first."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cwctl.runtime.blockpool import THREADS_ENV
from cwctl.scan.request import SimOptions
from cwctl.session import analyse
from cwctl.telemetry import localize
from cwctl.transport.sim import simulate

FAULTS = (
    ("switch:spine2:slow",),
    ("switch:spine2:congested", "link:leaf1-spine3:lossy"),
    ("link:leaf2-spine1:slow",),
)


def _report(faults: tuple[str, ...], threads: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv(THREADS_ENV, threads)
    report = analyse(simulate(SimOptions(hosts=64, seed=4, faults=faults))).to_json()
    report["sync"].pop("fit_s"), report["sync"].pop("solve_s")
    return report


@pytest.mark.parametrize("faults", FAULTS, ids="+".join)
def test_side_by_side_stages_report_what_one_thread_reports(
    faults: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    one = _report(faults, "1", monkeypatch)
    two = _report(faults, "2", monkeypatch)
    assert one["suspects"] and two == one


def test_the_chains_run_on_two_threads_and_in_their_own_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, str]] = []
    meet = threading.Barrier(2, timeout=10)  # a1 and b wait for each other: two threads

    def stage(name: str, wait: bool = False) -> Any:
        def run(s: Any) -> None:
            if wait:
                meet.wait()
            seen.append((name, threading.current_thread().name))

        run.__name__ = name
        return run

    group = localize.SideBySide((stage("a1", True), stage("a2")), (stage("b", True),))
    assert group.__name__ == "a1+a2 | b"
    monkeypatch.setenv(THREADS_ENV, "2")
    group(None)  # type: ignore[arg-type]
    threads = dict(seen)
    assert [n for n, _ in seen if n.startswith("a")] == ["a1", "a2"] and len(seen) == 3
    assert threads["a1"] == threads["a2"] != threads["b"]
    monkeypatch.setenv(THREADS_ENV, "1")  # one after another, in order
    seen.clear()
    group = localize.SideBySide((stage("a1"), stage("a2")), (stage("b"),))
    group(None)  # type: ignore[arg-type]
    assert [n for n, _ in seen] == ["a1", "a2", "b"]
