"""The "Next:" lines that end a report: the command to run now, with the flags that named
the hosts (as kubectl's hints do). A healthy scan has none; a suspect gets its reroute
(a switch, link or NIC) or its drain (a host); unreachable hosts on an inventory get the
inventory's check; an inconclusive window a longer one; and every one the TUI."""

from __future__ import annotations

import shlex

from cwctl.scan.snapshot import FabricSnapshot

LONGER_WINDOW = "10s"


def next_lines(snapshot: FabricSnapshot, source: str | None) -> list[str]:
    """``source``: the flags that name the hosts (``--sim --fault switch:spine2:down``,
    ``-i inv.toml``, "" for the default inventory), None where no command can reach them
    again (a replay): then nothing."""
    if source is None or snapshot.healthy:
        return []
    src = f" {source}" if source else ""
    steps: list[tuple[str, str]] = []
    if snapshot.suspects:
        top = snapshot.suspects[0]
        element = shlex.quote(top.element)
        if top.kind == "host":
            steps.append((f"cwctl drain {element}{src}", "plan its drain; --apply does it"))
        else:
            steps.append((f"cwctl reroute {element}{src}", "plan the way around it; --apply"))
    if snapshot.unreachable and "--sim" not in source and "--local" not in source:
        steps.append((f"cwctl inventory check{src}", "what scan needs of each host"))
    if snapshot.verdict == "inconclusive":
        steps.append((f"cwctl scan{src} --duration {LONGER_WINDOW}", "a longer window"))
    steps.append((f"cwctl tui{src}", "watch it live"))
    return ["Next:", *(f"  {command}   # {why}" for command, why in steps)]
