"""Probe budgets: which one a scan runs at, and what it costs each agent.

Two budgets, defined once in ``cwctl.settings.BUDGETS`` (docs/sync.md, "Probe budgets"):

* ``quick`` -- the default of ``scan``, ``reroute --verify`` and one ``sync`` round: a
  couple of seconds, dense, the most accurate answer now;
* ``watch`` -- ``tui``, ``watch`` and the ``sync`` loop: sparse and continuous; the sliding
  solve (``cwctl.sync.incremental``) carries the clock model across windows.

Which one a scan runs at: ``--budget`` (``ScanRequest.budget``), else the inventory's
``[probe] budget``, else the command's (``ScanRequest.command_budget``). The budget gives
the rate and the window; an explicit ``--rate``/``--duration`` or inventory ``rate``/
``duration`` still wins over it (``cwctl.transport.plan.resolve_probe``).

The cost is the agent's, per second of probing: a coded pair is two probes, and each
probe costs each end a probe, a reply and a follow-up (the kernel's TX stamp), so an agent
with K peers at R pairs/s, probed as often as it probes, sends and receives 6 R K
datagrams a second, ``DATAGRAM_BYTES`` each on the IP layer. Its CPU is a fixed share
and ``AGENT_CPU_US_PER_DATAGRAM`` for each datagram it handles, in or out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cwctl import settings
from cwctl.errors import InputError
from cwctl.probe.auth import SEALED_SIZE
from cwctl.probe.cost import IP_UDP_HEADER_BYTES
from cwctl.settings import Budget

DATAGRAM_BYTES = SEALED_SIZE + IP_UDP_HEADER_BYTES  # a signed probe datagram on the IP layer
DATAGRAMS_PER_PAIR = 6  # sent by each end: (probe, reply, follow-up) x the pair's 2 probes
# The agent's CPU while probing: a fixed share (its loop's wake-ups, timers, batches) and
# a cost per datagram it sends or receives. Measured with the agents' own figures on
# `cwctl scan --local 8 --format json` (7 peers): at quick 7.0 us per datagram, at watch
# 0.6 % of a core in all (bench/bench_budgets.py prints both again).
AGENT_CPU_FIXED_PCT = 0.47
AGENT_CPU_US_PER_DATAGRAM = 7.0

# command -> the budget it runs at unless told otherwise
COMMAND_BUDGETS = {
    "scan": settings.BUDGET_QUICK,
    "reroute": settings.BUDGET_QUICK,  # --verify's rescan
    "sync-once": settings.BUDGET_QUICK,  # sync --count 1
    "sync": settings.BUDGET_WATCH,  # the loop
    "tui": settings.BUDGET_WATCH,
    "watch": settings.BUDGET_WATCH,
    # watch --once (cron): one window must answer alone, as a scan's does; at the watch
    # budget a window is too sparse to vouch for every element (the loop's rounds carry
    # the clock model, not the loss coverage), so a healthy fabric read inconclusive
    "watch-once": settings.BUDGET_QUICK,
}


@dataclass(frozen=True)
class BudgetCost:
    """What probing costs one agent each second, at a rate and a number of peers."""

    rate: float  # coded pairs per second per peer
    peers: int
    probes_s: float  # probes it sends a second (two per coded pair)
    kbit_s: float  # what it sends, IP and UDP headers included (as much comes in)
    core_pct: float  # expected share of one core while probing, in percent

    def as_dict(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "peers": self.peers,
            "probes_s": round(self.probes_s, 1),
            "kbit_s": round(self.kbit_s, 1),
            "core_pct": round(self.core_pct, 2),
        }


def cost(rate: float, peers: int = settings.PROBE_PEERS) -> BudgetCost:
    """The cost of probing ``peers`` peers at ``rate`` coded pairs per second each."""
    sent = DATAGRAMS_PER_PAIR * rate * peers
    return BudgetCost(
        rate=rate,
        peers=peers,
        probes_s=2.0 * rate * peers,
        kbit_s=sent * DATAGRAM_BYTES * 8 / 1000.0,
        core_pct=AGENT_CPU_FIXED_PCT + 2 * sent * AGENT_CPU_US_PER_DATAGRAM * 1e-4,
    )


def fleet_rate(b: Budget, hosts: int, peers: int, duration_s: float) -> float:
    """``b``'s rate per peer over ``hosts`` hosts probing ``peers`` peers each for
    ``duration_s``: lowered where the fleet would gather more than
    ``settings.SCAN_MAX_ROWS`` probe rows (two per coded pair) at the collector."""
    rows_per_rate = 2.0 * max(1, hosts) * max(1, real_peers(peers, hosts)) * max(duration_s, 1e-9)
    return min(b.rate, settings.SCAN_MAX_ROWS / rows_per_rate)


def budget(name: str, where: str = "--budget") -> Budget:
    """The budget called ``name``; an unknown name is one line naming ``where``."""
    found = settings.BUDGETS.get(name)
    if found is None:
        known = " or ".join(settings.BUDGETS)
        raise InputError(f"{where} {name!r}: give {known}")
    return found


def choose(asked: str | None, inventory: str | None, command: str) -> Budget:
    """The budget a scan runs at: asked by flag, else the inventory's, else the command's."""
    if asked is not None:
        return budget(asked)
    if inventory is not None:
        return budget(inventory, "[probe] budget")
    return budget(command, "the command's budget")


def describe(b: Budget, peers: int = settings.PROBE_PEERS) -> str:
    """One line: the budget, its rate and window, and what it costs each agent."""
    c = cost(b.rate, peers)
    return (
        f"{b.name}: {b.rate:g} pairs/s per peer for {b.duration_s:g} s from {b.ports} ports "
        f"({c.probes_s:,.0f} probes/s, {c.kbit_s:,.0f} kbit/s, ~{c.core_pct:.2g} % of a core "
        f"per agent at {peers} peers)"
    )


def help_text(default: str) -> str:
    """What ``--budget`` says in a command's ``--help``: both budgets and their costs."""
    lines = "; ".join(describe(b) for b in settings.BUDGETS.values())
    return f"Probe budget (default {default}): {lines}. --rate/--duration override it."


def report_params(
    name: str | None, rate: float, duration_s: float, peers: int, hosts: int
) -> dict[str, Any]:
    """What a scan's records say of its budget (``Collection.params["budget"]``): its
    name (None: rate and duration given by hand), the window, and the cost per agent at
    the peers each host really had."""
    return {
        "name": name,
        "duration_s": duration_s,
        **cost(rate, real_peers(peers, hosts)).as_dict(),
    }


def real_peers(peers: int, hosts: int) -> int:
    """The peers each host really probes: ``peers``, or every other host of a smaller fleet."""
    return max(0, min(peers, hosts - 1))
