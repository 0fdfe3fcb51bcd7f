"""routes: the spine a flow direction crossed, as its discovered path names it.

``known_spines`` matches flows to the index by integer codes; here it is checked
against the plain reading of its rule (a dictionary lookup per flow: the NIC's path,
else the one traced without a NIC name) over random fleets, NICs and indexes."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.records import PathRecord
from cwctl.telemetry.routes import PathAges, known_spines, route_index

HOSTS = ["h0", "h1", "h2", "h3", "h1"]  # a name written twice: both its codes are that host
NICS = ["eth0", "eth1", "eth0"]
SPINES = ["s1", "s2", "s3"]
KEY = st.tuples(
    st.sampled_from(["h0", "h1", "h2", "h3", "x9"]),
    st.sampled_from(["h0", "h1", "h2", "h3"]),
    st.sampled_from(["probe", "reply"]),
    st.sampled_from([40000, 40001, 40007]),
    st.sampled_from([None, "eth0", "eth1", "eth7"]),
)


def _plain(
    src: list[int], dst: list[int], sport: list[int], nic: list[int], rev: list[bool],
    index: dict[Any, str],
) -> list[int]:  # fmt: skip
    out = []
    for a, b, port, code, r in zip(src, dst, sport, nic, rev, strict=True):
        role = "reply" if r else "probe"
        name = NICS[code] if 0 <= code < len(NICS) else None
        spine = index.get((HOSTS[a], HOSTS[b], role, port, name))
        if spine is None and name is not None:
            spine = index.get((HOSTS[a], HOSTS[b], role, port, None))
        out.append(-1 if spine is None else SPINES.index(spine) if spine in SPINES else -1)
    return out


@settings(max_examples=200, deadline=None)
@given(
    index=st.dictionaries(KEY, st.sampled_from([*SPINES, "core9"]), max_size=30),
    flows=st.lists(
        st.tuples(
            st.integers(0, len(HOSTS) - 1),
            st.integers(0, len(HOSTS) - 1),
            st.sampled_from([40000, 40001, 40002, 40007]),
            st.integers(-1, len(NICS)),
            st.booleans(),
        ),
        max_size=40,
    ),
)
def test_known_spines_reads_the_index_as_a_lookup_per_flow(index: dict, flows: list) -> None:
    src, dst, sport, nic, rev = (list(c) for c in zip(*flows, strict=True)) if flows else ([],) * 5
    got = known_spines(
        HOSTS, NICS, np.array(src, np.int64), np.array(dst, np.int64),
        np.array(sport, np.int64), np.array(nic, np.int64), np.array(rev, bool), index, SPINES,
    )  # fmt: skip
    assert got.tolist() == _plain(src, dst, sport, nic, rev, index)


def test_route_index_keeps_the_newest_record_naming_one_spine() -> None:
    where = {"10.0.0.1": "s1", "10.0.0.2": "s2", "10.9.0.1": "leaf1"}

    def rec(t_ns: int, hops: tuple[str | None, ...], role: str = "probe") -> PathRecord:
        return PathRecord(
            host="h0", peer="h1", role=role, src="10.1.0.1",  # type: ignore[arg-type]
            sport=40001 if role == "probe" else 50000, dst="10.1.0.2",
            dport=50000 if role == "probe" else 40001, hops=hops, complete=True, t_ns=t_ns,
        )  # fmt: skip

    records = [
        rec(1, ("10.9.0.1", "10.0.0.1", None)),
        rec(3, ("10.9.0.1", "10.0.0.2", None)),  # the newest naming one: s2
        rec(4, (None, None, None)),  # names none: unknown, not newer
        rec(5, ("10.0.0.1", "10.0.0.2", None)),  # names two: unknown
        rec(2, (None, "10.0.0.1", None), role="reply"),
    ]
    assert route_index(records, where, SPINES) == {
        ("h0", "h1", "probe", 40001, None): "s2",
        ("h0", "h1", "reply", 40001, None): "s1",
    }


def test_route_index_discounts_aged_records_and_counts_route_changes() -> None:
    where = {"10.0.0.1": "s1", "10.0.0.2": "s2"}
    minute = 60 * 10**9
    now = 100 * minute

    def rec(t_ns: int, spine_addr: str, port: int) -> PathRecord:
        return PathRecord(
            host="h0", peer="h1", role="probe", src="10.1.0.1", sport=port, dst="10.1.0.2",
            dport=50000, hops=(None, spine_addr, None), complete=True, t_ns=t_ns,
        )  # fmt: skip

    records = [
        rec(now - 20 * minute, "10.0.0.1", 40001),  # older than 10 min: discounted
        rec(now - 5 * minute, "10.0.0.1", 40002),  # the route changed since ...
        rec(now - 1 * minute, "10.0.0.2", 40002),  # ... this newer trace says
        rec(now - 2 * minute, "10.0.0.2", 40003),  # two traces agree: no change
        rec(now - 1 * minute, "10.0.0.2", 40003),
    ]
    ages = PathAges()
    index = route_index(records, where, SPINES, now_ns=now, ages=ages)
    assert index == {
        ("h0", "h1", "probe", 40002, None): "s2",
        ("h0", "h1", "probe", 40003, None): "s2",
    }
    assert (ages.records, ages.aged, ages.superseded) == (5, 1, 1)
    assert ages.to_json()["max_age_s"] == 600.0
    # without a scan time nothing is aged; the order records come in does not matter
    again = PathAges()
    assert len(route_index(records[::-1], where, SPINES, ages=again)) == 3
    assert (again.aged, again.superseded) == (0, 1)
