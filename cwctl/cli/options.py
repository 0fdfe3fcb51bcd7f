"""The flags every command shares, declared once, and the ScanRequest they add up to.

Each shared flag is one entry of ``FLAGS`` (its typer declaration and its default, the
default from ``cwctl.settings``), as mitmproxy's ``options.py`` and pip's
``cmdoptions.py`` do. A command asks for the flags it takes by name (or by group) with
``@source_flags(...)``: they are added to its signature and reach it as one
``SourceFlags`` value, the ``flags`` parameter, which ``build_request`` turns into a
``ScanRequest``. A new shared flag is one entry here and one field of ``SourceFlags``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from cwctl import settings
from cwctl.cli.app import BudgetName, Ecmp, Format, Timestamps, Via, fail
from cwctl.cli.complete import complete_fault, complete_host
from cwctl.cli.durations import METAVAR as DURATION
from cwctl.cli.durations import Duration
from cwctl.scan import budgets

_TIMESTAMPS = Timestamps(settings.SIM_TIMESTAMPS)
_ECMP = Ecmp(settings.SIM_ECMP)


@dataclass(frozen=True)
class SourceFlags:
    """Where the hosts come from and how to scan them, as the shared flags said."""

    inventory: Path | None = None
    local: int | None = None
    sim: bool = False
    replay: Path | None = None
    hosts: int = settings.SIM_HOSTS
    hosts_per_leaf: int | None = None  # None: settings.SIM_HOSTS_PER_LEAF, or --hosts if fewer
    spines: int = settings.SIM_SPINES
    seed: int = settings.SIM_SEED
    fault: list[str] | None = None
    timestamps: Timestamps = _TIMESTAMPS
    load: float = settings.SIM_LOAD
    ecmp: Ecmp = _ECMP
    discovery: bool = settings.SIM_DISCOVERY
    jobs: int = settings.SIM_JOBS
    duration: float | None = None
    rate: float | None = None
    budget: BudgetName | None = None
    save_records: Path | None = None
    reference: str | None = None
    concurrency: int | None = None
    accept_new_host_keys: bool = False
    via: Via = Via.ssh


_DEFAULTS = {f.name: f.default for f in fields(SourceFlags)}

# name -> the flag's type with its typer declaration; the default is SourceFlags'.
FLAGS: dict[str, Any] = {
    "inventory": Annotated[
        Path | None,
        typer.Option(
            "-i",
            "--inventory",
            metavar="FILE",
            envvar=settings.INVENTORY_ENV,
            help=f"Inventory file (default ${settings.INVENTORY_ENV}, "
            f"else ./{settings.INVENTORY_FILE}).",
        ),
    ],
    "local": Annotated[
        int | None,
        typer.Option(
            "--local",
            metavar="N",
            min=settings.LOCAL_MIN,
            max=settings.LOCAL_MAX,
            help="N agents on this machine's loopback.",
        ),
    ],
    "sim": Annotated[bool, typer.Option("--sim", help="Use the built-in simulated fabric.")],
    "replay": Annotated[
        Path | None,
        typer.Option("--replay", metavar="FILE", help="Analyse saved records instead of probing."),
    ],
    "hosts": Annotated[int, typer.Option("--hosts", min=2, metavar="N", help="Simulated hosts.")],
    "hosts_per_leaf": Annotated[
        int | None,
        typer.Option(
            "--hosts-per-leaf",
            min=1,
            metavar="N",
            help=f"Hosts per leaf (default {settings.SIM_HOSTS_PER_LEAF}, or --hosts if fewer).",
        ),
    ],
    "spines": Annotated[
        int, typer.Option("--spines", min=1, metavar="N", help="Simulated spines.")
    ],
    "seed": Annotated[int, typer.Option("--seed", metavar="N", help="Simulator seed.")],
    "fault": Annotated[
        list[str] | None,
        typer.Option(
            "--fault",
            metavar="KIND:NAME[:MODE][@T]",
            autocompletion=complete_fault,
            help="Inject a fault: KIND:NAME[:MODE][@T] (repeatable).",
        ),
    ],
    "timestamps": Annotated[
        Timestamps,
        typer.Option("--timestamps", metavar="hw|sw", help="Simulated timestamping: hw or sw."),
    ],
    "load": Annotated[
        float, typer.Option("--load", min=0.0, max=1.0, metavar="0..1", help="Simulated load 0..1.")
    ],
    "ecmp": Annotated[
        Ecmp,
        typer.Option(
            "--ecmp",
            metavar="hidden|documented",
            help="Simulated switches' ECMP hash: hidden (secret per switch) or documented.",
        ),
    ],
    "discovery": Annotated[
        bool,
        typer.Option(
            "--discovery/--no-discovery",
            help="Simulated agents discover their flows' paths (path records).",
        ),
    ],
    "jobs": Annotated[
        int,
        typer.Option(
            "--jobs",
            min=0,
            metavar="N",
            help="Simulated running jobs (placed from the seed): suspects and plans name "
            "the jobs they touch.",
        ),
    ],
    "duration": Annotated[
        float | None,
        typer.Option(
            "--duration",
            parser=Duration(low=settings.PROBE_DURATION_MIN_S, high=settings.PROBE_DURATION_MAX_S),
            metavar=DURATION,
            help="How long to probe: 5s, 500ms, 2m (a bare number is seconds; default: the "
            "budget's).",
        ),
    ],
    "rate": Annotated[
        float | None,
        typer.Option(
            "--rate",
            min=settings.PROBE_RATE_MIN,
            max=settings.PROBE_RATE_MAX,
            metavar="PAIRS",
            help="Coded probe pairs per second per peer (default: the budget's).",
        ),
    ],
    "budget": Annotated[
        BudgetName | None,
        typer.Option(
            "--budget",
            metavar="quick|watch",
            help=budgets.help_text(
                "quick for scan, reroute --verify and sync --count 1; watch for tui and the "
                "sync loop"
            ),
        ),
    ],
    "save_records": Annotated[
        Path | None,
        typer.Option("--save-records", metavar="FILE", help="Keep every probe record (.gz ok)."),
    ],
    "reference": Annotated[
        str | None,
        typer.Option(
            "--reference",
            metavar="HOST",
            help="Host whose clock is the reference.",
            autocompletion=complete_host,
        ),
    ],
    "concurrency": Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            metavar="N",
            min=1,
            help=f"SSH sessions at once (default {settings.SSH_CONCURRENCY}).",
        ),
    ],
    "accept_new_host_keys": Annotated[
        bool,
        typer.Option(
            "--accept-new-host-keys",
            help="Trust and record unknown SSH host keys (changed keys are still refused).",
        ),
    ],
    "via": Annotated[
        Via,
        typer.Option(
            "--via",
            metavar="ssh|slurm",
            help="How the inventory's agents start: ssh, or slurm (one srun step).",
        ),
    ],
}
assert set(FLAGS) == set(_DEFAULTS), "every SourceFlags field is one flag, and back"

# The groups commands ask for.
SIM_SHAPE = ("hosts", "hosts_per_leaf", "spines", "seed")
SIM_FLAGS = (*SIM_SHAPE, "fault", "timestamps", "load", "ecmp", "discovery")
SSH_FLAGS = ("reference", "concurrency", "accept_new_host_keys")
PROBE_FLAGS = ("budget", "duration", "rate")
SCAN_FLAGS = ("inventory", "local", "sim", *SIM_FLAGS, *PROBE_FLAGS, *SSH_FLAGS)

# Flags of single commands that more than one command shares.
FormatOpt = Annotated[
    Format, typer.Option("--format", "-o", metavar="table|json|prom", help="table, json or prom.")
]
PrettyOpt = Annotated[
    bool, typer.Option("--pretty", help="Indent --format json for people (default compact).")
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", metavar="FILE", help="Write the report here (atomic).")
]
HeatmapOpt = Annotated[
    Path | None,
    typer.Option("--heatmap", metavar="FILE.png", help="Also write the host x host heatmap (PNG)."),
]
InventoryOpt = FLAGS["inventory"]

F = TypeVar("F", bound=Callable[..., Any])


def _is_argument(param: inspect.Parameter) -> bool:
    meta = getattr(param.annotation, "__metadata__", ())
    return any(isinstance(m, typer.models.ArgumentInfo) for m in meta)


def source_flags(*names: str) -> Callable[[F], F]:
    """Give the command the shared flags ``names``; it gets them as ``flags: SourceFlags``.

    The flags go after the command's arguments and before its own options, so ``--help``
    lists them first, in the order given.
    """
    return flag_group("flags", SourceFlags, FLAGS, names)


def flag_group(
    param: str, group: Callable[..., Any], table: dict[str, Any], names: tuple[str, ...]
) -> Callable[[F], F]:
    """Give the command the flags ``names`` of ``table`` (name -> annotated type; the
    default is the ``group`` dataclass's); it gets them as ``param: group``. The flags go
    after the command's arguments and before its own options."""
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"no shared flag {unknown}")
    defaults = {f.name: f.default for f in fields(group)}  # type: ignore[arg-type]

    def decorate(command: F) -> F:
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != param]
        if param not in sig.parameters:
            raise TypeError(f"{command.__name__} takes no {param!r} parameter")
        shared = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name], annotation=table[name]
            )
            for name in names
        ]
        arguments = [p for p in own if _is_argument(p)]
        options = [p for p in own if not _is_argument(p)]
        params = [
            *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in arguments),
            *shared,
            *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in options),
        ]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in names}
            return command(**{param: group(**given)}, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper  # type: ignore[return-value]

    return decorate


def build_request(flags: SourceFlags, budget: str = settings.BUDGET_QUICK) -> Any:
    """A ScanRequest from the flags; exactly one source of hosts; every flag and
    combination checked first (``cwctl.cli.validate``). ``budget``: the command's own
    (``cwctl.scan.budgets.COMMAND_BUDGETS``), which ``--budget`` and the inventory override."""
    from cwctl.cli.validate import check_flags, check_reference
    from cwctl.runtime.atomic import expand

    check_flags(flags, _DEFAULTS)

    # ~ expanded in every path option (typer passes "--replay=~/x" through as it is)
    inventory = expand(flags.inventory, "--inventory") if flags.inventory is not None else None
    replay = expand(flags.replay, "--replay") if flags.replay is not None else None
    save_records = flags.save_records
    save_records = expand(save_records, "--save-records") if save_records is not None else None
    given = [
        name
        for name, on in (("--local", flags.local), ("--sim", flags.sim), ("--replay", replay))
        if on
    ]
    if len(given) > 1:
        fail(f"give one source of hosts, not {' and '.join(given)}")
    if flags.fault and not flags.sim:
        fail("--fault needs --sim")
    if flags.via is Via.slurm and given:
        fail(f"--via slurm starts an inventory's agents: give -i/--inventory, not {given[0]}")
    if not given:
        inventory = inventory or Path(settings.INVENTORY_FILE)
    check_reference(flags, inventory if (not given or flags.sim) else None, replay)
    from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions  # after the cheap checks

    sim_options = None
    if flags.sim:
        sim_options = SimOptions(
            hosts=flags.hosts,
            hosts_per_leaf=flags.hosts_per_leaf or min(settings.SIM_HOSTS_PER_LEAF, flags.hosts),
            spines=flags.spines,
            seed=flags.seed,
            faults=tuple(flags.fault or ()),
            timestamps=flags.timestamps.value,
            load=flags.load,
            ecmp=flags.ecmp.value,
            discovery=flags.discovery,
            jobs=flags.jobs,
        )
    request = ScanRequest(
        inventory=inventory if (not given or flags.sim) else None,
        local=flags.local,
        sim=sim_options,
        replay=replay,
        duration_s=flags.duration,
        save_records=save_records,
        reference=flags.reference,
        concurrency=flags.concurrency,
        accept_new_host_keys=flags.accept_new_host_keys,
        via=flags.via.value,
        overrides=ProbeOverrides(rate=flags.rate),
        budget=flags.budget.value if flags.budget is not None else None,
        command_budget=budget,
    )
    return request
