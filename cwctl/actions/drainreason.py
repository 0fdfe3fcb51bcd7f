"""How a drain is worded, once for every scheduler: the reason Slurm (``Reason=``) and
Kubernetes (the ``cwctl.io/drain-reason`` annotation) record, and how a plan's step
descriptions cite it (``repr``: a reason's quotes, newlines or escape sequences show as
text, never reach the operator's terminal raw)."""

from __future__ import annotations

DEFAULT_REASON = "cwctl"  # what the scheduler records when the operator gives no reason


def suspect_reason(suspect: str) -> str:
    """The reason cwctl gives when it drains a host on its own (a reroute that can only
    drain): ``cwctl: suspect gpu-007/mlx5_1``."""
    return f"cwctl: suspect {suspect}"


def with_suspect(reason: str, suspect: str | None) -> str:
    """``NIC flaps (suspect gpu-007/mlx5_1)``; the reason alone when it names the suspect."""
    if not suspect or suspect in reason:
        return reason
    return f"{reason} (suspect {suspect})"


def cited(reason: str) -> str:
    """The reason as a step description says it: ``reason 'NIC flaps'``."""
    return f"reason {reason!r}"
