"""``python -m bench [NAME ...]``: run every bench module (or the named ones) in turn."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench


def main(argv: list[str]) -> int:
    names = sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_")
    )
    wanted = [n if n.startswith("bench_") else f"bench_{n}" for n in argv] or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(
            f"bench: no such bench: {', '.join(unknown)} (have: {', '.join(names)})",
            file=sys.stderr,
        )
        return 2
    for name in wanted:
        print(f"\n== {name} ==", flush=True)
        started = time.perf_counter()
        importlib.import_module(f"bench.{name}").main()
        print(f"({name} took {time.perf_counter() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
