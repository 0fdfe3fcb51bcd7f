"""Moving open flows at the hosts: the socket tables read, which end is translated, the
paired nft maps, and a plan's order (every restoring table before any rewriting one).

The real judge is tests/integration/test_move_testbed.py (real nftables, a real TCP
connection, the kernel's own hash); here, what planning decides from what it reads."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cwctl.actions import moveflows, steer
from cwctl.actions import steerports as sp
from cwctl.actions.flowtable import Flow, find_flows, parse_devices, parse_sockets
from cwctl.actions.plan import ActionPlan
from cwctl.actions.runners import SECTION, CommandResult, split_together, together_argv
from cwctl.errors import EXIT_PROBLEMS, CwctlError
from cwctl.inventory import Host, Inventory, Switch

# real `ss -H -n -a -t -u` output, from a namespace holding these sockets
SS = """\
udp ESTAB  0      0      10.7.0.1:40001 10.7.0.2:9000
udp UNCONN 0      0      10.7.0.1:9000   0.0.0.0:*
tcp LISTEN 0      128     0.0.0.0:5201   0.0.0.0:*
tcp ESTAB  0      0      10.7.0.1:45001 10.7.0.2:5201
tcp ESTAB  0      0      10.7.0.1:5201  10.7.0.2:45100
tcp ESTAB  0      0      192.168.0.1:22  192.168.0.9:50000
tcp LISTEN 0      128           *:22           *:*
tcp ESTAB  0      0      [::ffff:10.7.0.1]:46000 [::ffff:10.7.0.2]:5202
"""
PEER_SS = """\
tcp LISTEN 0 128 0.0.0.0:5202 0.0.0.0:*
tcp ESTAB 0 0 10.7.0.2:5201 10.7.0.1:45001
tcp ESTAB 0 0 10.7.0.2:45100 10.7.0.1:5201
tcp ESTAB 0 0 10.7.0.2:5202 10.7.0.1:46000
"""
ADDRESS = {"a": "10.7.0.1", "b": "10.7.0.2"}


def test_sockets_parse_ipv4_mapped_wildcards_and_skip_the_rest() -> None:
    socks = parse_sockets(SS + "garbage line\ntcp ESTAB 0 0 [fe80::1]:1 [fe80::2]:2\n")
    assert len(socks) == 8
    assert socks[1].peer is None and socks[1].local == ("10.7.0.1", 9000)
    assert socks[7].local == ("10.7.0.1", 46000) and socks[7].peer == ("10.7.0.2", 5202)


def test_each_flow_once_with_the_listening_end_as_its_service() -> None:
    flows = find_flows({"a": SS, "b": PEER_SS}, ADDRESS)
    assert flows == [
        Flow("tcp", "a", 45001, "b", 5201),  # a listens on 5201 too, but b's 5201 is the end
        Flow("tcp", "a", 46000, "b", 5202),  # b listens on 5202
        Flow("tcp", "b", 45100, "a", 5201),  # a listens on 5201: b is the connecting end
        Flow("udp", "a", 40001, "b", 9000),  # seen from one end only: ordered by name
    ]


def test_a_nated_connection_is_taken_with_the_port_the_wire_carries() -> None:
    """a's socket is 45001; a SYN rule made it 61005 on the wire, which b lists."""
    a = "tcp ESTAB 0 0 10.7.0.1:45001 10.7.0.2:5201\n"
    b = "tcp LISTEN 0 128 0.0.0.0:5201 0.0.0.0:*\ntcp ESTAB 0 0 10.7.0.2:5201 10.7.0.1:61005\n"
    assert find_flows({"a": a, "b": b}, ADDRESS) == [Flow("tcp", "a", 61005, "b", 5201)]
    assert find_flows({"a": a}, ADDRESS) == [Flow("tcp", "a", 45001, "b", 5201)]  # b unread


def test_flows_outside_the_pairs_and_the_management_network_are_left_out() -> None:
    flows = find_flows({"a": SS, "b": PEER_SS}, ADDRESS, pairs=[("b", "a")])
    assert flows == [Flow("tcp", "b", 45100, "a", 5201)]


@given(st.text(max_size=400))
def test_no_socket_table_makes_finding_flows_raise(text: str) -> None:
    find_flows({"a": text, "b": text + "\n" + PEER_SS}, ADDRESS)


def test_devices_by_address() -> None:
    text = (
        "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n"
        "3: eth1    inet 10.7.0.1/30 brd 10.7.0.3 scope global eth1\\       valid_lft forever\n"
        '4: bad"name    inet 10.7.0.9/30 scope global x\n'
    )
    assert parse_devices(text) == {"127.0.0.1": "lo", "10.7.0.1": "eth1"}


def _translate(maps: moveflows.Maps, addr: str, sport: int, dport: int) -> tuple[int, int]:
    """What a host's chain does to one packet: the map lookups nft would make."""
    for name, entries in maps.items():
        field = name.split("_")[0]
        for a, s, d, new in entries:
            if (a, s, d) == (addr, sport, dport):
                return (new, dport) if field == "sport" else (sport, new)
    return sport, dport


