"""Count some hosts' TCP packets offered to a fabric link, both ways, where no cwctl
code runs: a netdev egress counter on each end of the link (the switches' namespaces).

The egress hook runs before the link's qdisc, so a packet the fault drops (``down``'s
empty class, ``congested``'s tbf) is counted as offered: a count of 0 means no packet
of the pair was even sent towards the link, not that the fault ate them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tests.testbed import layout as L
from tests.testbed.faults import interface
from tests.testbed.shell import run

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

_TABLE = "testbed_linkcount"


class LinkTcpCounter:
    """TCP packets among ``hosts``' fabric addresses sent into the link ``a-b``."""

    def __init__(self, bed: Testbed, a: str, b: str, hosts: tuple[str, ...]) -> None:
        self.bed, self.ends = bed, ((a, b), (b, a))
        self.table = f"{_TABLE}_{a}_{b}"  # one per link: a leaf counts on both its uplinks
        addrs = ", ".join(L.probe_address(h) for h in hosts)
        for src, dst in self.ends:
            dev = interface(src, dst)
            script = (
                f"add table netdev {self.table} ; "
                f'add chain netdev {self.table} out {{ type filter hook egress device "{dev}" '
                "priority 0 ; policy accept ; } ; "
                f"add rule netdev {self.table} out ip saddr {{ {addrs} }} ip daddr {{ {addrs} }} "
                "meta l4proto tcp counter"
            )
            run(["nft", script], ns=bed.ns(src))

    def read(self) -> int:
        total = 0
        for src, _ in self.ends:
            out = run(["nft", "list", "table", "netdev", self.table], ns=self.bed.ns(src)).stdout
            total += sum(int(n) for n in re.findall(r"counter packets (\d+)", out))
        return total

    def remove(self) -> None:
        for src, _ in self.ends:
            run(["nft", "delete", "table", "netdev", self.table], ns=self.bed.ns(src), check=False)
