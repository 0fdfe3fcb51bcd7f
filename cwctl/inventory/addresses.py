"""Checks of the keys path discovery and switch access rely on (docs/inventory.md).

Fabric addresses (a switch's ``addresses``, a host's ``probe_address`` or
``probe_addresses``) are IP literals kept in canonical text, so an ICMP answer's source
address can be looked up as is; each belongs to one switch or host. A switch's
``kind`` says how cwctl may act on it, and needs the management ``address`` to do so.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from cwctl.config.tomlcheck import TomlChecker, toml_type
from cwctl.inventory.model import Host, Switch

SWITCH_KINDS = ("linux",)  # "linux": iproute2 over SSH
_SWITCH_ACCESS_KEYS = ("address", "user", "port", "python")


def present(**values: Any) -> dict[str, Any]:
    """The keyword arguments that were given (not None)."""
    return {k: v for k, v in values.items() if v is not None}


def at(c: TomlChecker, where: str) -> str:
    return f"{where} (line {c.line_of(where)})"


_IP_WHAT = "an IP address (ICMP answers name a hop by address, so no DNS names here)"


def _canonical_ip(c: TomlChecker, key: str, value: Any) -> str | None:
    if not isinstance(value, str):
        c.problem(key, f"must be a string, not {toml_type(value)}")
        return None
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        c.problem(key, f"{value!r} is not {_IP_WHAT}")
        return None


def literal_ip(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def ip(c: TomlChecker, t: Mapping[str, Any], where: str, key: str) -> str | None:
    return _canonical_ip(c, f"{where}.{key}", t[key]) if key in t else None


def ips(c: TomlChecker, t: Mapping[str, Any], where: str, key: str) -> tuple[str, ...] | None:
    """An array of distinct IP addresses, each in canonical text; None after a problem."""
    if key not in t:
        return None
    value = t[key]
    if not isinstance(value, list):
        c.problem(f"{where}.{key}", f"must be an array of IP addresses, not {toml_type(value)}")
        return None
    out: list[str] = []
    for i, item in enumerate(value):
        ip = _canonical_ip(c, f"{where}.{key}[{i}]", item)
        if ip is None:
            return None
        if ip in out:
            c.problem(f"{where}.{key}[{i}]", f"{ip} is listed twice")
            return None
        out.append(ip)
    return tuple(out)


def check_switch_access(c: TomlChecker, t: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``kind`` and the SSH keys that go with it; without a kind they mean nothing."""
    kind = c.choice(t, where, "kind", SWITCH_KINDS)
    address = c.string(t, where, "address")
    if address is not None and any(ch.isspace() for ch in address):
        c.problem(f"{where}.address", f"{address!r} contains white space")
    if "kind" in t and "address" not in t:
        c.problem(
            f"{where}.kind",
            "is set, but the switch has no 'address' (its management SSH address) to reach it by",
        )
    if "kind" not in t:
        for key in _SWITCH_ACCESS_KEYS:
            if key in t:
                c.problem(
                    f"{where}.{key}",
                    f"is set, but the switch has no 'kind' (one of {' | '.join(SWITCH_KINDS)}) "
                    "saying how cwctl may act on it",
                )
    return present(
        kind=kind,
        address=address,
        user=c.string(t, where, "user"),
        port=c.integer(t, where, "port", 1, 65535),
        python=c.string(t, where, "python"),
    )


def check_probe_addresses(
    c: TomlChecker, t: Mapping[str, Any], where: str, nics: tuple[str, ...]
) -> dict[str, Any]:
    probe_address = ip(c, t, where, "probe_address")
    probe_addresses = ips(c, t, where, "probe_addresses")
    if "probe_address" in t and "probe_addresses" in t:
        c.problem(
            f"{where}.probe_addresses",
            "and probe_address exclude each other (probe_addresses gives one per NIC)",
        )
        return {}
    if probe_addresses is not None and len(probe_addresses) != len(nics):
        c.problem(
            f"{where}.probe_addresses",
            f"has {len(probe_addresses)} addresses for {len(nics)} NICs "
            "(one per entry of 'nics', in the same order)",
        )
        return {}
    return present(probe_address=probe_address, probe_addresses=probe_addresses)


def check_shared_addresses(
    c: TomlChecker,
    switches: list[tuple[str, Switch]],
    hosts: list[tuple[str, Host]],
    ssh_port: int,
) -> None:
    """No fabric address is two things; no switch shares a host's SSH address and port.

    A host without a probe address probes from its SSH address; two such hosts may share
    it (containers behind one IP), but nothing else may.
    """
    owner: dict[str, tuple[str, bool]] = {}  # address -> (key, implicit host address)

    def claim(key: str, address: str, implicit: bool) -> None:
        if address in owner:
            first, first_implicit = owner[address]
            if not (implicit and first_implicit):
                c.problem(key, f"{address} is already a fabric address of {at(c, first)}")
            return
        owner[address] = (key, implicit)

    for where, s in switches:
        for i, a in enumerate(s.addresses):
            claim(f"{where}.addresses[{i}]", a, False)
    for where, h in hosts:
        if h.probe_addresses:
            for i, a in enumerate(h.probe_addresses):
                claim(f"{where}.probe_addresses[{i}]", a, False)
        elif h.probe_address is not None:
            claim(f"{where}.probe_address", h.probe_address, False)
        elif (ip := literal_ip(h.address)) is not None:  # a DNS name: unknown until bound
            claim(f"{where}.address", ip, True)
    ssh_targets = {(h.address, h.port or ssh_port): where for where, h in hosts}
    for where, s in switches:
        if s.address is not None:
            target = (s.address, s.port or ssh_port)
            if target in ssh_targets:
                c.problem(
                    f"{where}.address",
                    f"{s.address}:{target[1]} is already the address of "
                    f"{at(c, ssh_targets[target])}",
                )
