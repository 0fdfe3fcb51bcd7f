"""``cwctl job-env``: the NCCL/Gloo environment for a job's hosts, from the journal."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from cwctl.cli.app import app, fail, run_guarded
from cwctl.cli.complete import complete_job_id
from cwctl.cli.options import SIM_SHAPE, SourceFlags, build_request, source_flags


class EnvFormat(StrEnum):
    sh = "sh"
    taskprolog = "taskprolog"
    json = "json"


@app.command("job-env")
@source_flags("inventory", "sim", *SIM_SHAPE, "jobs")
def job_env(
    flags: SourceFlags,
    job: Annotated[
        str | None,
        typer.Argument(
            metavar="JOBID",
            help="A running job (its hosts from the scheduler).",
            autocompletion=complete_job_id,
        ),
    ] = None,
    nodes: Annotated[
        str | None,
        typer.Option(
            "--nodes",
            metavar="LIST",
            help="These hosts instead of a job's: h1,h2 or Slurm's gpu-[001-004].",
        ),
    ] = None,
    fmt: Annotated[
        EnvFormat,
        typer.Option(
            "--format",
            "-o",
            metavar="sh|taskprolog|json",
            help="sh (for eval), taskprolog (Slurm's: export lines, values unquoted) or json.",
        ),
    ] = EnvFormat.sh,
) -> None:
    """Print the NCCL/Gloo environment for a job's hosts (NICs cwctl excluded).

    For eval before torchrun (eval "$(cwctl job-env 4242)"), or a Slurm TaskProlog
    (--format taskprolog: its export lines join the task's environment).

    Example: cwctl job-env 4242
    """

    def body() -> None:
        from cwctl.jobs.slurm import expand_hostlist

        if (job is None) == (nodes is None):
            fail("give a JOBID or --nodes LIST (one of them)")
        if job is not None and not job.strip():
            fail("JOBID is empty (is $SLURM_JOB_ID set?)")
        names = expand_hostlist(nodes or "")
        if nodes is not None and not names:
            fail("--nodes: no host named")
        request = build_request(flags)
        import asyncio
        import json

        from cwctl.actions.jobenv import env_for
        from cwctl.actions.journal import Journal

        # read only: a job's user (a TaskProlog) may read the operator's journal
        journal = Journal(shared=True)
        header, env = asyncio.run(env_for(request, job_id=job, hosts=names, journal=journal))
        for warning in env.warnings:  # a malformed row of the scheduler's: said, not fatal
            typer.echo(f"cwctl: warning: {warning}", err=True)
        if fmt is EnvFormat.json:
            typer.echo(json.dumps(env.to_json(), indent=1))
        elif fmt is EnvFormat.taskprolog:
            typer.echo(env.taskprolog(), nl=False)
        else:
            typer.echo(env.shell(header), nl=False)

    run_guarded(body)
