"""The progress line: drawn in place on a terminal (a real pty here), silent into a pipe
and with --quiet, erased before the report."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from cwctl.cli.progress import CLEAR, ProgressLine, progress_for


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_line_counts_hosts_probes_and_seconds_left() -> None:
    out, clock = io.StringIO(), Clock()
    line = ProgressLine(out, clock=clock)
    line("connected", {"host": "a"})
    assert out.getvalue().endswith(CLEAR + "cwctl: scan: 1 hosts connected")
    clock.t += 1
    line("connected", {"host": "b"})
    line("started", {"hosts": 2, "of": 3, "start_in_s": 0.5, "duration_s": 2.0})
    assert out.getvalue().endswith("cwctl: scan: 2/3 hosts · 2.5 s left")
    clock.t += 1
    line("records", {"records": 12345})
    assert out.getvalue().endswith("cwctl: scan: 2/3 hosts · 12,345 probes · 1.5 s left")
    before = out.getvalue()
    clock.t += 0.01
    line("records", {"records": 12400})  # within 0.1 s: not redrawn
    assert out.getvalue() == before
    line("done", {"ok": 2, "of": 3})  # probing is over; the solve takes seconds at scale
    assert out.getvalue().endswith("cwctl: scan: 2/3 hosts · 12,400 probes · solving 0 s")
    clock.t += 12
    line.draw(force=True)  # what the ticker does each second, on the scan's loop
    assert out.getvalue().endswith("· solving 12 s")
    line("solved", {"s": 12.0})
    assert out.getvalue().endswith(CLEAR)  # erased: the report starts on a clean line
    assert "\n" not in out.getvalue()  # never scrolls


async def test_the_solve_ticks_on_the_loop_until_solved() -> None:
    import asyncio

    from cwctl.cli import progress as module

    out, clock = io.StringIO(), Clock()
    line = ProgressLine(out, clock=clock)
    module.TICK_S, tick = 0.0, module.TICK_S  # every loop turn, not every second
    try:
        line("started", {"hosts": 2, "of": 2, "duration_s": 1.0})
        line("done", {"ok": 2, "of": 2})
        for seconds in (1, 2, 3):
            clock.t += 1
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert out.getvalue().endswith(f"solving {seconds} s"), out.getvalue()
        line("solved", {"s": 3.0})
        drawn = out.getvalue()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert drawn.endswith(CLEAR) and out.getvalue() == drawn  # no tick after solved
    finally:
        module.TICK_S = tick


def test_silent_unless_a_terminal_and_not_quiet() -> None:
    pipe = io.StringIO()
    assert progress_for(pipe, quiet=False, verbose=False) is None  # StringIO is no tty
    assert progress_for(pipe, quiet=True, verbose=True) is None
    log = progress_for(pipe, quiet=False, verbose=True)
    assert log is not None
    log("done", {"ok": 3, "of": 3})
    assert pipe.getvalue() == "cwctl: done ok=3 of=3\n"


def _run_on_a_pty(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run cwctl with stderr on a pseudo-terminal, stdout into a pipe."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cwctl.cli", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, cwd=cwd,
    )  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=120), stdout, b"".join(chunks).decode(errors="replace")


def test_a_real_scan_draws_progress_on_a_terminal_only(tmp_path: Path) -> None:
    args = ["scan", "--local", "3", "--duration", "1", "--format", "json"]
    code, stdout, tty = _run_on_a_pty(args, tmp_path)
    assert code in (0, 3), tty
    assert '"schema"' in stdout  # the report went to stdout, untouched
    assert "cwctl: scan: 3/3 hosts" in tty and "s left" in tty
    assert "· solving " in tty  # after the probing, while the clocks are solved
    assert tty.endswith(CLEAR)  # erased at the end: the terminal is clean
    code, stdout, tty = _run_on_a_pty(["-q", *args], tmp_path)
    assert code in (0, 3) and tty == ""  # --quiet: nothing on the terminal
    piped = subprocess.run(
        [sys.executable, "-m", "cwctl.cli", *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert piped.returncode in (0, 3) and piped.stderr == ""  # into a pipe: silent


def test_step_line_names_each_step_in_place() -> None:
    from types import SimpleNamespace

    from cwctl.cli.progress import StepLine

    out = io.StringIO()
    line = StepLine(out)
    step = SimpleNamespace(host="leaf2", description="ECMP weight of spine3 1 -> 0")
    line(1, step, "running")
    assert (
        out.getvalue()
        == CLEAR + "cwctl: apply: step 2 on leaf2: running (ECMP weight of spine3 1 -> 0)"
    )
    line.clear()
    assert out.getvalue().endswith(CLEAR) and "\n" not in out.getvalue()


def test_an_applied_action_shows_its_steps_on_a_terminal(tmp_path: Path) -> None:
    # the journal goes to the suite's own state dir (tests/conftest.py), inherited
    args = ["reroute", "--sim", "--hosts", "16", "--hosts-per-leaf", "4", "spine3",
            "--apply", "--yes"]  # fmt: skip
    code, stdout, tty = _run_on_a_pty(args, tmp_path)
    assert code == 0, tty
    assert "plan " in stdout  # the plan itself is data, on stdout
    assert "cwctl: planning reroute spine3: reading the fabric…" + CLEAR in tty
    assert "cwctl: apply: step 4 on sim: running (leaf4: ECMP weight of spine3 1 -> 0)" in tty
    assert CLEAR + "steps:" in tty  # the line gives way to the list of what ran


def test_both_lines_erase_only_what_they_drew() -> None:
    from cwctl.cli.progress import StepLine

    for line in (ProgressLine(io.StringIO()), StepLine(io.StringIO())):
        line.clear()
        assert line.stream.getvalue() == ""  # type: ignore[attr-defined]
        line.show("cwctl: x")
        line.clear()
        line.clear()
        assert line.stream.getvalue() == CLEAR + "cwctl: x" + CLEAR  # type: ignore[attr-defined]
