"""The inventory's hosts over SSH as an action target, and its reroute mechanisms.

=============================  ===============================================
element, options               mechanism (``MECHANISMS["ssh"]``)
=============================  ===============================================
spine or link                  "switch-ecmp": the leaves' ECMP groups (kind
                               "linux", ``switchroute.py``)
spine or link, ``--gateway``   "host-routes": the hosts' next hops (``route.py``)
spine or link, ``--at hosts``  "hosts": open flows moved by paired port translation
                               (``moveflows.py``); with --port or --roce, new
                               connections by source port (``steer.py``)
NIC ``gpu-001/mlx5_1``         "nccl": the NIC excluded in NCCL's file on its host
=============================  ===============================================

Planning reads the hosts first (the current route, the current NCCL setting) through
the runner; a host that cannot be read makes the plan fail (exit 3) naming it. Draining
goes through the inventory's ``[scheduler]`` (Slurm or Kubernetes).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from cwctl.actions import k8s, moveflows, nccl, route, slurm, steer, switchroute
from cwctl.actions.naming import Element, FabricShape
from cwctl.actions.plan import LOCAL, ActionPlan, Step
from cwctl.actions.runners import Runner, SSHRunner, read_on_all
from cwctl.actions.steerports import Avoided
from cwctl.actions.target import RouteOptions, mechanism
from cwctl.errors import InputError
from cwctl.jobs.read import read_jobs

if TYPE_CHECKING:
    from cwctl.inventory import Inventory
    from cwctl.jobs import JobRead
    from cwctl.scan.request import ScanRequest, Source
    from cwctl.sim.model import FabricModel

KIND = "ssh"


@dataclass
class InventoryTarget:
    """The inventory's hosts: reached over SSH (``ssh_options`` go to asyncssh)."""

    inventory: Inventory
    request: ScanRequest | None = None
    ssh_options: dict[str, Any] = field(default_factory=dict)
    kind: ClassVar[str] = KIND

    @staticmethod
    def opens(request: ScanRequest, model: FabricModel | None) -> bool:
        return model is None  # every request not on the simulator names its inventory

    @classmethod
    def open(cls, request: ScanRequest, model: FabricModel | None, **ssh: Any) -> InventoryTarget:
        """The target for ``request``: its inventory's hosts, loaded and checked."""
        from cwctl.inventory import load_inventory

        if request.inventory is None:
            raise InputError("nothing to act on: give an inventory (-i FILE) or --sim")
        return cls(load_inventory(request.inventory), request, dict(ssh))

    def shape(self) -> FabricShape:
        inv = self.inventory  # (read each time: cheap beside the SSH reads it precedes)
        return FabricShape(
            hosts=tuple(h.name for h in inv.hosts),
            leaves=tuple(s.name for s in inv.switches if s.role == "leaf"),
            spines=tuple(s.name for s in inv.switches if s.role == "spine"),
            nics={h.name: tuple(h.nics) for h in inv.hosts},
            leaf_of={h.name: h.leaf for h in inv.hosts},
            uplinks={s.name: frozenset(s.uplinks) for s in inv.switches if s.role == "leaf"},
            where=str(inv.path or "the inventory"),
        )

    def context(self) -> dict[str, Any]:
        path = self.inventory.path
        return {"source": "ssh", "inventory": str(Path(path).absolute()) if path else None}

    def open_runner(self) -> Runner:
        return SSHRunner(self.inventory, **self.ssh_options)

    def scan_source(self, request: ScanRequest) -> Source:
        from cwctl.transport.ssh import SSHSource

        options = self.ssh_options.get("client_options")
        return SSHSource(request, inventory=self.inventory, client_options=options)

    async def read_jobs(self, runner: Runner) -> JobRead | None:
        return await read_jobs(self.inventory, runner)

    def state_now(self) -> dict[str, Any]:
        return {}  # the hosts' state is read through the runner (prior.current)

    def check_options(self, options: RouteOptions) -> None:
        """``--gateway SWITCH=ADDRESS`` names a spine of this fabric: never a flag
        silently left out of the plan."""
        if not options.gateways:
            return
        if options.via == "hosts":
            raise InputError("--gateway reweights host routes; --at hosts steers by source port")
        spines = {s.name for s in self.inventory.switches if s.role == "spine"}
        for switch in sorted(set(options.gateways.values())):
            if switch not in spines:
                known = ", ".join(sorted(spines)) or "none in the inventory"
                raise InputError(
                    f"--gateway {switch}=...: {switch} is not a spine (spines: {known})"
                )

    def plan_scheduler(
        self, plan: ActionPlan, *, reason: str, evict: bool, suspect: str | None
    ) -> None:
        """Drain or resume ``plan.element`` through the inventory's ``[scheduler]``."""
        inv, host = self.inventory, plan.element
        inv.host(host)  # an unknown host is an InputError naming the inventory
        sched = inv.scheduler
        if sched.kind not in ("slurm", "k8s"):
            raise InputError(
                f"{inv.path or 'the inventory'}: [scheduler] kind is {sched.kind!r}: set "
                'kind = "slurm" or "k8s" (and host = where scontrol/kubectl runs) to drain hosts'
            )
        where = sched.host or LOCAL
        if sched.kind == "slurm":
            maker = slurm.drain_steps if plan.kind == "drain" else slurm.resume_steps
            plan.steps = maker(where, host, reason)
        elif plan.kind == "drain":
            plan.steps = k8s.drain_steps(where, host, reason, evict=evict, suspect=suspect)
        else:
            plan.steps = k8s.resume_steps(where, host, reason)


