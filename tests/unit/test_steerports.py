"""Host-side steering's core: which pairs a suspect affects, which traced ports avoid it,
the nft transaction it writes, and the tracer's packets parsed back as an ICMP quote."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from cwctl.actions import steer
from cwctl.actions import steerports as sp
from cwctl.actions.plan import ActionPlan
from cwctl.actions.runners import CommandResult
from cwctl.errors import EXIT_PROBLEMS, CwctlError, InputError
from cwctl.inventory import Host, Inventory, Switch
from cwctl.probe import hosttrace

LEAF_OF = {"a1": "leaf1", "a2": "leaf1", "b1": "leaf2", "c1": "leaf3"}
UPLINKS = {"leaf1": ["spine1", "spine2"], "leaf2": ["spine1", "spine2"], "leaf3": ["spine1"]}


def test_pairs_of_a_spine_skip_same_leaf_and_leaves_without_it() -> None:
    pairs = sp.plan_pairs(LEAF_OF, UPLINKS, sp.Avoided("spine2", "spine2"))
    assert pairs == [("a1", "b1"), ("a2", "b1"), ("b1", "a1"), ("b1", "a2")]


def test_pairs_of_a_link_need_an_end_on_its_leaf() -> None:
    leaf_of = {**LEAF_OF, "d1": "leaf4"}
    uplinks = {**UPLINKS, "leaf4": ["spine1", "spine2"]}
    pairs = sp.plan_pairs(leaf_of, uplinks, sp.Avoided("leaf2-spine2", "spine2", "leaf2"))
    assert ("a1", "d1") not in pairs and ("b1", "d1") in pairs and ("a1", "b1") in pairs


def test_healthy_needs_both_directions_known_and_off_the_spine() -> None:
    traced = sp.TracedPorts()
    key = ("a1", "b1", sp.Service("tcp", 5201))
    traced.record(key, 61000, "spine1", "spine1")  # healthy
    traced.record(key, 61001, "spine2", "spine1")  # forward on the suspect
    traced.record(key, 61002, "spine1", "spine2")  # reply on the suspect
    traced.record(key, 61003, "spine1", None)  # reply unknown: never healthy
    traced.record(key, 61004, None, "spine1")
    traced.record(key, 61005, "spine1", "spine1")
    suspect = sp.Avoided("spine2", "spine2")
    assert sp.healthy(traced, key, suspect) == [61000, 61005]
    assert sp.healthy(traced, key, suspect, reply=False) == [61000, 61002, 61003, 61005]


def test_candidates_continue_where_tracing_stopped() -> None:
    traced = sp.TracedPorts()
    key = ("a1", "b1", sp.ROCE)
    first = sp.next_candidates(traced, key, 3)
    for p in first:
        traced.record(key, p, None, None)
    assert first == [61000, 61001, 61002]
    assert sp.next_candidates(traced, key, 2) == [61003, 61004]


def test_more_is_traced_at_the_share_seen() -> None:
    assert sp.to_trace(found=64, pool=64, traced=200) == 0
    assert sp.to_trace(found=0, pool=64, traced=0) == int(64 / 0.25 * 1.25) + 8
    assert sp.to_trace(found=10, pool=20, traced=20) == int(10 / 0.5 * 1.25) + 8


@pytest.mark.parametrize(
    ("spec", "want"),
    [("5201", sp.Service("tcp", 5201)), ("udp:9000", sp.Service("udp", 9000))],
)
def test_services_parse(spec: str, want: sp.Service) -> None:
    assert sp.parse_service(spec) == want


@pytest.mark.parametrize("spec", ["sctp:1", "tcp:0", "tcp:70000", "x", ""])
def test_bad_services_name_the_flag(spec: str) -> None:
    with pytest.raises(InputError, match="--port"):
        sp.parse_service(spec)


def test_nft_script_is_one_table_with_a_rule_per_peer_and_service() -> None:
    script = steer.nft_script(
        "cwctl_steer_x",
        "10.0.1.2",
        [("10.0.2.2", sp.Service("tcp", 5201), [61000, 61007]), ("10.0.3.2", sp.ROCE, [61001])],
    )
    parts = [p.strip() for p in script.split(" ; add ")]
    assert parts[0] == "add table ip cwctl_steer_x"
    assert "type nat hook postrouting priority srcnat" in parts[1]
    assert parts[2].endswith(
        "ip saddr 10.0.1.2 ip daddr 10.0.2.2 meta l4proto tcp th dport 5201 "
        "tcp flags & (syn | ack) == syn counter "
        "snat ip to 10.0.1.2 : numgen inc mod 2 map { 0 : 61000, 1 : 61007 }"
    )  # only a TCP connection's opening SYN: one open before the table is never moved
    assert "meta l4proto udp th dport 4791" in parts[3] and "mod 1 map { 0 : 61001 }" in parts[3]
    assert "tcp flags" not in parts[3]


def test_table_name_is_an_nft_identifier() -> None:
    assert steer.table_name("20261203-171924-600d") == "cwctl_steer_20261203_171924_600d"


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_a_traced_packet_is_found_in_the_icmp_quote(proto: str) -> None:
    """The packet the tracer sends, quoted by a router's time-exceeded, names the tuple."""
    sent = hosttrace.packet(proto, "10.0.1.2", "10.0.2.2", 61000, 5201, 2, 7)
    assert sent[8] == 2 and struct.unpack("!H", sent[4:6])[0] == 7
    outer = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 0, 0, 0, 64, 1, 0,
        socket.inet_aton("10.0.9.2"), socket.inet_aton("10.0.1.2"),
    )  # fmt: skip
    icmp = bytes([11, 0, 0, 0, 0, 0, 0, 0]) + sent[:28]
    hop, tuple_ = hosttrace.quoted(outer + icmp) or ("", ())
    number = socket.IPPROTO_TCP if proto == "tcp" else socket.IPPROTO_UDP
    assert (hop, tuple_) == ("10.0.9.2", (number, "10.0.1.2", "10.0.2.2", 61000, 5201))
    assert hosttrace.quoted(outer + bytes([3]) + icmp[1:]) is None  # not time-exceeded


