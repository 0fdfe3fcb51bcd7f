"""The control commands: ``reroute``, ``drain``, ``resume``, ``rollback``, ``journal``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import typer

from cwctl.actions.drainreason import DEFAULT_REASON
from cwctl.actions.steerports import DEFAULT_POOL, MOVE_POOL
from cwctl.cli.app import STATE, app, run_guarded
from cwctl.cli.complete import complete_action_id, complete_element, complete_host
from cwctl.cli.options import SIM_SHAPE, SourceFlags, build_request, flag_group, source_flags
from cwctl.errors import InputError

ApplyOpt = Annotated[
    bool, typer.Option("--apply", help="Carry the plan out (asks first, unless --yes).")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="After applying, check that it took (a rescan for the suspect; steered ports "
        "traced again; uplink loads measured again): exit 3 if not.",
    ),
]


F = TypeVar("F", bound=Callable[..., Any])


class At(StrEnum):
    auto = "auto"
    hosts = "hosts"


class PlanFormat(StrEnum):
    table = "table"
    json = "json"


SudoOpt = Annotated[
    bool, typer.Option("--sudo", help="Run each command through 'sudo -n' on its host.")
]

PlanFormatOpt = Annotated[
    PlanFormat,
    typer.Option(
        "--format",
        "-o",
        metavar="table|json",
        help="table (the plan as text) or json (cwctl.action/1).",
    ),
]


@dataclass(frozen=True)
class ActionFlags:
    """How an action command carries its plan out, as its flags said."""

    apply: bool = False
    yes: bool = False
    fmt: PlanFormat = PlanFormat.table
    sudo: bool = False
    verify: bool = False


ACTION_OPTIONS: dict[str, Any] = {
    "apply": ApplyOpt,
    "yes": YesOpt,
    "fmt": PlanFormatOpt,
    "sudo": SudoOpt,
    "verify": VerifyOpt,
}


def action_flags(*names: str) -> Callable[[F], F]:
    """Give the command the action flags ``names``; it gets them as ``act: ActionFlags``."""
    return flag_group("act", ActionFlags, ACTION_OPTIONS, names)


# The ScanRequest an action plans against (and --verify rescans) comes from these.
ACTION_FLAGS = ("inventory", "sim", *SIM_SHAPE, "fault", "budget", "duration", "jobs")
RESUME_FLAGS = ("inventory", "sim", *SIM_SHAPE)


def _shell(yes: bool, fmt: PlanFormat = PlanFormat.table) -> Any:
    """Plans to stdout, messages to stderr, confirmation with typer.confirm."""
    from cwctl.actions.shell import Shell

    def confirm(plan: Any) -> bool:
        if yes:
            return True
        n = len(plan.steps)
        jobs = len(plan.jobs or ())
        touches = f"; touches {jobs} running job{'s' * (jobs != 1)}" if jobs else ""
        try:
            return typer.confirm(
                f"apply {plan.kind} {plan.element} ({n} step{'s' if n != 1 else ''}{touches})?",
                err=True,
            )
        except typer.Abort:
            typer.echo("", err=True)
            return False

    from cwctl.cli.progress import step_line_for

    steps = step_line_for(sys.stderr, quiet=STATE.quiet)

    def say(text: str) -> None:
        if steps is not None:
            steps.clear()  # the live step line gives way to the message
        typer.echo(f"cwctl: {text}" if "\n" not in text else text, err=True)

    def show(text: str) -> None:
        if steps is not None:
            steps.clear()  # "planning ..." gives way to the plan
        typer.echo(text, nl=False)

    return Shell(
        show=show,
        say=say,
        confirm=confirm,
        full=STATE.verbose,
        as_json=fmt is PlanFormat.json,
        progress=steps,
        status=(lambda text: steps.show(f"cwctl: {text}")) if steps is not None else None,
    )


@app.command()
@source_flags(*ACTION_FLAGS)
@action_flags("apply", "yes", "fmt", "sudo", "verify")
def reroute(
    element: Annotated[
        str,
        typer.Argument(
            metavar="ELEMENT",
            help="The suspect to steer around.",
            autocompletion=complete_element,
        ),
    ],
    flags: SourceFlags,
    act: ActionFlags,
    prefix: Annotated[
        str | None,
        typer.Option("--prefix", metavar="CIDR", help="Only the route for exactly this prefix."),
    ] = None,
    gateway: Annotated[
        list[str] | None,
        typer.Option(
            "--gateway",
            metavar="SWITCH=ADDRESS",
            help="Host routes: SWITCH=ADDRESS, the next hop to SWITCH (repeatable).",
        ),
    ] = None,
    nccl_conf: Annotated[
        str,
        typer.Option("--nccl-conf", metavar="PATH", help="NIC: the NCCL config file on the host."),
    ] = "/etc/nccl.conf",
    at: Annotated[
        At,
        typer.Option(
            "--at",
            metavar="auto|hosts",
            help="auto (switches, NCCL, routes, drain) or hosts: move the flows open "
            "between the hosts, established ones included, to healthy wire ports (nftables; "
            "with --port: new connections to that port, by source port).",
        ),
    ] = At.auto,
    port: Annotated[
        list[str] | None,
        typer.Option(
            "--port",
            metavar="[PROTO:]PORT",
            help="--at hosts: steer new connections to this destination port (5201, "
            "udp:9000; repeatable) instead of moving the flows open now.",
        ),
    ] = None,
    pool: Annotated[
        int | None,
        typer.Option(
            "--pool",
            metavar="N",
            min=1,
            max=4096,
            help="--at hosts: healthy source ports per peer and port for new connections "
            f"(default {DEFAULT_POOL} with --port; {MOVE_POOL} beside the open flows moved).",
        ),
    ] = None,
    roce: Annotated[
        bool,
        typer.Option(
            "--roce",
            help="--at hosts: print the RoCEv2 source-port sets (UDP to 4791) that avoid "
            "the suspect, per host pair; plans no step.",
        ),
    ] = False,
    job_log: Annotated[
        str | None,
        typer.Option(
            "--job-log",
            metavar="GLOB",
            help="The job's step logs on the hosts (cwctl.jobs.stephook writes them): after "
            "--apply, wait for the job's own pace to come back and say when.",
        ),
    ] = None,
) -> None:
    """Plan steering traffic around a suspect; --apply carries it out.

    Example: cwctl reroute --sim --fault switch:spine2:down spine2 --apply --yes
    """

    def body() -> int:
        from cwctl.actions.route import parse_gateways
        from cwctl.actions.session import Ask
        from cwctl.actions.steerports import SteerOptions, parse_service
        from cwctl.actions.target import RouteOptions

        sudo = act.sudo
        if (port or roce) and at is not At.hosts:
            raise InputError("--port and --roce steer at the hosts: add --at hosts")
        steer = SteerOptions(
            services=tuple(sorted({parse_service(p) for p in port or ()})),
            pool=pool,
            roce=roce,
            sudo=sudo,
        )
        options = RouteOptions(
            prefix=prefix,
            gateways=parse_gateways(gateway),
            nccl_conf=nccl_conf,
            via=at.value,
            steer=steer,
        )
        request = build_request(flags)
        ask = Ask("reroute", element, options=options, sudo=sudo, job_log=job_log)
        return carry_out(request, ask, act)

    raise typer.Exit(run_guarded(body))


def carry_out(request: Any, ask: Any, flags: ActionFlags) -> int:
    """Plan ``ask`` on ``request``'s fabric and carry it out as the action flags say."""
    import asyncio  # lazy: `cwctl --help` need not load it

    from cwctl.actions.shell import act

    shell = _shell(flags.yes, flags.fmt)
    return asyncio.run(act(ask, request, shell, apply=flags.apply, check=flags.verify))


