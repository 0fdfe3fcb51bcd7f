"""What a scan is asked to do, what it reports while it runs, and what answers it.

Defined once, below both the session that picks a source and the sources themselves
(httpx's ``_models.py`` shape): ``ScanRequest`` (where the hosts come from and how to
probe them), ``SimOptions`` (the simulator's knobs), ``Progress`` (the callback a scan
reports to, with its events in ``PROGRESS_EVENTS``) and ``Source`` (the one small
interface every source of records answers: sim, ssh, local, replay, and slurm next).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cwctl import settings
from cwctl.scan.collection import Collection

if TYPE_CHECKING:
    from cwctl.inventory import ProbeSettings


@dataclass(frozen=True)
class SimOptions:
    """The simulator's knobs (docs/simulator.md); defaults from ``cwctl.settings``."""

    hosts: int = settings.SIM_HOSTS
    hosts_per_leaf: int = settings.SIM_HOSTS_PER_LEAF
    spines: int = settings.SIM_SPINES
    seed: int = settings.SIM_SEED
    faults: tuple[str, ...] = ()  # KIND:NAME[:MODE][@T]
    timestamps: str = settings.SIM_TIMESTAMPS  # hw | sw
    load: float = settings.SIM_LOAD
    ecmp: str = settings.SIM_ECMP  # hidden | documented
    discovery: bool = settings.SIM_DISCOVERY
    jobs: int = settings.SIM_JOBS  # simulated running jobs, placed from the seed


@dataclass(frozen=True)
class ProbeOverrides:
    """The probe settings a command's flags give (``--rate``, ...), over the inventory's
    ``[probe]`` and the budget's; None where not given. ``seed``: the scan's seed."""

    rate: float | None = None  # coded pairs per second per peer
    peers: int | None = None  # peers each host probes
    ports: int | None = None  # source ports each host probes from
    gap_us: float | None = None  # spacing of the two probes of a coded pair
    seed: int | None = None

    def over(self, base: ProbeSettings) -> ProbeSettings:
        """``base`` with what these give (the seed is not a probe setting)."""
        given = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "seed" and getattr(self, f.name) is not None
        }
        return replace(base, **given)


@dataclass(frozen=True)
class ScanRequest:
    """Where the hosts come from (exactly one of inventory, local, sim, replay) and how.

    ``sim`` with an ``inventory`` simulates that inventory's fabric."""

    inventory: Path | None = None
    local: int | None = None
    sim: SimOptions | None = None
    replay: Path | None = None
    duration_s: float | None = None  # None: the inventory's [probe] duration, else the default
    save_records: Path | None = None
    reference: str | None = None
    concurrency: int | None = None
    accept_new_host_keys: bool = False
    via: str = "ssh"  # how inventory hosts are reached: ssh | slurm (one srun step)
    overrides: ProbeOverrides = ProbeOverrides()  # probe settings from flags
    budget: str | None = None  # --budget: quick | watch; None: the inventory's, else below
    command_budget: str = settings.BUDGET_QUICK  # the budget of the command that asks
    # the IP TOS byte of every probe (0: unmarked); the watch sets PROBE_OBSERVE_TOS while a
    # switch-side reroute is in place, so its probes keep crossing the avoided element
    probe_tos: int = 0

    def at_budget(self, name: str) -> ScanRequest:
        """This request at the budget ``name`` (settings.BUDGETS), as a command that runs
        at it by default asks: ``--budget`` and the inventory's ``[probe] budget`` still
        win, and so do an explicit ``--rate``/``--duration`` (``cwctl.scan.budgets``)."""
        return replace(self, command_budget=name)

    @property
    def source(self) -> str:
        """The source it asks for: ``replay``, ``sim``, ``local``, ``ssh``, ``slurm`` or
        ``none``."""
        if self.replay is not None:
            return "replay"
        if self.sim is not None:
            return "sim"
        if self.local is not None:
            return "local"
        if self.inventory is None:
            return "none"
        return "slurm" if self.via == "slurm" else "ssh"

    def fabric_context(self) -> dict[str, Any]:
        """The fabric it scans, as a plan's context records it: the journal's key to which
        fabric an action changed (a rollback rebuilds the request from it)."""
        path = str(Path(self.inventory).absolute()) if self.inventory is not None else None
        if self.sim is None:
            return {"source": "ssh", "inventory": path}
        sim = self.sim
        shape = {"hosts": sim.hosts, "hosts_per_leaf": sim.hosts_per_leaf, "spines": sim.spines}
        out: dict[str, Any] = {"source": "sim", "sim": {**shape, "seed": sim.seed}}
        if path is not None:
            out["inventory"] = path
        return out

    @property
    def label(self) -> str:
        """What a status bar says the hosts are."""
        return {
            "sim": "SIMULATED",
            "replay": f"replay {self.replay}",
            "local": f"local x{self.local}",
            "ssh": f"ssh {self.inventory}",
            "slurm": f"slurm {self.inventory}",
        }.get(self.source, "no hosts")


# progress(event, fields): reported while a scan runs, for a progress line on stderr.
Progress = Callable[[str, dict[str, Any]], None]

# Every event a source reports, in the order a scan reports them, with its fields.
PROGRESS_EVENTS: dict[str, str] = {
    "connected": "host, pid: one agent said hello",
    "started": "hosts, of[, start_in_s, source]: probing starts on `hosts` of `of`",
    "records": "records: records brought home so far",
    "done": "ok, of[, bytes]: every agent finished; `ok` of `of` hosts answered",
    "solved": "s: clocks solved, paths measured, suspects named, in `s` seconds",
}


class Source(Protocol):
    """Where a session's records come from: one call per scan, and a close.

    A source is built once per session and may keep state between scans (the
    simulator's model: clocks drift on, applied changes stay); ``aclose`` releases it.
    """

    name: str  # "sim", "ssh", "local", "replay", ...

    async def scan(self, request: ScanRequest, progress: Progress | None = None) -> Collection:
        """One scan's records, brought home."""
        ...

    async def aclose(self) -> None: ...
