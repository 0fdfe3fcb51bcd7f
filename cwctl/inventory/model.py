"""The inventory model (docs/inventory.md): hosts, switches, defaults.

Plain frozen dataclasses; ``cwctl.inventory.load`` builds them from a validated file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from cwctl import settings
from cwctl.errors import InputError
from cwctl.fabric.topology import Topology


@dataclass(frozen=True)
class SSHDefaults:
    user: str | None = None
    port: int = settings.SSH_PORT
    identity: str | None = None
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts (never "don't check")
    jump: str | None = None
    connect_timeout: float = settings.SSH_CONNECT_TIMEOUT_S
    concurrency: int = settings.SSH_CONCURRENCY
    python: str = settings.SSH_PYTHON


def jump_parts(jump: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` as (user, host, port); ValueError naming what is wrong."""
    user, _, hostport = jump.rpartition("@")
    host, colon, port = hostport.partition(":")
    if not host:
        raise ValueError("no host name")
    if colon and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"port {port!r} is not a number from 1 to 65535")
    return user or None, host, int(port) if colon else None


@dataclass(frozen=True)
class ProbeSettings:
    budget: str | None = None  # quick | watch; None: the command's (settings.BUDGETS)
    duration: float | None = None  # seconds of probing per scan; None: the budget's
    rate: float | None = None  # coded pairs per second per peer; None: the budget's
    peers: int = settings.PROBE_PEERS  # peers each host probes (K)
    port: int = settings.PROBE_PORT  # UDP port that answers probes; 0 = any free port
    ports: int | None = None  # source ports each host probes from (ECMP); None: the budget's
    gap_us: float = settings.PROBE_GAP_US  # spacing of the two probes of a coded pair
    trace: bool = settings.PROBE_TRACE  # discover each flow's path (docs/paths.md)
    icmp_ratelimit_ms: int = settings.ICMP_RATELIMIT_MS  # the switches' limit; 0 = none


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
        return self._reach(s, s.address)

    def switch_of_address(self) -> dict[str, str]:
        """Each switch fabric address (canonical IP text) -> the switch's name."""
        return {a: s.name for s in self.switches for a in s.addresses}

    def host_of_address(self) -> dict[str, tuple[str, str | None]]:
        """Each host probe address -> (host, NIC or None): who sent or answered from it."""
        return {a: (h.name, nic) for h in self.hosts for nic, a in h.probe_binds()}

    def endpoint(self, host: Host | str) -> Endpoint:
        """The host's address, port, user and python, with ``[ssh]`` filling the gaps."""
        h = self.host(host) if isinstance(host, str) else host
        return self._reach(h, h.address)

    def _reach(self, node: Host | Switch, address: str) -> Endpoint:
        """``node``'s own port, user and python where given, else ``[ssh]``'s."""
        return Endpoint(
            name=node.name,
            address=address,
            port=node.port if node.port is not None else self.ssh.port,
            user=node.user if node.user is not None else self.ssh.user,
            python=node.python if node.python is not None else self.ssh.python,
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


# THE inventory keys: each section's keys are its dataclass's fields (a new key is a new
# field). The loader refuses any other key, docs/inventory.md and inventory.example.toml
# show each one (tests/unit/test_inventory_keys.py holds all three to this table).
SECTIONS: dict[str, type] = {
    "ssh": SSHDefaults,
    "probe": ProbeSettings,
    "scheduler": Scheduler,
    "switch": Switch,  # [[switch]]
    "host": Host,  # [[host]]
}


def section_keys(section: str) -> tuple[str, ...]:
    """The keys a section of the inventory file may hold, in declaration order."""
    return tuple(f.name for f in fields(SECTIONS[section]))


class InventoryError(InputError):
    """One or more problems in an inventory file; ``problems`` has one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))
