"""Every default of cwctl, written once.

The CLI's flags, the TUI, the simulator, the inventory's dataclasses and the docs'
examples take their defaults from here; nothing else spells these numbers. Units are in
the names. This module imports nothing of cwctl: every layer may read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# --- where the hosts come from ---------------------------------------------------------
INVENTORY_FILE: Final = "inventory.toml"  # in the current directory
INVENTORY_ENV: Final = "CWCTL_INVENTORY"  # overrides INVENTORY_FILE
LOCAL_MAX: Final = 250  # --local N: agents on 127.0.0.2 .. 127.0.0.251
LOCAL_MIN: Final = 2

# --- the simulated fabric (--sim) ----------------------------------------------------------
SIM_HOSTS: Final = 64  # gpu-001 ...
SIM_HOSTS_PER_LEAF: Final = 8  # leaf1 ...
SIM_SPINES: Final = 4  # spine1 ...
SIM_SEED: Final = 1
SIM_TIMESTAMPS: Final = "hw"  # hw (NIC) | sw (kernel)
SIM_LOAD: Final = 0.2  # mean utilisation of every queue, 0..1
SIM_ECMP: Final = "hidden"  # hidden (per-switch secret seeds) | documented (docs/simulator.md)
SIM_DISCOVERY: Final = True  # simulated agents trace their flows (path records)
SIM_JOBS: Final = 0  # simulated running jobs (--jobs N; cwctl.jobs.simjobs)
SIM_HOST_PREFIX: Final = "gpu"

# --- probe budgets (docs/sync.md, "Probe budgets") ---------------------------------------


@dataclass(frozen=True)
class Budget:
    """How much probing one scan does: coded pairs per second per peer, for how long."""

    name: str
    rate: float  # coded pairs per second per peer
    duration_s: float  # seconds of probing per scan (per window, for watch)
    ports: int  # source ports each host probes from (each a flow its agent must trace)
    use: str  # which commands choose it


BUDGET_QUICK: Final = "quick"  # the most accurate answer now: short and dense
BUDGET_WATCH: Final = "watch"  # continuous and sparse: accuracy builds across windows
BUDGETS: Final = {
    # 2 ports: the flows a 2 s scan can trace under the switches' ICMP limits (docs/sync.md)
    BUDGET_QUICK: Budget(BUDGET_QUICK, 100.0, 2.0, 2, "scan, reroute --verify, sync --count 1"),
    BUDGET_WATCH: Budget(BUDGET_WATCH, 2.0, 5.0, 4, "tui, watch, the sync loop"),
}
# What one scan at a budget may gather at the collector, in probe rows (two per coded
# pair): above it the budget's rate per peer falls so the fleet's rows stay here (quick:
# 100 pairs/s to 1 000 hosts, 10 at 10 000, where 40 M rows took 86 s and 4.5 GB on 2
# cores; 4 M: 15 s and 1.5 GB, docs/scale.md). An explicit --rate or inventory rate wins.
SCAN_MAX_ROWS: Final = 4_000_000
# The sliding clock solve (TUI, watch, the sync loop) carries the clock model across
# windows by keeping the probes of the last windows: enough of them for this many coded
# pairs per peer (60 s at the watch budget), never older than the span a straight line
# (offset and drift) holds against the clocks' wander (docs/sync.md "Probe budgets").
SLIDING_HISTORY_PAIRS: Final = 120
SLIDING_HISTORY_MAX_S: Final = 300.0

# --- probing (the inventory's [probe] section) ------------------------------------------
PROBE_DURATION_S: Final = BUDGETS[BUDGET_QUICK].duration_s  # a scan's, unless a budget says
PROBE_RATE: Final = BUDGETS[BUDGET_QUICK].rate  # coded pairs per second per peer
# the sane ranges of both (flags, inventory keys, record file headers): an hour of probing,
# a thousand pairs a second to each peer (ten times a dense quick scan's)
PROBE_DURATION_MIN_S: Final = 0.1
PROBE_DURATION_MAX_S: Final = 3600.0
PROBE_RATE_MIN: Final = 0.1
PROBE_RATE_MAX: Final = 1000.0
PROBE_PEERS: Final = 10  # peers each host probes (K)
PROBE_PORT: Final = 0  # UDP port that answers probes; 0 = any free port
PROBE_PORTS: Final = BUDGETS[BUDGET_WATCH].ports  # a bare SimParams'; a scan's: its budget's
PROBE_GAP_US: Final = 20.0  # spacing of the two probes of a coded pair
# The IP TOS byte of the probes that keep crossing an element a switch-side reroute avoids
# (DSCP 1, "lower effort", RFC 8622; a legacy TOS bit, which every kernel's `ip rule tos`
# matches): the leaves route it by a copy of the routes as they were (actions/switchroute)
PROBE_OBSERVE_TOS: Final = 0x04
PROBE_TRACE: Final = True  # path discovery, where the inventory names switch addresses
ICMP_RATELIMIT_MS: Final = 1000  # switches' ICMP answers per destination (Linux default)
PATH_MAX_AGE_S: Final = 600.0  # a path record older than this is traced again, or discounted

# --- SSH (the inventory's [ssh] section) ---------------------------------------------------
SSH_PORT: Final = 22
SSH_CONNECT_TIMEOUT_S: Final = 10.0
SSH_CONCURRENCY: Final = 128  # below sshd's MaxStartups 10:30:100 per source, with a mux
SSH_PYTHON: Final = "python3"

# --- the TUI -----------------------------------------------------------------------------
TUI_INTERVAL_S: Final = 1.0  # pause between two scans

# --- cwctl watch (docs/watch.md) ----------------------------------------------------------
# /metrics' port in the docs and examples: Prometheus' exporter range 9100-9999 is full
# (9108, used before, is the graphite exporter's), and this machine's /etc/services
# names nothing at 19108
WATCH_PORT: Final = 19108
WATCH_INTERVAL_S: Final = 30.0  # from the start of one round to the start of the next

# --- cwctl sync: feeding chronyd (docs/sync.md, "Feeding chronyd") ----------------------
SYNC_SOCKET: Final = "/run/chrony/cwctl.sock"  # the refclock SOCK path on each host
SYNC_INTERVAL_S: Final = 10.0  # from scan to scan
SYNC_SAMPLE_PERIOD_S: Final = 1.0  # one sample to chronyd this often
SYNC_MAX_UNCERTAINTY: Final = "1us"  # feed only hosts with an error bar under this
SYNC_MAX_OFFSET: Final = "1ms"  # larger offsets need --step and a confirmation

# --- where cwctl keeps what it did (the journal, the simulator's saved state, the lock) --
STATE_DIR_ENV: Final = "CWCTL_STATE_DIR"


def state_dir() -> Path:
    """``$CWCTL_STATE_DIR``, else ``$XDG_STATE_HOME/cwctl``, else ``~/.local/state/cwctl``."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path("~/.local/state").expanduser()
    return base / "cwctl"
