"""The scan report for people: the verdict, a summary, the hosts, the worst paths, the
suspects, and what to run next.

Rich tables sized for an 80-column terminal. A large fabric shows its most interesting
hosts (not ok, GPU trouble, named by a suspect, least certain clocks) and says how many
are hidden; ``--format json`` lists everything.
"""

from __future__ import annotations

import datetime as dt
import heapq
import io
import math
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cwctl.report.nextsteps import next_lines
from cwctl.report.verdict import HEALTHY, VERDICT_STYLES, verdict_line
from cwctl.snapshot import FabricSnapshot, HostReport, PathReport
from cwctl.units import fmt_ns, fmt_ppb, fmt_ratio

HOST_ROWS = 12  # hosts shown when the fabric has more than HOST_ROWS_ALL
HOST_ROWS_ALL = 16
PATH_ROWS = 6
PATHS_TITLE = "worst paths (sorted ▼ by loss, then queueing p50, then queueing p99)"
SUSPECT_ROWS = 8


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


def _suspect_hosts(snapshot: FabricSnapshot) -> set[str]:
    names = {s.element for s in snapshot.suspects}
    return {
        h.name
        for h in snapshot.hosts
        if h.name in names or any(n.startswith(h.name + "/") for n in names)
    }


def interesting_hosts(snapshot: FabricSnapshot, limit: int) -> list[HostReport]:
    """Hosts worth a line, most interesting first (all of them when few)."""
    if len(snapshot.hosts) <= HOST_ROWS_ALL:
        return list(snapshot.hosts)
    named = _suspect_hosts(snapshot)
    gpu_rank = {"fail": 0, "warn": 1}

    def key(h: HostReport) -> tuple[int, int, int, float]:
        unc = h.uncertainty_ns if h.uncertainty_ns is not None else math.inf
        return (
            h.status == "ok",
            gpu_rank.get(h.gpu_verdict or "", 2),
            h.name not in named,
            -(unc if math.isfinite(unc) else 1e30),
        )

    chosen = sorted(snapshot.hosts, key=key)[:limit]
    order = {h.name: i for i, h in enumerate(snapshot.hosts)}
    return sorted(chosen, key=lambda h: (h.status == "ok", order[h.name]))


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
    """The probe budget the scan ran at and what it cost each agent (``cwctl.budgets``)."""
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


def _status_text(h: HostReport, silent: set[str]) -> Text:
    if h.status == "ok" and h.name in silent:
        return Text("no fabric", style="bold red")  # SSH fine, every probe lost
    if h.status == "ok":
        return Text("ok", style="green")
    label = h.status if not h.error else f"{h.status}: {h.error}"
    return Text(label, style="bold red")


def _gpu_text(h: HostReport) -> Text:
    if h.gpu_verdict is None:
        return Text("-")
    style = {"ok": "green", "warn": "yellow", "fail": "bold red"}.get(h.gpu_verdict, "")
    n = f"{len(h.gpus)}× " if h.gpus else ""
    return Text(f"{n}{h.gpu_verdict}", style=style)


def hosts_title(snapshot: FabricSnapshot, shown: int) -> str:
    """Which hosts the table lists, and why: ``hosts: 12 of 64, the least certain clocks
    (...); --format json lists every host``."""
    total = len(snapshot.hosts)
    if shown >= total:
        return f"hosts: all {total}"
    return (
        f"hosts: {shown} of {total}, the least certain clocks (unreachable, GPU-failing "
        "and suspect hosts first), in inventory order; --format json lists every host"
    )


def _hosts_table(snapshot: FabricSnapshot) -> tuple[Table, int]:
    shown = interesting_hosts(snapshot, HOST_ROWS)
    silent = set(silent_hosts(snapshot))
    gpu = any(h.gpu_verdict is not None for h in snapshot.hosts)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("host", no_wrap=True)
    table.add_column("status", overflow="fold")  # an SSH error: as wide as the terminal allows
    table.add_column("offset", justify="right", no_wrap=True)
    table.add_column("drift", justify="right", no_wrap=True)
    table.add_column("±", justify="right", no_wrap=True)
    if gpu:
        table.add_column("GPU", no_wrap=True)
    for h in shown:
        row = [
            Text(h.name),
            _status_text(h, silent),
            Text(fmt_ns(h.offset_ns, signed=True)),
            Text(fmt_ppb(h.drift_ppb)),
            Text(fmt_ns(h.uncertainty_ns)),
        ]
        if gpu:
            row.append(_gpu_text(h))
        table.add_row(*row)
    return table, len(snapshot.hosts) - len(shown)


