"""What actions have changed in a simulated fabric, in words.

A fresh model has plain ECMP (every weight 1), every NIC in use and no host drained;
``applied_changes`` lists how a model's ``ModelState`` differs from that, one short line
per change. The scan report and the TUI header show these lines, so a ``--sim`` scan
never silently runs on a fabric an earlier ``--apply`` changed (``cwctl sim status``
lists them, ``cwctl sim reset`` clears them).
"""

from __future__ import annotations

from cwctl.sim.world import ModelState


def applied_changes(state: ModelState) -> list[str]:
    """One line per change from a fresh fabric, sorted: ECMP weights, NICs, hosts."""
    lines = [
        f"{leaf}: ECMP weight of {spine} {weight}"
        for (leaf, spine), weight in sorted(state.ecmp_weight.items())
        if weight != 1
    ]
    lines += [f"NIC {nic} excluded" for nic in sorted(state.excluded_nics)]
    lines += [f"{host} drained" for host in sorted(state.drained_hosts)]
    lines += [
        f"{a} <-> {b} steered off {spine} by source port"
        for (a, b), spine in sorted(state.steered.items())
    ]
    return lines