def test_tcp_probe_is_a_rst_with_a_valid_checksum() -> None:
    sent = hosttrace.packet("tcp", "10.0.1.2", "10.0.2.2", 61000, 5201, 2, 1)
    tcp = sent[20:]
    assert tcp[13] == 0x04  # RST only: conntrack keeps no entry for it
    pseudo = sent[12:20] + struct.pack("!BBH", 0, 6, len(tcp))
    assert hosttrace.checksum(pseudo + tcp) == 0


# --- planning over a fabric that answers like a hash would (the runner below) -----------


def _inventory() -> Inventory:
    spine = {"spine1": ("10.9.1.1", "10.9.1.2"), "spine2": ("10.9.2.1", "10.9.2.2")}
    return Inventory(
        hosts=(
            Host("a1", "192.168.0.1", leaf="leaf1", probe_address="10.0.1.2"),
            Host("b1", "192.168.0.2", leaf="leaf2", probe_address="10.0.2.2"),
        ),
        switches=(
            Switch("spine1", "spine", addresses=spine["spine1"]),
            Switch("spine2", "spine", addresses=spine["spine2"]),
            Switch("leaf1", "leaf", ("spine1", "spine2")),
            Switch("leaf2", "leaf", ("spine1", "spine2")),
        ),
    )


class Fabric:
    """Hosts that list nft tables and trace: a tuple crosses spine2 when the sum of its
    ports is a multiple of 3 (the same sum both ways), else spine1; or all on one."""

    def __init__(self, *, nft: bool = True, all_on: str | None = None) -> None:
        self.nft, self.all_on = nft, all_on
        self.traced = 0

    def spine_of(self, sport: int, dport: int) -> str:
        if self.all_on is not None:
            return self.all_on
        return "spine1" if (sport + dport) % 3 else "spine2"

    async def run(self, host: str, argv: list[str]) -> CommandResult:
        if list(argv[:3]) == ["nft", "list", "tables"]:
            return CommandResult(0, "") if self.nft else CommandResult(1, "", "nft: not found")
        spec = json.loads(argv[-1])
        self.traced += len(spec["jobs"])
        hops = [
            "10.9.1.1" if self.spine_of(s, d) == "spine1" else "10.9.2.1"
            for _, _, s, d in spec["jobs"]
        ]
        return CommandResult(0, json.dumps({"hops": hops}))

    async def apply_change(self, change: dict) -> CommandResult:  # pragma: no cover
        raise AssertionError("planning applies nothing")

    async def close(self) -> None:
        return None


def _plan() -> ActionPlan:
    return ActionPlan(kind="reroute", element="spine2", reason="", steps=[])


SPINE2 = sp.Avoided("spine2", "spine2")


async def plan_steering(inv: Inventory, runner: Fabric, options: steer.SteerOptions, plan):
    fabric, pairs = steer.fabric_pairs(inv, SPINE2)
    return await steer.plan_host_steering(fabric, SPINE2, pairs, runner, options, plan)


async def test_plan_installs_only_ports_whose_both_ways_avoid_the_spine() -> None:
    runner, plan = Fabric(), _plan()
    options = steer.SteerOptions(services=(sp.Service("tcp", 5201),), pool=8)
    steps = await plan_steering(_inventory(), runner, options, plan)
    assert [s.host for s in steps] == ["a1", "b1"]
    for entry in plan.steering["pools"]:
        assert len(entry["ports"]) == 8
        assert all(runner.spine_of(p, 5201) == "spine1" for p in entry["ports"])
    table = steer.table_name(plan.id)
    assert steps[0].undo_argv == ("nft", f"add table ip {table} ; delete table ip {table}")
    assert set(plan.prior) == {"nft:a1", "nft:b1"}


async def test_roce_sets_are_forward_only_and_plan_no_step() -> None:
    plan = _plan()
    options = steer.SteerOptions(roce=True, pool=5)
    steps = await plan_steering(_inventory(), Fabric(), options, plan)
    assert steps == [] and not plan.prior
    sets = plan.steering["roce"]
    assert {(e["host"], e["peer"], e["dport"]) for e in sets} == {
        ("a1", "b1", 4791),
        ("b1", "a1", 4791),
    }
    assert all((p + 4791) % 3 and len(e["ports"]) == 5 for e in sets for p in e["ports"])


async def test_refusals_are_one_line() -> None:
    inv, tcp = _inventory(), steer.SteerOptions(services=(sp.Service("tcp", 5201),))
    with pytest.raises(InputError, match="no two hosts on different leaves"):
        lone = Inventory(hosts=inv.hosts[:1], switches=inv.switches)
        steer.fabric_pairs(lone, SPINE2)
    with pytest.raises(InputError, match="needs nftables and root"):
        await plan_steering(inv, Fabric(nft=False), tcp, _plan())
    with pytest.raises(CwctlError, match="too few healthy source ports") as caught:
        await plan_steering(inv, Fabric(all_on="spine2"), tcp, _plan())
    assert caught.value.exit_code == EXIT_PROBLEMS and "\n" not in str(caught.value)
