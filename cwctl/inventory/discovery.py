"""What an inventory lacks for path discovery (docs/paths.md), as ``inventory check``
says it: each gap one line, naming what is missing and what it costs.

Path discovery turns the addresses of routers that answer TTL expiry into switch names
through the switches' ``addresses``, binds each agent to its host's fabric address
(``probe_address`` / ``probe_addresses``) and asks routers only about the hops the
topology leaves open (hosts' ``leaf``, leaves' ``uplinks``). None of these gaps is an
error: discovery does what it can and leaves the rest unknown.
"""

from __future__ import annotations

import ipaddress
import math
from collections import Counter

from cwctl import settings
from cwctl.inventory.model import Inventory


def _names(items: list[str], most: int = 6) -> str:
    shown = items if len(items) <= most else [*items[: most - 1], f"... ({len(items)} in all)"]
    return ", ".join(shown)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def discovery_gaps(inv: Inventory) -> list[str]:
    """One line per thing path discovery lacks; empty when the inventory has it all."""
    if not inv.probe.trace:
        return ["off ([probe] trace = false): flows' paths stay unknown"]
    if not any(s.addresses for s in inv.switches):
        return [
            "off: no [[switch]] lists its addresses, so no answering router could be named "
            "(add each switch's fabric interface addresses as addresses = [...])"
        ]
    gaps = []
    bare = [s.name for s in inv.switches if not s.addresses]
    if bare:
        gaps.append(f"switches without addresses (their hops stay unknown): {_names(bare)}")
    separate = any(h.probe_address or h.probe_addresses for h in inv.hosts)
    if separate:
        lacking = [h.name for h in inv.hosts if not (h.probe_address or h.probe_addresses)]
        if lacking:
            gaps.append(
                "hosts without probe_address (they probe from their SSH address, "
                f"while others use a separate fabric address): {_names(lacking)}"
            )
    named = [h.name for h in inv.hosts if not h.probe_address and not _is_ip(h.address)]
    if named and not separate:
        gaps.append(
            "hosts reached by name without probe_address (the agent binds what the name "
            f"resolves to there; give the fabric address): {_names(named)}"
        )
    rails = [h.name for h in inv.hosts if len(h.nics) > 1 and not h.probe_addresses]
    if rails:
        gaps.append(
            "hosts with several NICs but one probe address (a bad NIC is named as the "
            f"host; give probe_addresses, one per NIC): {_names(rails)}"
        )
    leafless = [h.name for h in inv.hosts if h.leaf is None]
    if leafless:
        gaps.append(
            "hosts without a leaf (every TTL is traced, one ICMP answer per router on the "
            f"way instead of one per path): {_names(leafless)}"
        )
    spines = {s.name for s in inv.switches if s.role == "spine"}
    flat = [s.name for s in inv.switches if s.role == "leaf" and not s.uplinks and spines]
    if flat:
        gaps.append(f"leaves without uplinks (their spines are not known): {_names(flat)}")
    return gaps


def discovery_summary(inv: Inventory) -> list[str]:
    """The ``path discovery:`` lines of the inventory summary."""
    gaps = discovery_gaps(inv)
    if gaps and gaps[0].startswith("off"):
        return [f"path discovery: {gaps[0]}"]
    limit = inv.probe.icmp_ratelimit_ms
    pace = (
        f"switches answer {1000 / limit:g} ICMP/s per host each (icmp_ratelimit_ms {limit})"
        if limit
        else "switches do not rate-limit ICMP (icmp_ratelimit_ms 0)"
    )
    known = sum(len(s.addresses) for s in inv.switches)
    out = [f"path discovery: on, {known} switch addresses, {pace}"]
    if limit and (scans := _scans_to_learn(inv)) is not None:
        out.append(
            f"  about {scans} scan{'s' if scans != 1 else ''} of {_window_s(inv):g} s to "
            "learn every spine a host's flows cross (then only revalidation)"
        )
    out += [f"  lacks: {gap}" for gap in gaps] or ["  nothing missing"]
    return out


def _window_s(inv: Inventory) -> float:
    """A scan's probing window: the inventory's, else its budget's, else a scan's (quick)."""
    if inv.probe.duration is not None:
        return inv.probe.duration
    return settings.BUDGETS[inv.probe.budget or settings.BUDGET_QUICK].duration_s


def _ports(inv: Inventory) -> int:
    """Source ports each host probes from: the inventory's, else its budget's (quick's)."""
    if inv.probe.ports is not None:
        return inv.probe.ports
    return settings.BUDGETS[inv.probe.budget or settings.BUDGET_QUICK].ports


def _scans_to_learn(inv: Inventory) -> int | None:
    """Scans until every cross-leaf flow of a host has its spine (docs/paths.md): one ICMP
    answer per flow and direction, the host's spines each answering 1000/limit a second
    after a burst of six. None without leaves and uplinks to go by."""
    leaf_of = {h.name: h.leaf for h in inv.hosts if h.leaf}
    uplinks = {s.name: len(s.uplinks) for s in inv.switches if s.role == "leaf" and s.uplinks}
    if not leaf_of or not uplinks or len(inv.hosts) < 2:
        return None
    worst = 0.0
    for leaf, on_leaf in Counter(leaf_of.values()).items():  # a leaf's hosts are alike
        spines = uplinks.get(leaf, 0)
        if not spines:
            continue
        elsewhere = len(leaf_of) - on_leaf  # the hosts on other leaves
        share = elsewhere / (len(inv.hosts) - 1)
        peers = min(inv.probe.peers, len(inv.hosts) - 1)
        answers = 2 * peers * _ports(inv) * share  # its probe flows and replies
        per_s = spines * 1000.0 / inv.probe.icmp_ratelimit_ms
        worst = max(worst, max(0.0, answers - 6 * spines) / per_s)
    window_s = _window_s(inv) + 0.7  # probing and the linger after it
    return max(1, math.ceil(worst / window_s))
