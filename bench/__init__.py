"""cwctl's benchmarks: each ``bench_*.py`` module has ``main() -> None`` printing a table.

Figures are ratios in one run against a baseline, never single absolute times.
"""