def _seen(host: str, argv: list[str], stdout: str) -> dict[str, Any]:
    """A ``prior`` entry: what ``argv`` printed on ``host`` while planning (re-read and
    compared before applying: ``session.check_prior``)."""
    return {"host": host, "read": list(argv), "seen": stdout}


# --- mechanisms ---------------------------------------------------------------------------


def _at_hosts(element: Element, options: RouteOptions) -> bool:
    return options.via == "hosts"


@mechanism(KIND, "hosts", _at_hosts)
async def _host_steps(
    element: Element,
    target: InventoryTarget,
    runner: Runner,
    options: RouteOptions,
    plan: ActionPlan,
) -> list[Step]:
    """Move the open flows (``moveflows.py``), or steer new connections to the services
    named by source port (``steer.py``)."""
    assert element.spine is not None  # planner.check_at_hosts
    suspect = Avoided(element.name, element.spine, element.leaf)
    fabric, pairs = steer.fabric_pairs(target.inventory, suspect)
    if options.steer.services or options.steer.roce:
        return await steer.plan_host_steering(fabric, suspect, pairs, runner, options.steer, plan)
    return await moveflows.plan_moves(fabric, suspect, pairs, runner, options.steer, plan)


def _by_nccl(element: Element, options: RouteOptions) -> bool:
    return element.kind == "nic" and options.via != "hosts"


@mechanism(KIND, "nccl", _by_nccl)
async def _nccl_steps(
    element: Element,
    target: InventoryTarget,
    runner: Runner,
    options: RouteOptions,
    plan: ActionPlan,
) -> list[Step]:
    inv = target.inventory
    host, nic = element.host, element.nic
    assert host is not None and nic is not None
    python = inv.endpoint(host).python
    key = nccl.setting_for(nic)
    path = nccl.check_conf_path(options.nccl_conf)
    read = nccl.read_argv(python, path, key)
    out = await read_on_all(runner, [host], lambda h: read, path)
    plan.prior[f"nccl:{host}"] = _seen(host, read, out[host])
    _, current = nccl.parse_read(out[host], host)
    devices = nccl.devices_read(out[host])
    if devices is not None and nic not in devices:  # a note, not a refusal: a NIC that
        # failed may have left sysfs, and that is exactly when it must be excluded
        plan.notes.append(
            f"{host} lists no device {nic} (it has {', '.join(devices) or 'none'}); "
            "check the name: the exclusion is planned anyway"
        )
    others = tuple(n for n in inv.host(host).nics if n != nic)
    new = nccl.excluded_value(current, nic, key=key, host=host, others=others)
    if new is None:
        return []
    backup = f"{path}.cwctl-{plan.id}"
    return [
        nccl.exclude_step(
            host, python=python, path=path, key=key, current=current, new=new, backup=backup
        )
    ]


def _by_switches(element: Element, options: RouteOptions) -> bool:
    return element.kind != "nic" and options.via != "hosts" and not options.gateways


