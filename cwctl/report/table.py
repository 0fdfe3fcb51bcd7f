"""The scan report for people: the verdict, a summary, the hosts, the worst paths, the
suspects, and what to run next.

Rich tables sized for an 80-column terminal. A large fabric shows its most interesting
hosts (not ok, GPU trouble, named by a suspect, least certain clocks) and says how many
are hidden; ``--format json`` lists everything.
"""

from __future__ import annotations

import io
import math
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cwctl.report.nextsteps import next_lines
from cwctl.report.summary import (
    is_simulated,
    median_queueing_ns,
    silent_hosts,
    summary_lines,
    worst_paths,
)
from cwctl.report.verdict import HEALTHY, VERDICT_STYLES, verdict_line
from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.units import fmt_ns, fmt_ppb, fmt_ratio

HOST_ROWS = 12  # hosts shown when the fabric has more than HOST_ROWS_ALL
HOST_ROWS_ALL = 16
PATH_ROWS = 6
PATHS_TITLE = "worst paths (sorted ▼ by loss, then queueing p50, then queueing p99)"
SUSPECT_ROWS = 8


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
