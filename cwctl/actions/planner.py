"""From a suspect element to a plan: which mechanism, which hosts, which steps.

=============================  ==========================  ===============================
element                        ``--sim``                    real fabric (inventory)
=============================  ==========================  ===============================
spine ``spine2``               ECMP weight 0 in every leaf  the leaves' ECMP groups (kind
                                                            "linux", ``switchroute.py``);
                                                            with --gateway: host routes
link ``leaf1-spine2``          ECMP weight 0 in every leaf  ``leaf1``'s groups + the other
                               (see ``_link_note``)         leaves' routes towards leaf1
spine or link, ``--at hosts``  pairs steered in the model  open flows moved by paired port
                                                            translation (``moveflows.py``);
                                                            with --port: new connections
                                                            by source port (``steer.py``)
NIC ``gpu-001/mlx5_1``         exclude the NIC              NCCL exclusion on ``gpu-001``
host ``gpu-001``, access link  drain                        drain through ``[scheduler]``
leaf ``leaf1``                 refused: its hosts have no other way in (drain them)
=============================  ==========================  ===============================

Planning may read the hosts first (the current route, the current NCCL setting) through
the runner; a host that cannot be read makes the plan fail (exit 3) naming it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwctl.actions import k8s, moveflows, nccl, route, simulated, slurm, steer, switchroute
from cwctl.actions.drainreason import DEFAULT_REASON, suspect_reason, with_suspect
from cwctl.actions.naming import Element, covering, resolve
from cwctl.actions.plan import LOCAL, ActionPlan, Step, new_plan_id
from cwctl.actions.runners import Runner, read_on_all
from cwctl.actions.steerports import Avoided
from cwctl.errors import InputError
from cwctl.sim import state as sim_state


@dataclass
class Target:
    """What a plan acts on: an inventory's hosts, or the simulator's model."""

    inventory: Any = None  # cwctl.inventory.Inventory
    model: Any = None  # cwctl.sim.FabricModel (--sim)
    request: Any = None  # the ScanRequest that describes it (rescans, saved sim state)
    ssh_options: dict[str, Any] = field(default_factory=dict)  # asyncssh options (tests)

    def context(self) -> dict[str, Any]:
        if self.model is not None:
            sim = self.request.sim if self.request is not None else None
            out: dict[str, Any] = {"source": "sim"}
            if sim is not None:
                out["sim"] = {
                    "hosts": sim.hosts,
                    "hosts_per_leaf": sim.hosts_per_leaf,
                    "spines": sim.spines,
                    "seed": sim.seed,
                }
            if self.request is not None and self.request.inventory is not None:
                out["inventory"] = str(Path(self.request.inventory).absolute())
            return out
        path = getattr(self.inventory, "path", None)
        return {"source": "ssh", "inventory": str(Path(path).absolute()) if path else None}


@dataclass
class RouteOptions:
    prefix: str | None = None
    gateways: dict[str, str] = field(default_factory=dict)  # gateway address -> switch
    nccl_conf: str = nccl.DEFAULT_CONF
    via: str = "auto"  # "hosts": steer by source ports at the hosts (steer.py)
    steer: steer.SteerOptions = field(default_factory=steer.SteerOptions)


# --- reroute -----------------------------------------------------------------------------


def _link_note(element: Element) -> str:
    return (
        f"the simulator's ECMP groups are per leaf, not per destination: to keep traffic "
        f"to and from {element.leaf} off {element.name}, every leaf stops using {element.spine}"
    )


def _check_gateway_switches(options: RouteOptions, target: Target) -> None:
    """``--gateway SWITCH=ADDRESS`` names a spine of this fabric, and a fabric where the
    hosts choose the next hop: never a flag silently left out of the plan."""
    if not options.gateways:
        return
    if target.model is not None:
        raise InputError(
            "--gateway: in the simulated fabric the leaves choose the spine (ECMP), the "
            "hosts have no next hops to reweight; leave --gateway out"
        )
    if options.via == "hosts":
        raise InputError("--gateway reweights host routes; --at hosts steers by source port")
    spines = {s.name for s in target.inventory.switches if s.role == "spine"}
    for switch in sorted(set(options.gateways.values())):
        if switch not in spines:
            known = ", ".join(sorted(spines)) or "none in the inventory"
            raise InputError(f"--gateway {switch}=...: {switch} is not a spine (spines: {known})")


async def plan_reroute(
    name: str, target: Target, runner: Runner, options: RouteOptions | None = None
) -> ActionPlan:
    options = options or RouteOptions()
    _check_gateway_switches(options, target)
    covered: list[Element] = []
    if "|" in name:  # a candidate set: act on the element that covers it
        element, covered = covering(name, target)
    else:
        element = resolve(name, target)
    if element.kind == "host" or (element.kind == "link" and element.host is not None):
        host = element.host or element.name
        why = f"{element.name} carries all of {host}'s traffic: no other way round it"
        plan = plan_drain(host, target, reason=suspect_reason(element.name), suspect=element.name)
        plan.kind, plan.element = "reroute", element.name
        plan.notes.insert(0, f"{why}; draining {host} instead")
        return plan
    if element.kind == "switch" and element.leaf is not None:
        within = f"the candidate set {name!r} is covered by {element.name}; " if covered else ""
        raise InputError(
            f"{within}{element.name} is a leaf: its hosts have no other way in; drain them "
            "(cwctl drain HOST) or repair the switch"
        )
    plan = ActionPlan(
        kind="reroute",
        element=element.name,
        reason=f"steer traffic around suspect {element.kind} {element.name}",
        steps=[],
        context=target.context(),
        id=new_plan_id(),
    )
    if covered:
        plan.notes.append(
            f"the candidate set {name} is covered by {element.name}: steering around "
            f"{element.name} avoids every candidate ({', '.join(e.name for e in covered)})"
        )
    if options.via == "hosts":
        plan.steps = await _host_steps(element, target, runner, options, plan)
        return plan
    if target.model is not None:
        model = target.model
        plan.prior = {"sim": sim_state.state_to_json(model.state)}
        if element.kind == "nic":
            plan.steps = simulated.exclude_nic_step(model, element.name)
        else:
            spine = element.spine or element.name
            plan.steps = simulated.ecmp_steps(model, spine, list(model.fabric.leaves))
            if element.kind == "link":
                plan.notes.append(_link_note(element))
    elif element.kind == "nic":
        plan.steps = await _nccl_steps(element, target, runner, options, plan)
    elif options.gateways:  # the operator says the hosts choose the next hop
        plan.steps = await _route_steps(element, target, runner, options, plan)
    else:  # the leaves choose the spine: their ECMP groups (switchroute.py)
        found = await switchroute.plan_switch_reroute(
            target.inventory,
            element.name,
            element.spine or element.name,
            element.leaf if element.kind == "link" else None,
            runner,
            prefix=options.prefix,
        )
        plan.steps = found.observe + found.steps if found.steps else []
        plan.prior = found.prior
        plan.notes += found.notes
    if not plan.steps and not plan.notes:  # every mechanism above read the state first
        plan.notes.append(f"nothing to change: {element.name} is already avoided")
    return plan


async def _host_steps(
    element: Element, target: Target, runner: Runner, options: RouteOptions, plan: ActionPlan
) -> list[Step]:
    """``--at hosts``: source-port steering at the hosts (steer.py)."""
    if element.kind == "nic" or element.spine is None:
        raise InputError(
            f"--at hosts steers around a spine or a leaf-spine link, not {element.kind} "
            f"{element.name}"
        )
    suspect = Avoided(element.name, element.spine, element.leaf)
    if target.model is not None:
        if options.steer.roce:
            raise InputError("--roce traces real hosts: give an inventory (-i), not --sim")
        model = target.model
        plan.prior = {"sim": sim_state.state_to_json(model.state)}
        pairs = steer.model_pairs(model.fabric, suspect)
        plan.steering = {"method": "simulated", "suspect": element.name, "pairs": len(pairs)}
        return simulated.steer_pairs_step(model, pairs, suspect.spine)
    fabric, pairs = steer.fabric_pairs(target.inventory, suspect)
    if options.steer.services or options.steer.roce:
        return await steer.plan_host_steering(fabric, suspect, pairs, runner, options.steer, plan)
    return await moveflows.plan_moves(fabric, suspect, pairs, runner, options.steer, plan)


def _route_hosts(element: Element, inv: Any) -> list[str]:
    if element.kind == "link":
        return [h.name for h in inv.hosts if h.leaf == element.leaf]
    serves = {s.name for s in inv.switches if s.role == "leaf" and element.spine in s.uplinks}
    return [h.name for h in inv.hosts if h.leaf in serves]


def _seen(host: str, argv: list[str], stdout: str) -> dict[str, Any]:
    """A ``prior`` entry: what ``argv`` printed on ``host`` while planning (re-read and
    compared before applying: ``session.check_prior``)."""
    return {"host": host, "read": list(argv), "seen": stdout}


async def _route_steps(
    element: Element, target: Target, runner: Runner, options: RouteOptions, plan: ActionPlan
) -> list[Step]:
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


async def _nccl_steps(
    element: Element, target: Target, runner: Runner, options: RouteOptions, plan: ActionPlan
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


# --- drain / resume ----------------------------------------------------------------------


def _scheduler(target: Target, host: str) -> tuple[str, str]:
    """(kind, where its CLI runs) from the inventory's [scheduler]."""
    inv = target.inventory
    inv.host(host)  # an unknown host is an InputError naming the inventory
    sched = inv.scheduler
    if sched.kind not in ("slurm", "k8s"):
        raise InputError(
            f"{inv.path or 'the inventory'}: [scheduler] kind is {sched.kind!r}: set kind = "
            '"slurm" or "k8s" (and host = where scontrol/kubectl runs) to drain hosts'
        )
    return sched.kind, sched.host or LOCAL


