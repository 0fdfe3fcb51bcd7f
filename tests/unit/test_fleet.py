"""What a scan of an inventory (ssh, slurm) and ``cwctl sync``'s fleet take from it and
from the request, written once in ``transport/plan.py``: the hosts (leaf and NICs
included), duration, seed, probe flags, hello timeout, binds; and the SSH launcher the
request asks for (host-key policy, concurrency)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cwctl.chrony.feeders import BOOT_LIFETIME_S
from cwctl.chrony.fleet import fleet_for
from cwctl.inventory import ProbeSettings, load_inventory
from cwctl.scan.collection import HostInfo
from cwctl.scan.pathcache import PathCache
from cwctl.scan.request import ProbeOverrides, ScanRequest
from cwctl.transport.plan import inventory_hosts, inventory_plan, request_plan
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
connect_timeout = 7

[probe]
duration = 3.5
rate = 20

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
probe_address = "10.9.0.1"

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
        # a feeder's boot lifetime as its own alarm, never timeout(1): it lives on a lease
        assert (fleet.launch.lifetime_s, fleet.launch.outer_guard) == (BOOT_LIFETIME_S, False)
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


def test_request_duration_else_the_settings() -> None:
    hosts = [HostInfo("a", "127.0.0.2")]
    plain = request_plan(ScanRequest(), hosts, ProbeSettings(duration=4.0), "local")
    assert (plain.duration_s, plain.seed, plain.source) == (4.0, 0, "local")
    asked = ScanRequest(duration_s=1.5, overrides=ProbeOverrides(seed=9))
    plan = request_plan(asked, hosts, ProbeSettings(duration=4.0), "local")
    assert (plan.duration_s, plan.seed, plan.hosts) == (1.5, 9, hosts)


def test_an_inventory_plan_takes_the_inventory_under_the_request(inventory_file: Path) -> None:
    cache = PathCache()
    request = ScanRequest(inventory=inventory_file, overrides=ProbeOverrides(rate=50.0, seed=3))
    plan = inventory_plan(
        load_inventory(inventory_file), request, source="slurm", hello_margin_s=30.0, cache=cache
    )
    assert plan.source == "slurm" and plan.cache is cache
    assert plan.hosts == EXPECTED
    assert plan.duration_s == 3.5  # the inventory's [probe] duration: the request gave none
    assert plan.settings.rate == 50.0  # the flag over the inventory's 20
    assert plan.seed == 3
    assert plan.hello_timeout_s == 37.0  # connect_timeout 7 + the source's margin
    assert plan.bind == {"gpu-001": "10.9.0.1"}  # the fabric address, not the SSH one
    assert plan.topology is not None and plan.topology.leaf_of["gpu-001"] == "leaf1"
