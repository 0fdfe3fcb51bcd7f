"""Loading an inventory file: TOML in, a validated ``Inventory`` out, or every problem.

``load_inventory(path)`` parses the TOML with ``tomllib`` and validates it; every
problem becomes one line naming the file, the line and the key
(``FILE:LINE: key 'host[3].leaf': message``), and all of them are raised together in
one ``InventoryError``. ``docs/inventory.md`` lists every key.

Indices in key names count from 0 in file order: ``host[0]`` is the first ``[[host]]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cwctl import settings
from cwctl.config import tomlfile
from cwctl.config.tomlcheck import TomlChecker, did_you_mean
from cwctl.inventory.addresses import (
    at,
    check_probe_addresses,
    check_shared_addresses,
    check_switch_access,
    ips,
    present,
)
from cwctl.inventory.model import (
    SECTIONS,
    Host,
    Inventory,
    InventoryError,
    ProbeSettings,
    Scheduler,
    SSHDefaults,
    Switch,
    jump_parts,
    section_keys,
)
from cwctl.settings import BUDGETS

# --- validation -----------------------------------------------------------------------

_TOP_KEYS = tuple(SECTIONS)
_SSH_KEYS = section_keys("ssh")
_PROBE_KEYS = section_keys("probe")
_SCHEDULER_KEYS = section_keys("scheduler")
_SWITCH_KEYS = section_keys("switch")
_HOST_KEYS = section_keys("host")
_SECTIONS = {
    "[ssh]": _SSH_KEYS,
    "[probe]": _PROBE_KEYS,
    "[scheduler]": _SCHEDULER_KEYS,
    "[[switch]]": _SWITCH_KEYS,
    "[[host]]": _HOST_KEYS,
}


def _homes(here: str) -> dict[str, str]:
    """For each key of the other sections, the sections it belongs in (for hints)."""
    homes: dict[str, list[str]] = {}
    for section, keys in _SECTIONS.items():
        if section != here:
            for key in keys:
                homes.setdefault(key, []).append(section)
    return {key: " or ".join(sections) for key, sections in homes.items()}


_SCHEDULER_KINDS = ("slurm", "k8s", "none")
_SWITCH_ROLES = ("leaf", "spine")
# Element names appear in fault specs (KIND:NAME:MODE) and NIC names (host/nic).
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_NAME_WHAT = "a usable name (letters, digits, '_', '.', '-'; no spaces, '/' or ':')"


def _path_value(raw: str, base_dir: Path) -> str:
    """``~`` expanded; a relative path is taken relative to the inventory's directory."""
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    return os.path.normpath(path)


def _check_ssh(c: TomlChecker, doc: Mapping[str, Any], base_dir: Path) -> SSHDefaults:
    t = c.table(doc, "ssh")
    c.unknown_keys(t, "ssh", _SSH_KEYS, _homes("[ssh]"))
    identity = c.string(t, "ssh", "identity")
    known_hosts = c.string(t, "ssh", "known_hosts")
    return SSHDefaults(
        **present(
            user=c.string(t, "ssh", "user"),
            port=c.integer(t, "ssh", "port", 1, 65535),
            identity=_path_value(identity, base_dir) if identity else None,
            known_hosts=_path_value(known_hosts, base_dir) if known_hosts else None,
            jump=_jump(c, t),
            connect_timeout=c.positive(t, "ssh", "connect_timeout"),
            concurrency=c.integer(t, "ssh", "concurrency", 1),
            python=c.string(t, "ssh", "python"),
        )
    )


def _check_probe(c: TomlChecker, doc: Mapping[str, Any]) -> ProbeSettings:
    t = c.table(doc, "probe")
    c.unknown_keys(t, "probe", _PROBE_KEYS, _homes("[probe]"))
    return ProbeSettings(
        **present(
            budget=c.choice(t, "probe", "budget", tuple(BUDGETS)),
            duration=c.positive(t, "probe", "duration", settings.PROBE_DURATION_MAX_S),
            rate=c.positive(t, "probe", "rate", settings.PROBE_RATE_MAX),
            peers=c.integer(t, "probe", "peers", 1),
            port=c.integer(t, "probe", "port", 0, 65535),
            ports=c.integer(t, "probe", "ports", 1, 64),
            gap_us=c.positive(t, "probe", "gap_us"),
            trace=c.boolean(t, "probe", "trace"),
            icmp_ratelimit_ms=c.integer(t, "probe", "icmp_ratelimit_ms", 0, 3_600_000),
        )
    )


