"""The scan report's plain-text summary: where the records came from, the hosts and
their clocks, what limits the figures, the worst path, the top suspect, the jobs.

The same lines head the table report and the TUI's status line.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math

from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.units import fmt_ns, fmt_ratio


def is_simulated(snapshot: FabricSnapshot) -> bool:
    return snapshot.source == "sim" or snapshot.source.endswith(":sim")


def applied_actions(snapshot: FabricSnapshot) -> list[str]:
    """The changes actions left in the simulated fabric this scan ran on (none: [])."""
    applied = (snapshot.truth or {}).get("applied") or []
    return [str(line) for line in applied]


def sync_p99_ns(snapshot: FabricSnapshot) -> float | None:
    """The 99th percentile of the hosts' clock uncertainty (the sync quality figure)."""
    vals = sorted(
        h.uncertainty_ns
        for h in snapshot.hosts
        if h.uncertainty_ns is not None and math.isfinite(h.uncertainty_ns)
    )
    if not vals:
        return None
    return vals[min(len(vals) - 1, math.ceil(0.99 * len(vals)) - 1)]


def median_queueing_ns(p: PathReport) -> float | None:
    """p50 over the path's floor: ``PathReport.queueing_ns`` (the heatmaps' metric)."""
    return p.queueing_ns


def path_badness(p: PathReport) -> tuple[float, float, float]:
    """Sort key of the worst paths: loss, then median queueing, then p99 queueing
    (``median_queueing_ns`` and ``excess_ns``, -1 where unknown; written out here: it is
    the key of every path of a scan)."""
    floor, p50, p99 = p.owd_min_ns, p.owd_p50_ns, p.owd_p99_ns
    return (
        round(1.0 - p.received / p.sent if p.sent else 0.0, 3),
        p50 - floor if p50 is not None and floor is not None else -1.0,
        p99 - floor if p99 is not None and floor is not None else -1.0,
    )


def worst_paths(snapshot: FabricSnapshot, n: int) -> list[PathReport]:
    """The ``n`` worst, in ``path_badness`` order (ties in the snapshot's order)."""
    return heapq.nlargest(n, snapshot.paths, key=path_badness)


def worst_path_line(p: PathReport) -> str:
    """``worst path gpu-016 → gpu-018: loss 0%, queueing p50 4.32 us, p99 28.3 us``: the
    report's summary line, and the TUI's history label."""
    return (
        f"worst path {p.src} → {p.dst}: loss {fmt_ratio(p.loss)}, "
        f"queueing p50 {fmt_ns(median_queueing_ns(p))}, p99 {fmt_ns(p.excess_ns)}"
    )


# reasons an agent refuses a datagram that no healthy scan produces (probe/auth.py);
# "unexpected" is left out: a genuine answer after its probe timed out lands there too
TAMPER_REASONS = ("bad_mac", "other_scan", "replay", "unknown_peer", "malformed")


def refused_datagrams(snapshot: FabricSnapshot) -> str:
    """'gpu-001 (bad_mac 3, replay 2), ...' for the hosts whose agent refused datagrams
    only tampering or strays explain; '' when none did."""
    parts = []
    for h in snapshot.hosts:
        dropped = (h.agent or {}).get("dropped") or {}
        counts = [f"{r} {dropped[r]:,}" for r in TAMPER_REASONS if dropped.get(r)]
        if counts:
            parts.append(f"{h.name} ({', '.join(counts)})")
    more = f" (+{len(parts) - 3} more)" if len(parts) > 3 else ""
    return ", ".join(parts[:3]) + more


def silent_hosts(snapshot: FabricSnapshot) -> list[str]:
    """Hosts reached (status ok) whose every probed path, in and out, lost everything:
    up for SSH, dead on the fabric. Read off the paths, not off any suspect's words."""
    probed = {h for p in snapshot.paths if p.sent for h in (p.src, p.dst)}
    heard = {h for p in snapshot.paths if p.received for h in (p.src, p.dst)}
    return [
        h.name
        for h in snapshot.hosts
        if h.status == "ok" and h.name in probed and h.name not in heard
    ]


def budget_line(snapshot: FabricSnapshot) -> str | None:
    """The probe budget the scan ran at and what it cost each agent (``cwctl.scan.budgets``)."""
    b = snapshot.telemetry.get("budget")
    if not isinstance(b, dict):
        return None
    name = b.get("name") or "custom"
    if b.get("name") and not b.get("own", True):
        name = f"{name}, rate or window changed"
    elif b.get("fleet_capped"):
        name = f"{name}, rate lowered to keep the fleet's probe rows within the collector's"
    return (
        f"budget {name} ({b['rate']:g} pairs/s/peer × {b['duration_s']:g} s): per agent "
        f"{b['probes_s']:,.0f} probes/s, {b['kbit_s']:,.0f} kbit/s, ~{b['core_pct']:.2g} % "
        "of a core"
    )


