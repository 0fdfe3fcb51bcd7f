"""The inventory, as the testbed writes it for cwctl (keys as docs/inventory.md says)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.testbed import layout as L

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed


TESTBED_RATE = 100.0  # coded pairs per second per peer in the testbed's inventory


def _q(value: object) -> str:
    return json.dumps(value)  # a JSON string or list of strings is valid TOML


def inventory_text(bed: Testbed, *, python: str = "/usr/bin/python3") -> str:
    out = [
        f"# The namespace testbed {bed.prefix!r}, written by `python -m tests.testbed up`.",
        "# Management (SSH) on 192.168.201.x, fabric (probes, routes) on 10.201.x.x.",
        "",
        "[ssh]",
        'user = "root"',
        f"identity = {_q(str(bed.identity))}",
        f"known_hosts = {_q(str(bed.known_hosts))}",
        "connect_timeout = 5",
        f"python = {_q(python)}",
        "",
        "[probe]",
        # the tests' and the tally's scans are 1.5-2 s: they need this rate's volume
        # (the default, cwctl/settings.py, is a 10 s scan at 2 pairs/s per peer)
        f"rate = {TESTBED_RATE:g}",
        "",
    ]
    for switch in (*L.SPINES, *L.LEAVES):
        out += [
            "[[switch]]",
            f"name = {_q(switch)}",
            f"role = {_q('spine' if switch in L.SPINES else 'leaf')}",
        ]
        if switch in L.LEAVES:
            out.append(f"uplinks = {_q(list(L.SPINES))}")
        out += [
            f"addresses = {_q(list(L.fabric_addresses(switch)))}",
            'kind = "linux"',
            f"address = {_q(bed.mgmt(switch))}",
            "",
        ]
    for host in L.HOSTS:
        out += [
            "[[host]]",
            f"name = {_q(host)}",
            f"address = {_q(bed.mgmt(host))}",
            f"leaf = {_q(L.leaf_of(host))}",
            f"nics = {_q([L.HOST_NIC])}",
            f"probe_address = {_q(L.probe_address(host))}",
            "",
        ]
    return "\n".join(out)


def write_inventory(bed: Testbed) -> None:
    bed.inventory.write_text(inventory_text(bed))


def with_icmp_ratelimit(text: str, limit_ms: int) -> str:
    """The testbed's inventory telling cwctl its switches' ICMP rate limit (0: none), as
    a key of the inventory's own ``[probe]`` section (TOML has one section per name)."""
    if "\n[probe]\n" not in text:
        raise ValueError("the testbed inventory has no [probe] section")
    return text.replace("\n[probe]\n", f"\n[probe]\nicmp_ratelimit_ms = {limit_ms}\n", 1)