@app.command()
@source_flags(*ACTION_FLAGS)
@action_flags("apply", "yes", "fmt", "sudo", "verify")
def drain(
    host: Annotated[
        str,
        typer.Argument(
            metavar="HOST",
            help="The host to take out of the scheduler.",
            autocompletion=complete_host,
        ),
    ],
    flags: SourceFlags,
    act: ActionFlags,
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="Why, for the scheduler.")
    ] = DEFAULT_REASON,
    evict: Annotated[
        bool, typer.Option("--evict", help="Kubernetes: also evict its pods (kubectl drain).")
    ] = False,
    suspect: Annotated[
        str | None,
        typer.Option(
            "--suspect",
            metavar="ELEMENT",
            autocompletion=complete_element,
            help="The suspect that caused it (a scan's suspect: gpu-007/mlx5_1, leaf3); "
            "Slurm's Reason and Kubernetes' annotations and taint carry it.",
        ),
    ] = None,
) -> None:
    """Take a host out of the scheduler (Slurm drain with a reason; Kubernetes cordon,
    annotations and a taint that carry the reason and the suspect).

    Example: cwctl drain -i inventory.toml gpu-007 --reason "NIC flaps" --suspect gpu-007/mlx5_1
    """

    def body() -> int:
        from cwctl.actions.session import Ask

        ask = Ask("drain", host, reason=reason, evict=evict, sudo=act.sudo, suspect=suspect)
        return carry_out(build_request(flags), ask, act)

    raise typer.Exit(run_guarded(body))


