"""Work off the event loop that a quitting TUI need not wait for.

The scan's numpy work runs on the loop's default executor (``asyncio.to_thread``), and
``asyncio.run`` joins that executor's threads on the way out, as the interpreter joins
every executor thread at exit: quitting the TUI in the middle of a 512-host solve
waited the solve's seconds out. The TUI's loop gets a ``QuitFastExecutor`` instead,
whose shutdown does not wait, and the ``tui`` command, once the app has returned, ends
the process at once (``exit_now_if_busy``) when work is still running there: nothing
it computes would be shown. (Daemon threads are no answer: a daemon thread inside
OpenBLAS at exit can hang the interpreter's shutdown for good.)

Every other command waits for its work as before: a scan's result is its output, and a
watch stopped mid-solve finishes it (bounded) rather than risk its exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class QuitFastExecutor(ThreadPoolExecutor):
    """A thread pool that knows whether work is running, and whose shutdown never waits
    for it (queued work is dropped)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._running = 0
        self._count = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._count:
            self._running += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future[Any]) -> None:
        with self._count:
            self._running -= 1

    @property
    def busy(self) -> bool:
        with self._count:
            return self._running > 0

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


def exit_now_if_busy(executor: QuitFastExecutor, code: int = 0) -> None:
    """The process ends here, with ``code``, when ``executor`` still runs work (its
    threads would otherwise be joined at exit); else this returns."""
    if not executor.busy:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to keep
            stream.flush()
    os._exit(code)
