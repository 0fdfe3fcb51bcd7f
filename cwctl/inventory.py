"""The inventory model (DESIGN.md, "The inventory file"): hosts, switches, defaults.

This module holds the model and its loader. ``load_inventory(path)`` parses the TOML
with ``tomllib`` and validates it; every problem becomes one line naming the file, the
line and the key (``FILE:LINE: key 'host[3].leaf': message``), and all of them are
raised together in one ``InventoryError``. ``docs/inventory.md`` lists every key.

Indices in key names count from 0 in file order: ``host[0]`` is the first ``[[host]]``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwctl.errors import InputError
from cwctl.tomlcheck import TomlChecker, did_you_mean, syntax_problem, toml_type
from cwctl.topology import Topology


@dataclass(frozen=True)
class SSHDefaults:
    user: str | None = None
    port: int = 22
    identity: str | None = None
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts (never "don't check")
    jump: str | None = None
    connect_timeout: float = 10.0
    concurrency: int = 128
    python: str = "python3"


@dataclass(frozen=True)
class ProbeSettings:
    duration: float = 2.0  # seconds of probing per scan
    rate: float = 100.0  # coded pairs per second per peer
    peers: int = 10  # peers each host probes (K)
    port: int = 0  # UDP port that answers probes; 0 = any free port
    ports: int = 4  # source ports each host probes from (spreads ECMP paths)
    gap_us: float = 20.0  # spacing of the two probes of a coded pair


@dataclass(frozen=True)
class Scheduler:
    kind: str = "none"  # slurm | k8s | none
    host: str | None = None  # where scontrol/kubectl runs; None = this machine


@dataclass(frozen=True)
class Switch:
    name: str
    role: str  # "leaf" | "spine"
    uplinks: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()  # fabric interface addresses (canonical IP text)
    kind: str | None = None  # how cwctl may act on it ("linux"); None = no access
    address: str | None = None  # management (SSH) address; set whenever kind is
    user: str | None = None
    port: int | None = None
    python: str | None = None


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    user: str | None = None
    port: int | None = None
    python: str | None = None
    leaf: str | None = None
    nics: tuple[str, ...] = ()
    gpus: int | None = None
    probe_address: str | None = None  # fabric address the agent binds; None = address
    probe_addresses: tuple[str, ...] = ()  # multi-rail: one per NIC, in the order of nics

    def probe_binds(self) -> tuple[tuple[str | None, str], ...]:
        """(NIC or None, address) for each socket set the agent binds on this host."""
        if self.probe_addresses:
            return tuple(zip(self.nics, self.probe_addresses, strict=True))
        return ((None, self.probe_address or self.address),)


@dataclass(frozen=True)
class Endpoint:
    """How to reach one host: its own user/port/python where given, else ``[ssh]``'s."""

    name: str
    address: str
    port: int
    user: str | None
    python: str


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[Host, ...]
    switches: tuple[Switch, ...] = ()
    ssh: SSHDefaults = field(default_factory=SSHDefaults)
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    scheduler: Scheduler = field(default_factory=Scheduler)
    path: Path | None = None

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise InputError(f"{self.path or 'inventory'}: no host named {name!r}")

    def switch(self, name: str) -> Switch:
        for switch in self.switches:
            if switch.name == name:
                return switch
        raise InputError(f"{self.path or 'inventory'}: no switch named {name!r}")

    def switch_endpoint(self, switch: Switch | str) -> Endpoint:
        """How to reach a switch cwctl may act on (``kind`` set), ``[ssh]`` filling gaps."""
        s = self.switch(switch) if isinstance(switch, str) else switch
        if s.kind is None or s.address is None:
            raise InputError(f"{self.path or 'inventory'}: switch {s.name!r} has no kind/address")
        return Endpoint(
            name=s.name,
            address=s.address,
            port=s.port if s.port is not None else self.ssh.port,
            user=s.user if s.user is not None else self.ssh.user,
            python=s.python if s.python is not None else self.ssh.python,
        )

    def switch_of_address(self) -> dict[str, str]:
        """Each switch fabric address (canonical IP text) -> the switch's name."""
        return {a: s.name for s in self.switches for a in s.addresses}

    def host_of_address(self) -> dict[str, tuple[str, str | None]]:
        """Each host probe address -> (host, NIC or None): who sent or answered from it."""
        return {a: (h.name, nic) for h in self.hosts for nic, a in h.probe_binds()}

    def endpoint(self, host: Host | str) -> Endpoint:
        """The host's address, port, user and python, with ``[ssh]`` filling the gaps."""
        h = self.host(host) if isinstance(host, str) else host
        return Endpoint(
            name=h.name,
            address=h.address,
            port=h.port if h.port is not None else self.ssh.port,
            user=h.user if h.user is not None else self.ssh.user,
            python=h.python if h.python is not None else self.ssh.python,
        )

    def topology(self) -> Topology | None:
        """The leaf-spine topology the switches describe, or None when no host has a leaf."""
        if not any(h.leaf for h in self.hosts):
            return None
        uplinks = {s.name: tuple(s.uplinks) for s in self.switches if s.role == "leaf"}
        for h in self.hosts:
            if h.leaf is not None:
                uplinks.setdefault(h.leaf, ())
        return Topology(
            leaf_of={h.name: h.leaf for h in self.hosts if h.leaf is not None},
            uplinks=uplinks,
            nics={h.name: h.nics for h in self.hosts if h.nics},
            switch_of_address=self.switch_of_address(),
            host_of_address=self.host_of_address(),
        )