def test_the_four_translations_carry_both_directions_and_the_sockets_see_their_ports() -> None:
    flow = Flow("tcp", "a", 45001, "b", 5201)
    maps = moveflows.host_maps([moveflows.Move(flow, 61003)], ADDRESS)
    a, b = ADDRESS["a"], ADDRESS["b"]
    wire = _translate(maps["a"]["out"], b, 45001, 5201)  # a sends
    assert wire == (61003, 5201)
    assert _translate(maps["b"]["in"], a, *wire) == (45001, 5201)  # b's socket sees 45001
    back = _translate(maps["b"]["out"], a, 5201, 45001)  # b answers
    assert back == (5201, 61003)
    assert _translate(maps["a"]["in"], b, *back) == (5201, 45001)
    assert _translate(maps["a"]["out"], b, 45002, 5201) == (45002, 5201)  # another flow


def test_the_chain_script_is_one_transaction_with_a_map_per_direction() -> None:
    flow = Flow("udp", "a", 40001, "b", 9000)
    maps = moveflows.host_maps([moveflows.Move(flow, 61000)], ADDRESS)
    script = moveflows.chain_script("cwctl_steer_x_out", "egress", "eth1", maps["a"]["out"])
    assert script == " ; ".join([
        "add table netdev cwctl_steer_x_out",
        'add chain netdev cwctl_steer_x_out out { type filter hook egress device "eth1" '
        "priority 300 ; policy accept ; }",
        "add map netdev cwctl_steer_x_out sport_udp { type ipv4_addr . inet_service . "
        "inet_service : inet_service ; }",
        "add element netdev cwctl_steer_x_out sport_udp { 10.7.0.2 . 40001 . 9000 : 61000 }",
        "add rule netdev cwctl_steer_x_out out udp sport set ip daddr . udp sport . "
        "udp dport map @sport_udp counter",
    ])  # fmt: skip


# --- planning, over hosts that answer like a fabric would (the runner below) -------------


def _inventory() -> Inventory:
    spine = {"spine1": ("10.9.1.1", "10.9.1.2"), "spine2": ("10.9.2.1", "10.9.2.2")}
    return Inventory(
        hosts=(
            Host("a", "192.168.0.1", leaf="leaf1", probe_address="10.7.0.1"),
            Host("b", "192.168.0.2", leaf="leaf2", probe_address="10.7.0.2"),
        ),
        switches=(
            Switch("spine1", "spine", addresses=spine["spine1"]),
            Switch("spine2", "spine", addresses=spine["spine2"]),
            Switch("leaf1", "leaf", ("spine1", "spine2")),
            Switch("leaf2", "leaf", ("spine1", "spine2")),
        ),
    )


class Hosts:
    """Two hosts with the socket tables above; a tuple crosses spine2 when its ports'
    sum is a multiple of 3 (both ways alike)."""

    def __init__(self, tables: dict[str, str] | None = None) -> None:
        self.tables = tables or {"a": SS, "b": PEER_SS}

    async def run(self, host: str, argv: list[str]) -> CommandResult:
        if argv[0] == "sh":  # several reads in one session: each answered as if alone
            return await _as_shell(self.run, host, argv[2])
        if argv[0] == "ss":
            return CommandResult(0, self.tables[host])
        if argv[0] == "ip":
            dev = "eth1" if host == "a" else "ens5"
            return CommandResult(0, f"3: {dev}    inet {ADDRESS[host]}/30 scope global\n")
        if list(argv[:3]) == ["nft", "list", "tables"]:
            return CommandResult(0, "")
        spec = json.loads(argv[-1])
        hops = ["10.9.2.1" if (s + d) % 3 == 0 else "10.9.1.1" for _, _, s, d in spec["jobs"]]
        return CommandResult(0, json.dumps({"hops": hops}))

    async def apply_change(self, change: dict) -> CommandResult:  # pragma: no cover
        raise AssertionError("planning applies nothing")

    async def close(self) -> None:
        return None


async def _as_shell(run: Any, host: str, script: str) -> CommandResult:
    """What ``sh -c script`` prints, for a script of ``cmd; printf MARK $?`` pairs (as
    a POSIX shell runs it), each command answered by ``run``."""
    out, rc = [], 0
    for part in script.split("; "):
        words = shlex.split(part)
        if words[0] == "printf":
            out.append(words[1].replace("\\n", "\n").replace("%d", str(rc)))
        else:
            result = await run(host, words)
            rc = result.rc
            out.append(result.stdout)
    return CommandResult(0, "".join(out))