def _check_scheduler(c: TomlChecker, doc: Mapping[str, Any]) -> Scheduler:
    t = c.table(doc, "scheduler")
    c.unknown_keys(t, "scheduler", _SCHEDULER_KEYS, _homes("[scheduler]"))
    kind = c.choice(t, "scheduler", "kind", _SCHEDULER_KINDS)
    host = c.string(t, "scheduler", "host")
    if host in RESERVED_NAMES:
        c.problem("scheduler.host", f"{host!r} is reserved; omit host to run on this machine")
    if host is not None and t.get("kind", "none") == "none":
        c.problem("scheduler.host", "is set, but scheduler.kind is not slurm or k8s")
    return Scheduler(**present(kind=kind, host=host))


# names plans use for where a step runs (cwctl.actions.plan): "local" is this machine
RESERVED_NAMES = ("local", "sim")


def _name(c: TomlChecker, t: Mapping[str, Any], where: str) -> str | None:
    if not c.required(t, where, "name"):
        return None
    name = c.matching(t, where, "name", _NAME, _NAME_WHAT)
    if name in RESERVED_NAMES:
        c.problem(
            f"{where}.name",
            f"{name!r} is reserved (in plans it means {_RESERVED_MEANS[name]}); rename it",
        )
        return None
    return name


_RESERVED_MEANS = {"local": "this machine", "sim": "the simulator"}


def _check_switches(c: TomlChecker, doc: Mapping[str, Any]) -> list[tuple[str, Switch]]:
    switches: list[tuple[str, Switch]] = []
    seen: dict[str, str] = {}
    for where, t in c.array_of_tables(doc, "switch"):
        c.unknown_keys(t, where, _SWITCH_KEYS, _homes("[[switch]]"))
        name = _name(c, t, where)
        role = c.choice(t, where, "role", _SWITCH_ROLES) if c.required(t, where, "role") else None
        uplinks = c.names(t, where, "uplinks", _NAME, "a switch name") or ()
        if role == "spine" and uplinks:
            c.problem(f"{where}.uplinks", "a spine has no uplinks (only a leaf lists its spines)")
        access = check_switch_access(c, t, where)
        addresses = ips(c, t, where, "addresses") or ()
        if name is not None and name in seen:
            c.problem(f"{where}.name", f"switch {name!r} is already defined at {at(c, seen[name])}")
            continue
        if name is not None and role is not None:
            seen[name] = where
            switch = Switch(name=name, role=role, uplinks=uplinks, addresses=addresses, **access)
            switches.append((where, switch))
    roles = {s.name: s.role for _, s in switches}
    spines = [n for n, r in roles.items() if r == "spine"]
    for where, s in switches:
        for i, up in enumerate(s.uplinks):
            if roles.get(up) == "spine":
                continue
            if up in roles:
                c.problem(f"{where}.uplinks[{i}]", f"{up!r} is a {roles[up]}, not a spine")
            else:
                c.problem(
                    f"{where}.uplinks[{i}]",
                    f'spine {up!r} is not defined as a [[switch]] with role = "spine"'
                    f"{did_you_mean(up, spines)}",
                )
    return switches