class InventoryError(InputError):
    """One or more problems in an inventory file; ``problems`` has one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


# --- validation -----------------------------------------------------------------------

_TOP_KEYS = ("ssh", "probe", "scheduler", "switch", "host")
_SSH_KEYS = (
    "user",
    "port",
    "identity",
    "known_hosts",
    "jump",
    "connect_timeout",
    "concurrency",
    "python",
)
_PROBE_KEYS = ("duration", "rate", "peers", "port", "ports", "gap_us")
_SCHEDULER_KEYS = ("kind", "host")
_SWITCH_KEYS = ("name", "role", "uplinks", "addresses", "kind", "address", "user", "port", "python")
_HOST_KEYS = (
    "name",
    "address",
    "user",
    "port",
    "python",
    "leaf",
    "nics",
    "gpus",
    "probe_address",
    "probe_addresses",
)
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
_SWITCH_KINDS = ("linux",)  # "linux": iproute2 over SSH
_SWITCH_ACCESS_KEYS = ("address", "user", "port", "python")
# Element names appear in fault specs (KIND:NAME:MODE) and NIC names (host/nic).
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_NAME_WHAT = "a usable name (letters, digits, '_', '.', '-'; no spaces, '/' or ':')"


def _path_value(raw: str, base_dir: Path) -> str:
    """``~`` expanded; a relative path is taken relative to the inventory's directory."""
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    return os.path.normpath(path)


