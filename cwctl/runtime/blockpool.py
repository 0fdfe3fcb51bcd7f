"""Independent blocks of numpy work, spread over the machine's cores.

A large scan is worked a block of pairs at a time (``cwctl.sync.blocks``): the clock
fits and the path statistics of one block need nothing of another's. numpy lets go of
the interpreter's lock inside its sorts, its ufuncs and its reductions, which is where a
block spends its time, so two threads on two cores finish two blocks in about the time
of one. Small blocks pay twice more: their temporaries (a few MB each) are reused from
the allocator's heap instead of being mapped and faulted in afresh, and their sorts stay
in cache.

``pipeline`` is the other shape: a sequence that must be made in order (a simulator's
draws from one generator) and worked on as it comes; the work of one item goes beside
the making of the next.

``map_blocks`` keeps the order of its inputs, so whatever is merged after it is merged
as one thread would have (the results are the same to the bit). At most ``workers``
blocks are in flight, so memory is that many blocks' temporaries, not the table's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

THREADS_ENV = "CWCTL_THREADS"  # how many blocks at once; 1 works them one after another
MAX_THREADS = 2  # each block in flight holds its own temporaries: two bound the peak


def block_threads() -> int:
    """How many blocks to work at once: ``$CWCTL_THREADS`` if it is a positive integer,
    else the cores this process may run on, at most ``MAX_THREADS``."""
    given = os.environ.get(THREADS_ENV, "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cores))


def map_blocks(work: Callable[[In], Out], blocks: Iterable[In]) -> list[Out]:
    """``[work(b) for b in blocks]``, on ``block_threads()`` threads, in the blocks'
    order. An exception in any block is raised here (the others are abandoned)."""
    items = list(blocks)
    threads = min(block_threads(), len(items))
    if threads <= 1:
        return [work(b) for b in items]
    with ThreadPoolExecutor(threads, thread_name_prefix="cwctl-block") as pool:
        return list(pool.map(work, items))


def pipeline(items: Iterable[In], work: Callable[[In], object]) -> None:
    """``work(item)`` for each of ``items`` in order, on a second thread while this one
    makes the next item (``items`` an iterator that computes them as it goes): one item
    worked while one is made. With one thread (``block_threads``) one after the other.
    An exception in either is raised here, after the item in flight is done."""
    if block_threads() <= 1:
        for item in items:
            work(item)
        return
    with ThreadPoolExecutor(1, thread_name_prefix="cwctl-pipe") as pool:
        pending = None
        for item in items:
            if pending is not None:
                pending.result()
            pending = pool.submit(work, item)
        if pending is not None:
            pending.result()
