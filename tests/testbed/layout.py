"""The testbed's fabric on paper: node names, links, addresses. No side effects.

Two spines, two leaves (``set_leaves(n)``: 2-4), four hosts per leaf. Every fabric
address lives only inside the testbed's namespaces (so every run may use the same ones);
the management network is the only thing in the root namespace, a /28 of
192.168.201.0/24 chosen per run ("slot").

    leafL - spineS link   10.201.{10L+S}.0/30     leaf .1, spine .2
    host i (0-3) on leafL 10.201.{100+L}.{4i}/30   leaf .{4i+1}, host .{4i+2}
    hosts behind leafL    10.201.{100+L}.0/24     (what the other leaf and the spines route)
    management, slot k    192.168.201.{16k}/28    bridge .{16k+1}, nodes .{16k+2}...
                          (a /27, two slots from an even k, past 13 nodes: 3-4 leaves)

Interfaces inside a namespace are named for the neighbour they reach (``spine2`` on a
leaf, ``leaf1`` on a spine, ``gpu-003`` on a leaf, ``eth1`` on a host) plus ``mgmt``.
"""

from __future__ import annotations

from dataclasses import dataclass

SPINES = ("spine1", "spine2")
LEAVES = ("leaf1", "leaf2")
LEAF_COUNTS = range(2, 5)
HOSTS_PER_LEAF = 4
HOST_NIC = "eth1"
MGMT_IF = "mgmt"
SLOTS = 16


def host_name(i: int) -> str:
    return f"gpu-{i + 1:03d}"


HOSTS = tuple(host_name(i) for i in range(len(LEAVES) * HOSTS_PER_LEAF))


@dataclass(frozen=True)
class Link:
    """A point-to-point fabric link: ``a`` is the lower tier (host < leaf < spine)."""

    a: str
    b: str
    a_addr: str
    b_addr: str
    prefix_len: int = 30

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    def end(self, node: str) -> tuple[str, str, str]:
        """(interface name on ``node``, node's address, the far end's address)."""
        if node == self.a:
            return (HOST_NIC if self.a in HOSTS else self.b), self.a_addr, self.b_addr
        if node == self.b:
            return self.a, self.b_addr, self.a_addr
        raise KeyError(f"{node} is not an end of {self.name}")

    def other(self, node: str) -> str:
        return self.b if node == self.a else self.a


def leaf_of(host: str) -> str:
    return LEAVES[HOSTS.index(host) // HOSTS_PER_LEAF]


def hosts_of(leaf: str) -> tuple[str, ...]:
    i = LEAVES.index(leaf)
    return HOSTS[i * HOSTS_PER_LEAF : (i + 1) * HOSTS_PER_LEAF]


def host_subnet(leaf: str) -> str:
    return f"10.201.{101 + LEAVES.index(leaf)}.0/24"


def links() -> tuple[Link, ...]:
    out = []
    for li, leaf in enumerate(LEAVES, start=1):
        for si, spine in enumerate(SPINES, start=1):
            net = f"10.201.{10 * li + si}"
            out.append(Link(leaf, spine, f"{net}.1", f"{net}.2"))
    for h in HOSTS:
        leaf = leaf_of(h)
        i = HOSTS.index(h) % HOSTS_PER_LEAF
        net = f"10.201.{101 + LEAVES.index(leaf)}"
        out.append(Link(h, leaf, f"{net}.{4 * i + 2}", f"{net}.{4 * i + 1}"))
    return tuple(out)


LINKS = links()
NODES = SPINES + LEAVES + HOSTS


def link(x: str, y: str) -> Link:
    for lk in LINKS:
        if {lk.a, lk.b} == {x, y}:
            return lk
    raise KeyError(f"no link between {x} and {y}")


def links_of(node: str) -> tuple[Link, ...]:
    return tuple(lk for lk in LINKS if node in (lk.a, lk.b))


def fabric_addresses(node: str) -> tuple[str, ...]:
    return tuple(lk.end(node)[1] for lk in links_of(node))


def probe_address(host: str) -> str:
    return fabric_addresses(host)[0]


def set_leaves(n: int) -> None:
    """Lay out ``n`` leaves (2-4), each with four hosts, the same two spines. One layout
    per process: the names above are rebound, so every ``L.NAME`` read sees it."""
    global LEAVES, HOSTS, LINKS, NODES
    if n not in LEAF_COUNTS:
        raise ValueError(f"leaves: {n}: the testbed has 2 to 4 leaves")
    LEAVES = tuple(f"leaf{i + 1}" for i in range(n))
    HOSTS = tuple(host_name(i) for i in range(n * HOSTS_PER_LEAF))
    LINKS = links()
    NODES = SPINES + LEAVES + HOSTS


def mgmt_span() -> int:
    """Slots the management subnet takes: a /28 holds 13 nodes, a /27 (two) beyond."""
    return 1 if len(NODES) <= 13 else 2


def mgmt_prefix_len() -> int:
    return 28 if mgmt_span() == 1 else 27


def mgmt_network(slot: int) -> str:
    return f"192.168.201.{16 * slot}/{mgmt_prefix_len()}"


def mgmt_address(slot: int, node: str) -> str:
    return f"192.168.201.{16 * slot + 2 + NODES.index(node)}"


def mgmt_gateway(slot: int) -> str:
    return f"192.168.201.{16 * slot + 1}"


def split_link(text: str) -> tuple[str, str]:
    """``leaf1-spine2`` or ``gpu-001-leaf1`` -> its two node names (node names hold '-')."""
    for node in NODES:
        if text.startswith(node + "-") and text[len(node) + 1 :] in NODES:
            other = text[len(node) + 1 :]
            link(node, other)  # KeyError when they are not neighbours
            return node, other
    raise KeyError(f"{text!r} is not a link of the testbed (e.g. leaf1-spine2, gpu-001-leaf1)")