def _paths_table(snapshot: FabricSnapshot) -> Table:
    """The worst paths, in ``path_badness`` order, showing every column that order uses
    (loss, then median queueing, then p99 queueing); ▼ marks the sort columns."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("path", no_wrap=True, overflow="ellipsis", max_width=30)
    table.add_column("loss▼", justify="right", no_wrap=True)
    table.add_column("queue p50▼", justify="right", no_wrap=True)
    table.add_column("queue p99▼", justify="right", no_wrap=True)
    table.add_column("p99", justify="right", no_wrap=True)
    table.add_column("lossy ports", justify="right", no_wrap=True)
    for p in worst_paths(snapshot, PATH_ROWS):
        loss = Text(fmt_ratio(p.loss), style="bold red" if p.loss > 0.01 else "")
        table.add_row(
            f"{p.src} → {p.dst}",
            loss,
            fmt_ns(median_queueing_ns(p)),
            fmt_ns(p.excess_ns),
            fmt_ns(p.owd_p99_ns),
            _lossy_ports(p),
        )
    return table


def _lossy_ports(p: PathReport) -> str:
    """How many of the path's source ports lost probes (one of four: one bad ECMP way)."""
    ports = p.ports.to_json() if p.ports is not None else []
    if not ports:
        return "-"
    return f"{sum(1 for x in ports if x.get('loss', 0) > 0.01)}/{len(ports)}"


def _suspects_table(snapshot: FabricSnapshot) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("element", no_wrap=True, style="bold")
    table.add_column("kind", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    jobs = snapshot.jobs is not None  # a scheduler was read: the jobs each one hurts
    if jobs:
        table.add_column("jobs hurt: pairs hit", overflow="fold", max_width=28)
    table.add_column("evidence", overflow="fold", ratio=1)
    for s in snapshot.suspects[:SUSPECT_ROWS]:
        cells = [s.element, s.kind, f"{s.score:.2f}"]
        if jobs:
            cells.append(jobs_cell(s.jobs or []))
        table.add_row(*cells, s.evidence)
    return table


JOBS_SHOWN = 3  # jobs named per suspect in the table (the JSON lists all)


def jobs_cell(jobs: list[dict[str, Any]]) -> str:
    """``4105 alice/bert-eval 15/28`` per job (node pairs whose paths cross the suspect, of
    the job's pairs), most hit first; ``-`` for none."""
    if not jobs:
        return "-"
    lines = [
        f"{j['id']} {j['user']}/{j['name']} {j['paths_hit']}/{j['paths']}"
        + (" (its node)" if j.get("on_node") else "")
        for j in jobs[:JOBS_SHOWN]
    ]
    if len(jobs) > JOBS_SHOWN:
        lines.append(f"+{len(jobs) - JOBS_SHOWN} more")
    return "\n".join(lines)


def render_table(
    snapshot: FabricSnapshot,
    *,
    color: bool = True,
    width: int = 80,
    source: str | None = None,
    fold: bool = True,
) -> str:
    """The whole report as text, ``width`` columns wide; ``source``: the flags that name
    the hosts (``--sim --fault switch:spine2:down``), for the "Next:" lines. ``fold``
    False (a pipe, a file): a line of words stays one line, for grep and for a command
    to paste; tables keep ``width``. No line ends in padding."""
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        no_color=not color,
        force_terminal=color,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )

    def say(text: str, style: str = "") -> None:
        if fold:
            console.print(Text(text, style=style), overflow="fold")
        else:
            console.print(Text(text, style=style), soft_wrap=True)

    say(verdict_line(snapshot), VERDICT_STYLES[snapshot.verdict])
    lines = summary_lines(snapshot)
    for i, line in enumerate(lines):
        style = "bold yellow" if i == 0 and is_simulated(snapshot) else ""
        if line.startswith("the simulated fabric carries"):
            style = "bold yellow"
        if line.startswith("top suspect"):
            style = "bold red"
        say(line, style)
    # titles are lines of their own, as wide as the console, never folded to a table's width
    if snapshot.hosts:
        hosts, hidden = _hosts_table(snapshot)
        console.print(Text(hosts_title(snapshot, len(snapshot.hosts) - hidden), style="bold"))
        console.print(hosts)
    if snapshot.paths:
        console.print(Text(PATHS_TITLE, style="bold"))
        console.print(_paths_table(snapshot))
    if snapshot.suspects:
        console.print(Text("suspects", style="bold"))
        console.print(_suspects_table(snapshot))
        if len(snapshot.suspects) > SUSPECT_ROWS:
            console.print(Text(f"{len(snapshot.suspects) - SUSPECT_ROWS} more suspects not shown"))
    elif snapshot.verdict == "inconclusive":
        say("No suspects, but the window could not tell: inconclusive.", "bold yellow")
    elif snapshot.healthy:
        say(f"No suspects: {HEALTHY}.", "green")
    elif snapshot.unlocalised is None:  # unreachable hosts, busy ones, bad records
        say(f"No suspect element, but not healthy: {'; '.join(snapshot.verdict_reasons())}.",
            "bold red")  # fmt: skip
    if snapshot.unlocalised is not None:
        say(str(snapshot.unlocalised.get("evidence", "unlocalised loss")), "bold red")
    for line in next_lines(snapshot, source):
        say(line)
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())
