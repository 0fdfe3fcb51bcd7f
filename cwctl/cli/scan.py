"""``cwctl scan`` and ``cwctl inventory check``: measure the fabric, or check its description."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from cwctl import settings
from cwctl.cli.app import (
    STATE,
    Format,
    app,
    fail,
    inventory_app,
    report_width,
    run_guarded,
    write_output,
)
from cwctl.cli.durations import METAVAR as DURATION
from cwctl.cli.durations import Duration
from cwctl.cli.options import (
    SCAN_FLAGS,
    FormatOpt,
    HeatmapOpt,
    InventoryOpt,
    OutOpt,
    PrettyOpt,
    SourceFlags,
    build_request,
    source_flags,
)
from cwctl.errors import EXIT_OK, EXIT_PROBLEMS
from cwctl.scan.budgets import COMMAND_BUDGETS
from cwctl.transport.k8s import DEFAULT_DEADLINE_S, DEFAULT_IMAGE, DEFAULT_NAMESPACE
from cwctl.units import parse_ns

HEATMAP_MAX_DEFAULT = "100us"


class CheckFormat(StrEnum):
    table = "table"
    json = "json"


@app.command()
@source_flags(*SCAN_FLAGS, "jobs", "via", "save_records", "replay")
def scan(
    flags: SourceFlags,
    fmt: FormatOpt = Format.table,
    pretty: PrettyOpt = False,
    out: OutOpt = None,
    heatmap: HeatmapOpt = None,
    heatmap_max: Annotated[
        float | None,
        typer.Option(
            "--heatmap-max",
            parser=Duration(low=1e-8),
            metavar=DURATION,
            help=f"Top of the heatmap's fixed log scale (10ns up to this; default "
            f"{HEATMAP_MAX_DEFAULT}), e.g. 2ms.",
        ),
    ] = None,
    offsets_plot: Annotated[
        Path | None,
        typer.Option(
            "--offsets-plot",
            metavar="FILE.png",
            help="Also plot each host's offset against time, window by window: windows of "
            "20 coded pairs per peer or more (up to 20), each with its error bars.",
        ),
    ] = None,
    prom_paths: Annotated[
        bool,
        typer.Option(
            "--prom-paths",
            help="With --format prom: per-path series too (7 per directed path; "
            "the default is bounded per host, leaf pair and suspect).",
        ),
    ] = False,
) -> None:
    """One scan: probe, solve clocks, measure paths, report. Exit 3 if problems found.

    Example: cwctl scan --sim --fault switch:spine2:congested --heatmap fabric.png
    """

    def body() -> int:
        from cwctl.cli.validate import check_report_flags
        from cwctl.runtime.atomic import check_output

        check_report_flags(
            fmt=fmt.value,
            prom_paths=prom_paths,
            pretty=pretty,
            heatmap=heatmap,
            heatmap_max_given=heatmap_max is not None,
            offsets_plot=offsets_plot,
        )
        # every output path checked before the scan, not after it
        outputs = {
            "--out": out,
            "--heatmap": heatmap,
            "--save-records": flags.save_records,
            "--offsets-plot": offsets_plot,
        }
        checked = {o: check_output(p, o) if p is not None else None for o, p in outputs.items()}
        out_path, heatmap_path = checked["--out"], checked["--heatmap"]

        request = build_request(
            replace(flags, save_records=checked["--save-records"]), COMMAND_BUDGETS["scan"]
        )
        if offsets_plot is not None and request.replay is None:
            _check_offsets_plot(request)  # before probing: the windows the rate supports
        import asyncio  # lazy: `cwctl --help` need not load it

        from cwctl.actions.jobs import job_reader
        from cwctl.report import BINARY, render, render_bytes
        from cwctl.session import scan as run_scan  # after every check: numpy, scipy, ...

        table, rate = None, None
        jobs = job_reader(request, accept_new_host_keys=request.accept_new_host_keys)
        progress = _progress_printer()
        try:
            if checked["--offsets-plot"] is None:
                snapshot = asyncio.run(run_scan(request, progress, jobs))
            else:
                snapshot, table, rate = asyncio.run(_scan_keeping_records(request, jobs, progress))
        finally:  # a scan that failed leaves no progress line under its error
            getattr(progress, "clear", lambda: None)()
        if checked["--offsets-plot"] is not None:
            from cwctl.report.offsets import too_few_windows

            why = too_few_windows(rate, snapshot.duration_s)  # saved records: known now
            if why is not None:
                fail(why)
        from cwctl.cli.hints import source_args

        color = STATE.color and out_path is None and fmt is Format.table
        width, source = report_width(out_path), source_args(flags)
        # a terminal's width (or $COLUMNS) folds lines; a pipe, a file: lines unbroken
        fold = out_path is None and (sys.stdout.isatty() or "COLUMNS" in os.environ)
        write_output(
            render_bytes(snapshot, fmt.value, prom_paths=prom_paths, pretty=pretty)
            if fmt.value in BINARY
            else render(snapshot, fmt.value, color=color, width=width, source=source, fold=fold),
            out_path,
        )
        if heatmap_path is not None:
            from cwctl.report.heatmap import write_heatmap

            max_ns = parse_ns(HEATMAP_MAX_DEFAULT) if heatmap_max is None else heatmap_max * 1e9
            write_heatmap(snapshot, heatmap_path, max_ns=max_ns)
        if table is not None and checked["--offsets-plot"] is not None:
            from cwctl.report.offsets import write_offsets_plot

            write_offsets_plot(table, snapshot, checked["--offsets-plot"], rate)
        return EXIT_OK if snapshot.healthy else EXIT_PROBLEMS

    raise typer.Exit(run_guarded(body))


async def _scan_keeping_records(
    request: Any, jobs: Any, progress: Any
) -> tuple[Any, Any, float | None]:
    """One scan, its probe table and its rate (for the offsets plot)."""
    import asyncio

    from cwctl.jobs.affected import attach
    from cwctl.session import ScanSession, analyse

    async with ScanSession(request, progress=progress, jobs=jobs) as session:
        collection = await session.collect()
        snapshot = await asyncio.to_thread(analyse, collection, reference=request.reference)
        if session.jobs is not None:
            attach(snapshot, await session.jobs(collection))
        rate = collection.params.get("rate")
        return snapshot, collection.table, float(rate) if rate else None


def _check_offsets_plot(request: Any) -> None:
    """Refuse --offsets-plot before probing when the scan's rate and window cannot give
    two windows worth solving (the budget's, the inventory's, the flags')."""
    from cwctl.report.offsets import too_few_windows
    from cwctl.transport.plan import resolve_probe

    base, hosts = None, request.sim.hosts if request.sim is not None else None
    if request.inventory is not None:
        from cwctl.inventory import load_inventory

        inventory = load_inventory(request.inventory)
        base, hosts = inventory.probe, len(inventory.hosts)
    probe = resolve_probe(request, base, hosts)
    why = too_few_windows(probe.rate, float(probe.duration or 0.0))
    if why is not None:
        fail(why)


def _progress_printer(label: str = "scan") -> Callable[[str, dict[str, Any]], None] | None:
    """The live progress line on stderr when it is a terminal (``cli/progress.py``)."""
    from cwctl.cli.progress import progress_for

    return progress_for(sys.stderr, quiet=STATE.quiet, verbose=STATE.verbose, label=label)


@inventory_app.command("check")
def inventory_check(
    inventory: InventoryOpt = None,
    fmt: Annotated[
        CheckFormat,
        typer.Option(
            "--format", "-o", metavar="table|json", help="table, or json (cwctl.inventory/1)."
        ),
    ] = CheckFormat.table,
) -> None:
    """Validate an inventory file, and the files it names that a scan reads on this
    machine (the SSH identity, known_hosts); print what it describes. Exit 2 if invalid.

    Example: cwctl inventory check -i inventory.toml
    """

    def body() -> None:
        from cwctl.errors import InputError
        from cwctl.inventory import load_inventory, summarize
        from cwctl.inventory.local import local_problems
        from cwctl.inventory.summary import inventory_json
        from cwctl.report.jsonenc import encode

        inv = load_inventory(inventory or Path(settings.INVENTORY_FILE))
        problems = local_problems(inv)  # what the SSH transport refuses before a scan
        if problems:
            raise InputError("\n".join(problems))
        if fmt is CheckFormat.json:
            write_output(encode(inventory_json(inv), pretty=True), None)
        else:
            typer.echo(summarize(inv))

    run_guarded(body)


@inventory_app.command("pods")
def inventory_pods(
    inventory: InventoryOpt = None,
    scan_id: Annotated[
        str,
        typer.Option("--scan-id", metavar="NAME", help="Names this scan's pods (a-z, 0-9, '-')."),
    ] = "scan",
    namespace: Annotated[
        str, typer.Option("--namespace", metavar="NAME", help="Namespace of the pods.")
    ] = DEFAULT_NAMESPACE,
    image: Annotated[
        str,
        typer.Option(
            "--image", metavar="IMAGE", help="Container image with python3 (stdlib only)."
        ),
    ] = DEFAULT_IMAGE,
    deadline: Annotated[
        float,
        typer.Option(
            "--deadline",
            parser=Duration(low=10),
            metavar=DURATION,
            help="Time before Kubernetes ends a pod (whole seconds; at least 10s).",
        ),
    ] = DEFAULT_DEADLINE_S,
) -> None:
    """Print the per-node agent pods for Kubernetes (a v1 List, JSON: kubectl apply -f -).

    Example: cwctl inventory pods -i inventory.toml | kubectl apply -f -
    """

    def body() -> None:
        from cwctl.errors import InputError
        from cwctl.inventory import load_inventory
        from cwctl.report.jsonenc import encode
        from cwctl.transport.k8s import agent_pods

        inv = load_inventory(inventory or Path(settings.INVENTORY_FILE))
        try:
            pods = agent_pods(
                inv, scan_id=scan_id, namespace=namespace, image=image, deadline_s=round(deadline)
            )
        except ValueError as exc:
            raise InputError(f"--scan-id: {exc}") from None
        write_output(encode(pods, pretty=True), None)

    run_guarded(body)
