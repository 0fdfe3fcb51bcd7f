"""The typer app: parse flags, call the core, print. Nothing else lives here.

Data goes to stdout, messages and progress to stderr. Every ``CwctlError`` becomes one
line on stderr and its exit code (docs/cli.md); a traceback only with ``--verbose``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from cwctl import __version__, atomic
from cwctl.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, CwctlError

app = typer.Typer(
    name="cwctl",
    help="Clock sync, fabric telemetry and control for GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
inventory_app = typer.Typer(help="Inspect and validate an inventory file.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")


class _State:
    verbose: bool = False
    color: bool = True


STATE = _State()
T = TypeVar("T")


class Format(StrEnum):
    table = "table"
    json = "json"
    prom = "prom"


class Timestamps(StrEnum):
    hw = "hw"
    sw = "sw"


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"cwctl: {message}", err=True)
    raise typer.Exit(code)


def run_guarded(fn: Callable[[], T]) -> T:
    """Run a command body; domain errors become one line on stderr and their exit code."""
    try:
        return fn()
    except CwctlError as exc:
        if STATE.verbose:
            import traceback

            traceback.print_exc()
        lines = str(exc).splitlines() or [exc.__class__.__name__]
        for line in lines:
            typer.echo(f"cwctl: {line}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("cwctl: interrupted", err=True)
        raise typer.Exit(130) from None
    except (typer.Exit, SystemExit):
        raise
    except Exception as exc:  # a bug: say so in one line, keep the traceback for -v
        if STATE.verbose:
            raise
        typer.echo(
            f"cwctl: internal error: {exc.__class__.__name__}: {exc} (a bug; -v shows where)",
            err=True,
        )
        raise typer.Exit(1) from None


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cwctl {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="More detail; tracebacks on errors.")
    ] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour in output.")] = False,
) -> None:
    """cwctl: measure the fabric, then steer it."""
    STATE.verbose = verbose
    STATE.color = not no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()


# --- shared options -------------------------------------------------------------------

InventoryOpt = Annotated[
    Path | None,
    typer.Option(
        "-i",
        "--inventory",
        envvar="CWCTL_INVENTORY",
        help="Inventory file (default $CWCTL_INVENTORY, else ./inventory.toml).",
    ),
]
LocalOpt = Annotated[
    int | None,
    typer.Option("--local", min=2, max=250, help="N agents on this machine's loopback."),
]
SimOpt = Annotated[bool, typer.Option("--sim", help="Use the built-in simulated fabric.")]
HostsOpt = Annotated[int, typer.Option("--hosts", min=2, help="Simulated hosts.")]
HostsPerLeafOpt = Annotated[int, typer.Option("--hosts-per-leaf", min=1, help="Hosts per leaf.")]
SpinesOpt = Annotated[int, typer.Option("--spines", min=1, help="Simulated spines.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Simulator seed.")]
FaultOpt = Annotated[
    list[str] | None,
    typer.Option("--fault", help="Inject a fault: KIND:NAME[:MODE][@T] (repeatable)."),
]
TimestampsOpt = Annotated[
    Timestamps, typer.Option("--timestamps", help="Simulated timestamping: hw or sw.")
]
LoadOpt = Annotated[float, typer.Option("--load", min=0.0, max=1.0, help="Simulated load 0..1.")]
DurationOpt = Annotated[
    float | None, typer.Option("--duration", min=0.1, help="Seconds of probing.")
]
FormatOpt = Annotated[Format, typer.Option("--format", help="table, json or prom.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Write the report here (atomic).")]
SaveOpt = Annotated[
    Path | None, typer.Option("--save-records", help="Keep every probe record (.gz ok).")
]
HeatmapOpt = Annotated[
    Path | None, typer.Option("--heatmap", help="Also write the host x host heatmap (PNG).")
]
ReplayOpt = Annotated[
    Path | None, typer.Option("--replay", help="Analyse saved records instead of probing.")
]
ReferenceOpt = Annotated[
    str | None, typer.Option("--reference", help="Host whose clock is the reference.")
]
ConcurrencyOpt = Annotated[
    int | None, typer.Option("--concurrency", min=1, help="SSH sessions at once (default 128).")
]
AcceptKeysOpt = Annotated[
    bool,
    typer.Option(
        "--accept-new-host-keys",
        help="Trust and record unknown SSH host keys (changed keys are still refused).",
    ),
]


def build_request(
    *,
    inventory: Path | None,
    local: int | None,
    sim: bool,
    replay: Path | None,
    hosts: int,
    hosts_per_leaf: int,
    spines: int,
    seed: int,
    faults: list[str] | None,
    timestamps: Timestamps,
    load: float,
    duration: float | None,
    save_records: Path | None,
    reference: str | None,
    concurrency: int | None,
    accept_new_host_keys: bool,
) -> Any:
    """A ScanRequest from the flags; exactly one source of hosts."""
    from cwctl.pipeline import ScanRequest, SimOptions

    given = [name for name, on in (("--local", local), ("--sim", sim), ("--replay", replay)) if on]
    if len(given) > 1:
        _fail(f"give one source of hosts, not {' and '.join(given)}")
    if faults and not sim:
        _fail("--fault needs --sim")
    sim_options = None
    if sim:
        sim_options = SimOptions(
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=tuple(faults or ()),
            timestamps=timestamps.value,
            load=load,
        )
    if not given:
        inventory = inventory or Path("inventory.toml")
    return ScanRequest(
        inventory=inventory if (not given or sim) else None,
        local=local,
        sim=sim_options,
        replay=replay,
        duration_s=duration,
        save_records=save_records,
        reference=reference,
        concurrency=concurrency,
        accept_new_host_keys=accept_new_host_keys,
    )


def write_output(text: str, out: Path | None) -> None:
    """To stdout, or atomically to ``out`` (write a sibling, then rename over)."""
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        atomic.write_text(out, text)
    except OSError as exc:
        _fail(f"cannot write {out}: {exc.strerror}")


# --- commands -------------------------------------------------------------------------


@app.command()
def scan(
    inventory: InventoryOpt = None,
    local: LocalOpt = None,
    sim: SimOpt = False,
    hosts: HostsOpt = 64,
    hosts_per_leaf: HostsPerLeafOpt = 8,
    spines: SpinesOpt = 4,
    seed: SeedOpt = 1,
    fault: FaultOpt = None,
    timestamps: TimestampsOpt = Timestamps.hw,
    load: LoadOpt = 0.2,
    duration: DurationOpt = None,
    fmt: FormatOpt = Format.table,
    out: OutOpt = None,
    save_records: SaveOpt = None,
    replay: ReplayOpt = None,
    reference: ReferenceOpt = None,
    concurrency: ConcurrencyOpt = None,
    accept_new_host_keys: AcceptKeysOpt = False,
    heatmap: HeatmapOpt = None,
) -> None:
    """One scan: probe, solve clocks, measure paths, report. Exit 3 if problems found."""

    def body() -> int:
        from cwctl.pipeline import scan as run_scan
        from cwctl.report import render

        request = build_request(
            inventory=inventory,
            local=local,
            sim=sim,
            replay=replay,
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=fault,
            timestamps=timestamps,
            load=load,
            duration=duration,
            save_records=save_records,
            reference=reference,
            concurrency=concurrency,
            accept_new_host_keys=accept_new_host_keys,
        )
        snapshot = asyncio.run(run_scan(request, _progress_printer()))
        color = STATE.color and out is None and fmt is Format.table
        write_output(render(snapshot, fmt.value, color=color), out)
        if heatmap is not None:
            from cwctl.report.heatmap import write_heatmap

            write_heatmap(snapshot, heatmap)
        return EXIT_OK if snapshot.healthy else EXIT_PROBLEMS

    raise typer.Exit(run_guarded(body))


def _progress_printer() -> Callable[[str, dict[str, Any]], None] | None:
    """Progress lines on stderr when it is a terminal or with --verbose."""
    if not (STATE.verbose or sys.stderr.isatty()):
        return None

    def progress(event: str, fields: dict[str, Any]) -> None:
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        typer.echo(f"cwctl: {event} {detail}".rstrip(), err=True)

    return progress


@app.command()
def tui(
    inventory: InventoryOpt = None,
    local: LocalOpt = None,
    sim: SimOpt = False,
    hosts: HostsOpt = 64,
    hosts_per_leaf: HostsPerLeafOpt = 8,
    spines: SpinesOpt = 4,
    seed: SeedOpt = 1,
    fault: FaultOpt = None,
    timestamps: TimestampsOpt = Timestamps.hw,
    load: LoadOpt = 0.2,
    duration: DurationOpt = None,
    reference: ReferenceOpt = None,
    concurrency: ConcurrencyOpt = None,
    accept_new_host_keys: AcceptKeysOpt = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.0, help="Seconds between scans.")
    ] = 1.0,
    readonly: Annotated[bool, typer.Option("--readonly", help="Hide every action.")] = False,
) -> None:
    """The scan pipeline, continuously, in a live terminal UI."""

    def body() -> None:
        from cwctl.tui.app import make_app
        from cwctl.tui.source import PipelineSource

        request = build_request(
            inventory=inventory,
            local=local,
            sim=sim,
            replay=None,
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=fault,
            timestamps=timestamps,
            load=load,
            duration=duration,
            save_records=None,
            reference=reference,
            concurrency=concurrency,
            accept_new_host_keys=accept_new_host_keys,
        )
        if request.inventory is not None and request.sim is None:
            from cwctl.inventory import load_inventory

            load_inventory(request.inventory)  # a broken inventory: one line, before the UI
        make_app(PipelineSource(request), readonly=readonly, interval_s=interval).run()

    run_guarded(body)


ApplyOpt = Annotated[
    bool, typer.Option("--apply", help="Carry the plan out (asks first, unless --yes).")
]
YesOpt = Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")]
VerifyOpt = Annotated[
    bool, typer.Option("--verify", help="After applying, rescan: exit 3 if the suspect remains.")
]


class PlanFormat(StrEnum):
    table = "table"
    json = "json"


SudoOpt = Annotated[
    bool, typer.Option("--sudo", help="Run each command through 'sudo -n' on its host.")
]
PlanFormatOpt = Annotated[
    PlanFormat,
    typer.Option("--format", help="table (the plan as text) or json (cwctl.action/1)."),
]


def _action_request(
    *,
    inventory: Path | None,
    sim: bool,
    hosts: int,
    hosts_per_leaf: int,
    spines: int,
    seed: int,
    faults: list[str] | None,
    duration: float | None,
) -> Any:
    """The ScanRequest an action plans against (and --verify rescans)."""
    from cwctl.pipeline import ScanRequest, SimOptions

    if faults and not sim:
        _fail("--fault needs --sim")
    options = None
    if sim:
        options = SimOptions(
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=tuple(faults or ()),
        )
    elif inventory is None:
        inventory = Path("inventory.toml")
    return ScanRequest(inventory=inventory, sim=options, duration_s=duration)


def _shell(yes: bool, fmt: PlanFormat = PlanFormat.table) -> Any:
    """Plans to stdout, messages to stderr, confirmation with typer.confirm."""
    from cwctl.actions.session import Shell

    def confirm(plan: Any) -> bool:
        if yes:
            return True
        n = len(plan.steps)
        try:
            return typer.confirm(
                f"apply {plan.kind} {plan.element} ({n} step{'s' if n != 1 else ''})?",
                err=True,
            )
        except typer.Abort:
            typer.echo("", err=True)
            return False

    return Shell(
        show=lambda text: typer.echo(text, nl=False),
        say=lambda text: typer.echo(f"cwctl: {text}" if "\n" not in text else text, err=True),
        confirm=confirm,
        full=STATE.verbose,
        as_json=fmt is PlanFormat.json,
    )


@app.command()
def reroute(
    element: Annotated[str, typer.Argument(help="The suspect to steer around.")],
    inventory: InventoryOpt = None,
    sim: SimOpt = False,
    hosts: HostsOpt = 64,
    hosts_per_leaf: HostsPerLeafOpt = 8,
    spines: SpinesOpt = 4,
    seed: SeedOpt = 1,
    fault: FaultOpt = None,
    duration: DurationOpt = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="TCP: the destination prefix to reweight.")
    ] = None,
    gateway: Annotated[
        list[str] | None,
        typer.Option("--gateway", help="TCP: SWITCH=ADDRESS, the next hop to SWITCH (repeatable)."),
    ] = None,
    nccl_conf: Annotated[
        str, typer.Option("--nccl-conf", help="NIC: the NCCL config file on the host.")
    ] = "/etc/nccl.conf",
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    fmt: PlanFormatOpt = PlanFormat.table,
    sudo: SudoOpt = False,
    verify: VerifyOpt = False,
) -> None:
    """Plan steering traffic around a suspect; --apply carries it out."""

    def body() -> int:
        from cwctl.actions.plan import with_sudo
        from cwctl.actions.planner import RouteOptions, plan_reroute
        from cwctl.actions.route import parse_gateways
        from cwctl.actions.session import act

        options = RouteOptions(prefix=prefix, gateways=parse_gateways(gateway), nccl_conf=nccl_conf)
        request = _action_request(
            inventory=inventory,
            sim=sim,
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=fault,
            duration=duration,
        )

        async def make(target: Any, runner: Any) -> Any:
            plan = await plan_reroute(element, target, runner, options)
            return with_sudo(plan) if sudo else plan

        return asyncio.run(act(make, request, _shell(yes, fmt), apply=apply, check=verify))

    raise typer.Exit(run_guarded(body))


def _scheduler_action(
    kind: str,
    host: str,
    request: Any,
    *,
    reason: str,
    evict: bool,
    apply: bool,
    yes: bool,
    verify: bool,
    fmt: PlanFormat = PlanFormat.table,
    sudo: bool = False,
) -> int:
    from cwctl.actions.plan import with_sudo
    from cwctl.actions.planner import plan_drain, plan_resume
    from cwctl.actions.session import act

    async def make(target: Any, runner: Any) -> Any:
        if kind == "drain":
            plan = plan_drain(host, target, reason=reason, evict=evict)
        else:
            plan = plan_resume(host, target, reason=reason)
        return with_sudo(plan) if sudo else plan

    return asyncio.run(act(make, request, _shell(yes, fmt), apply=apply, check=verify))


@app.command()
def drain(
    host: Annotated[str, typer.Argument(help="The host to take out of the scheduler.")],
    inventory: InventoryOpt = None,
    sim: SimOpt = False,
    hosts: HostsOpt = 64,
    hosts_per_leaf: HostsPerLeafOpt = 8,
    spines: SpinesOpt = 4,
    seed: SeedOpt = 1,
    fault: FaultOpt = None,
    duration: DurationOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Why, for the scheduler.")] = "cwctl",
    evict: Annotated[
        bool, typer.Option("--evict", help="Kubernetes: also evict its pods (kubectl drain).")
    ] = False,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    fmt: PlanFormatOpt = PlanFormat.table,
    sudo: SudoOpt = False,
    verify: VerifyOpt = False,
) -> None:
    """Take a host out of the scheduler (Slurm drain, Kubernetes cordon)."""

    def body() -> int:
        request = _action_request(
            inventory=inventory,
            sim=sim,
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=fault,
            duration=duration,
        )
        return _scheduler_action(
            "drain",
            host,
            request,
            reason=reason,
            evict=evict,
            apply=apply,
            yes=yes,
            verify=verify,
            fmt=fmt,
            sudo=sudo,
        )

    raise typer.Exit(run_guarded(body))


@app.command()
def resume(
    host: Annotated[str, typer.Argument(help="The host to put back into the scheduler.")],
    inventory: InventoryOpt = None,
    sim: SimOpt = False,
    hosts: HostsOpt = 64,
    hosts_per_leaf: HostsPerLeafOpt = 8,
    spines: SpinesOpt = 4,
    seed: SeedOpt = 1,
    apply: ApplyOpt = False,
    yes: YesOpt = False,
    fmt: PlanFormatOpt = PlanFormat.table,
    sudo: SudoOpt = False,
) -> None:
    """Put a drained host back into the scheduler."""

    def body() -> int:
        request = _action_request(
            inventory=inventory,
            sim=sim,
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=None,
            duration=None,
        )
        return _scheduler_action(
            "resume",
            host,
            request,
            reason="cwctl",
            evict=False,
            apply=apply,
            yes=yes,
            verify=False,
            fmt=fmt,
            sudo=sudo,
        )

    raise typer.Exit(run_guarded(body))


@app.command()
def rollback(
    action_id: Annotated[str | None, typer.Argument(help="Journal entry to undo.")] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Carry the undo out.")] = False,
    yes: YesOpt = False,
    fmt: PlanFormatOpt = PlanFormat.table,
) -> None:
    """Undo an applied action (the latest, or the one named)."""

    def body() -> int:
        from cwctl.actions.session import roll_back

        return asyncio.run(roll_back(action_id, _shell(yes, fmt), apply=apply))

    raise typer.Exit(run_guarded(body))


class JournalFormat(StrEnum):
    table = "table"
    json = "json"


@app.command()
def journal(
    fmt: Annotated[JournalFormat, typer.Option("--format", help="table or json.")] = (
        JournalFormat.table
    ),
) -> None:
    """List the actions cwctl has applied."""

    def body() -> None:
        import json as jsonlib

        from cwctl.actions.journal import Journal, iter_rows

        read = Journal().read()
        for line in read.skipped:
            typer.echo(f"cwctl: {line}", err=True)
        rows = list(iter_rows(read.entries))
        if fmt is JournalFormat.json:
            typer.echo(jsonlib.dumps({"schema": "cwctl.journal/1", "entries": rows}, indent=1))
            return
        if not rows:
            typer.echo("cwctl: the journal is empty", err=True)
            return
        header = ("ID", "TIME", "EVENT", "KIND", "ELEMENT", "STATUS", "STEPS", "NOTE")
        table = [header]
        for r in rows:
            note = ""
            if r["rollback_of"]:
                note = f"undoes {r['rollback_of']}"
            elif r["rolled_back_by"]:
                note = f"rolled back by {r['rolled_back_by']}"
            if r["verify"]:
                note = f"{note}; verify: {r['verify']}".lstrip("; ")
            steps = f"{r['steps_ok']}/{r['steps']}"
            table.append(
                tuple(
                    str(x or "")
                    for x in (
                        r["id"],
                        r["time"],
                        r["event"],
                        r["kind"],
                        r["element"],
                        r["status"],
                        steps,
                        note,
                    )
                )
            )
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    run_guarded(body)


@inventory_app.command("check")
def inventory_check(inventory: InventoryOpt = None) -> None:
    """Validate an inventory file and print what it describes. Exit 2 if invalid."""

    def body() -> None:
        from cwctl.inventory import load_inventory, summarize

        path = inventory or Path("inventory.toml")
        typer.echo(summarize(load_inventory(path)))

    run_guarded(body)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
