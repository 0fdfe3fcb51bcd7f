"""``cwctl watch`` as a process: rounds on a timer, signals, /metrics, the textfile.

``run_watch`` runs a ``Watch`` until SIGTERM or SIGINT (or ``rounds``, or ``once``):
a round every ``interval_s`` from the start of the last (never piling up: a round longer
than the interval is followed by the next at once). A stop signal cancels the scan in
flight (its agents see their stdin close and exit; each also has its hard lifetime) but
lets an action in flight finish, so nothing is left half-applied; the session is closed
and the HTTP server shut down. SIGHUP asks for a reload, done between two rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cwctl.errors import EXIT_OK, EXIT_PROBLEMS
from cwctl.scan.request import ScanRequest
from cwctl.watch.log import make_log
from cwctl.watch.metrics import WatchMetrics, serve, write_textfile
from cwctl.watch.policy import Policy
from cwctl.watch.rounds import Watch


@dataclass(frozen=True)
class WatchOptions:
    interval_s: float
    once: bool = False
    rounds: int | None = None  # stop after this many rounds (tests, benches)
    listen: str | None = None  # ADDR:PORT for /metrics
    textfile: Path | None = None  # node_exporter's textfile collector


def run_watch(
    request: ScanRequest,
    options: WatchOptions,
    policy: Policy | None = None,
    *,
    log: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """Watch until told to stop; the exit code (``once``: 0 healthy, 3 problems or an
    inconclusive window; ``rounds``: 3 when the last round found problems, unreachable
    hosts among them, or failed). ``log``: where entries go (default
    ``cwctl.watch.log.make_log()``: stderr)."""
    return asyncio.run(_main(request, options, policy, log or make_log()))


async def _main(
    request: ScanRequest,
    options: WatchOptions,
    policy: Policy | None,
    log: Callable[[dict[str, Any]], None],
) -> int:
    metrics = WatchMetrics()
    server = serve(metrics, options.listen) if options.listen else None
    watch = Watch(request, policy=policy, metrics=metrics, log=log)
    stop, reload = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reload.set)
    started = {
        "event": "start",
        "source": request.source,
        "interval_s": options.interval_s,
        "policy": str(policy.path) if policy is not None and policy.path else None,
        "dry_run": policy.dry_run if policy is not None else None,
        "listen": server.address if server is not None else None,  # as bound: port 0 picks one
    }
    log(started)
    healthy, found = True, False
    try:
        await watch.take_up()  # an earlier watch's actions cut short: rolled back first
        while not stop.is_set():
            if reload.is_set():
                reload.clear()
                await watch.reload()
            began = loop.time()
            snapshot = await _unless_stopped(watch.scan(), stop)
            if stop.is_set():
                break
            if snapshot is not None:
                healthy, found = snapshot.healthy, snapshot.found
                await watch.decide(snapshot)  # not cancelled: an action runs to its end
            else:
                healthy, found = False, True
            if options.textfile is not None:
                write_textfile(metrics, options.textfile)
            if options.once or (options.rounds is not None and watch.rounds >= options.rounds):
                break
            wait_s = max(0.0, options.interval_s - (loop.time() - began))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_either(stop, reload), wait_s)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await watch.aclose()
        if server is not None:
            server.shutdown()
            server.server_close()
        log({"event": "stop", "rounds": watch.rounds, "signal": stop.is_set()})
    if options.once and not healthy:
        return EXIT_PROBLEMS
    # --rounds: its last round found problems, or no scan: 3. A sparse round that is only
    # inconclusive is the watch budget working (accuracy builds up across windows): 0.
    if options.rounds is not None and found:
        return EXIT_PROBLEMS
    return EXIT_OK


async def _unless_stopped(work: Any, stop: asyncio.Event) -> Any:
    """``await work``, cancelled when ``stop`` is set first (then None)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def _either(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
