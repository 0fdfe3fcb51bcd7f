"""A quitting TUI does not wait out a solve in flight (issue 35, item 8: q at 512 hosts
took 4.7 s): its loop's executor shuts down without waiting, and the command ends the
process while that work still runs."""

from __future__ import annotations

import subprocess
import sys
import threading

from cwctl.runtime.offthread import QuitFastExecutor, exit_now_if_busy


def test_the_executor_knows_its_work_and_does_not_wait_for_it() -> None:
    executor = QuitFastExecutor(max_workers=1)
    release = threading.Event()
    future = executor.submit(release.wait)
    assert executor.busy
    executor.shutdown(wait=True)  # returns at once, the work still running
    assert not future.done() and executor.busy
    release.set()
    future.result(timeout=60)
    assert not executor.busy
    exit_now_if_busy(executor)  # nothing runs: returns


SCRIPT = """
import asyncio, threading
from cwctl.runtime.offthread import QuitFastExecutor, exit_now_if_busy

never = threading.Event()
executor = QuitFastExecutor()

async def main():
    asyncio.get_running_loop().set_default_executor(executor)  # as the TUI does
    task = asyncio.ensure_future(asyncio.to_thread(never.wait))  # a solve in flight
    await asyncio.sleep(0.05)
    task.cancel()  # q: the app's worker is cancelled

asyncio.run(main())
print("quit", flush=True)
exit_now_if_busy(executor, 0)
print("never here")
"""


def test_a_process_quits_while_its_work_still_runs() -> None:
    # with the default executor, asyncio.run joins its threads: this never returns
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "quit\n", done.stderr
