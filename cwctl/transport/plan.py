"""A scan's plan: what to probe and how (``ScanPlan``), and how each source builds it
from the request (duration, seed, probe flags) and, for ssh and slurm, the inventory.
``base.run_scan`` carries a plan out."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from typing import Any

from cwctl import settings as defaults
from cwctl.fabric.topology import Topology
from cwctl.inventory import Inventory, ProbeSettings
from cwctl.scan import budgets
from cwctl.scan.collection import HostInfo
from cwctl.scan.pathcache import PathCache
from cwctl.scan.request import ScanRequest
from cwctl.transport.traceplan import TraceSettings

HELLO_TIMEOUT_S = 20.0  # from session open to hello (python start-up, bind)


@dataclass
class ScanPlan:
    """What to probe and how, for one scan."""

    hosts: list[HostInfo]
    settings: ProbeSettings
    duration_s: float
    source: str
    topology: Topology | None = None
    seed: int = 0
    bind: dict[str, str] = field(default_factory=dict)  # host -> address the agent binds
    hello_timeout_s: float = HELLO_TIMEOUT_S
    trace: TraceSettings | None = None  # path discovery (traceplan.py); None: off
    cache: PathCache | None = None  # paths and ports of earlier scans (pathcache.py)
    # multi-rail hosts: (NIC, probe address) per NIC; the agent binds a socket set each
    rails: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # this scan's probe key and nonce (probe/auth.py), fresh for every plan; they reach
    # the agents in the params line on stdin, never on a command line
    auth: dict[str, str] = field(default_factory=lambda: scan_auth())
    tos: int = 0  # the IP TOS byte of every probe (ScanRequest.probe_tos)


def scan_auth() -> dict[str, str]:
    """A fresh random key (32 bytes) and nonce (8 bytes), as hex, for one scan."""
    return {"key": secrets.token_hex(32), "nonce": secrets.token_hex(8)}


def inventory_hosts(inventory: Inventory) -> list[HostInfo]:
    """The inventory's hosts as a scan (or ``cwctl sync``) takes part with them."""
    return [
        HostInfo(name=h.name, address=h.address, leaf=h.leaf, nics=tuple(h.nics))
        for h in inventory.hosts
    ]


def resolve_probe(
    request: ScanRequest, base: ProbeSettings | None = None, hosts: int | None = None
) -> ProbeSettings:
    """The probe settings a scan runs at, every one of them set: the flags' over the
    inventory's (``base``) over the chosen budget's rate and window (``cwctl.scan.budgets``).
    ``budget`` names the budget chosen. Over ``hosts`` hosts the budget's rate is the
    fleet's share of ``settings.SCAN_MAX_ROWS`` where that is lower (``fleet_rate``)."""
    base = request.overrides.over(base or ProbeSettings())
    chosen = budgets.choose(request.budget, base.budget, request.command_budget)
    duration = request.duration_s if request.duration_s is not None else base.duration
    window = duration if duration is not None else chosen.duration_s
    rate = chosen.rate if hosts is None else budgets.fleet_rate(chosen, hosts, base.peers, window)
    return replace(
        base,
        budget=chosen.name,
        duration=window,
        rate=base.rate if base.rate is not None else rate,
        ports=base.ports if base.ports is not None else chosen.ports,
    )


def budget_params(probe: ProbeSettings, hosts: int) -> dict[str, Any]:
    """``Collection.params["budget"]`` of a scan at ``probe`` (``resolve_probe``'s) over
    ``hosts`` hosts: the budget, whether flags or the inventory changed its rate or
    window, and what it costs each agent."""
    rate, duration = float(probe.rate or 0.0), float(probe.duration or 0.0)
    chosen = budgets.budget(probe.budget or defaults.BUDGET_QUICK)
    fleet = budgets.fleet_rate(chosen, hosts, probe.peers, duration)
    return {
        **budgets.report_params(chosen.name, rate, duration, probe.peers, hosts),
        "own": rate in (chosen.rate, fleet) and duration == chosen.duration_s,
        "fleet_capped": rate == fleet < chosen.rate,
    }


def request_plan(
    request: ScanRequest,
    hosts: list[HostInfo],
    settings: ProbeSettings,
    source: str,
    **more: Any,
) -> ScanPlan:
    """A plan with what the request says of every scan: its duration (else the probe
    settings') and its seed."""
    settings = resolve_probe(request, settings, len(hosts))
    return ScanPlan(
        hosts=hosts,
        settings=settings,
        duration_s=float(settings.duration or 0.0),
        source=source,
        seed=request.overrides.seed or 0,
        tos=request.probe_tos,
        **more,
    )


def inventory_plan(
    inventory: Inventory,
    request: ScanRequest,
    *,
    source: str,
    hello_margin_s: float,
    cache: PathCache | None,
) -> ScanPlan:
    """The plan of a scan of an inventory's hosts (ssh, slurm): the request's probe
    settings over the inventory's, the topology, where each agent binds (the fabric's
    probe address, not the management one), its rails (one per NIC where the inventory
    gives ``probe_addresses``), path discovery where switch addresses can name the hops
    it finds, and ``hello_margin_s`` past the connect timeout for each agent's hello."""
    probe = inventory.probe  # the flags' overrides are applied once, by request_plan
    hosts = inventory.hosts
    return request_plan(
        request,
        inventory_hosts(inventory),
        probe,
        source,
        topology=inventory.topology(),
        hello_timeout_s=inventory.ssh.connect_timeout + hello_margin_s,
        cache=cache,
        bind={h.name: h.probe_binds()[0][1] for h in hosts if h.probe_address or h.probe_addresses},
        rails={
            h.name: [(str(nic), address) for nic, address in h.probe_binds()]
            for h in hosts
            if h.probe_addresses
        },
        trace=TraceSettings.for_ratelimit(probe.icmp_ratelimit_ms)
        if probe.trace and inventory.switch_of_address()
        else None,
    )
