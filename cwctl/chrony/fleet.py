"""The hosts ``cwctl sync`` works on, and how to reach them: the scan's own transport.

``--local N``: agents and commands on this machine; an inventory: agents through the
scan's SSH launcher (host keys checked, ~/.ssh/config, jump host) and commands through
``SSHRunner`` (argument lists quoted with ``shlex.join``); ``--sim``: names only, a dry
run (the simulated hosts have no chronyd to feed). ``--replay`` has no hosts to reach.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cwctl.errors import InputError
from cwctl.scan.collection import HostInfo


@dataclass
class Fleet:
    source: str  # local | ssh | sim
    hosts: list[HostInfo]
    launch: Any = None  # HostInfo -> AgentSession (None: nothing can be started)
    runner: Any = None  # runs argv on a host (None: nothing can be run)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def require_hosts(self, what: str) -> None:
        if self.runner is None or self.launch is None:
            raise InputError(
                f"{what} needs real hosts (--local N or an inventory): "
                f"{self.source} hosts have no chronyd"
            )

    async def close(self) -> None:
        closers = [getattr(x, "close", None) for x in (self.launch, self.runner)]
        await asyncio.gather(*(c() for c in closers if c is not None))


def fleet_for(request: Any, *, client_options: Mapping[str, Any] | None = None) -> Fleet:
    """The fleet of a ScanRequest (one source of hosts, as for a scan)."""
    if request.replay is not None:
        raise InputError("--replay reads saved records: there are no hosts to feed or check")
    if request.sim is not None:
        from cwctl.fabric.topology import leaf_spine

        sim = request.sim
        names, _ = leaf_spine(sim.hosts, sim.hosts_per_leaf, sim.spines)
        return Fleet("sim", [HostInfo(name=n, address=n) for n in names])
    from cwctl.chrony.feeders import BOOT_LIFETIME_S

    if request.local is not None:
        from functools import partial

        from cwctl.actions.runners import LocalRunner
        from cwctl.transport.local import launch_local, local_hosts

        launch = partial(launch_local, lifetime_s=BOOT_LIFETIME_S)
        return Fleet("local", local_hosts(request.local), launch, LocalRunner(30.0))
    from cwctl.actions.runners import SSHRunner
    from cwctl.inventory import load_inventory
    from cwctl.transport.plan import inventory_hosts
    from cwctl.transport.ssh import SSHLauncher

    inventory = load_inventory(request.inventory)
    launcher = SSHLauncher.for_request(inventory, request, client_options=client_options)
    # a feeder outlives any fixed lifetime: its alarm only, re-armed as its lease
    launcher.lifetime_s, launcher.outer_guard = BOOT_LIFETIME_S, False
    runner = SSHRunner(
        inventory,
        client_options=client_options,
        accept_new_host_keys=request.accept_new_host_keys,
        timeout_s=30.0,
    )
    return Fleet("ssh", inventory_hosts(inventory), launcher, runner)
