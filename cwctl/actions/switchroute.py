"""ECMP groups on Linux switches (iproute2 over SSH): steer around a spine or a leaf-spine link.

In a leaf-spine fabric the leaves, not the hosts, choose the spine: each leaf hashes a
flow onto one of the next hops of its route to the destination. So a reroute around
``spine2`` changes those routes on the leaves, for every ``[[switch]]`` with
``kind = "linux"`` (reached over SSH like a host, at its management ``address``):

- read each affected leaf's main table (``ip -j route show``);
- a next hop leads to a spine when its gateway is one of that spine's ``addresses``;
- for a spine: every route of every leaf it serves; for a link ``leafL-spineS``: every
  route of ``leafL`` (traffic up the link) and, on the other leaves, the routes towards
  ``leafL``'s hosts (traffic down it: a route whose prefix holds one of their addresses);
- plan ``ip route replace`` of that exact route without those next hops; the undo is
  ``ip route replace`` of the route exactly as read (``prior`` keeps the JSON read).

The avoided element stays observable: before the routes change, each leaf keeps a copy
of them as read in a table of the element's own (``observe_table``) and a rule sends the
probes ``cwctl watch`` marks (IP TOS ``settings.PROBE_OBSERVE_TOS``) to it, so its rounds
still cross the element and restore only once it probes clean (``observe_steps``; the
rollback removes rule and copies after the routes are back).

Nothing is claimed that was not read: a route whose every next hop leads to the element
is refused (removing them would cut it), a route with attributes this module cannot
write back is refused by name, and "nothing to change" means every affected leaf was
read and none of its routes (to the affected destinations) uses the element.
"""

from __future__ import annotations

import ipaddress
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cwctl import settings
from cwctl.actions.plan import Step
from cwctl.actions.runners import Runner, read_on_all
from cwctl.errors import EXIT_PROBLEMS, CwctlError, InputError

if TYPE_CHECKING:
    from cwctl.inventory import Inventory

READ_ARGV = ("ip", "-j", "route", "show")
KINDS = ("linux",)
OBSERVE_TABLES = range(7300, 7500)  # routing tables (and rule priorities) for observe_table

_ROUTE_KEYS = {"type", "dst", "gateway", "dev", "protocol", "scope", "metric", "prefsrc"}
_ROUTE_KEYS |= {"flags", "nexthops"}
_HOP_KEYS = {"gateway", "dev", "weight", "flags"}
_STATE_FLAGS = {"linkdown", "dead"}  # the kernel's view of the link, not configuration
_WRITABLE_FLAGS = {"onlink"}


class Unwritable(ValueError):
    """A route with something ``ip route replace`` here would not write back."""


def _flags(obj: Mapping[str, Any], what: str) -> list[str]:
    flags = [str(f) for f in obj.get("flags") or []]
    odd = [f for f in flags if f not in _STATE_FLAGS | _WRITABLE_FLAGS]
    if odd:
        raise Unwritable(f"{what} has flag(s) {', '.join(odd)}")
    return [f for f in flags if f in _WRITABLE_FLAGS]