async def _plan_moves(runner: Hosts, pool: int = 8) -> tuple[ActionPlan, list]:
    suspect = sp.Avoided("spine2", "spine2")
    plan = ActionPlan(kind="reroute", element="spine2", reason="", steps=[])
    fabric, pairs = steer.fabric_pairs(_inventory(), suspect)
    options = steer.SteerOptions(pool=pool)
    steps = await moveflows.plan_moves(fabric, suspect, pairs, runner, options, plan)
    return plan, steps


async def test_only_flows_on_the_suspect_move_each_to_its_own_healthy_port() -> None:
    plan, steps = await _plan_moves(Hosts())
    moved = {(m["host"], m["port"], m["dport"]): m["wire"] for m in plan.steering["moves"]}
    # 45001+5201 and 45100+5201 are multiples of 3 (spine2); 46000+5202, 40001+9000 are not
    assert set(moved) == {("a", 45001, 5201), ("b", 45100, 5201)}
    assert all((w + 5201) % 3 for w in moved.values())
    assert plan.steering["flows"] == 4 and plan.steering["kept"] == 2
    pools = {(p["host"], p["dport"]): p["ports"] for p in plan.steering["pools"]}
    assert moved[("a", 45001, 5201)] not in pools[("a", 5201)]  # new connections elsewhere
    table = steer.table_name(plan.id)
    tables = [re.findall(r"add table (\S+ \S+)", s.argv[1]) for s in steps]
    assert tables == [  # a's and b's SYN rules (services seen) go with their rewriting
        [f"netdev {table}_in"],
        [f"netdev {table}_in"],
        [f"netdev {table}_out", f"ip {table}"],
        [f"netdev {table}_out", f"ip {table}"],
    ]
    for step in steps:  # each undo deletes exactly the tables its step adds
        assert re.findall(r"delete table (\S+ \S+)", step.undo_argv[1]) == re.findall(
            r"add table (\S+ \S+)", step.argv[1]
        )
    assert 'device "ens5"' in steps[1].argv[1] and 'device "eth1"' in steps[0].argv[1]
    assert set(plan.prior) == {"nft:a", "nft:b"}


async def test_no_open_flow_is_refused_naming_the_way_to_steer_new_ones() -> None:
    with pytest.raises(CwctlError, match=r"no TCP or UDP flow .* \(--port\)") as caught:
        await _plan_moves(Hosts({"a": "", "b": ""}))
    assert caught.value.exit_code == EXIT_PROBLEMS


async def test_verification_traces_every_moved_flows_wire_port_both_ways() -> None:
    runner = Hosts()
    plan, _ = await _plan_moves(runner)
    traced: list[tuple[str, int, int]] = []

    class Recording(Hosts):
        async def run(self, host: str, argv: list[str]) -> CommandResult:
            if argv[0] not in ("sh", "ss", "ip", "nft"):
                traced.extend((host, s, d) for _, _, s, d in json.loads(argv[-1])["jobs"])
            return await super().run(host, argv)

    verdict = await steer.verify_steering(plan, _inventory(), Recording())
    for m in plan.steering["moves"]:
        assert (m["host"], m["wire"], m["dport"]) in traced  # forward, from the wire port
        assert (m["peer"], m["dport"], m["wire"]) in traced  # and the reply
    assert verdict.gone and verdict.ports >= len(plan.steering["moves"])


async def test_a_flow_whose_trace_never_answers_is_moved_and_counted() -> None:
    class Silent(Hosts):
        async def run(self, host: str, argv: list[str]) -> CommandResult:
            result = await super().run(host, argv)
            if argv[0] in ("sh", "ss", "ip", "nft"):
                return result
            jobs = json.loads(argv[-1])["jobs"]
            hops = json.loads(result.stdout)["hops"]
            silent = [
                None if s == 46000 or d == 46000 else h
                for (_, _, s, d), h in zip(jobs, hops, strict=True)
            ]
            return CommandResult(0, json.dumps({"hops": silent}))

    plan, _ = await _plan_moves(Silent())
    moved = {(m["host"], m["port"]) for m in plan.steering["moves"]}
    assert ("a", 46000) in moved and plan.steering["unknown"] == 1


@given(
    st.lists(
        st.tuples(
            st.text(
                st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                max_size=40,
            ).filter(lambda t: SECTION not in t),
            st.integers(0, 9),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_reads_run_together_in_one_real_shell_come_apart_as_each_printed(
    reads: list[tuple[str, int]],
) -> None:
    """Whatever each read prints (no final newline, empty, a blank line) and however it
    exits, a real ``sh`` running them together gives each one back as it printed."""
    argvs = [("sh", "-c", f'printf %s "$1"; exit {rc}', "sh", text) for text, rc in reads]
    ran = subprocess.run(together_argv(argvs), capture_output=True, check=True)
    stdout = ran.stdout.decode()  # (as SSH hands it over: no newline translation)
    assert split_together(stdout, len(reads)) == [(rc, text) for text, rc in reads]
    assert split_together(stdout, len(reads) + 1) is None  # cut short: not a view