def _check_hosts(
    c: TomlChecker, doc: Mapping[str, Any], switches: Mapping[str, Switch], ssh_port: int
) -> list[tuple[str, Host]]:
    hosts: list[tuple[str, Host]] = []
    names: dict[str, str] = {}
    addresses: dict[tuple[str, int], str] = {}
    leaves = [n for n, s in switches.items() if s.role == "leaf"]
    entries = c.array_of_tables(doc, "host")
    if "host" not in doc:
        c.problem("host", "no [[host]] entries: an inventory needs at least one host")
    elif doc["host"] == []:
        c.problem("host", "the host array is empty: an inventory needs at least one host")
    for where, t in entries:
        c.unknown_keys(t, where, _HOST_KEYS, _homes("[[host]]"))
        name = _name(c, t, where)
        address = c.string(t, where, "address") if c.required(t, where, "address") else None
        port = c.integer(t, where, "port", 1, 65535)
        leaf = c.string(t, where, "leaf")
        nics = c.names(t, where, "nics", _NAME, "a NIC name (no spaces, '/' or ':')") or ()
        host = Host(
            name=name or "",
            address=address or "",
            user=c.string(t, where, "user"),
            port=port,
            python=c.string(t, where, "python"),
            leaf=leaf,
            nics=nics,
            gpus=c.integer(t, where, "gpus", 0),
            **check_probe_addresses(c, t, where, nics),
        )
        if address is not None and any(ch.isspace() for ch in address):
            c.problem(f"{where}.address", f"{address!r} contains white space")
        if leaf is not None and switches.get(leaf, None) is None:
            c.problem(
                f"{where}.leaf",
                f'leaf {leaf!r} is not defined as a [[switch]] with role = "leaf"'
                f"{did_you_mean(leaf, leaves)}",
            )
        elif leaf is not None and switches[leaf].role != "leaf":
            c.problem(f"{where}.leaf", f"{leaf!r} is a {switches[leaf].role}, not a leaf")
        if name is not None:
            if name in names:
                c.problem(
                    f"{where}.name", f"host {name!r} is already defined at {at(c, names[name])}"
                )
            elif name in switches:
                c.problem(f"{where}.name", f"{name!r} is already the name of a switch")
            names.setdefault(name, where)
        if address is not None:
            target = (address, port if port is not None else ssh_port)
            if target in addresses:
                c.problem(
                    f"{where}.address",
                    f"{address}:{target[1]} is already the address of {at(c, addresses[target])}",
                )
            addresses.setdefault(target, where)
        hosts.append((where, host))
    return hosts


def _read_text(path: Path) -> str:
    try:
        return tomlfile.read_text(path, "inventory file", tomlfile.INVENTORY_LIMIT)
    except tomlfile.TomlFileError as exc:
        problem = exc.problem
        if problem.endswith(": no such inventory file"):
            problem = f"{path}: no such file (give -i FILE or set CWCTL_INVENTORY)"
        raise InventoryError([problem]) from None


def _jump(c: TomlChecker, t: Mapping[str, Any]) -> str | None:
    jump = c.string(t, "ssh", "jump")
    if jump is None:
        return None
    try:
        jump_parts(jump)
    except ValueError as exc:
        c.problem("ssh.jump", f"{jump!r} is not [user@]host[:port]: {exc}")
        return None
    return jump


def parse_inventory(
    text: str, *, label: str = "inventory", base_dir: Path | None = None
) -> Inventory:
    """Validate inventory TOML text; ``label`` names it in problems (usually its path)."""
    try:
        doc = tomlfile.parse(text, label)
    except tomlfile.TomlFileError as exc:
        raise InventoryError([exc.problem]) from None
    c = TomlChecker(label, text)
    c.unknown_keys(doc, "", _TOP_KEYS, _homes(""))
    ssh = _check_ssh(c, doc, base_dir or Path.cwd())
    probe = _check_probe(c, doc)
    scheduler = _check_scheduler(c, doc)
    switches = _check_switches(c, doc)
    by_name = {s.name: s for _, s in switches}
    hosts = _check_hosts(c, doc, by_name, ssh.port)
    check_shared_addresses(c, switches, hosts, ssh.port)
    if c.problems:
        raise InventoryError(c.problems)
    return Inventory(
        hosts=tuple(h for _, h in hosts),
        switches=tuple(s for _, s in switches),
        ssh=ssh,
        probe=probe,
        scheduler=scheduler,
    )


def load_inventory(path: str | Path) -> Inventory:
    """Parse and validate an inventory file; raise ``InventoryError`` listing every problem."""
    path = Path(path)
    text = _read_text(path)
    inv = parse_inventory(text, label=str(path), base_dir=path.parent.absolute())
    return Inventory(
        hosts=inv.hosts,
        switches=inv.switches,
        ssh=inv.ssh,
        probe=inv.probe,
        scheduler=inv.scheduler,
        path=path,
    )
