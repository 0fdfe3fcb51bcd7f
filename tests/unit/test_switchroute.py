"""Switch-side reroute planning: the exact ``ip route replace`` argv, and every refusal.

The route JSON below is what iproute2 6.1's ``ip -j route show`` printed on the
namespace testbed's leaf1; the end-to-end tests (tests/integration/test_fabric_e2e.py)
run the same planner against the real switches and compare ``ip route`` byte for byte.
Here a stand-in runner hands the planner those tables, so every refusal is checked
without root.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from cwctl import settings
from cwctl.actions.runners import CommandResult
from cwctl.actions.switchroute import (
    Unwritable,
    holds_any,
    observe_table,
    plan_switch_reroute,
    replace_argv,
    same_prefix,
)
from cwctl.errors import CwctlError, InputError
from cwctl.inventory import Host, Inventory, Switch

MULTIPATH = {
    "dst": "10.201.102.0/24",
    "protocol": "static",
    "flags": [],
    "nexthops": [
        {"gateway": "10.201.11.2", "dev": "spine1", "weight": 1, "flags": []},
        {"gateway": "10.201.12.2", "dev": "spine2", "weight": 1, "flags": []},
    ],
}
CONNECTED = {
    "dst": "10.201.101.0/30",
    "dev": "gpu-001",
    "protocol": "kernel",
    "scope": "link",
    "prefsrc": "10.201.101.1",
    "flags": [],
}


def test_replace_argv_writes_the_route_back_as_read() -> None:
    assert replace_argv(MULTIPATH) == (
        *("ip", "route", "replace", "10.201.102.0/24", "proto", "static"),
        *("nexthop", "via", "10.201.11.2", "dev", "spine1", "weight", "1"),
        *("nexthop", "via", "10.201.12.2", "dev", "spine2", "weight", "1"),
    )
    kept = [MULTIPATH["nexthops"][0]]  # type: ignore[index]
    assert replace_argv(MULTIPATH, kept) == (
        *("ip", "route", "replace", "10.201.102.0/24", "proto", "static"),
        *("nexthop", "via", "10.201.11.2", "dev", "spine1", "weight", "1"),
    )


def test_replace_argv_keeps_metric_source_scope_weights_and_onlink() -> None:
    route = {
        "dst": "default",
        "gateway": "10.0.0.1",
        "dev": "eth0",
        "protocol": "bgp",
        "metric": 20,
        "prefsrc": "10.0.0.2",
        "flags": ["onlink"],
    }
    assert replace_argv(route) == (
        *("ip", "route", "replace", "default", "proto", "bgp", "metric", "20"),
        *("src", "10.0.0.2", "via", "10.0.0.1", "dev", "eth0", "onlink"),
    )
    weighted = {**MULTIPATH, "nexthops": [{"gateway": "10.1.1.1", "weight": 7, "flags": ["dead"]}]}
    assert replace_argv(weighted)[-5:] == ("nexthop", "via", "10.1.1.1", "weight", "7")


@pytest.mark.parametrize(
    ("route", "why"),
    [
        ({**MULTIPATH, "expires": 30}, "expires"),
        ({**MULTIPATH, "type": "blackhole"}, "type blackhole"),
        ({**MULTIPATH, "flags": ["offload"]}, "offload"),
        ({**MULTIPATH, "nexthops": [{"gateway": "10.0.0.1", "realms": "1"}]}, "realms"),
        (CONNECTED, "no gateway"),
    ],
)
def test_routes_that_cannot_be_written_back_exactly_are_refused(
    route: dict[str, Any], why: str
) -> None:
    with pytest.raises(Unwritable, match=why):
        replace_argv(route)


def test_prefixes() -> None:
    assert same_prefix("default", "0.0.0.0/0") and same_prefix("10.1.0.0/16", "10.1.0.0/16")
    assert not same_prefix("10.1.0.0/16", "10.1.0.0/24")
    assert holds_any("default", ["10.1.1.1"]) and holds_any("10.201.101.0/24", ["10.201.101.6"])
    assert not holds_any("10.201.102.0/24", ["10.201.101.6", "not an address"])


class Tables:
    """A stand-in for the leaves' ``ip -j route show`` (and a log of what ran)."""

    def __init__(self, tables: dict[str, list[dict[str, Any]]], fail: str | None = None) -> None:
        self.tables, self.fail, self.ran = tables, fail, []  # type: ignore[var-annotated]

    async def run(self, host: str, argv: Sequence[str]) -> CommandResult:
        self.ran.append((host, tuple(argv)))
        if host == self.fail:
            return CommandResult(255, "", f"{host}: connection refused")
        return CommandResult(0, json.dumps(self.tables[host]))

    async def apply_change(self, change: dict[str, Any]) -> CommandResult:
        raise AssertionError("no model here")

    async def close(self) -> None:
        return None