def plan_drain(
    host: str, target: Target, *, reason: str, evict: bool = False, suspect: str | None = None
) -> ActionPlan:
    """Drain ``host``; the scheduler records ``reason`` and the ``suspect`` that caused it
    (Slurm: in ``Reason=``; Kubernetes: annotations and a taint)."""
    return _plan_scheduler(
        "drain", host, target, reason=with_suspect(reason, suspect), evict=evict, suspect=suspect
    )


def plan_resume(host: str, target: Target, *, reason: str = DEFAULT_REASON) -> ActionPlan:
    return _plan_scheduler("resume", host, target, reason=reason)


def _plan_scheduler(
    kind: str,
    host: str,
    target: Target,
    *,
    reason: str,
    evict: bool = False,
    suspect: str | None = None,
) -> ActionPlan:
    plan = ActionPlan(kind=kind, element=host, reason=reason, steps=[], context=target.context())
    if target.model is not None:
        if host not in target.model.fabric.hosts:
            raise InputError(f"no host named {host!r} in the simulated fabric")
        plan.prior = {"sim": sim_state.state_to_json(target.model.state)}
        plan.steps = simulated.drain_step(target.model, host, resume=kind == "resume")
        if not plan.steps:
            state = "drained" if kind == "drain" else "in service"
            plan.notes.append(f"nothing to change: {host} is already {state}")
        return plan
    sched, where = _scheduler(target, host)
    if sched == "slurm":
        maker = slurm.drain_steps if kind == "drain" else slurm.resume_steps
        plan.steps = maker(where, host, reason)
    elif kind == "drain":
        plan.steps = k8s.drain_steps(where, host, reason, evict=evict, suspect=suspect)
    else:
        plan.steps = k8s.resume_steps(where, host, reason)
    return plan
