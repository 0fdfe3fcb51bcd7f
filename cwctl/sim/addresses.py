"""Fabric addresses of the simulated hosts and switches (IPv4, as 32-bit integers).

Published the way an inventory publishes them (``[[switch]] addresses``, ``[[host]]
probe_addresses``): ``Topology.switch_of_address`` and ``Topology.host_of_address``, so a
discovered hop's address names its switch exactly as on a real fabric. The layout:

- NIC ``j`` of host ``i`` (0-based, hosts in the fabric's order): ``10.160.0.0 + 16(i+1) + j``;
- leaf ``k``'s host-facing interface: ``10.128.0.0 + k + 1``;
- the link of leaf ``k`` and spine ``s`` (``L = k * spines + s``) is a /30 in 10.0.0.0/9:
  the leaf's end ``+ 4L + 1``, the spine's ``+ 4L + 2``.

A switch answers TTL expiry from the address of the interface the packet came in on
(Linux with ``net.ipv4.icmp_errors_use_inbound_ifaddr = 1``): a leaf from its host-facing
address or its end of the link from the spine, a spine from its end of the link from
the leaf.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import U64
from cwctl.sim.fabric import HIDDEN_LEAF, Fabric

_HOSTS = int(ipaddress.IPv4Address("10.160.0.0"))
_LEAF_DOWN = int(ipaddress.IPv4Address("10.128.0.0"))
_LINKS = int(ipaddress.IPv4Address("10.0.0.0"))


def ip_text(value: int) -> str:
    """An IPv4 address's canonical dotted-quad text (what ``ipaddress`` would write)."""
    v = int(value)
    if not 0 <= v < 1 << 32:
        raise ValueError(f"not an IPv4 address: {v}")
    return f"{v >> 24}.{(v >> 16) & 255}.{(v >> 8) & 255}.{v & 255}"


def ip_texts(values: npt.ArrayLike) -> list[str]:
    """``ip_text`` of each value (of a sequence of distinct ones, say)."""
    return [ip_text(v) for v in np.asarray(values, np.uint64).tolist()]


@dataclass(frozen=True)
class SimAddresses:
    """Every fabric address of a simulated fabric, vectorised for the hash and the tracer."""

    nic: U64  # per NIC (global index): its probe address
    leaf_down: U64  # per leaf: its host-facing address
    link_leaf: U64  # (leaves, spines): the leaf's end of each leaf-spine link
    link_spine: U64  # (leaves, spines): the spine's end

    @cached_property  # formatted once per fabric
    def nic_text(self) -> npt.NDArray[np.object_]:
        """Per NIC, its probe address as text (an object array: index it by NICs)."""
        return np.array(ip_texts(self.nic), dtype=object)

    def switch_addresses(self, fabric: Fabric) -> dict[str, tuple[str, ...]]:
        """Per switch name, its addresses as text (the inventory's ``addresses``)."""
        out: dict[str, tuple[str, ...]] = {}
        for k, leaf in enumerate(fabric.leaves):
            if leaf == HIDDEN_LEAF:
                continue
            ups = [int(self.link_leaf[k, s]) for s in fabric.uplinks[k]]
            out[leaf] = tuple(ip_text(a) for a in [int(self.leaf_down[k]), *ups])
        for s, spine in enumerate(fabric.spines):
            ends = [
                int(self.link_spine[k, s]) for k in range(fabric.n_leaves) if s in fabric.uplinks[k]
            ]
            out[spine] = tuple(ip_text(a) for a in ends)
        return out

    def host_addresses(self, fabric: Fabric) -> dict[str, tuple[str, ...]]:
        """Per host name, one probe address per NIC (the inventory's ``probe_addresses``)."""
        return {
            host: tuple(ip_text(self.nic[int(fabric.nic_base[h]) + j]) for j in range(len(nics)))
            for h, (host, nics) in enumerate(zip(fabric.hosts, fabric.nics, strict=True))
        }


def sim_addresses(fabric: Fabric) -> SimAddresses:
    n_links = fabric.n_leaves * fabric.n_spines
    if fabric.n_hosts * 16 + 16 >= 1 << 21 or 4 * n_links >= 1 << 23:
        raise ValueError("the simulated fabric is too large for its address plan")
    local = np.concatenate([np.arange(len(n)) for n in fabric.nics]).astype(np.uint64)
    nic = _HOSTS + 16 * (fabric.nic_host.astype(np.uint64) + 1) + local
    leaf_down = _LEAF_DOWN + np.arange(1, fabric.n_leaves + 1, dtype=np.uint64)
    link = np.arange(n_links, dtype=np.uint64).reshape(fabric.n_leaves, fabric.n_spines)
    return SimAddresses(
        nic=nic.astype(np.uint64),
        leaf_down=leaf_down,
        link_leaf=_LINKS + 4 * link + 1,
        link_spine=_LINKS + 4 * link + 2,
    )