@mechanism(KIND, "switch-ecmp", _by_switches)
async def _switch_steps(
    element: Element,
    target: InventoryTarget,
    runner: Runner,
    options: RouteOptions,
    plan: ActionPlan,
) -> list[Step]:
    """The leaves choose the spine: their ECMP groups (``switchroute.py``)."""
    found = await switchroute.plan_switch_reroute(
        target.inventory,
        element.name,
        element.spine or element.name,
        element.leaf if element.kind == "link" else None,
        runner,
        prefix=options.prefix,
    )
    plan.prior = found.prior
    plan.notes += found.notes
    return found.observe + found.steps if found.steps else []


def _route_hosts(element: Element, inv: Inventory) -> list[str]:
    if element.kind == "link":
        return [h.name for h in inv.hosts if h.leaf == element.leaf]
    serves = {s.name for s in inv.switches if s.role == "leaf" and element.spine in s.uplinks}
    return [h.name for h in inv.hosts if h.leaf in serves]


def _by_host_routes(element: Element, options: RouteOptions) -> bool:
    return element.kind != "nic" and options.via != "hosts" and bool(options.gateways)


@mechanism(KIND, "host-routes", _by_host_routes)
async def _route_steps(
    element: Element,
    target: InventoryTarget,
    runner: Runner,
    options: RouteOptions,
    plan: ActionPlan,
) -> list[Step]:
    """The operator says the hosts choose the next hop (``--gateway``)."""
    inv = target.inventory
    spine = element.spine or element.name
    missing = []
    if not any(h.leaf for h in inv.hosts):
        missing.append(
            "which hosts' traffic crosses it (give each [[host]] a leaf and each leaf "
            "switch its uplinks in the inventory)"
        )
    if options.prefix is None:
        missing.append("the destination prefix whose next hops to reweight (--prefix 10.0.0.0/8)")
    if spine not in options.gateways.values():
        missing.append(f"the next-hop address that leads to {spine} (--gateway {spine}=ADDRESS)")
    if missing:
        raise InputError(
            f"cannot plan a TCP reroute around {element.name}; missing: " + "; ".join(missing)
        )
    assert options.prefix is not None
    prefix = route.check_prefix(options.prefix)
    hosts = _route_hosts(element, inv)
    if not hosts:
        raise InputError(f"no inventory host sits on a leaf whose traffic crosses {element.name}")
    avoid = {gw: sw for gw, sw in options.gateways.items() if sw == spine}
    outputs = await read_on_all(
        runner, hosts, lambda h: route.show_argv(prefix), f"the route to {prefix}"
    )
    routes = {host: route.parse_route(outputs[host], prefix, host) for host in hosts}
    await _check_gateways(runner, hosts, routes, avoid, prefix, plan)
    steps, unknown = [], []
    owner = inv.switch_of_address()
    for host in hosts:
        plan.prior[f"route:{host}"] = _seen(host, route.show_argv(prefix), outputs[host])
        step = route.reweight_step(host, routes[host], avoid, element.name)
        if step is not None:
            steps.append(step)
        unknown += [
            f"{host} via {h.gateway}" + (f" ({owner[h.gateway]})" if h.gateway in owner else "")
            for h in routes[host].nexthops
            if h.gateway not in options.gateways
        ]
    if unknown and not steps:  # "already avoided" only when every next hop is known
        raise InputError(
            f"cannot tell whether the hosts' routes to {prefix} avoid {element.name}: "
            f"next hop(s) {', '.join(unknown[:4])} lead to no switch named with --gateway; "
            "where a leaf chooses the spine, host routes cannot steer around it (give the "
            'leaves kind = "linux" in the inventory and reroute without --gateway)'
        )
    return steps


async def _check_gateways(
    runner: Runner,
    hosts: list[str],
    routes: dict[str, route.Route],
    avoid: dict[str, str],
    prefix: str,
    plan: ActionPlan,
) -> None:
    """A ``--gateway`` no route uses is refused unless some host reaches it directly
    (then it is already avoided: the plan says so): a typo is never "already avoided"."""
    unused = route.unused_gateways(routes, avoid)
    if not unused:
        return
    onlink = {}
    for gw in unused:
        results = await asyncio.gather(*(runner.run(h, route.get_argv(gw)) for h in hosts))
        onlink[gw] = any(r.ok and route.is_onlink(r.stdout) for r in results)
    used = ", ".join(sorted({h.gateway for r in routes.values() for h in r.nexthops}))
    route.check_onlink(unused, avoid, onlink, prefix, used)
    for gw in unused:
        plan.notes.append(
            f"no route to {prefix} uses {gw} ({avoid[gw]}) as a next hop: already avoided"
        )
