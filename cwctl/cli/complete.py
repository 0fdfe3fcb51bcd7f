"""What <Tab> offers beyond commands and flags: fault specs, element names, hosts,
action ids and job ids.

``--fault`` completes ``KIND:`` then ``KIND:NAME`` then ``KIND:NAME:MODE``; a suspect
(``reroute ELEMENT``, ``drain --suspect``) completes to a switch, link, host or NIC
name; a host (``drain HOST``, ``resume HOST``, ``--reference``) to a host's; a plan
(``rollback PLAN``) to an id in the journal, newest first; a job (``job-env JOBID``) to
a simulated job's id (``--sim --jobs N``; a real scheduler is not asked at each <Tab>).
Names come from the inventory the command line names (``-i FILE``, else
``$CWCTL_INVENTORY``), else from the simulated fabric its ``--hosts``/``--spines``
shape (the defaults when not typed). Completion never fails: a broken inventory
completes nothing.
"""

from __future__ import annotations

import os
from typing import Any

from cwctl import settings

LIMIT = 400  # names offered at once (a fleet of thousands: type more of the name)
MODE_EXAMPLES = {"lossy": "lossy=0.02", "congested": "congested=0.9", "slow": "slow"}


def _inventory_names(path: str) -> dict[str, list[str]]:
    from cwctl.inventory import load_inventory

    inv = load_inventory(path)
    switches = [s.name for s in inv.switches]
    links = [f"{s.name}-{up}" for s in inv.switches for up in s.uplinks]
    hosts = [h.name for h in inv.hosts]
    nics = [f"{h.name}/{nic}" for h in inv.hosts for nic in h.nics]
    return {"switch": switches, "link": links, "host": hosts, "nic": nics}


def _sim_names(params: dict[str, Any]) -> dict[str, list[str]]:
    from cwctl.fabric.topology import leaf_spine

    hosts = int(params.get("hosts") or settings.SIM_HOSTS)
    per_leaf = int(params.get("hosts_per_leaf") or min(settings.SIM_HOSTS_PER_LEAF, hosts))
    spines = int(params.get("spines") or settings.SIM_SPINES)
    names, topology = leaf_spine(hosts, per_leaf, spines)
    leaves = sorted(topology.uplinks, key=lambda n: int(n[4:]))
    links = [f"{leaf}-{up}" for leaf in leaves for up in topology.uplinks[leaf]]
    nics = [f"{h}/mlx5_{k}" for h in names for k in range(2)]
    return {"switch": [*leaves, *topology.spines], "link": links, "host": names, "nic": nics}


def fabric_names(ctx: Any) -> dict[str, list[str]]:
    """Every element name by kind, of the fabric the command line so far names."""
    params = dict(getattr(ctx, "params", None) or {})
    inventory = params.get("inventory") or os.environ.get(settings.INVENTORY_ENV)
    try:
        if inventory is not None and not params.get("sim"):
            return _inventory_names(str(inventory))
        return _sim_names(params)
    except Exception:  # completion must never break the shell
        return {}


def complete_fault(ctx: Any, incomplete: str) -> list[str]:
    from cwctl.sim.faults import KINDS, MODES

    parts = incomplete.split(":")
    if len(parts) == 1:
        return [f"{k}:" for k in KINDS if k.startswith(incomplete)]
    kind, name = parts[0], parts[1]
    if len(parts) == 2:
        names = fabric_names(ctx).get(kind, [])
        return [f"{kind}:{n}" for n in names if n.startswith(name)][:LIMIT]
    modes = [MODE_EXAMPLES.get(m, m) for m in MODES]
    return [f"{kind}:{name}:{m}" for m in modes if m.startswith(parts[2])]


def complete_element(ctx: Any, incomplete: str) -> list[str]:
    names = fabric_names(ctx)
    every = [n for kind in ("switch", "link", "host", "nic") for n in names.get(kind, [])]
    return [n for n in every if n.startswith(incomplete)][:LIMIT]


def complete_host(ctx: Any, incomplete: str) -> list[str]:
    hosts = fabric_names(ctx).get("host", [])
    return [n for n in hosts if n.startswith(incomplete)][:LIMIT]


def complete_action_id(ctx: Any, incomplete: str) -> list[str]:
    """The journal's action ids, newest first (the journal read only, as job-env reads it)."""
    try:
        from cwctl.actions.history import history
        from cwctl.actions.journal import Journal

        ids = [a.id for a in reversed(history(Journal(shared=True)).actions)]
    except Exception:  # no journal, an unreadable one: nothing to offer
        return []
    return [i for i in dict.fromkeys(ids) if i.startswith(incomplete)][:LIMIT]


def complete_job_id(ctx: Any, incomplete: str) -> list[str]:
    """The simulated jobs' ids (``--sim --jobs N``, seeded as job-env places them)."""
    params = dict(getattr(ctx, "params", None) or {})
    n_jobs = int(params.get("jobs") or 0)
    if not params.get("sim") or n_jobs <= 0:
        return []
    try:
        from cwctl.jobs.simjobs import sim_jobs

        hosts = fabric_names(ctx).get("host", [])
        seed = params.get("seed")
        seed = int(seed) if seed is not None else settings.SIM_SEED
        ids = [job.id for job in sim_jobs(hosts, n_jobs, seed).jobs]
    except Exception:
        return []
    return [i for i in ids if i.startswith(incomplete)][:LIMIT]