def summary_lines(snapshot: FabricSnapshot) -> list[str]:
    """The plain-text summary (also what the TUI's status line can show)."""
    lines = _source_lines(snapshot) + _host_lines(snapshot) + _caveat_lines(snapshot)
    worst = worst_paths(snapshot, 1)
    if worst:
        lines.append(worst_path_line(worst[0]))
    if snapshot.suspects:
        s = snapshot.suspects[0]
        more = f" (+{len(snapshot.suspects) - 1} more)" if len(snapshot.suspects) > 1 else ""
        lines.append(f"top suspect {s.element} ({s.kind}, score {s.score:.2f}){more}")
    else:
        lines.append("no suspects")
    if snapshot.jobs is not None:
        lines.append(jobs_line(snapshot))
    if snapshot.unlocalised is not None:
        lines.append(str(snapshot.unlocalised.get("evidence", "unlocalised loss")))
    if snapshot.verdict == "inconclusive":
        lines.append("inconclusive (exit 3): " + "; ".join(snapshot.inconclusive))
    return lines


def _source_lines(snapshot: FabricSnapshot) -> list[str]:
    """Where the records came from: the simulator (and its applied changes), a replay,
    the budget."""
    lines = []
    if is_simulated(snapshot):
        lines.append("SIMULATED fabric (--sim): these are not measurements of a real network")
    applied = applied_actions(snapshot)
    if applied:
        more = f" (+{len(applied) - 3} more)" if len(applied) > 3 else ""
        lines.append(
            f"the simulated fabric carries {len(applied)} applied action change(s): "
            f"{'; '.join(applied[:3])}{more} (cwctl sim status; cwctl sim reset clears them)"
        )
    lines.append(
        f"source {snapshot.source} · timestamps {snapshot.timestamp_source} · "
        f"{snapshot.records:,} records · {len(snapshot.paths):,} paths · "
        f"{snapshot.duration_s:g} s"
    )
    captured = snapshot.telemetry.get("captured_ns")
    if snapshot.source.startswith("replay:") and isinstance(captured, int):
        when = dt.datetime.fromtimestamp(captured / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"replay of records captured {when} UTC (the record file's header)")
    budget = budget_line(snapshot)
    if budget:
        lines.append(budget)
    return lines


def _host_lines(snapshot: FabricSnapshot) -> list[str]:
    """The hosts: how many answered, which are silent on the fabric, the clocks, and
    busy agents."""
    ok = sum(h.status == "ok" for h in snapshot.hosts)
    p99 = sync_p99_ns(snapshot)
    sync = f"±{fmt_ns(p99)} (p99 uncertainty)" if p99 is not None else "unsolved"
    ref = f" vs {snapshot.reference}" if snapshot.reference else ""
    silent = silent_hosts(snapshot)
    dead = ""
    if silent:
        names = ", ".join(silent[:3]) + (f" (+{len(silent) - 3} more)" if len(silent) > 3 else "")
        dead = f" · {len(silent)} silent on the fabric: {names}"
    lines = [f"hosts ok {ok}/{len(snapshot.hosts)}{dead} · clocks {sync}{ref}"]
    busy = [h.name for h in snapshot.hosts if h.agent and h.agent.get("busy")]
    if busy:
        names = ", ".join(busy[:3]) + (f" (+{len(busy) - 3} more)" if len(busy) > 3 else "")
        left = snapshot.telemetry.get("busy_exchanges", 0)
        lines.append(
            f"host busy: {names}: agent starved (CPU); {left:,} exchanges left out of "
            "localisation, not blamed on the network"
        )
        busy_with_loss = snapshot.busy_with_loss  # a pass over every path
        if busy_with_loss:
            lines.append(
                f"not healthy: {len(busy_with_loss)} busy hosts on paths that lost "
                "probes; rescan when their CPUs are free to tell host from network"
            )
    return lines


def _caveat_lines(snapshot: FabricSnapshot) -> list[str]:
    """What limits the figures: inconsistent records, refused datagrams, few probes,
    aged path records."""
    lines = [
        f"not healthy: records inconsistent ({problem['check']}): {problem['detail']}"
        for problem in snapshot.consistency  # telemetry/consistency.py
    ]
    refused = refused_datagrams(snapshot)
    if refused:
        lines.append(
            f"refused datagrams: {refused}: forged, replayed or stray packets at the probe "
            "ports (signed probes); the figures exclude them"
        )
    few = snapshot.telemetry.get("few_probes")
    if few:
        lines.append(
            f"few probes: {few['pairs_per_peer']:g} coded pairs per peer ({few['rate']:g}/s for "
            f"{few['duration_s']:g} s), under {few['needed']}: clocks and localisation have "
            f"little to go on; probe for {few['needed'] / few['rate']:g} s or more"
        )
    ages = snapshot.telemetry.get("path_records")
    if ages and (ages.get("aged") or ages.get("superseded")):
        lines.append(
            f"path records: {ages['aged']} of {ages['records']} older than "
            f"{ages['max_age_s']:g} s discounted (their flows' spines unknown), "
            f"{ages['superseded']} superseded by a newer trace naming another spine"
        )
    return lines


def jobs_line(snapshot: FabricSnapshot) -> str:
    """What the scheduler said: how many jobs run, how many the suspects hurt."""
    read = snapshot.jobs or {}
    if read.get("error"):
        return f"jobs: not known ({read['error']})"
    hurt = {j["id"] for s in snapshot.suspects for j in (s.jobs or [])}
    line = f"jobs: {read.get('running', 0)} running ({read.get('scheduler')})"
    return line + (f", {len(hurt)} hurt by the suspects" if snapshot.suspects else "")
