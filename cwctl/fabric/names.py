"""How generated hosts are named: the simulator's ``gpu-001``... and ``--local``'s
``local-01``... (stdlib only, so the CLI can check ``--reference`` before importing numpy)."""

from __future__ import annotations

from cwctl import settings


def sim_host_names(n: int, prefix: str = settings.SIM_HOST_PREFIX) -> list[str]:
    """``gpu-001`` ... ``gpu-NNN`` (at least three digits)."""
    width = max(3, len(str(n)))
    return [f"{prefix}-{i + 1:0{width}d}" for i in range(n)]


def local_host_names(n: int) -> list[str]:
    """``local-01`` ... ``local-NN`` (at least two digits)."""
    width = max(2, len(str(n)))
    return [f"local-{i + 1:0{width}d}" for i in range(n)]
