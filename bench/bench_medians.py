"""Median per group: cwctl's exact two-sort median against the one combined float key it
replaced, on the same 4 M values in one run (``python -m bench medians``, ~15 s).

The combined key (group id + the value scaled into a fraction below one) took one
stable argsort, but rounded a group's values together once they spanned ~1e16 or once
the group ids took the float's bits; it is kept here only as the yardstick.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from cwctl.sync.robust import median_per_group

F64 = npt.NDArray[np.float64]
IntP = npt.NDArray[np.intp]

N_VALUES = 4_000_000
REPEATS = 3


def combined_key_median(values: F64, group: IntP, n_groups: int) -> F64:
    """The replaced method: one stable argsort of ``group + (value / span + 1) * 0.49``."""
    out = np.full(n_groups, np.nan)
    if len(values) == 0:
        return out
    span = float(np.max(np.abs(values))) + 1.0
    order = np.argsort(group + (values / span + 1.0) * 0.49, kind="stable")
    counts = np.bincount(group[order], minlength=n_groups)
    starts = np.cumsum(counts) - counts
    has = counts > 0
    v = values[order]
    out[has] = (v[starts[has] + (counts[has] - 1) // 2] + v[starts[has] + counts[has] // 2]) / 2
    return out


def best_of(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(7)
    print(f"{'groups':>8}{'values':>10}{'combined key s':>16}{'exact s':>10}{'ratio':>8}")
    for n_groups in (1_000, 50_000, 1_000_000):
        group = rng.integers(0, n_groups, N_VALUES).astype(np.intp)
        # residual-like: a normal core and a queueing tail
        values = np.abs(rng.normal(0.0, 100.0, N_VALUES)) + rng.exponential(2000.0, N_VALUES) * (
            rng.random(N_VALUES) < 0.1
        )
        before = best_of(lambda: combined_key_median(values, group, n_groups))  # noqa: B023
        after = best_of(lambda: median_per_group(values, group, n_groups))  # noqa: B023
        print(f"{n_groups:>8}{N_VALUES:>10}{before:>16.3f}{after:>10.3f}{after / before:>8.2f}")
    # what the combined key got wrong: one huge value beside ordinary groups
    group = rng.integers(1, 1_000, 100_000).astype(np.intp)
    values = rng.normal(0.0, 100.0, 100_000)
    group[0], values[0] = 0, 1e16
    want = np.array([np.median(values[group == g]) for g in range(1_000)])
    for name, fn in (("combined key", combined_key_median), ("exact", median_per_group)):
        wrong = int(np.sum(fn(values, group, 1_000) != want))
        print(f"{name}: {wrong} of 1000 group medians differ from np.median (one value 1e16)")


if __name__ == "__main__":
    main()
