"""The allocator policy: taken by glibc, a no-op elsewhere (never an error)."""

from __future__ import annotations

import platform
import subprocess
import sys

from cwctl.runtime import allocator


def test_glibc_takes_the_policy_and_others_are_left_alone() -> None:
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert allocator.tune() is glibc


def test_a_freed_large_array_is_given_back_to_the_kernel() -> None:
    """Above the threshold a block is mapped, so freeing it lowers the RSS again."""
    code = (
        "import numpy as np\n"
        "from cwctl.runtime import allocator\n"
        "allocator.tune()\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1])\n"
        "base = rss()\n"
        "a = np.ones(allocator.MMAP_THRESHOLD_B // 8 * 3)\n"
        "held = rss()\n"
        "del a\n"
        "print(base, held, rss())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, held, after = (int(x) for x in out.stdout.split())
    assert held - base > (allocator.MMAP_THRESHOLD_B * 3 // 4096) * 0.9
    assert after - base < (held - base) * 0.1
