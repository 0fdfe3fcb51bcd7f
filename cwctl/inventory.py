"""The inventory model (DESIGN.md, "The inventory file"): hosts, switches, defaults.

This module holds the model and its loader. ``load_inventory(path)`` parses the TOML
with ``tomllib`` and validates it; every problem becomes one line naming the file, the
line and the key, and all of them are raised together in one ``InventoryError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cwctl.errors import InputError
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
        )


class InventoryError(InputError):
    """One or more problems in an inventory file; ``problems`` has one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def load_inventory(path: str | Path) -> Inventory:
    """Parse and validate an inventory file; raise ``InventoryError`` listing every problem."""
    raise InputError("inventory loading is not built yet")