@app.command()
@source_flags(*RESUME_FLAGS)
@action_flags("apply", "yes", "fmt", "sudo")
def resume(
    host: Annotated[
        str,
        typer.Argument(
            metavar="HOST",
            help="The host to put back into the scheduler.",
            autocompletion=complete_host,
        ),
    ],
    flags: SourceFlags,
    act: ActionFlags,
) -> None:
    """Put a drained host back into the scheduler.

    Example: cwctl resume -i inventory.toml gpu-007 --apply
    """

    def body() -> int:
        from cwctl.actions.session import Ask

        ask = Ask("resume", host, sudo=act.sudo)
        return carry_out(build_request(flags), ask, act)

    raise typer.Exit(run_guarded(body))


@app.command()
def rollback(
    action_id: Annotated[
        str | None,
        typer.Argument(
            metavar="[PLAN]", help="Journal entry to undo.", autocompletion=complete_action_id
        ),
    ] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Carry the undo out.")] = False,
    yes: YesOpt = False,
    fmt: PlanFormatOpt = PlanFormat.table,
) -> None:
    """Undo an applied action (the latest, or the one named).

    Example: cwctl rollback 20261203-053226-cb76 --apply
    """

    def body() -> int:
        import asyncio  # lazy: `cwctl --help` need not load it

        from cwctl.actions.shell import roll_back

        return asyncio.run(roll_back(action_id, _shell(yes, fmt), apply=apply))

    raise typer.Exit(run_guarded(body))


class JournalFormat(StrEnum):
    table = "table"
    json = "json"


@app.command()
def journal(
    element: Annotated[
        str | None,
        typer.Argument(
            metavar="[ELEMENT]",
            help="Only the actions on this element (a glob: 'leaf*', 'gpu-00?').",
            autocompletion=complete_element,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only the actions since then: a duration back from now (2h, 30m) or a UTC "
            "time (2026-12-06, 2026-12-06T10:00).",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, metavar="N", help="Only the last N actions."),
    ] = None,
    fmt: Annotated[
        JournalFormat, typer.Option("--format", "-o", metavar="table|json", help="table or json.")
    ] = (JournalFormat.table),
) -> None:
    """List the actions cwctl has applied: who (cli, tui or watch, and the user), where
    (sim or ssh), what came of each step.

    Example: cwctl journal spine2 --since 24h --limit 20
    """

    def body() -> None:
        import json as jsonlib

        from cwctl.actions.history import history, iter_rows, select_rows
        from cwctl.actions.journal import Journal
        from cwctl.cli.journaltable import journal_table, parse_since

        hist = history(Journal())
        for line in hist.read.skipped:
            typer.echo(f"cwctl: {line}", err=True)
        start = parse_since(since) if since is not None else None
        rows = select_rows(list(iter_rows(hist)), element=element, since=start, limit=limit)
        if fmt is JournalFormat.json:
            typer.echo(jsonlib.dumps({"schema": "cwctl.journal/1", "entries": rows}, indent=1))
            return
        if not rows:
            filtered = element is not None or since is not None
            typer.echo(f"cwctl: {'no action matches' if filtered else 'the journal is empty'}",
                       err=True)  # fmt: skip
            return
        typer.echo(journal_table(rows))

    run_guarded(body)