def fabric(*, kind: str | None = "linux", spine_addresses: bool = True) -> Inventory:
    def leaf(n: int, *addresses: str) -> Switch:
        return Switch(f"leaf{n}", "leaf", ("spine1", "spine2"), addresses, kind, "192.0.2.1")

    return Inventory(
        hosts=(
            Host("gpu-001", "192.0.2.11", leaf="leaf1", probe_address="10.201.101.2"),
            Host("gpu-005", "192.0.2.15", leaf="leaf2", probe_address="10.201.102.2"),
        ),
        switches=(
            Switch("spine1", "spine", addresses=("10.201.11.2", "10.201.21.2")),
            Switch("spine2", "spine", addresses=("10.201.12.2", "10.201.22.2") * spine_addresses),
            leaf(1, "10.201.11.1", "10.201.12.1", "10.201.101.1"),
            leaf(2, "10.201.21.1", "10.201.22.1", "10.201.102.1"),
        ),
    )


def leaf2_route(dst: str = "10.201.101.0/24") -> dict[str, Any]:
    return {
        "dst": dst,
        "protocol": "static",
        "flags": [],
        "nexthops": [
            {"gateway": "10.201.21.2", "dev": "spine1", "weight": 1, "flags": []},
            {"gateway": "10.201.22.2", "dev": "spine2", "weight": 1, "flags": []},
        ],
    }


TABLES = {"leaf1": [CONNECTED, MULTIPATH], "leaf2": [leaf2_route(), leaf2_route("10.99.0.0/16")]}


async def test_a_spine_is_taken_out_of_every_leaf_group_it_is_in() -> None:
    runner = Tables(TABLES)
    found = await plan_switch_reroute(fabric(), "spine2", "spine2", None, runner)
    assert [(s.host, s.argv[3]) for s in found.steps] == [
        ("leaf1", "10.201.102.0/24"),
        ("leaf2", "10.201.101.0/24"),
        ("leaf2", "10.99.0.0/16"),
    ]
    assert all("spine2" not in s.argv for s in found.steps)
    assert all(s.undo_argv and "spine2" in s.undo_argv for s in found.steps)
    assert found.prior["leaf1"]["10.201.102.0/24"] == MULTIPATH
    assert {h for h, argv in runner.ran} == {"leaf1", "leaf2"}  # read only
    assert all(argv == ("ip", "-j", "route", "show") for _, argv in runner.ran)


async def test_a_link_changes_its_leaf_and_the_other_leaves_routes_towards_it_only() -> None:
    found = await plan_switch_reroute(fabric(), "leaf1-spine2", "spine2", "leaf1", Tables(TABLES))
    # 10.99.0.0/16 on leaf2 does not lead to leaf1's hosts: it never comes down the link
    assert [(s.host, s.argv[3]) for s in found.steps] == [
        ("leaf1", "10.201.102.0/24"),
        ("leaf2", "10.201.101.0/24"),
    ]


