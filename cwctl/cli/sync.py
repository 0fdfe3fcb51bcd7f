"""``cwctl sync`` (feed each host's chronyd the solved offsets) and ``cwctl sync check``."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from cwctl import settings
from cwctl.cli.app import STATE, app, fail, run_guarded
from cwctl.cli.durations import METAVAR as DURATION
from cwctl.cli.durations import Duration
from cwctl.cli.options import SCAN_FLAGS, SourceFlags, build_request, source_flags
from cwctl.errors import EXIT_OK, EXIT_PROBLEMS
from cwctl.scan.budgets import COMMAND_BUDGETS
from cwctl.units import parse_seconds

sync_app = typer.Typer(
    help="Feed each host's chronyd the offsets cwctl solves (SOCK refclock); dry run by default.",
    invoke_without_command=True,
)
app.add_typer(sync_app, name="sync")


class SyncFormat(StrEnum):
    table = "table"
    json = "json"


SocketOpt = Annotated[
    str,
    typer.Option(
        "--socket",
        metavar="PATH",
        help="chronyd's refclock SOCK path on each host; {host} becomes the host's name.",
    ),
]
ChronycSocketOpt = Annotated[
    str | None,
    typer.Option(
        "--chronyc-socket",
        metavar="PATH",
        help="chronyd's command socket for chronyc -h ({host} allowed); default chronyc's own.",
    ),
]
PeriodOpt = Annotated[
    float,
    typer.Option(
        "--sample-period",
        parser=Duration(low=0.05, high=64),
        metavar=DURATION,
        help="Time between samples to chronyd (50ms to 64s).",
    ),
]
FormatOpt = Annotated[
    SyncFormat,
    typer.Option("--format", "-o", metavar="table|json", help="table or json (one per line)."),
]


@sync_app.callback()
@source_flags(*SCAN_FLAGS)
def sync(
    ctx: typer.Context,
    flags: SourceFlags,
    apply: Annotated[
        bool, typer.Option("--apply", help="Feed chronyd (default: dry run).")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Confirm --step feeds without asking.")
    ] = False,
    step: Annotated[
        bool, typer.Option("--step", help="Also feed offsets beyond --max-offset (confirmed).")
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            parser=Duration(low=0.5, high=86_400),
            metavar=DURATION,
            help="Time from scan to scan (500ms to 24h).",
        ),
    ] = settings.SYNC_INTERVAL_S,
    count: Annotated[
        int | None,
        typer.Option("--count", metavar="N", help="Stop after N rounds (default: until Ctrl-C)."),
    ] = None,
    max_uncertainty: Annotated[
        float,
        typer.Option(
            "--max-uncertainty",
            parser=Duration(low=1e-9),
            metavar=DURATION,
            show_default=settings.SYNC_MAX_UNCERTAINTY,
            help="Feed only hosts whose error bar is under this.",
        ),
    ] = parse_seconds(settings.SYNC_MAX_UNCERTAINTY),
    max_offset: Annotated[
        float,
        typer.Option(
            "--max-offset",
            parser=Duration(low=1e-9),
            metavar=DURATION,
            show_default=settings.SYNC_MAX_OFFSET,
            help="Larger offsets need --step and a confirmation.",
        ),
    ] = parse_seconds(settings.SYNC_MAX_OFFSET),
    socket: SocketOpt = settings.SYNC_SOCKET,
    chronyc_socket: ChronycSocketOpt = None,
    period: PeriodOpt = settings.SYNC_SAMPLE_PERIOD_S,
    fmt: FormatOpt = SyncFormat.table,
) -> None:
    """Scan every --interval seconds; with --apply, feed each qualifying host's chronyd.

    Example: cwctl sync -i inventory.toml --apply
    """
    if ctx.invoked_subcommand is not None:
        return

    def body() -> int:
        from cwctl.chrony.chronyc import poll_for
        from cwctl.chrony.feeders import FeederSettings
        from cwctl.chrony.fleet import fleet_for
        from cwctl.chrony.loop import SyncPlan
        from cwctl.chrony.rules import FeedRules, check_socket_template

        rules = FeedRules(
            max_uncertainty_ns=max_uncertainty * 1e9, max_offset_ns=max_offset * 1e9, step=step
        )
        if count is not None and count < 1:
            fail(f"--count {count}: give at least 1 round")
        # one round is an answer now (quick); the loop watches (watch)
        request = build_request(flags, COMMAND_BUDGETS["sync-once" if count == 1 else "sync"])
        reference = flags.reference
        fleet = fleet_for(request)
        check_socket_template(socket, fleet.names)
        if chronyc_socket is not None:
            check_socket_template(chronyc_socket, fleet.names, "--chronyc-socket")
        if apply:
            fleet.require_hosts("--apply")
        scan_s = (
            request.duration_s
            or settings.BUDGETS[request.budget or request.command_budget].duration_s
        )
        feeder = FeederSettings(
            period_s=period,
            hold_s=2 * max(interval, scan_s + 5.0) + 10.0,
            idle_exit_s=3 * interval + 120.0,
        )
        plan = SyncPlan(apply, interval, count, rules, socket, feeder)
        import asyncio  # lazy: `cwctl --help` need not load it

        return asyncio.run(
            _run(request, plan, fleet, reference, chronyc_socket, yes, fmt, poll_for(period))
        )

    raise typer.Exit(run_guarded(body))


async def _run(
    request: Any,
    plan: Any,
    fleet: Any,
    reference: str | None,
    chronyc_socket: str | None,
    yes: bool,
    fmt: SyncFormat,
    poll: int,
) -> int:
    from cwctl.chrony.check import check_hosts, choose_reference, mark_reference
    from cwctl.chrony.loop import SyncRun
    from cwctl.cli.scan import _progress_printer
    from cwctl.report.feed import render_round_json, render_round_table

    try:
        unready: dict[str, str] = {}
        if fleet.runner is None:  # the simulator's hosts have no chronyd to ask
            if reference is None:
                reference = fleet.names[0]
                why = f"{fleet.source} hosts have no chronyd to ask: the first host"
            else:
                why = "named with --reference"
        else:
            checks = await check_hosts(
                fleet.runner, fleet.names, socket_template=plan.socket_template,
                chronyc_socket=chronyc_socket, poll=poll,
            )  # fmt: skip
            if reference is None:
                reference, why = choose_reference(checks)
            else:
                why = "named with --reference"
            mark_reference(checks, reference)
            # a dry run promises only what --apply can do: not a host chronyd cannot hear
            unready = {c.host: "; ".join(c.problems) for c in checks if not c.ready}
        journal = None
        if plan.apply:
            from cwctl.actions.journal import Journal

            journal = Journal()

        def confirm(d: Any) -> bool:
            if yes:
                return True
            if not sys.stdin.isatty():
                return False
            return typer.confirm(
                f"feed {d.host} an offset of {d.offset_ns / 1e6:+.3f} ms, beyond --max-offset?",
                default=False,
            )

        def on_round(rnd: Any) -> None:
            text = render_round_json(rnd) if fmt is SyncFormat.json else render_round_table(rnd)
            sys.stdout.write(text)
            sys.stdout.flush()

        def on_fed(rnd: Any) -> None:
            if STATE.quiet:
                return
            fed = sum(d.feeds for d in rnd.decisions)
            others = sum(d.host != rnd.reference for d in rnd.decisions)
            typer.echo(
                f"cwctl: sync round {rnd.number}: feeding {fed} of {others} hosts' chronyd; its "
                "table follows when their samples are counted, an interval from now",
                err=True,
            )

        run = SyncRun(
            request, plan, fleet, reference, why,
            confirm=confirm, on_round=on_round, journal=journal, progress=_progress_printer(),
            unready=unready, on_fed=on_fed,
        )  # fmt: skip
        return await run.run()
    finally:
        await fleet.close()


@sync_app.command("check")
@source_flags("inventory", "local", "reference", "concurrency", "accept_new_host_keys")
def check(
    flags: SourceFlags,
    socket: SocketOpt = settings.SYNC_SOCKET,
    chronyc_socket: ChronycSocketOpt = None,
    period: PeriodOpt = settings.SYNC_SAMPLE_PERIOD_S,
    fmt: FormatOpt = SyncFormat.table,
) -> None:
    """Is chronyd running on each host, with cwctl's refclock, and what does it make of it?

    Exit 0 when every host is ready (the reference needs no refclock), 3 when some are not.

    Example: cwctl sync check -i inventory.toml
    """

    def body() -> int:
        from cwctl.chrony.check import check_hosts, choose_reference, mark_reference
        from cwctl.chrony.chronyc import poll_for
        from cwctl.chrony.fleet import fleet_for
        from cwctl.chrony.rules import check_socket_template
        from cwctl.errors import InputError
        from cwctl.report.feed import render_check_json, render_check_table

        request = build_request(flags)
        fleet = fleet_for(request)
        fleet.require_hosts("cwctl sync check")
        check_socket_template(socket, fleet.names)
        if chronyc_socket is not None:
            check_socket_template(chronyc_socket, fleet.names, "--chronyc-socket")

        async def go() -> list[Any]:
            try:
                return await check_hosts(
                    fleet.runner, fleet.names, socket_template=socket,
                    chronyc_socket=chronyc_socket, poll=poll_for(period),
                )  # fmt: skip
            finally:
                await fleet.close()

        import asyncio  # lazy: `cwctl --help` need not load it
        import contextlib

        checks = asyncio.run(go())
        reference: tuple[str, str] | None = None
        if flags.reference is not None:
            reference = (flags.reference, "named with --reference")
        else:
            with contextlib.suppress(InputError):
                reference = choose_reference(checks)
        if reference is not None:
            mark_reference(checks, reference[0])
        render = render_check_json if fmt is SyncFormat.json else render_check_table
        sys.stdout.write(render(checks, reference))
        return EXIT_OK if all(c.ready for c in checks) else EXIT_PROBLEMS

    raise typer.Exit(run_guarded(body))
