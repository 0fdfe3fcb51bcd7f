"""A TCP reroute planned against real kernel routes (a network namespace of this test's
own, ``trust<pid>``, 10.205.x.x): a mistyped ``--gateway`` is refused instead of being
"already avoided", a gateway an earlier reroute removed is still "already avoided", and a
route changed by hand between planning and applying makes the plan stale."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cwctl.actions import prior
from cwctl.actions.executor import apply_plan
from cwctl.actions.inventorytarget import InventoryTarget
from cwctl.actions.journal import Journal
from cwctl.actions.planner import RouteOptions, plan_reroute
from cwctl.actions.route import parse_gateways
from cwctl.actions.runners import CommandResult, LocalRunner
from cwctl.errors import InputError
from cwctl.inventory import Host, Inventory, Switch

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="network namespaces need root and ip"
)
PREFIX = "10.205.100.0/24"


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"trust{os.getpid()}"
    ip("netns", "add", name)
    try:
        ip("-n", name, "link", "add", "t0", "type", "veth", "peer", "name", "t1")
        for dev, addr in (("t0", "10.205.1.2/24"), ("t1", "10.205.2.2/24")):
            ip("-n", name, "addr", "add", addr, "dev", dev)
        for dev in ("lo", "t0", "t1"):
            ip("-n", name, "link", "set", dev, "up")
        ip("-n", name, "route", "add", PREFIX, "nexthop", "via", "10.205.1.1", "dev", "t0",
           "nexthop", "via", "10.205.2.1", "dev", "t1")  # fmt: skip
        yield name
    finally:
        ip("netns", "del", name)


class NetnsRunner(LocalRunner):
    """Every host's commands in the test's namespace (one kernel playing each host)."""

    def __init__(self, ns: str) -> None:
        super().__init__()
        self.ns = ns

    async def run(self, host: str, argv: Sequence[str]) -> CommandResult:
        return await super().run(host, ["ip", "netns", "exec", self.ns, *argv])


def inventory() -> Inventory:
    return Inventory(
        hosts=(Host("gpu-001", "192.0.2.1", leaf="leaf1"),),
        switches=(
            Switch("spine1", "spine"),
            Switch("spine2", "spine"),
            Switch("leaf1", "leaf", ("spine1", "spine2")),
        ),
    )


def options(gateway: str) -> RouteOptions:
    gateways = parse_gateways(["spine1=10.205.1.1", f"spine2={gateway}"])
    return RouteOptions(prefix=PREFIX, gateways=gateways)


async def test_a_mistyped_gateway_is_refused_not_already_avoided(netns: str) -> None:
    runner = NetnsRunner(netns)
    with pytest.raises(InputError, match=r"spine2=10\.205\.9\.1: no host's route .* directly"):
        await plan_reroute("spine2", InventoryTarget(inventory()), runner, options("10.205.9.1"))


async def test_a_gateway_already_removed_is_already_avoided(netns: str, tmp_path: object) -> None:
    runner = NetnsRunner(netns)
    target = InventoryTarget(inventory())
    plan = await plan_reroute("spine2", target, runner, options("10.205.2.1"))
    assert len(plan.steps) == 1
    execution = await apply_plan(plan, runner, Journal(tmp_path / "state"))  # type: ignore[operator]
    assert execution.status == "applied", execution.summary()
    assert "10.205.2.1" not in ip("-n", netns, "route", "show", PREFIX)
    again = await plan_reroute("spine2", target, runner, options("10.205.2.1"))
    assert again.steps == [] and any("already avoided" in n for n in again.notes)


async def test_a_route_changed_by_hand_makes_the_plan_stale(netns: str) -> None:
    runner = NetnsRunner(netns)
    target = InventoryTarget(inventory())
    plan = await plan_reroute("spine2", target, runner, options("10.205.2.1"))
    assert prior.stale(plan, await prior.current(plan, target, runner)) == []
    ip("-n", netns, "route", "replace", PREFIX, "nexthop", "via", "10.205.1.1", "dev", "t0",
       "weight", "3", "nexthop", "via", "10.205.2.1", "dev", "t1")  # fmt: skip
    assert prior.stale(plan, await prior.current(plan, target, runner)) == ["route:gpu-001"]


async def test_a_device_coming_or_going_leaves_an_nccl_plan_fresh_a_setting_does_not(
    netns: str, tmp_path: Path
) -> None:
    # the NCCL read lists the host's devices beside the setting (a note when the NIC
    # is gone); a container's veth appearing between plan and apply is no reason to refuse
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\n")
    inv = Inventory(hosts=(Host("gpu-001", "192.0.2.1", nics=("mlx5_0", "mlx5_1")),))
    runner, target = NetnsRunner(netns), InventoryTarget(inv)
    plan = await plan_reroute("gpu-001/mlx5_1", target, runner, RouteOptions(nccl_conf=str(conf)))
    assert plan.steps and "nccl:gpu-001" in plan.prior
    ip("-n", netns, "link", "add", "c0", "type", "veth", "peer", "name", "c1")
    assert prior.stale(plan, await prior.current(plan, target, runner)) == []
    conf.write_text("NCCL_DEBUG=WARN\nNCCL_IB_HCA=^mlx5_0\n")
    assert prior.stale(plan, await prior.current(plan, target, runner)) == ["nccl:gpu-001"]
