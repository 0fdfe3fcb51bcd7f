"""Actions over real SSH (the in-process asyncssh fleet of ``sshfleet.py``): a NIC
reroute reads the NCCL setting on the host, writes it there, and rollback restores it.
The fleet's server runs each command through a shell, as sshd does, so the argv quoting
(``shlex.join``) is exercised for real, hostile values included."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from cwctl.actions.executor import apply_plan, rollback_plan, verify
from cwctl.actions.history import find
from cwctl.actions.inventorytarget import InventoryTarget
from cwctl.actions.journal import Journal
from cwctl.actions.planner import RouteOptions, plan_drain, plan_reroute
from cwctl.actions.route import parse_gateways
from cwctl.actions.runners import SSHRunner
from cwctl.inventory import Inventory, Scheduler, Switch
from cwctl.scan.request import ScanRequest
from tests.integration.sshfleet import SSHFleet


def with_nics(inv: Inventory) -> Inventory:
    hosts = tuple(dataclasses.replace(h, nics=("mlx5_0", "mlx5_1")) for h in inv.hosts)
    return dataclasses.replace(inv, hosts=hosts)


async def test_nic_reroute_and_rollback_over_ssh(fleet: SSHFleet, tmp_path: Path) -> None:
    await fleet.add("gpu-001")
    inv = with_nics(fleet.inventory())
    # a hostile directory name: quoting must keep it one argument end to end
    conf_dir = tmp_path / "it's; $(echo x) dir"
    conf_dir.mkdir()
    conf = conf_dir / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\n")
    runner = SSHRunner(inv, client_options=fleet.client_options)
    journal = Journal(tmp_path / "state")
    try:
        target = InventoryTarget(inv)
        plan = await plan_reroute(
            "gpu-001/mlx5_1", target, runner, RouteOptions(nccl_conf=str(conf))
        )
        (step,) = plan.steps
        assert step.host == "gpu-001" and "NCCL_IB_HCA" in step.argv
        # this machine has no mlx5_1: the host says so, and the plan tells the operator
        assert any("gpu-001 lists no device mlx5_1" in n for n in plan.notes), plan.notes
        execution = await apply_plan(plan, runner, journal)
        assert execution.status == "applied", execution.summary()
        assert conf.read_text() == "NCCL_DEBUG=WARN\nNCCL_IB_HCA=^=mlx5_1\n"
        undo = rollback_plan(find(journal, plan.id))
        done = await apply_plan(undo, runner, journal)
        assert done.status == "applied", done.summary()
        assert conf.read_text() == "NCCL_DEBUG=WARN\n"
        assert sorted(p.name for p in conf_dir.iterdir()) == ["nccl.conf"]
    finally:
        await runner.close()


async def test_unreachable_host_fails_the_plan_naming_it(fleet: SSHFleet, tmp_path: Path) -> None:
    host = await fleet.add("gpu-001", known=False)  # its host key is not trusted
    inv = with_nics(fleet.inventory())
    runner = SSHRunner(inv, client_options=fleet.client_options)
    try:
        result = await runner.run("gpu-001", ["true"])
    finally:
        await runner.close()
    assert (
        result.rc == 255 and "unknown host key" in result.stderr and host.address in result.stderr
    )


async def test_drain_runs_on_the_scheduler_host_over_ssh(
    fleet: SSHFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[scheduler] host`` is reached over SSH; the remote shell receives the hostile
    reason as one argument. ``scontrol`` here is a stand-in script (NOT Slurm) that logs
    its argv; the fleet's server runs commands with this process's PATH."""
    await fleet.add("slurm-ctl")
    await fleet.add("gpu-001")
    bindir = tmp_path / "stand-in-bin"
    bindir.mkdir()
    log = tmp_path / "scontrol.log"
    (bindir / "scontrol").write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    (bindir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    inv = dataclasses.replace(fleet.inventory(), scheduler=Scheduler("slurm", "slurm-ctl"))
    reason = "'; touch /tmp/cwctl-pwned #"
    plan = plan_drain("gpu-001", InventoryTarget(inv), reason=reason)
    runner = SSHRunner(inv, client_options=fleet.client_options)
    try:
        execution = await apply_plan(plan, runner, Journal(tmp_path / "state"))
    finally:
        await runner.close()
    assert execution.status == "applied", execution.summary()
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["update", "NodeName=gpu-001", "State=DRAIN", f"Reason={reason}"]
    ]
    assert not Path("/tmp/cwctl-pwned").exists()


