"""``end_process``: how the local and slurm transports end a child (stdin EOF first,
then each signal of the escalation in turn), on real subprocesses."""

from __future__ import annotations

import asyncio
import signal
import sys

from cwctl.transport.hostrun import end_process

# A child hears SIGINT as Python's default would have it, whatever it inherited (a
# pytest-xdist worker, like a shell's background job, passes SIGINT on ignored).
HEARS_SIGINT = "import signal, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
# Ignores SIGTERM and stdin EOF; says so once its handler is in place.
STUBBORN = HEARS_SIGINT + (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


async def start(*argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )


async def test_stdin_eof_is_enough_for_a_child_that_reads_it() -> None:
    proc = await start(sys.executable, "-c", "import sys; sys.stdin.read()")
    await end_process(proc, ((None, 30.0), (signal.SIGKILL, 5.0)))
    assert proc.returncode == 0  # exited on EOF: never signalled


async def test_a_child_deaf_to_eof_gets_the_next_signal() -> None:
    proc = await start("sleep", "60")
    await end_process(proc, ((None, 0.1), (signal.SIGTERM, 30.0), (signal.SIGKILL, 5.0)))
    assert proc.returncode == -signal.SIGTERM


async def stubborn() -> asyncio.subprocess.Process:
    """A child that ignores SIGTERM and stdin EOF, once its handler is in place."""
    proc = await start(sys.executable, "-c", STUBBORN)
    assert proc.stdout is not None
    assert await proc.stdout.readline() == b"ready\n"
    return proc


async def test_the_escalation_goes_on_while_the_child_ignores_a_signal() -> None:
    proc = await stubborn()
    await end_process(proc, ((signal.SIGTERM, 0.2), (signal.SIGINT, 0.2), (signal.SIGKILL, 30.0)))
    # SIGINT raised KeyboardInterrupt inside time.sleep; Python then exits by SIGINT
    assert proc.returncode == -signal.SIGINT


async def test_sigint_step_as_slurm_uses_it() -> None:
    proc = await start(sys.executable, "-c", HEARS_SIGINT + "time.sleep(60)\n")
    await end_process(proc, ((None, 0.1), (signal.SIGINT, 30.0), (signal.SIGKILL, 5.0)))
    assert proc.returncode == -signal.SIGINT


async def test_kill_is_the_last_word() -> None:
    proc = await stubborn()
    await end_process(proc, ((signal.SIGTERM, 0.2), (signal.SIGKILL, 30.0)))
    assert proc.returncode == -signal.SIGKILL


async def test_a_child_already_gone_is_left_alone() -> None:
    proc = await start(sys.executable, "-c", "pass")
    await proc.wait()
    await end_process(proc, ((signal.SIGKILL, 5.0),))
    assert proc.returncode == 0
