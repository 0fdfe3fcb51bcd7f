"""TCP: steer a host's traffic off a spine with ECMP next-hop weights (``ip route``).

For a destination prefix a host reaches through several next hops (one per spine or
plane), ``plan_reweight`` reads the current route (``ip -j route show PREFIX``, through
the runner) and plans ``ip route replace PREFIX nexthop via GW dev DEV weight W ...``
without the next hops that lead to the suspect; the undo replaces the route with what
was read. Linux weights are 1..256, so "weight 0" means leaving the next hop out.

Which next hop leads to which switch is not in the inventory: the operator says it
(``--gateway SPINE=ADDRESS``), with the prefix (``--prefix``). Without them the plan
names what is missing and stops (exit 2).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cwctl.actions.plan import Step
from cwctl.errors import InputError


@dataclass(frozen=True)
class NextHop:
    gateway: str
    dev: str | None = None
    weight: int = 1


@dataclass(frozen=True)
class Route:
    prefix: str
    nexthops: tuple[NextHop, ...]
    metric: int | None = None
    multipath: bool = True  # False: a single "via GW dev DEV" route
    protocol: str | None = None  # proto (kept as read: static, boot, bgp, ...)
    prefsrc: str | None = None  # src


def show_argv(prefix: str) -> list[str]:
    return ["ip", "-j", "route", "show", prefix]


def parse_route(stdout: str, prefix: str, host: str) -> Route:
    """The one route ``ip -j route show PREFIX`` printed."""
    try:
        data = json.loads(stdout or "[]")
    except ValueError:
        raise InputError(f"{host}: 'ip -j route show {prefix}' printed no JSON") from None
    routes = [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []
    if not routes:
        raise InputError(f"{host}: no route for {prefix} (ip route show {prefix} is empty)")
    if len(routes) > 1:
        raise InputError(f"{host}: {len(routes)} routes match {prefix}; name one exact prefix")
    r: dict[str, Any] = routes[0]
    metric = r.get("metric")
    extra = {"protocol": r.get("protocol"), "prefsrc": r.get("prefsrc")}
    if "nexthops" in r:
        hops = tuple(
            NextHop(str(h["gateway"]), h.get("dev"), int(h.get("weight", 1)))
            for h in r["nexthops"]
            if "gateway" in h
        )
        return Route(prefix, hops, metric, multipath=True, **extra)
    if "gateway" in r:
        hop = NextHop(str(r["gateway"]), r.get("dev"))
        return Route(prefix, (hop,), metric, multipath=False, **extra)
    raise InputError(f"{host}: the route for {prefix} has no gateway (a directly connected net)")


def replace_argv(route: Route) -> tuple[str, ...]:
    argv = ["ip", "route", "replace", route.prefix]
    if route.metric is not None:
        argv += ["metric", str(route.metric)]
    if route.protocol is not None:
        argv += ["proto", route.protocol]
    if route.prefsrc is not None:
        argv += ["src", route.prefsrc]
    if not route.multipath and len(route.nexthops) == 1:
        hop = route.nexthops[0]
        argv += ["via", hop.gateway] + (["dev", hop.dev] if hop.dev else [])
        return tuple(argv)
    for hop in route.nexthops:
        argv += ["nexthop", "via", hop.gateway]
        argv += ["dev", hop.dev] if hop.dev else []
        argv += ["weight", str(hop.weight)]
    return tuple(argv)


def _describe(route: Route) -> str:
    return ", ".join(f"{h.gateway} w{h.weight}" for h in route.nexthops)


def reweight_step(host: str, route: Route, avoid: Mapping[str, str], element: str) -> Step | None:
    """The step that drops the next hops in ``avoid`` (gateway -> switch) from ``route``;
    None when the route does not use them. ``InputError`` when none would be left."""
    kept = tuple(h for h in route.nexthops if h.gateway not in avoid)
    if len(kept) == len(route.nexthops):
        return None
    if not kept:
        raise InputError(
            f"{host}: every next hop of {route.prefix} leads to {element}; "
            "rerouting would cut the host off (drain it instead)"
        )
    new = dataclasses.replace(route, nexthops=kept, multipath=True)
    return Step(
        host=host,
        description=f"route {route.prefix}: next hops {_describe(route)} -> {_describe(new)}",
        argv=replace_argv(new),
        undo_argv=replace_argv(route),
        undo_description=f"route {route.prefix}: next hops back to {_describe(route)}",
    )


def parse_gateways(specs: list[str] | None) -> dict[str, str]:
    """``--gateway SWITCH=ADDRESS`` (repeatable) as {address: switch}; ADDRESS must be an
    IP address (written as ``ip route`` prints it)."""
    out: dict[str, str] = {}
    for spec in specs or ():
        switch, eq, address = spec.partition("=")
        if not eq or not switch.strip() or not address.strip():
            raise InputError(f"--gateway {spec!r}: expected SWITCH=ADDRESS (spine2=10.0.2.1)")
        try:
            gateway = str(ipaddress.ip_address(address.strip()))
        except ValueError:
            why = f"{address.strip()!r} is not an IP address"
            raise InputError(f"--gateway {spec!r}: {why}") from None
        if gateway in out and out[gateway] != switch.strip():
            raise InputError(f"--gateway {gateway} is given for both {out[gateway]} and {switch}")
        out[gateway] = switch.strip()
    return out


def check_prefix(prefix: str) -> str:
    """``--prefix``: a network (``10.0.0.0/8``, host bits zero) or ``default``."""
    if prefix == "default":
        return prefix
    try:
        return str(ipaddress.ip_network(prefix.strip(), strict=True))
    except ValueError as exc:
        raise InputError(f"--prefix {prefix!r}: not a network ({exc})") from None


def unused_gateways(routes: Mapping[str, Route], avoid: Mapping[str, str]) -> list[str]:
    """The ``--gateway`` addresses to avoid that no host's route uses as a next hop:
    either already avoided (an earlier reroute) or mistyped (``check_onlink`` tells)."""
    used = {h.gateway for r in routes.values() for h in r.nexthops}
    return sorted(gw for gw in avoid if gw not in used)


def get_argv(address: str) -> list[str]:
    return ["ip", "-j", "route", "get", address]


def is_onlink(stdout: str) -> bool:
    """From ``ip -j route get ADDRESS``: is ADDRESS directly reachable (a neighbour, so
    possibly a next hop), rather than local or itself behind a gateway?"""
    try:
        data = json.loads(stdout or "[]")
    except ValueError:
        return False
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    return bool(first) and "gateway" not in first and first.get("type", "unicast") == "unicast"


def check_onlink(
    unused: list[str], avoid: Mapping[str, str], onlink: Mapping[str, bool], prefix: str, used: str
) -> None:
    """Refuse the unused gateways no host can reach directly: no route's next hop and
    not even a neighbour is a typo, not "already avoided" (exit 2)."""
    typos = [gw for gw in unused if not onlink.get(gw)]
    if typos:
        raise InputError(
            f"--gateway {', '.join(f'{avoid[g]}={g}' for g in typos)}: no host's route to "
            f"{prefix} has that next hop, and no host reaches it directly (the routes use "
            f"{used or 'none'}); check the address"
        )
