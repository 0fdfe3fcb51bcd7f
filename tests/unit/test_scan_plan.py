"""What every scan's plan takes from the request (duration, seed, probe flags) and, for
the inventory sources (ssh, slurm), from the inventory: written once in base.py."""

from __future__ import annotations

from pathlib import Path

from cwctl.collection import HostInfo
from cwctl.inventory import ProbeSettings, parse_inventory
from cwctl.pathcache import PathCache
from cwctl.request import ScanRequest
from cwctl.transport.plan import inventory_plan, request_plan

INVENTORY = """
[ssh]
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
address = "192.0.2.1"
leaf = "leaf1"
probe_address = "10.9.0.1"

[[host]]
name = "gpu-002"
address = "192.0.2.2"
leaf = "leaf1"
"""


def test_request_duration_else_the_settings() -> None:
    hosts = [HostInfo("a", "127.0.0.2")]
    plain = request_plan(ScanRequest(), hosts, ProbeSettings(duration=4.0), "local")
    assert (plain.duration_s, plain.seed, plain.source) == (4.0, 0, "local")
    asked = ScanRequest(duration_s=1.5, overrides={"seed": 9})
    plan = request_plan(asked, hosts, ProbeSettings(duration=4.0), "local")
    assert (plan.duration_s, plan.seed, plan.hosts) == (1.5, 9, hosts)


def test_an_inventory_plan_takes_the_inventory_under_the_request() -> None:
    inventory = parse_inventory(INVENTORY)
    cache = PathCache()
    request = ScanRequest(inventory=Path("inv.toml"), overrides={"rate": 50.0, "seed": 3})
    plan = inventory_plan(inventory, request, source="slurm", hello_margin_s=30.0, cache=cache)
    assert plan.source == "slurm" and plan.cache is cache
    assert [h.name for h in plan.hosts] == ["gpu-001", "gpu-002"]
    assert plan.hosts[0].leaf == "leaf1"
    assert plan.duration_s == 3.5  # the inventory's [probe] duration: the request gave none
    assert plan.settings.rate == 50.0  # the flag over the inventory's 20
    assert plan.seed == 3
    assert plan.hello_timeout_s == 37.0  # connect_timeout 7 + the source's margin
    assert plan.bind == {"gpu-001": "10.9.0.1"}  # the fabric address, not the SSH one
    assert plan.topology is not None and plan.topology.leaf_of["gpu-002"] == "leaf1"
