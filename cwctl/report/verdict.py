"""The line that leads every report: the verdict, its exit status and its reasons."""

from __future__ import annotations

from cwctl.scan.snapshot import FabricSnapshot

VERDICT_STYLES = {"healthy": "bold green", "problems": "bold red", "inconclusive": "bold yellow"}
HEALTHY = "no element explains any loss or delay"


def verdict_line(snapshot: FabricSnapshot) -> str:
    """The report's first line: the verdict, its exit status and its reasons, e.g.
    ``verdict: problems (exit 3): 3 hosts unreachable (gpu-001, gpu-002, gpu-003)``."""
    verdict = snapshot.verdict
    reasons = [HEALTHY] if verdict == "healthy" else snapshot.verdict_reasons()
    down = [h.name for h in snapshot.unreachable]
    if down:  # which hosts, not only how many
        names = ", ".join(down[:3]) + (f" +{len(down) - 3} more" if len(down) > 3 else "")
        reasons = [f"{r} ({names})" if r.endswith("hosts unreachable") else r for r in reasons]
    code = 0 if verdict == "healthy" else 3
    return f"verdict: {verdict} (exit {code}): " + "; ".join(reasons)
