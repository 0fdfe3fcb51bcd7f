"""Seeing a collision: socket counters and cwctl's translations read off the hosts' own
output, each flow's rates, the load per directed link, and the imbalance worded as a
finding. The real judge is tests/integration/test_rebalance_testbed.py (real sockets,
the switches' own counters); here, what is computed from what was read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cwctl.actions import rebalance, steer
from cwctl.actions import uplinkload as ul
from cwctl.actions.flowtable import Flow

# real `ss -H -n -a -t -u -i` output (a loopback pair; the info line follows its socket)
SS_I = """\
tcp LISTEN 0      128    10.7.0.2:5201      0.0.0.0:*
\t bbr cwnd:10
tcp ESTAB  0      0      10.7.0.1:45001    10.7.0.2:5201
\t bbr wscale:10,10 rto:204 rtt:4.029/0.012 mss:47616 cwnd:13 bytes_sent:100000 \
bytes_acked:{acked} segs_out:5 bbr:(bw:30474233640bps,mrtt:0.013) send 170760827586bps \
rcv_rtt:0.023 minrtt:0.013 snd_wnd:95232
tcp ESTAB  0      0      10.7.0.2:5201    10.7.0.1:45001
\t bbr wscale:10,10 rto:200 rtt:0.023/0.011 ato:40 bytes_received:{received} \
rcv_rtt:0.023 minrtt:0.023
udp ESTAB  0      0      10.7.0.1:40001 10.7.0.2:9000
"""

# real `nft list ruleset` output of a moveflows rewriting table
RULESET = """\
table ip keep_me {
\tmap sport_tcp {
\t\ttype ipv4_addr . inet_service . inet_service : inet_service
\t\telements = { 10.9.9.9 . 1 . 2 : 3 }
\t}
}
table netdev cwctl_steer_20261206_165709_8312_out {
\tmap sport_tcp {
\t\ttype ipv4_addr . inet_service . inet_service : inet_service
\t\telements = { 10.7.0.2 . 45001 . 5201 : 61003,
\t\t\t     10.7.0.3 . 50001 . 5201 : 61004 }
\t}

\tchain out {
\t\ttype filter hook egress device "v0" priority 300; policy accept;
\t\ttcp sport set ip daddr . tcp sport . tcp dport map @sport_tcp counter packets 0 bytes 0
\t}
}
"""

FABRIC = steer.HostFabric(
    address={"a": "10.7.0.1", "b": "10.7.0.2", "c": "10.7.0.3", "d": "10.7.0.4"},
    leaf_of={"a": "leaf1", "c": "leaf1", "b": "leaf2", "d": "leaf2"},
    uplinks={"leaf1": ["spine1", "spine2"], "leaf2": ["spine1", "spine2"]},
    python={},
    switch_of_address={},
    spines={"spine1", "spine2"},
)


def test_counters_are_read_from_the_info_line_under_each_connected_socket() -> None:
    got = ul.parse_counters(SS_I.format(acked=100001, received=5000))
    assert set(got) == {
        (("10.7.0.1", 45001), ("10.7.0.2", 5201)),
        (("10.7.0.2", 5201), ("10.7.0.1", 45001)),
    }  # the listener and the UDP socket have none
    sender = got[(("10.7.0.1", 45001), ("10.7.0.2", 5201))]
    assert (sender.acked, sender.received, sender.rtt_ms, sender.minrtt_ms) == (
        100001, 0, 4.029, 0.013,
    )  # fmt: skip
    assert got[(("10.7.0.2", 5201), ("10.7.0.1", 45001))].received == 5000


@given(
    st.text(alphabet=st.sampled_from("tcp ESTAB\t 10.7.0.1:2 bytes_acked:rtt/\n9"), max_size=300)
)
def test_counters_never_raise_on_text_that_is_not_ss(text: str) -> None:
    assert isinstance(ul.parse_counters(text), dict)


def test_only_cwctl_rewriting_tables_give_wire_ports() -> None:
    assert ul.parse_translations(RULESET) == {
        ("tcp", "10.7.0.2", 45001, 5201): 61003,
        ("tcp", "10.7.0.3", 50001, 5201): 61004,
    }


def _seen(acked0: int, acked1: int, rules: str = "") -> dict[str, dict[str, str]]:
    table = {
        "a": (SS_I.format(acked=acked0, received=0), SS_I.format(acked=acked1, received=0)),
        "b": ("", ""),
    }
    return {
        "socket counters before": {h: t[0] for h, t in table.items()},
        "socket counters after": {h: t[1] for h, t in table.items()},
        "clock before": {"a": "100.0\n", "b": "100.0\n"},
        "clock after": {"a": "102.0\n", "b": "102.0\n"},
        "translations": {"a": rules, "b": ""},
    }


def test_a_flow_rate_is_its_bytes_over_the_hosts_own_interval_and_its_wire_port() -> None:
    flow = Flow("tcp", "a", 45001, "b", 5201)
    [r] = ul._rates([flow], FABRIC, _seen(1_000_000, 51_000_000))
    assert r.forward_bps == 50_000_000 * 8 / 2.0 and r.reverse_bps == 0.0
    assert (r.wire, r.translated) == (45001, False)
    assert r.queueing_us is not None and abs(r.queueing_us - 4016.0) < 1e-6
    assert r.id == "a:45001>b:5201"
    [moved] = ul._rates([flow], FABRIC, _seen(0, 1, RULESET))
    assert (moved.wire, moved.translated) == (61003, True)


def _flow(host: str, port: int, peer: str, bps: float, q: float | None = None) -> ul.FlowRate:
    return ul.FlowRate(Flow("tcp", host, port, peer, 5201), port, bps, bps / 100, q, False)


def test_loads_land_on_both_directions_of_the_traced_paths() -> None:
    placed = [
        (_flow("a", 1, "b", 100e6, 40.0), "spine2", "spine1"),
        (_flow("c", 2, "b", 90e6, 60.0), "spine2", "spine2"),
        (_flow("c", 3, "d", 0.5e6), "spine1", "spine1"),  # a mouse
    ]
    rows = {r.link: r for r in ul.link_loads(FABRIC, placed)}
    pairs = [(leaf, spine) for leaf in ("leaf1", "leaf2") for spine in ("spine1", "spine2")]
    assert set(rows) == {
        f"{a}>{b}" for leaf, spine in pairs for a, b in ((leaf, spine), (spine, leaf))
    }
    assert rows["leaf1>spine2"].bps == 190e6 and rows["leaf1>spine2"].elephants == 2
    assert rows["spine2>leaf2"].bps == 190e6
    assert rows["leaf2>spine1"].bps == 1e6 + 5e3  # a's replies, and the mouse's
    assert rows["leaf1>spine1"].elephants == 0 and rows["leaf1>spine1"].flows == 1
    assert rows["leaf1>spine2"].queueing_p50_us == 50.0
    ratios = ul.group_ratios({r.link: r.bps for r in rows.values()}, ul.groups(FABRIC))
    assert abs(ratios["leaf1 up"] - 190 / (190.5 / 2)) < 1e-9
    assert abs(ratios["leaf1 down"] - 1.005 / (1.905 / 2)) < 1e-9  # replies: 1 + 0.005, 0.9


def test_an_imbalance_is_named_as_a_finding_with_its_elephants_and_queueing() -> None:
    placed = [(_flow("a", 1, "b", 1.0e9, 30.0), "spine2", "spine2"),
              (_flow("c", 2, "b", 0.9e9, 50.0), "spine2", "spine2")]  # fmt: skip
    lines = ul.findings(ul.link_loads(FABRIC, placed), target=1.2)
    assert lines[0] == (
        "leaf1's uplink to spine2 carries 2 elephants (1.9 Gbit/s, queueing p50 40 us), its "
        "uplink to spine1 none (max/mean 2.00)"
    )
    assert any(
        line.startswith("leaf2's downlink from spine2 carries 2 elephants") for line in lines
    )
    even = [(_flow("a", 1, "b", 1e9), "spine1", "spine1"), (_flow("c", 2, "b", 1e9), "spine2",
                                                            "spine2")]  # fmt: skip
    assert ul.findings(ul.link_loads(FABRIC, even), target=1.2) == []


@given(st.lists(st.floats(0, 1e11), min_size=2, max_size=8))
def test_a_groups_ratio_is_between_one_and_its_size(values: list[float]) -> None:
    members = [f"l{i}" for i in range(len(values))]
    ratio = ul.group_ratios(dict(zip(members, values, strict=True)), {"g": members})["g"]
    assert 1.0 - 1e-9 <= ratio <= len(values) + 1e-9


def test_avoid_names_expand_to_the_directed_links_they_stand_for() -> None:
    sets = ul.groups(FABRIC)
    expand = rebalance.expand_avoid
    assert expand(frozenset({"spine2"}), sets) == {
        "leaf1>spine2", "spine2>leaf1", "leaf2>spine2", "spine2>leaf2"}  # fmt: skip
    assert expand(frozenset({"leaf1-spine2"}), sets) == {"leaf1>spine2", "spine2>leaf1"}
    assert expand(frozenset({"spine1>leaf2"}), sets) == {"spine1>leaf2"}
    try:
        expand(frozenset({"spine9"}), sets)
    except rebalance.InputError as exc:
        assert str(exc) == "--avoid spine9: no spine, leaf or leaf-spine link of this fabric"
    else:
        raise AssertionError("an unknown element was accepted")


def test_verified_means_within_target_or_half_the_predicted_gain() -> None:
    assert rebalance.balanced(2.0, 1.0, 1.19, 1.2)
    assert rebalance.balanced(2.0, 1.4, 1.7, 1.2)  # half of 0.6 gained
    assert not rebalance.balanced(2.0, 1.4, 1.8, 1.2)