async def test_the_element_stays_observable_by_marked_probes_through_the_routes_as_read() -> None:
    """Before the routes change, each leaf keeps them as read in the element's table and
    routes the watch's marked probes by it; rollback (last first) removes rule and copies
    after the routes are back."""
    found = await plan_switch_reroute(fabric(), "spine2", "spine2", None, Tables(TABLES))
    table = str(observe_table("spine2"))
    assert observe_table("spine2") == observe_table("spine2") != observe_table("spine1")
    copies = [s for s in found.observe if s.argv[:3] == ("ip", "route", "replace")]
    assert [(s.host, s.argv[3]) for s in copies] == [(s.host, s.argv[3]) for s in found.steps]
    for copy, change in zip(copies, found.steps, strict=True):
        assert change.undo_argv is not None  # the route exactly as read, in the table:
        assert copy.argv == (*change.undo_argv[:4], "table", table, *change.undo_argv[4:])
        assert copy.undo_argv == ("ip", "route", "del", change.argv[3], "table", table)
    rules = [s for s in found.observe if s.argv[:3] == ("ip", "rule", "add")]
    assert [s.host for s in rules] == ["leaf1", "leaf2"]
    tos = f"{settings.PROBE_OBSERVE_TOS:#04x}"
    assert rules[0].argv[3:] == ("priority", table, "tos", tos, "lookup", table)
    assert rules[0].undo_argv == ("ip", "rule", "del", *rules[0].argv[3:])


async def test_nothing_to_change_is_said_only_after_reading_every_leaf() -> None:
    avoided = {
        "leaf1": [CONNECTED],
        "leaf2": [{**leaf2_route(), "nexthops": leaf2_route()["nexthops"][:1]}],
    }
    found = await plan_switch_reroute(fabric(), "spine2", "spine2", None, Tables(avoided))
    assert found.steps == []
    assert found.notes == [
        "nothing to change: checked 2 route(s) on leaf1, leaf2; none has a next hop through spine2"
    ]


async def test_refusals_name_what_is_missing() -> None:
    with pytest.raises(InputError, match=r"no access to leaf1, leaf2.*kind = \"linux\""):
        await plan_switch_reroute(fabric(kind=None), "spine2", "spine2", None, Tables(TABLES))
    with pytest.raises(InputError, match="gives spine2 no addresses"):
        await plan_switch_reroute(
            fabric(spine_addresses=False), "spine2", "spine2", None, Tables(TABLES)
        )
    only_spine2 = {**leaf2_route(), "nexthops": leaf2_route()["nexthops"][1:]}
    with pytest.raises(
        InputError, match=re.escape("every next hop of 10.201.101.0/24 leads to spine2")
    ):
        await plan_switch_reroute(
            fabric(), "spine2", "spine2", None, Tables({**TABLES, "leaf2": [only_spine2]})
        )
    with pytest.raises(InputError, match="no route for default on leaf1, leaf2"):
        await plan_switch_reroute(
            fabric(), "spine2", "spine2", None, Tables(TABLES), prefix="default"
        )
    with pytest.raises(CwctlError, match="could not read the routes on 1 switch"):
        await plan_switch_reroute(fabric(), "spine2", "spine2", None, Tables(TABLES, fail="leaf2"))
    odd = {**TABLES, "leaf1": [{**MULTIPATH, "expires": 30}]}
    with pytest.raises(InputError, match=re.escape("leaf1: route 10.201.102.0/24 has attribute")):
        await plan_switch_reroute(fabric(), "spine2", "spine2", None, Tables(odd))


async def test_a_prefix_limits_the_change_to_that_route() -> None:
    found = await plan_switch_reroute(
        fabric(), "spine2", "spine2", None, Tables(TABLES), prefix="10.99.0.0/16"
    )
    assert [(s.host, s.argv[3]) for s in found.steps] == [("leaf2", "10.99.0.0/16")]
