"""Path records: decoding, refusal of malformed or forged input, and the path table."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cwctl.errors import RecordError
from cwctl.records import (
    PathRecord,
    PathTable,
    decode_path,
    encode_line,
    hop_switches,
    parse_line,
)
from cwctl.records.path import MAX_HOPS
from cwctl.scan.collection import HostInfo
from cwctl.transport.hostrun import Collector, HostRun

T0 = 1_700_000_000_000_000_000


def record(**changes: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "type": "path",
        "v": 1,
        "host": "gpu-001",
        "peer": "gpu-005",
        "role": "probe",
        "nic": "eth1",
        "src": "10.1.1.2",
        "sport": 40001,
        "dst": "10.1.2.3",
        "dport": 50000,
        "proto": "udp",
        "hops": ["10.0.1.1", None, "10.0.9.3"],
        "complete": True,
        "t_ns": T0,
        "cached": False,
    }
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not _DROP}


_DROP = object()


def test_the_documented_example_decodes_and_round_trips() -> None:
    path = decode_path(parse_line(encode_line(record())))
    assert path.hops == ("10.0.1.1", None, "10.0.9.3")
    assert (path.host, path.peer, path.role, path.nic) == ("gpu-001", "gpu-005", "probe", "eth1")
    assert path.flow_port == 40001 and path.known == 2 and path.complete
    assert path.to_json() == record()
    assert decode_path(path.to_json()) == path


def test_nic_is_optional_and_addresses_become_canonical() -> None:
    path = decode_path(record(nic=_DROP, src="2001:DB8::0001", dst="2001:db8::2", hops=[]))
    assert path.nic is None and path.src == "2001:db8::1" and path.hops == ()
    assert "nic" not in path.to_json()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"v": 2}, "unsupported path record version 2"),
        ({"v": True}, "unsupported path record version True"),
        ({"host": ""}, "path key 'host' must be a non-empty name"),
        ({"peer": _DROP}, "path key 'peer' must be a non-empty name, got None"),
        ({"peer": "gpu-001"}, "path from 'gpu-001' to itself"),
        ({"role": "forward"}, "path key 'role' must be one of probe, reply, got 'forward'"),
        ({"proto": "tcp"}, "path key 'proto' must be one of udp"),
        ({"nic": 3}, "path key 'nic' must be a non-empty name, got 3"),
        ({"src": "gpu-001"}, "path key 'src' must be an IP address, got 'gpu-001'"),
        ({"dst": "10.1.1.2"}, "path from 10.1.1.2 to itself"),
        ({"sport": 0}, "path key 'sport' must be a port in [1, 65535], got 0"),
        ({"dport": 70000}, "path key 'dport' must be a port"),
        ({"dport": True}, "path key 'dport' must be a port"),
        ({"hops": "10.0.1.1"}, "path key 'hops' must be a list of at most 64"),
        ({"hops": ["10.0.0.1"] * (MAX_HOPS + 1)}, "got 65 hops"),
        ({"hops": ["10.0.1.1", "spine1"]}, "path key 'hops[1]' must be an IP address"),
        ({"hops": [0]}, "path key 'hops[0]' must be an IP address, got 0"),
        ({"complete": 1}, "path key 'complete' must be true or false, got 1"),
        ({"cached": _DROP}, "path key 'cached' must be true or false, got None"),
        ({"t_ns": -5}, "path key 't_ns' must be an integer"),
        ({"t_ns": 2**70}, "path key 't_ns' must be an integer"),
    ],
)
def test_malformed_records_are_refused_in_one_line(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RecordError) as info:
        decode_path(record(**changes), where="gpu-001 line 7")
    text = str(info.value)
    assert text.startswith("gpu-001 line 7: ") and message in text and "\n" not in text


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(sorted(record())), _JSON, max_size=6))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_fuzzed_fields_give_a_record_or_one_line_error(changes: dict[str, Any]) -> None:
    """Any JSON value in any field: a valid record, or one RecordError line; never a crash."""
    try:
        path = decode_path(record(**changes), where="fuzz")
    except RecordError as exc:
        assert str(exc).startswith("fuzz: ") and "\n" not in str(exc)
    else:
        assert decode_path(json.loads(json.dumps(path.to_json()))) == path


@given(st.dictionaries(st.text(max_size=8), _JSON, max_size=8))
@settings(max_examples=100)
def test_fuzzed_objects_never_crash(rec: dict[str, Any]) -> None:
    with contextlib.suppress(RecordError):
        decode_path(rec)


def path(
    host: str = "a",
    peer: str = "b",
    role: str = "probe",
    port: int = 40001,
    t_ns: int = T0,
    hops: tuple[str | None, ...] = ("10.0.0.1",),
    nic: str | None = None,
) -> PathRecord:
    sport, dport = (port, 50000) if role == "probe" else (50000, port)
    return PathRecord(
        host=host,
        peer=peer,
        role=role,  # type: ignore[arg-type]
        src="10.9.0.1",
        sport=sport,
        dst="10.9.0.2",
        dport=dport,
        hops=hops,
        complete=True,
        t_ns=t_ns,
        nic=nic,
    )


def test_table_gives_forward_and_reverse_of_a_probe_flow() -> None:
    fwd = path("a", "b", "probe", 40001, hops=("10.0.0.1", "10.0.9.1"))
    rev = path("b", "a", "reply", 40001, hops=("10.0.0.2", "10.0.9.2"))
    other = path("a", "b", "probe", 40002)
    table = PathTable.of([fwd, rev, other])
    assert table.forward("a", "b", 40001) == fwd
    assert table.reverse("a", "b", 40001) == rev
    assert table.forward("b", "a", 40001) is None  # b never traced towards a from 40001
    assert table.reverse("a", "b", 40002) is None
    assert table.flows() == {("a", "b", 40001), ("a", "b", 40002)}
    assert len(table) == 3 and set(table) == {fwd, rev, other}


def test_table_keeps_the_newest_trace_of_a_tuple() -> None:
    old = path(t_ns=T0, hops=("10.0.0.1", "10.0.9.1"))
    new = path(t_ns=T0 + 1, hops=("10.0.0.1", "10.0.9.2"))
    assert PathTable.of([old, new]).forward("a", "b", 40001) == new
    assert PathTable.of([new, old]).forward("a", "b", 40001) == new


def test_table_picks_the_nic_asked_for() -> None:
    rail0 = path(nic="eth0", hops=("10.0.0.1",))
    rail1 = path(nic="eth1", hops=("10.0.1.1",))
    table = PathTable.of([rail0, rail1])
    assert table.forward("a", "b", 40001, nic="eth1") == rail1
    assert table.forward("a", "b", 40001, nic="eth0") == rail0
    assert table.forward("a", "b", 40001, nic="eth2") is None
    assert table.forward("a", "b", 40001) in (rail0, rail1)


def test_hops_name_switches_only_through_the_address_map() -> None:
    p = path(hops=("10.0.0.1", None, "10.0.9.9", "10.0.9.1"))
    assert hop_switches(p, {"10.0.0.1": "leaf1", "10.0.9.1": "spine1"}) == [
        "leaf1",
        None,
        None,
        "spine1",
    ]


def test_the_record_stream_takes_a_hosts_own_paths_and_refuses_forged_ones() -> None:
    collector = Collector(["gpu-001", "gpu-005"], None)
    run = HostRun(HostInfo("gpu-001", "10.1.1.2"), collector)
    run.handle(encode_line(record()).encode())
    assert run.status.status == "ok"
    assert collector.paths.forward("gpu-001", "gpu-005", 40001) is not None
    forged = HostRun(HostInfo("gpu-005", "10.1.2.3"), collector)
    forged.handle(encode_line(record(t_ns=T0 + 5, hops=[])).encode())
    assert forged.status.status == "error"
    assert "path traced by 'gpu-001', not this host" in (forged.status.error or "")
    assert collector.paths.forward("gpu-001", "gpu-005", 40001).hops[0] == "10.0.1.1"  # type: ignore[union-attr]
    bad = HostRun(HostInfo("gpu-001", "10.1.1.2"), collector)
    bad.handle(encode_line(record(hops=["x"])).encode())
    assert bad.status.status == "error" and "hops[0]" in (bad.status.error or "")


class _Reference:
    """The table as a dict per traced tuple of a dict per NIC (its first, plain form)."""

    def __init__(self) -> None:
        self.by: dict[tuple[str, str, str, int], dict[str | None, PathRecord]] = {}

    def add(self, p: PathRecord, force: bool) -> None:
        per = self.by.setdefault((p.host, p.peer, p.role, p.flow_port), {})
        old = per.get(p.nic)
        if force or old is None or (old.t_ns, old.known) <= (p.t_ns, p.known):
            per[p.nic] = p

    def get(self, key: tuple[str, str, str, int], nic: str | None) -> PathRecord | None:
        per = self.by.get(key)
        if not per:
            return None
        if nic in per:
            return per[nic]
        if nic is None or None in per:
            return per.get(None) or next(iter(per.values()))
        return None


_TRACES = st.tuples(
    st.sampled_from(["probe", "reply"]),
    st.sampled_from([40001, 40002]),
    st.sampled_from([None, "eth0", "eth1"]),
    st.integers(1, 4),  # t_ns
    st.booleans(),  # the spine answered
    st.booleans(),  # replace (a path cache's remember) rather than add
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_TRACES, max_size=25))
def test_path_table_keeps_what_a_table_per_nic_keeps(traces: list[Any]) -> None:
    table, ref = PathTable(), _Reference()
    for role, port, nic, t_ns, known, force in traces:
        p = _traced(role, port, nic, t_ns, known)
        (table.replace if force else table.add)(p)
        ref.add(p, force)
    kept = [p for per in ref.by.values() for p in per.values()]
    assert list(table) == kept  # in the same order, too
    assert len(table) == sum(len(per) for per in ref.by.values())
    for port in (40001, 40002):
        for nic in (None, "eth0", "eth1", "eth9"):
            assert table.forward("a", "b", port, nic) == ref.get(("a", "b", "probe", port), nic)
            assert table.reverse("b", "a", port, nic) == ref.get(("a", "b", "reply", port), nic)


@settings(max_examples=100, deadline=None)
@given(st.lists(_TRACES, max_size=25))
def test_path_table_of_is_add_in_order(traces: list[Any]) -> None:
    records = [_traced(role, port, nic, t_ns, known) for role, port, nic, t_ns, known, _ in traces]
    added = PathTable()
    for p in records:
        added.add(p)
    assert list(PathTable.of(records)) == list(added)
    assert PathTable.of(records).flows() == added.flows()


def _traced(role: str, port: int, nic: str | None, t_ns: int, known: bool) -> PathRecord:
    return PathRecord(
        host="a", peer="b", role=role, src="10.1.0.1",  # type: ignore[arg-type]
        sport=port if role == "probe" else 50000, dst="10.1.0.2",
        dport=50000 if role == "probe" else port, hops=(None, "10.0.0.2" if known else None, None),
        complete=True, t_ns=t_ns, nic=nic,
    )  # fmt: skip