async def test_verify_rescans_the_inventory_over_ssh(fleet: SSHFleet, tmp_path: Path) -> None:
    """--verify's real path: a scan of the inventory's hosts (real agents, loopback)."""
    for name in ("gpu-001", "gpu-002", "gpu-003"):
        await fleet.add(name)
    inv = fleet.inventory()
    request = ScanRequest(inventory=tmp_path / "inv.toml", duration_s=0.5)
    target = InventoryTarget(
        inventory=inv, request=request, ssh_options={"client_options": fleet.client_options}
    )
    # the fleet's inventory probes at 40 pairs/s: 5 s gives every element the 300
    # exchanges a verdict needs with room to spare (a shorter window is inconclusive,
    # never "gone"); 3 s gave 270 on this 2-core machine under make test's load
    result = await verify(target, "gpu-002", duration_s=5.0)
    assert result.gone and "gpu-002" not in result.suspects


STAND_IN_IP = """#!{python}
# A stand-in for iproute2's ip (NOT the real tool: the test must not touch this machine's
# routes). It prints one multipath route for 'ip -j route show PREFIX' and logs the rest.
import json, sys
args = sys.argv[1:]
if args[:3] == ["-j", "route", "show"]:
    print(json.dumps([{{"dst": args[3], "flags": [], "nexthops": [
        {{"gateway": "10.9.1.1", "dev": "eth0", "weight": 1, "flags": []}},
        {{"gateway": "10.9.2.1", "dev": "eth1", "weight": 1, "flags": []}}]}}]))
else:
    open({log!r}, "a").write(json.dumps(args) + "\\n")
"""


async def test_tcp_reroute_over_ssh_reads_then_replaces_then_rolls_back(
    fleet: SSHFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fleet.add("gpu-001")
    await fleet.add("gpu-002")
    bindir = tmp_path / "stand-in-bin"
    bindir.mkdir()
    log = tmp_path / "ip.log"
    (bindir / "ip").write_text(STAND_IN_IP.format(python=sys.executable, log=str(log)))
    (bindir / "ip").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    inv = fleet.inventory()
    inv = dataclasses.replace(
        inv,
        hosts=tuple(dataclasses.replace(h, leaf="leaf1") for h in inv.hosts),
        switches=(
            Switch("spine1", "spine"),
            Switch("spine2", "spine"),
            Switch("leaf1", "leaf", ("spine1", "spine2")),
        ),
    )
    options = RouteOptions(prefix="10.0.0.0/8", gateways=parse_gateways(["spine2=10.9.2.1"]))
    runner = SSHRunner(inv, client_options=fleet.client_options)
    journal = Journal(tmp_path / "state")
    try:
        plan = await plan_reroute("spine2", InventoryTarget(inv), runner, options)
        assert [s.host for s in plan.steps] == ["gpu-001", "gpu-002"]
        assert not log.exists()  # planning only read
        assert (await apply_plan(plan, runner, journal)).status == "applied"
        assert (await apply_plan(rollback_plan(find(journal, None)), runner, journal)).status == (
            "applied"
        )
    finally:
        await runner.close()
    one = ["route", "replace", "10.0.0.0/8", "nexthop", "via", "10.9.1.1", "dev", "eth0"]
    both = [*one, "weight", "1", "nexthop", "via", "10.9.2.1", "dev", "eth1", "weight", "1"]
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        [*one, "weight", "1"],
        [*one, "weight", "1"],
        both,
        both,
    ]