def _kwargs(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _check_ssh(c: TomlChecker, doc: Mapping[str, Any], base_dir: Path) -> SSHDefaults:
    t = c.table(doc, "ssh")
    c.unknown_keys(t, "ssh", _SSH_KEYS, _homes("[ssh]"))
    identity = c.string(t, "ssh", "identity")
    known_hosts = c.string(t, "ssh", "known_hosts")
    return SSHDefaults(
        **_kwargs(
            user=c.string(t, "ssh", "user"),
            port=c.integer(t, "ssh", "port", 1, 65535),
            identity=_path_value(identity, base_dir) if identity else None,
            known_hosts=_path_value(known_hosts, base_dir) if known_hosts else None,
            jump=c.string(t, "ssh", "jump"),
            connect_timeout=c.positive(t, "ssh", "connect_timeout"),
            concurrency=c.integer(t, "ssh", "concurrency", 1),
            python=c.string(t, "ssh", "python"),
        )
    )


def _check_probe(c: TomlChecker, doc: Mapping[str, Any]) -> ProbeSettings:
    t = c.table(doc, "probe")
    c.unknown_keys(t, "probe", _PROBE_KEYS, _homes("[probe]"))
    return ProbeSettings(
        **_kwargs(
            duration=c.positive(t, "probe", "duration"),
            rate=c.positive(t, "probe", "rate"),
            peers=c.integer(t, "probe", "peers", 1),
            port=c.integer(t, "probe", "port", 0, 65535),
            ports=c.integer(t, "probe", "ports", 1, 64),
            gap_us=c.positive(t, "probe", "gap_us"),
        )
    )


def _check_scheduler(c: TomlChecker, doc: Mapping[str, Any]) -> Scheduler:
    t = c.table(doc, "scheduler")
    c.unknown_keys(t, "scheduler", _SCHEDULER_KEYS, _homes("[scheduler]"))
    kind = c.choice(t, "scheduler", "kind", _SCHEDULER_KINDS)
    host = c.string(t, "scheduler", "host")
    if host is not None and t.get("kind", "none") == "none":
        c.problem("scheduler.host", "is set, but scheduler.kind is not slurm or k8s")
    return Scheduler(**_kwargs(kind=kind, host=host))


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


def _literal_ip(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def _ip(c: TomlChecker, t: Mapping[str, Any], where: str, key: str) -> str | None:
    return _canonical_ip(c, f"{where}.{key}", t[key]) if key in t else None


def _ips(c: TomlChecker, t: Mapping[str, Any], where: str, key: str) -> tuple[str, ...] | None:
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


def _at(c: TomlChecker, where: str) -> str:
    return f"{where} (line {c.line_of(where)})"


def _name(c: TomlChecker, t: Mapping[str, Any], where: str) -> str | None:
    return c.matching(t, where, "name", _NAME, _NAME_WHAT) if c.required(t, where, "name") else None


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
        access = _check_switch_access(c, t, where)
        addresses = _ips(c, t, where, "addresses") or ()
        if name is not None and name in seen:
            c.problem(
                f"{where}.name", f"switch {name!r} is already defined at {_at(c, seen[name])}"
            )
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


def _check_switch_access(c: TomlChecker, t: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``kind`` and the SSH keys that go with it; without a kind they mean nothing."""
    kind = c.choice(t, where, "kind", _SWITCH_KINDS)
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
                    f"is set, but the switch has no 'kind' (one of {' | '.join(_SWITCH_KINDS)}) "
                    "saying how cwctl may act on it",
                )
    return _kwargs(
        kind=kind,
        address=address,
        user=c.string(t, where, "user"),
        port=c.integer(t, where, "port", 1, 65535),
        python=c.string(t, where, "python"),
    )


def _check_probe_addresses(
    c: TomlChecker, t: Mapping[str, Any], where: str, nics: tuple[str, ...]
) -> dict[str, Any]:
    probe_address = _ip(c, t, where, "probe_address")
    probe_addresses = _ips(c, t, where, "probe_addresses")
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
    return _kwargs(probe_address=probe_address, probe_addresses=probe_addresses)


def _check_shared_addresses(
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
                c.problem(key, f"{address} is already a fabric address of {_at(c, first)}")
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
        elif (ip := _literal_ip(h.address)) is not None:  # a DNS name: unknown until bound
            claim(f"{where}.address", ip, True)
    ssh_targets = {(h.address, h.port or ssh_port): where for where, h in hosts}
    for where, s in switches:
        if s.address is not None:
            target = (s.address, s.port or ssh_port)
            if target in ssh_targets:
                c.problem(
                    f"{where}.address",
                    f"{s.address}:{target[1]} is already the address of "
                    f"{_at(c, ssh_targets[target])}",
                )


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
            **_check_probe_addresses(c, t, where, nics),
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
                    f"{where}.name", f"host {name!r} is already defined at {_at(c, names[name])}"
                )
            elif name in switches:
                c.problem(f"{where}.name", f"{name!r} is already the name of a switch")
            names.setdefault(name, where)
        if address is not None:
            target = (address, port if port is not None else ssh_port)
            if target in addresses:
                c.problem(
                    f"{where}.address",
                    f"{address}:{target[1]} is already the address of {_at(c, addresses[target])}",
                )
            addresses.setdefault(target, where)
        hosts.append((where, host))
    return hosts


def _read_text(path: Path) -> str:
    label = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InventoryError(
            [f"{label}: no such file (give -i FILE or set CWCTL_INVENTORY)"]
        ) from None
    except IsADirectoryError:
        raise InventoryError([f"{label}: is a directory, not an inventory file"]) from None
    except OSError as exc:
        raise InventoryError([f"{label}: cannot read: {exc.strerror or exc}"]) from None
    try:
        return data.decode("utf-8-sig")  # an editor's byte-order mark is not an error
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InventoryError([f"{label}:{line}: not UTF-8 text (byte {exc.start})"]) from None


def parse_inventory(
    text: str, *, label: str = "inventory", base_dir: Path | None = None
) -> Inventory:
    """Validate inventory TOML text; ``label`` names it in problems (usually its path)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InventoryError([syntax_problem(label, text, exc)]) from None
    c = TomlChecker(label, text)
    c.unknown_keys(doc, "", _TOP_KEYS, _homes(""))
    ssh = _check_ssh(c, doc, base_dir or Path.cwd())
    probe = _check_probe(c, doc)
    scheduler = _check_scheduler(c, doc)
    switches = _check_switches(c, doc)
    by_name = {s.name: s for _, s in switches}
    hosts = _check_hosts(c, doc, by_name, ssh.port)
    _check_shared_addresses(c, switches, hosts, ssh.port)
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


# --- the summary `cwctl inventory check` prints ----------------------------------------


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def summarize(inv: Inventory) -> str:
    """What the inventory describes, as plain text: hosts per leaf, switches, settings."""
    leaves = [s for s in inv.switches if s.role == "leaf"]
    spines = [s for s in inv.switches if s.role == "spine"]
    label = str(inv.path) if inv.path else "inventory"
    n_switches = _plural(len(inv.switches), "switch", "switches")
    if inv.switches:
        n_switches += (
            f" ({_plural(len(leaves), 'leaf', 'leaves')}, {_plural(len(spines), 'spine')})"
        )
    out = [f"{label}: {_plural(len(inv.hosts), 'host')}, {n_switches}"]
    out.append("hosts per leaf:")
    by_leaf: dict[str | None, list[Host]] = {}
    for h in inv.hosts:
        by_leaf.setdefault(h.leaf, []).append(h)
    order = [s.name for s in leaves if s.name in by_leaf] + ([None] if None in by_leaf else [])
    width = max((len(s or "(no leaf)") for s in order), default=0)
    for leaf in order:
        members = by_leaf[leaf]
        shown = [h.name for h in members]
        if len(shown) > 8:  # a big leaf: its first and last hosts
            shown = [*shown[:3], "...", *shown[-2:]]
        names = ", ".join(shown)
        out.append(f"  {(leaf or '(no leaf)'):<{width}}  {len(members):>4}  {names}")
    idle = [s.name for s in leaves if s.name not in by_leaf]
    if idle:
        out.append(f"  leaves without hosts: {', '.join(idle)}")
    if inv.switches:
        out.append("switches:")
        width = max(len(s.name) for s in inv.switches)
        for s in spines + leaves:
            ups = f"  uplinks {', '.join(s.uplinks)}" if s.uplinks else ""
            out.append(f"  {s.name:<{width}}  {s.role}{ups}")
    ssh = inv.ssh
    overrides = sum(1 for h in inv.hosts if h.user or h.port or h.python)
    out.append(
        f"ssh: user {ssh.user or '(from ~/.ssh/config or local user)'}, port {ssh.port}, "
        f"jump {ssh.jump or '(none)'}, connect timeout {ssh.connect_timeout:g} s, "
        f"concurrency {ssh.concurrency}, python {ssh.python}"
    )
    out.append(f"  identity {ssh.identity or '(ssh-agent / ~/.ssh/config)'}")
    out.append(f"  known_hosts {ssh.known_hosts or '~/.ssh/known_hosts'}")
    if overrides:
        verb = "overrides" if overrides == 1 else "override"
        out.append(f"  {_plural(overrides, 'host')} {verb} user, port or python")
    p = inv.probe
    out.append(
        f"probe: {p.duration:g} s, {p.rate:g} pairs/s per peer, {p.peers} peers per host, "
        f"port {p.port or 'any'}, {p.ports} source ports, pair gap {p.gap_us:g} us"
    )
    sched = inv.scheduler
    where = (
        f" on {sched.host}" if sched.host else (" on this machine" if sched.kind != "none" else "")
    )
    out.append(f"scheduler: {sched.kind}{where}")
    return "\n".join(out)
