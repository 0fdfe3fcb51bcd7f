"""The C allocator's policy for a process that makes and frees large numpy arrays.

glibc serves an allocation above ``M_MMAP_THRESHOLD`` with its own mapping, returned to
the kernel when freed; smaller ones come from heaps that keep what is freed. The
threshold starts at 128 KiB and rises to the size of each large block freed, and
every thread that allocates may get its own heap (arena): a scan's analysis (a worker
thread) ends up holding freed arrays of tens of megabytes in heaps its next steps
cannot all reuse. Measured on ``cwctl scan --sim --hosts 10000`` (docs/scale.md): peak
RSS 2.2 GB by default, 1.82 GB with the threshold fixed at 32 MiB and one arena, and
less system time (fewer fresh pages faulted in) than a lower threshold.

``tune()`` sets that, once, at the start of a command (``cwctl.cli``); elsewhere than
glibc it does nothing. Standard library only.
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt() parameter numbers (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD_B = 32 << 20  # blocks this large are mapped, and unmapped when freed
ARENAS = 1  # one heap for the analysis and its block threads: what one frees, the next reuses


def tune() -> bool:
    """Fix the mmap threshold and the arena count; True if the allocator took both."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_B)) and bool(mallopt(M_ARENA_MAX, ARENAS))


def trim() -> bool:
    """Give the heap's free pages back to the kernel (``malloc_trim``): a long-running
    process (``cwctl watch``) calls it after each round, so the holes its freed arrays
    leave in the heap do not stay resident round after round. False elsewhere than glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    return bool(malloc_trim(0))
