"""Known paths between scans: what stays known, and what makes a path stale."""

from __future__ import annotations

from dataclasses import replace

from cwctl.records import PathRecord, PathTable, ProbeRecord, ProbeTableBuilder
from cwctl.scan.collection import Collection, HostInfo
from cwctl.scan.pathcache import PathCache

T0 = 1_700_000_000_000_000_000
ADDR = {"a": [("10.0.0.1", 5000, [40001, 40002])], "b": [("10.0.0.2", 6000, [41001, 41002])]}


def pair(sport: int, t_ns: int = T0, spine: str | None = "10.9.0.1") -> list[PathRecord]:
    fwd = PathRecord(
        host="a",
        peer="b",
        role="probe",
        src="10.0.0.1",
        sport=sport,
        dst="10.0.0.2",
        dport=6000,
        hops=(None, spine, None),
        complete=True,
        t_ns=t_ns,
    )
    rev = replace(fwd, host="b", peer="a", role="reply", src="10.0.0.2", sport=6000)
    rev = replace(rev, dst="10.0.0.1", dport=sport)
    return [fwd, rev]


def collection(paths: list[PathRecord], rtt_ns: int = 50_000) -> Collection:
    b = ProbeTableBuilder(["a", "b"])
    for sport in (40001, 40002):
        b.add(ProbeRecord("a", "b", sport, 0, 0, 0, "sw", T0, T0 + 10, T0 + 20, T0 + 20 + rtt_ns))
    return Collection(
        source="local",
        hosts=[HostInfo("a", "10.0.0.1"), HostInfo("b", "10.0.0.2")],
        table=b.build(),
        duration_s=1.0,
        paths=PathTable.of(paths),
        hello={h: {"port": a[0][1], "sports": a[0][2]} for h, a in ADDR.items()},
    )


def both(*sports: int) -> set[tuple[str, str, str, int]]:
    """The forward and reverse traces of the flows a -> b from these source ports."""
    return {("probe", "a", "b", s) for s in sports} | {("reply", "b", "a", s) for s in sports}


def test_whole_fresh_paths_of_the_same_tuples_are_known() -> None:
    cache = PathCache(revalidate=0.0)
    cache.remember(collection(pair(40001) + pair(40002)))
    assert cache.known(T0 + 10**9, ADDR) == both(40001, 40002)
    assert cache.requested_ports("a") == {"port": [5000], "sports": [40001, 40002]}


def test_stale_paths_are_traced_again() -> None:
    cache = PathCache(revalidate=0.0, max_age_s=60)
    cache.remember(collection(pair(40001, spine=None) + pair(40002)))
    assert cache.known(T0, ADDR) == both(40002)  # an unknown spine is not known
    assert cache.known(T0 + 61 * 10**9, ADDR) == set()  # too old
    moved = {**ADDR, "b": [("10.0.0.2", 6001, [41001])]}
    assert cache.known(T0, moved) == set()  # the answering port changed: another tuple


def test_oldest_share_is_revalidated() -> None:
    cache = PathCache(revalidate=0.5)
    cache.remember(collection(pair(40001, t_ns=T0) + pair(40002, t_ns=T0 + 5)))
    assert cache.known(T0 + 10, ADDR) == both(40002)


def test_a_changed_delay_signature_makes_a_path_stale() -> None:
    cache = PathCache(revalidate=0.0)
    cache.remember(collection(pair(40001) + pair(40002), rtt_ns=50_000))
    cache.remember(collection([], rtt_ns=52_000))  # within the noise: still known
    assert cache.known(T0, ADDR) == both(40001, 40002)
    cache.remember(collection([], rtt_ns=400_000))  # another path, or a queue: trace again
    assert cache.known(T0, ADDR) == set()


def test_cached_paths_fill_a_scan_that_did_not_trace_them() -> None:
    cache = PathCache(revalidate=0.0)
    cache.remember(collection(pair(40001) + pair(40002)))
    scan = collection(pair(40002, t_ns=T0 + 7))  # this scan traced 40002 again
    cache.fill(scan, both(40001, 40002))
    assert scan.paths.forward("a", "b", 40001).cached  # type: ignore[union-attr]
    assert scan.paths.reverse("a", "b", 40001).cached  # type: ignore[union-attr]
    assert not scan.paths.forward("a", "b", 40002).cached  # type: ignore[union-attr]


def test_a_weaker_trace_does_not_erase_a_known_path_but_a_different_router_does() -> None:
    cache = PathCache(revalidate=0.0)
    cache.remember(collection(pair(40001)))
    cache.remember(collection(pair(40001, t_ns=T0 + 9, spine=None)))  # rate-limited: no news
    assert cache.paths.forward("a", "b", 40001).hops[1] == "10.9.0.1"  # type: ignore[union-attr]
    cache.remember(collection(pair(40001, t_ns=T0 + 10, spine="10.9.0.2")))  # moved
    assert cache.paths.forward("a", "b", 40001).hops[1] == "10.9.0.2"  # type: ignore[union-attr]
    scan = collection(pair(40001, t_ns=T0 + 11, spine=None))
    cache.fill(scan, both(40001))  # this scan's answer was lost: the known path stands in
    assert scan.paths.forward("a", "b", 40001).hops[1] == "10.9.0.2"  # type: ignore[union-attr]
    assert scan.paths.forward("a", "b", 40001).cached  # type: ignore[union-attr]


def test_a_changed_fabric_forgets_what_was_learnt() -> None:
    from types import SimpleNamespace

    from cwctl.scan.request import ScanRequest
    from cwctl.session import ScanSession

    cache = PathCache(revalidate=0.0)
    cache.remember(collection(pair(40001)))
    assert cache.known(T0, ADDR)
    session = ScanSession(ScanRequest(), source=SimpleNamespace(name="ssh", paths=cache))  # type: ignore[arg-type]
    session.fabric_changed()  # e.g. a reroute was applied
    assert cache.known(T0, ADDR) == set() and len(cache.paths) == 0
    assert cache.requested_ports("a")  # the tuples may stay; their paths are relearnt
