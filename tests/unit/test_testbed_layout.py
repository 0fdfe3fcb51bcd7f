"""The testbed's layout at 2, 3 and 4 leaves: names, fabric and management addresses."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest

from tests.testbed import layout as L


@pytest.fixture(autouse=True)
def _two_leaves_after() -> Iterator[None]:
    yield
    L.set_leaves(2)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_leaf_has_four_hosts_and_both_spines(n: int) -> None:
    L.set_leaves(n)
    assert len(L.LEAVES) == n and len(L.HOSTS) == 4 * n
    assert L.NODES == L.SPINES + L.LEAVES + L.HOSTS
    for leaf in L.LEAVES:
        assert len(L.hosts_of(leaf)) == 4
        assert all(L.leaf_of(h) == leaf for h in L.hosts_of(leaf))
        for spine in L.SPINES:
            L.link(leaf, spine)  # raises when missing
    assert len(L.LINKS) == 2 * n + 4 * n


@pytest.mark.parametrize("n", [2, 3, 4])
def test_addresses_are_distinct_and_management_fits_its_subnet(n: int) -> None:
    L.set_leaves(n)
    fabric = [a for node in L.NODES for a in L.fabric_addresses(node)]
    assert len(fabric) == len(set(fabric))
    for slot in range(0, L.SLOTS, L.mgmt_span()):
        net = ipaddress.ip_network(L.mgmt_network(slot))
        mgmt = [ipaddress.ip_address(L.mgmt_address(slot, node)) for node in L.NODES]
        mgmt.append(ipaddress.ip_address(L.mgmt_gateway(slot)))
        assert len(set(mgmt)) == len(mgmt)
        assert all(a in net and a not in (net.network_address, net.broadcast_address) for a in mgmt)


def test_two_leaves_is_the_layout_it_always_was() -> None:
    L.set_leaves(2)
    assert L.LEAVES == ("leaf1", "leaf2") and L.HOSTS[-1] == "gpu-008"
    assert L.mgmt_network(3) == "192.168.201.48/28"
    assert L.host_subnet("leaf2") == "10.201.102.0/24"


@pytest.mark.parametrize("n", [1, 5])
def test_leaves_out_of_range_are_refused(n: int) -> None:
    with pytest.raises(ValueError, match="2 to 4 leaves"):
        L.set_leaves(n)
