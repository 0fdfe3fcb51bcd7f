"""What ``cwctl inventory check`` prints: the inventory described in plain text, or
as JSON (``cwctl.inventory/1``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from cwctl.inventory.discovery import discovery_summary
from cwctl.inventory.model import Host, Inventory


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def summarize(inv: Inventory) -> str:
    """What the inventory describes, as plain text: hosts per leaf, switches, settings."""
    leaves = [s for s in inv.switches if s.role == "leaf"]
    spines = [s for s in inv.switches if s.role == "spine"]
    label = str(inv.path) if inv.path else "inventory"
    n_switches = _plural(len(inv.switches), "switch", "switches")
    if inv.switches:
        n_switches += (
            f" ({_plural(len(leaves), 'leaf', 'leaves')}, {_plural(len(spines), 'spine')})"
        )
    out = [f"{label}: {_plural(len(inv.hosts), 'host')}, {n_switches}"]
    out.append("hosts per leaf:")
    by_leaf: dict[str | None, list[Host]] = {}
    for h in inv.hosts:
        by_leaf.setdefault(h.leaf, []).append(h)
    order = [s.name for s in leaves if s.name in by_leaf] + ([None] if None in by_leaf else [])
    width = max((len(s or "(no leaf)") for s in order), default=0)
    for leaf in order:
        members = by_leaf[leaf]
        shown = [h.name for h in members]
        if len(shown) > 8:  # a big leaf: its first and last hosts
            shown = [*shown[:3], "...", *shown[-2:]]
        names = ", ".join(shown)
        out.append(f"  {(leaf or '(no leaf)'):<{width}}  {len(members):>4}  {names}")
    idle = [s.name for s in leaves if s.name not in by_leaf]
    if idle:
        out.append(f"  leaves without hosts: {', '.join(idle)}")
    if inv.switches:
        out.append("switches:")
        width = max(len(s.name) for s in inv.switches)
        for s in spines + leaves:
            ups = f"  uplinks {', '.join(s.uplinks)}" if s.uplinks else ""
            acts = f"  {s.kind} via {s.address}" if s.kind else ""
            out.append(f"  {s.name:<{width}}  {s.role}{ups}{acts}")
    ssh = inv.ssh
    overrides = sum(1 for h in inv.hosts if h.user or h.port or h.python)
    out.append(
        f"ssh: user {ssh.user or '(from ~/.ssh/config or local user)'}, port {ssh.port}, "
        f"jump {ssh.jump or '(none)'}, connect timeout {ssh.connect_timeout:g} s, "
        f"concurrency {ssh.concurrency}, python {ssh.python}"
    )
    out.append(f"  identity {ssh.identity or '(ssh-agent / ~/.ssh/config)'}")
    out.append(f"  known_hosts {ssh.known_hosts or '~/.ssh/known_hosts'}")
    if overrides:
        verb = "overrides" if overrides == 1 else "override"
        out.append(f"  {_plural(overrides, 'host')} {verb} user, port or python")
    p = inv.probe
    budget = f"budget {p.budget}" if p.budget else "each command's budget (scan quick, tui watch)"
    window = "" if p.duration is None else f", {p.duration:g} s"
    rate = "" if p.rate is None else f", {p.rate:g} pairs/s per peer"
    ports = "the budget's" if p.ports is None else str(p.ports)
    out.append(
        f"probe: {budget}{window}{rate}, {p.peers} peers per host, "
        f"port {p.port or 'any'}, {ports} source ports, pair gap {p.gap_us:g} us"
    )
    sched = inv.scheduler
    where = (
        f" on {sched.host}" if sched.host else (" on this machine" if sched.kind != "none" else "")
    )
    out.append(f"scheduler: {sched.kind}{where}")
    out += discovery_summary(inv)
    return "\n".join(out)


INVENTORY_SCHEMA = "cwctl.inventory/1"


def inventory_json(inv: Inventory) -> dict[str, Any]:
    """What the inventory describes, as ``cwctl.inventory/1``: every host and switch
    with its keys, and the ``[ssh]``, ``[probe]`` and ``[scheduler]`` settings in force
    (defaults filled in)."""

    def plain(obj: Any) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(obj).items()}

    return {
        "schema": INVENTORY_SCHEMA,
        "path": str(inv.path) if inv.path else None,
        "hosts": [plain(h) for h in inv.hosts],
        "switches": [plain(s) for s in inv.switches],
        "ssh": plain(inv.ssh),
        "probe": plain(inv.probe),
        "scheduler": plain(inv.scheduler),
    }
