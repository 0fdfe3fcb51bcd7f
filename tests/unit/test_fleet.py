"""``cwctl sync``'s fleet over an inventory reaches the same hosts, the same way, as a
scan does: the hosts (leaf and NICs included) and the launcher's request settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from cwctl.chrony.fleet import fleet_for
from cwctl.collection import HostInfo
from cwctl.inventory import load_inventory
from cwctl.request import ScanRequest
from cwctl.transport.plan import inventory_hosts
from cwctl.transport.ssh import SSHLauncher

NO_DEV_SSH = {"config": None, "agent_path": None}


@pytest.fixture
def inventory_file(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.toml"
    path.write_text(
        f"""
[ssh]
known_hosts = "{tmp_path / "known_hosts"}"
concurrency = 7

[[switch]]
name = "spine1"
role = "spine"

[[switch]]
name = "leaf1"
role = "leaf"
uplinks = ["spine1"]

[[host]]
name = "gpu-001"
address = "10.0.1.1"
leaf = "leaf1"
nics = ["mlx5_0", "mlx5_1"]

[[host]]
name = "gpu-002"
address = "10.0.1.2"
"""
    )
    return path


EXPECTED = [
    HostInfo(name="gpu-001", address="10.0.1.1", leaf="leaf1", nics=("mlx5_0", "mlx5_1")),
    HostInfo(name="gpu-002", address="10.0.1.2"),
]


def test_inventory_hosts_carry_leaf_and_nics(inventory_file: Path) -> None:
    assert inventory_hosts(load_inventory(inventory_file)) == EXPECTED


async def test_the_sync_fleet_is_the_scan_s_hosts(inventory_file: Path) -> None:
    request = ScanRequest(inventory=inventory_file, accept_new_host_keys=True, concurrency=3)
    fleet = fleet_for(request, client_options=NO_DEV_SSH)
    try:
        assert fleet.source == "ssh"
        assert fleet.hosts == EXPECTED
        assert isinstance(fleet.launch, SSHLauncher)
        assert fleet.launch.accept_new is True
        for _ in range(3):  # the request's concurrency, not the inventory's 7
            await fleet.launch.semaphore.acquire()
        assert fleet.launch.semaphore.locked()
    finally:
        await fleet.close()


async def test_without_a_request_concurrency_the_inventory_s_holds(inventory_file: Path) -> None:
    launcher = SSHLauncher.for_request(
        load_inventory(inventory_file),
        ScanRequest(inventory=inventory_file),
        client_options=NO_DEV_SSH,
    )
    assert launcher.accept_new is False
    for _ in range(6):
        await launcher.semaphore.acquire()
    assert not launcher.semaphore.locked()
    await launcher.semaphore.acquire()
    assert launcher.semaphore.locked()
    await launcher.close()
