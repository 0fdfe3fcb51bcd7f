"""Pausing Python's cycle collector while a step makes many objects that hold no cycles.

Each 700 new container objects start a young collection, and the older generations
are walked again as the young ones fill up: building half a million path records (a
10 000-host window) spent about a third of its time in collections that found
nothing. ``paused_gc()`` holds collection off for the step and restores whatever was
set before (nested uses leave it off until the outermost ends); objects made inside
are collected as usual afterwards if they ever form cycles.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """No automatic cycle collection inside the block; the previous setting after it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
