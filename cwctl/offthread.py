"""Run a function on a thread of its own that never holds the process open.

``asyncio.to_thread`` uses the loop's default executor, and ``asyncio.run`` joins its
threads on the way out: quitting the TUI in the middle of a 512-host solve waited the
solve's seconds out. ``in_thread`` runs the work on a daemon thread instead and awaits
its result; when the loop is gone first, the result is dropped and the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``await in_thread(fn, *args)``: ``fn(*args, **kwargs)`` on a daemon thread (with
    this task's context variables), its result or its exception here."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def run() -> None:
        result, error = None, None
        try:
            result = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # handed to the awaiting task, raised there
            error = exc
        # the loop closed first (RuntimeError): nobody waits for this any more
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, result, error)

    threading.Thread(
        target=run, name=f"cwctl-{getattr(fn, '__name__', 'work')}", daemon=True
    ).start()
    return await future
