"""Every flag and combination checked before any work starts.

Each check is one line naming the culprit and, where there is one, the fix; a failed
check exits 2 before a host is contacted, a file written or a UI drawn (the CLI and the
TUI alike). What can only be known by reading a file (the inventory's or a record
file's host names, for ``--reference``) is read here, cheaply, up front.
"""

from __future__ import annotations

from typing import Any

from cwctl import settings
from cwctl.cli.app import fail

# sim-only flags: (SourceFlags field, flag as typed); given without --sim they would do nothing
_SIM_ONLY = (
    ("hosts", "--hosts"),
    ("hosts_per_leaf", "--hosts-per-leaf"),
    ("spines", "--spines"),
    ("seed", "--seed"),
    ("load", "--load"),
    ("discovery", "--no-discovery"),
    ("jobs", "--jobs"),
)


def check_flags(flags: Any, defaults: dict[str, Any]) -> None:
    """Combinations of the shared flags that would be silently ignored, or cannot work."""
    if flags.replay is not None:
        if flags.duration is not None:
            fail("--duration does nothing with --replay: the saved records set the duration")
        if flags.rate is not None:
            fail("--rate does nothing with --replay: the saved records were probed already")
        if flags.budget is not None:
            fail("--budget does nothing with --replay: the saved records were probed already")
        if flags.save_records is not None:
            fail("--save-records with --replay: the records are saved already, in "
                 f"{flags.replay}")  # fmt: skip
    if not flags.sim:
        given = [flag for name, flag in _SIM_ONLY if getattr(flags, name) != defaults[name]]
        if flags.timestamps.value != settings.SIM_TIMESTAMPS:
            given.append("--timestamps")
        if flags.ecmp.value != settings.SIM_ECMP:
            given.append("--ecmp")
        if given:
            fail(f"{given[0]} needs --sim (it shapes the simulated fabric)")
    elif flags.hosts_per_leaf is not None and flags.hosts_per_leaf > flags.hosts:
        fail(f"--hosts-per-leaf {flags.hosts_per_leaf} is more than --hosts {flags.hosts}")


def check_report_flags(
    *,
    fmt: str,
    prom_paths: bool,
    pretty: bool,
    heatmap: Any,
    heatmap_max_given: bool,
    offsets_plot: Any = None,
) -> None:
    """Flags of ``scan``'s output that only mean something with another flag."""
    if prom_paths and fmt != "prom":
        fail(f"--prom-paths needs --format prom (the format is {fmt})")
    if pretty and fmt != "json":
        fail(f"--pretty needs --format json (the format is {fmt})")
    if heatmap_max_given and heatmap is None:
        fail("--heatmap-max needs --heatmap FILE.png")
    for flag, path in (("--heatmap", heatmap), ("--offsets-plot", offsets_plot)):
        if path is not None and str(path).lower().endswith(_OTHER_IMAGES):
            fail(f"{flag} {path}: cwctl draws PNG only; name the file .png")


# image names that promise another format than the PNG cwctl writes
_OTHER_IMAGES = (".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".svg", ".pdf")


def host_names(flags: Any, inventory: Any, replay: Any) -> list[str] | None:
    """The hosts the flags will scan, without scanning (None: not known up front).
    Reads only what it must: a record file's header, the inventory."""
    if replay is not None:
        from cwctl.scan.recordfile import read_host_names

        return read_host_names(replay)
    if inventory is not None and (flags.sim or flags.local is None):
        from cwctl.inventory import load_inventory

        return [h.name for h in load_inventory(inventory).hosts]
    if flags.sim:
        from cwctl.fabric.names import sim_host_names

        return sim_host_names(flags.hosts)
    if flags.local is not None:
        from cwctl.fabric.names import local_host_names

        return local_host_names(flags.local)
    return None


def check_reference(flags: Any, inventory: Any, replay: Any) -> None:
    """``--reference`` must name a host the scan will have."""
    if flags.reference is None:
        return
    names = host_names(flags, inventory, replay)  # a broken inventory or record file: its line
    if names is not None and flags.reference not in names:
        sample = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        fail(f"--reference {flags.reference}: no such host ({len(names)} hosts: {sample})")
