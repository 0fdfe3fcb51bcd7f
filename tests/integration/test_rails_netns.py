"""Multi-rail hosts in network namespaces: a bad NIC is that NIC's loss, not the host's.

Four hosts, each its own namespace with two NICs (``eth0`` on rail 0, ``eth1`` on rail
1), each rail a bridge of its own in the root namespace: a rail-optimised fabric in
miniature. Every agent binds one socket set per NIC address (``rails``); one host's
``eth1`` then drops everything it sends (a tc queue that holds nothing: the testbed's
``down``). Probes over that host's rail 1 are lost and only those; its rail 0 and every
other rail-1 exchange come through, and the localiser names ``h2/eth1``. Skips only
where namespaces cannot be made.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from cwctl.inventory import ProbeSettings
from cwctl.probe.bootstrap import BOOTSTRAP_CODE
from cwctl.scan.collection import HostInfo
from cwctl.session import analyse
from cwctl.transport.base import run_scan
from cwctl.transport.local import LocalSession
from cwctl.transport.plan import ScanPlan
from tests.testbed.faults import _drop_class, drop_all_bytecode
from tests.testbed.fixture import unique_prefix
from tests.testbed.shell import missing_prerequisite

pytestmark = pytest.mark.netns
HOSTS = ("h1", "h2", "h3", "h4")
RAILS = ("eth0", "eth1")


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=30)


def address(host: str, rail: int) -> str:
    return f"10.202.{rail}.{HOSTS.index(host) + 1}"


@pytest.fixture(scope="module")
def rails_fabric() -> Iterator[str]:
    why = missing_prerequisite()
    if why:
        pytest.skip(why)
    p = unique_prefix()
    try:
        for r in range(len(RAILS)):
            sh("ip", "link", "add", f"{p}b{r}", "type", "bridge")
            sh("ip", "link", "set", f"{p}b{r}", "up")
        for h in HOSTS:
            ns = f"{p}-{h}"
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            for r, nic in enumerate(RAILS):
                outer = f"{p}{h}{r}"
                sh("ip", "link", "add", outer, "type", "veth", "peer", "name", nic, "netns", ns)
                sh("ip", "link", "set", outer, "master", f"{p}b{r}", "up")
                sh("ip", "-n", ns, "addr", "add", f"{address(h, r)}/24", "dev", nic)
                sh("ip", "-n", ns, "link", "set", nic, "up")
        yield p
    finally:
        for h in HOSTS:
            subprocess.run(["ip", "netns", "del", f"{p}-{h}"], capture_output=True)
        for r in range(len(RAILS)):
            subprocess.run(["ip", "link", "del", f"{p}b{r}"], capture_output=True)
    left = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{p}b0" not in left and f"{p}h1" not in left


def test_a_bad_nic_loses_only_its_own_rails_probes(rails_fabric: str) -> None:
    p = rails_fabric
    _drop_class(f"{p}-h2", "eth1", drop_all_bytecode())  # h2's rail-1 NIC sends nothing

    async def launch(info: HostInfo) -> LocalSession:
        proc = await asyncio.create_subprocess_exec(
            *("ip", "netns", "exec", f"{p}-{info.name}", sys.executable, "-c", BOOTSTRAP_CODE),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return LocalSession(proc)

    plan = ScanPlan(
        hosts=[HostInfo(h, address(h, 0), nics=RAILS) for h in HOSTS],
        settings=ProbeSettings(peers=3, ports=2, rate=40.0),
        duration_s=1.0,
        source="netns",
        rails={h: [(nic, address(h, r)) for r, nic in enumerate(RAILS)] for h in HOSTS},
    )
    c = asyncio.run(run_scan(plan, launch))
    assert {s.status for s in c.status.values()} == {"ok"}, c.status
    t = c.table
    nic = np.array([t.nics[i] for i in t.nic.tolist()])
    h2 = t.host_index("h2")
    touches = (t.src == h2) | (t.dst == h2)
    ok = t.complete
    assert len(t) > 200 and set(nic.tolist()) == set(RAILS)
    assert not ok[touches & (nic == "eth1")].any()  # h2's rail 1: every exchange lost
    assert ok[touches & (nic == "eth0")].all()  # its rail 0: all through
    assert ok[~touches].all()  # and nobody else lost anything, on either rail
    suspects = analyse(c).suspects  # and the localiser names the NIC, not the host
    assert suspects and (suspects[0].element, suspects[0].kind) == ("h2/eth1", "nic"), suspects