def hops_of(route: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The next hops of a route as read (one for a single-path route)."""
    if "nexthops" in route:
        return [dict(h) for h in route["nexthops"]]
    if "gateway" in route:
        return [{k: route[k] for k in ("gateway", "dev", "flags") if k in route}]
    return []


def replace_argv(
    route: Mapping[str, Any], hops: Sequence[Mapping[str, Any]] | None = None
) -> tuple[str, ...]:
    """``ip route replace`` of ``route`` (as ``ip -j route show`` printed it), with
    ``hops`` as its next hops when given (always written as ``nexthop`` groups then)."""
    dst = str(route.get("dst", ""))
    what = f"route {dst or '?'}"
    odd = sorted(set(route) - _ROUTE_KEYS)
    if odd or not dst:
        raise Unwritable(f"{what} has attribute(s) {', '.join(odd) or 'none: no dst'}")
    if route.get("type", "unicast") != "unicast":
        raise Unwritable(f"{what} is of type {route['type']}")
    argv = ["ip", "route", "replace", dst]
    if "protocol" in route:
        argv += ["proto", str(route["protocol"])]
    if "scope" in route:
        argv += ["scope", str(route["scope"])]
    if "metric" in route:
        argv += ["metric", str(int(route["metric"]))]
    if "prefsrc" in route:
        argv += ["src", str(route["prefsrc"])]
    route_flags = _flags(route, what)
    if hops is None and "nexthops" not in route:
        if "gateway" not in route:
            raise Unwritable(f"{what} has no gateway (a directly connected net)")
        argv += ["via", str(route["gateway"])]
        argv += ["dev", str(route["dev"])] if "dev" in route else []
        return (*argv, *route_flags)
    for hop in hops if hops is not None else route["nexthops"]:
        odd = sorted(set(hop) - _HOP_KEYS)
        if odd or "gateway" not in hop:
            raise Unwritable(
                f"a next hop of {what} has attribute(s) {', '.join(odd) or 'no gateway'}"
            )
        argv += ["nexthop", "via", str(hop["gateway"])]
        argv += ["dev", str(hop["dev"])] if "dev" in hop else []
        argv += ["weight", str(int(hop.get("weight", 1)))]
        argv += _flags(hop, f"a next hop of {what}")
    return (*argv, *route_flags)


def parse_table(stdout: str, switch: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(stdout or "[]")
    except ValueError:
        raise CwctlError(
            f"{switch}: '{' '.join(READ_ARGV)}' printed no JSON (is iproute2 too old for -j?)",
            exit_code=EXIT_PROBLEMS,
        ) from None
    if not isinstance(data, list):
        raise CwctlError(
            f"{switch}: '{' '.join(READ_ARGV)}' printed no list", exit_code=EXIT_PROBLEMS
        )
    return [r for r in data if isinstance(r, dict)]


def _net(dst: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if dst == "default":
        return ipaddress.ip_network("0.0.0.0/0")
    try:
        return ipaddress.ip_network(dst, strict=False)
    except ValueError:
        return None


def same_prefix(dst: str, prefix: str) -> bool:
    a, b = _net(dst), _net(prefix)
    return a is not None and a == b


def holds_any(dst: str, addresses: Sequence[str]) -> bool:
    net = _net(dst)
    if net is None:
        return False
    for address in addresses:
        try:
            if ipaddress.ip_address(address) in net:
                return True
        except ValueError:
            continue
    return False


@dataclass
class SwitchPlan:
    """What planning found: the steps, the routes read (``prior``), notes for the operator,
    and the steps that keep the element observable (``observe``: they go first)."""

    steps: list[Step] = field(default_factory=list)
    prior: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    observe: list[Step] = field(default_factory=list)


def observe_table(element: str) -> int:
    """The routing table (and rule priority) that keeps ``element`` observable: one per
    element, the same every time, so two elements avoided at once never share one."""
    return OBSERVE_TABLES.start + zlib.crc32(element.encode()) % len(OBSERVE_TABLES)


def observe_steps(switch: str, routes: Sequence[Mapping[str, Any]], table: int) -> list[Step]:
    """On ``switch``: a copy of each route as read in ``table``, and a rule sending the
    probes the watch marks (``settings.PROBE_OBSERVE_TOS``) to it. The rerouted traffic
    avoids the element; the marked probes still cross it, so the watch sees when it has
    healed instead of restoring to find out (docs/watch.md)."""
    tos = f"{settings.PROBE_OBSERVE_TOS:#04x}"
    into = ("table", str(table))  # after the prefix: ip takes no option past its next hops
    steps = [
        Step(
            host=switch,
            description=f"{switch} route {r['dst']}: kept as it was in table {table} (probes)",
            argv=(*replace_argv(r)[:4], *into, *replace_argv(r)[4:]),
            undo_argv=("ip", "route", "del", str(r["dst"]), "table", str(table)),
            undo_description=f"{switch} route {r['dst']}: out of table {table}",
        )
        for r in routes
    ]
    rule = ("priority", str(table), "tos", tos, "lookup", str(table))
    steps.append(
        Step(
            host=switch,
            description=f"{switch}: probes marked tos {tos} follow table {table}",
            argv=("ip", "rule", "add", *rule),
            undo_argv=("ip", "rule", "del", *rule),
            undo_description=f"{switch}: rule {table} (tos {tos}) removed",
        )
    )
    return steps


def is_observe_rule(step: Step) -> bool:
    """``step`` adds the rule that routes the watch's marked probes as before
    (``observe_steps``): a plan with one leaves the probes' paths as they were."""
    return step.argv[:3] == ("ip", "rule", "add") and "tos" in step.argv


def affected_leaves(inv: Inventory, spine: str) -> list[Any]:
    """The leaves whose ECMP groups can send traffic over the element."""
    return [s for s in inv.switches if s.role == "leaf" and spine in s.uplinks]


def check_access(inv: Inventory, element: str, spine: str, leaves: Sequence[Any]) -> None:
    """Refuse, naming what is missing, unless cwctl can read and change every leaf."""
    where = inv.path or "the inventory"
    if not leaves:
        raise InputError(
            f"{where}: no leaf lists {spine} among its uplinks: nothing routes over {element}"
        )
    no_access = [s.name for s in leaves if s.kind is None]
    if no_access:
        raise InputError(
            f"cannot reroute around {element}: the leaves choose the spine (their ECMP "
            f"groups) and cwctl has no access to {', '.join(no_access)}; give each "
            f'[[switch]] kind = "linux" and its management address in {where} '
            f"(or, where the hosts choose the next hop, --prefix and --gateway {spine}=ADDRESS)"
        )
    spine_switch = inv.switch(spine)
    if not spine_switch.addresses:
        raise InputError(
            f"cannot reroute around {element} on the leaves: {where} gives {spine} no "
            f"addresses, so no next hop can be told to lead to it (add [[switch]] "
            f"{spine} addresses = [its fabric interface addresses])"
        )
    other = [s.name for s in leaves if s.kind not in KINDS]
    if other:
        raise InputError(f"cannot act on switch(es) {', '.join(other)}: kind not one of {KINDS}")


async def read_tables(runner: Runner, switches: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    out = await read_on_all(runner, switches, lambda s: READ_ARGV, "the routes", "switch(es)")
    return {s: parse_table(text, s) for s, text in out.items()}


def _names(hops: Sequence[Mapping[str, Any]], owner: Mapping[str, str]) -> str:
    return ", ".join(f"{h.get('gateway')} ({owner.get(str(h.get('gateway')), '?')})" for h in hops)


def healthy(hop: Mapping[str, Any]) -> bool:
    """A next hop the kernel can forward through: not flagged ``dead`` or ``linkdown``."""
    return not {"dead", "linkdown"} & set(hop.get("flags") or ())


def _without_spine(
    switch: str,
    route: dict[str, Any],
    hops: list[dict[str, Any]],
    via_spine: set[str],
    spine: str,
    owner: Mapping[str, str],
) -> Step | str:
    """The step that takes ``spine``'s next hops out of ``route`` on ``switch``, or why
    it must not (the last next hop, the last healthy one, a route cwctl cannot restore)."""
    dst = str(route["dst"])
    kept = [h for h in hops if str(h.get("gateway")) not in via_spine]
    if not kept:
        return (
            f"{switch}: every next hop of {dst} leads to {spine} ({_names(hops, owner)}); "
            "removing them would cut the route"
        )
    if not any(healthy(h) for h in kept):  # configured is not enough: carrying
        return (
            f"{switch}: every other next hop of {dst} is dead or its link down "
            f"({_names(kept, owner)}); {spine} is the last healthy path"
        )
    try:
        undo = replace_argv(route)
        argv = replace_argv(route, kept)
    except Unwritable as exc:
        return f"{switch}: {exc}: cwctl would not restore it exactly"
    before, after = _names(hops, owner), _names(kept, owner)
    return Step(
        host=switch,
        description=f"{switch} route {dst}: next hops {before} -> {after}",
        argv=argv,
        undo_argv=undo,
        undo_description=f"{switch} route {dst}: next hops back to {before}",
    )


async def plan_switch_reroute(
    inv: Inventory,
    element: str,
    spine: str,
    leaf: str | None,
    runner: Runner,
    *,
    prefix: str | None = None,
) -> SwitchPlan:
    """Plan the change of the leaves' ECMP groups that keeps traffic off ``element``
    (``spine``, or the link ``leaf``-``spine``); reads the leaves through ``runner``."""
    leaves = affected_leaves(inv, spine)
    check_access(inv, element, spine, leaves)
    owner = inv.switch_of_address()
    via_spine = set(inv.switch(spine).addresses)
    below = [a for h in inv.hosts if h.leaf == leaf for _, a in h.probe_binds()] if leaf else []
    tables = await read_tables(runner, [s.name for s in leaves])
    out = SwitchPlan()
    considered = 0
    refused = []
    for s in leaves:
        for route in tables[s.name]:
            dst = str(route.get("dst", ""))
            if prefix is not None and not same_prefix(dst, prefix):
                continue
            if leaf is not None and s.name != leaf and not holds_any(dst, below):
                continue  # not towards leaf's hosts: does not come down the link
            considered += 1
            hops = hops_of(route)
            if not any(str(h.get("gateway")) in via_spine for h in hops):
                continue
            made = _without_spine(s.name, route, hops, via_spine, spine, owner)
            if isinstance(made, str):
                refused.append(made)
                continue
            out.prior.setdefault(s.name, {})[dst] = route
            out.steps.append(made)
    if refused:
        raise InputError(f"cannot reroute around {element}: " + "; ".join(refused))
    table = observe_table(element)
    for name, routes in out.prior.items():
        out.observe += observe_steps(name, list(routes.values()), table)
    names = ", ".join(s.name for s in leaves)
    if prefix is not None and considered == 0:
        raise InputError(f"no route for {prefix} on {names}: name a prefix the leaves route")
    if not out.steps:
        scope = f"to {prefix} " if prefix is not None else ""
        out.notes.append(
            f"nothing to change: checked {considered} route(s) {scope}on {names}; "
            f"none has a next hop through {spine}"
        )
    elif leaf is not None:
        out.notes.append(
            f"traffic up {element} leaves {leaf} by these routes; traffic down it comes from "
            f"the other leaves' routes towards {leaf}'s hosts (a route that also leads "
            f"elsewhere stops using {spine} for all of it)"
        )
    return out
