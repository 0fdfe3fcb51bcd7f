"""The flags that name a command's hosts, as a string a "Next:" hint can repeat: the
next command (``cwctl reroute spine2 ...``) reaches the same hosts as the scan did."""

from __future__ import annotations

import shlex

from cwctl.cli.options import SourceFlags

_SIM_FLAGS = {  # SourceFlags' field -> its flag, written when it is not the default
    "hosts": "--hosts",
    "hosts_per_leaf": "--hosts-per-leaf",
    "spines": "--spines",
    "seed": "--seed",
    "load": "--load",
    "jobs": "--jobs",
}


def source_args(flags: SourceFlags) -> str | None:
    """``--sim --hosts 16 --fault switch:spine2:down``, ``-i inv.toml``, ``--local 4``, or
    "" (the default inventory); None for a replay (nothing to reach again)."""
    if flags.replay is not None:
        return None
    if flags.local:
        return f"--local {flags.local}"
    if not flags.sim:
        return f"-i {shlex.quote(str(flags.inventory))}" if flags.inventory is not None else ""
    defaults = SourceFlags()
    words = ["--sim"]
    for name, flag in _SIM_FLAGS.items():
        value = getattr(flags, name)
        if value is not None and value != getattr(defaults, name):
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if flags.timestamps != defaults.timestamps:
        words += ["--timestamps", flags.timestamps.value]
    for fault in flags.fault or ():
        words += ["--fault", fault]
    return shlex.join(words)
