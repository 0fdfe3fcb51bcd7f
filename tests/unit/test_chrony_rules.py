"""Who ``cwctl sync`` feeds and why not; the operator's values; chronyc's CSV."""

from __future__ import annotations

import math

import pytest

from cwctl.chrony.check import HostCheck, choose_reference
from cwctl.chrony.chronyc import (
    parse_sources,
    parse_sourcestats,
    parse_tracking,
    poll_for,
    refclock_line,
)
from cwctl.chrony.rules import FeedRules, check_socket_template, decide
from cwctl.errors import InputError
from cwctl.scan.snapshot import FabricSnapshot, HostReport

T_REF = 1_800_000_000_000_000_000


def snap(*hosts: HostReport, reference: str = "a") -> FabricSnapshot:
    return FabricSnapshot("local", reference, 1.0, list(hosts), t_ref_ns=T_REF)


def ok(name: str, offset: float, unc: float = 50.0, **kw: object) -> HostReport:
    return HostReport(name, offset_ns=offset, drift_ppb=3.0, uncertainty_ns=unc, **kw)  # type: ignore[arg-type]


def by_host(decisions):
    return {d.host: d for d in decisions}


def test_each_rule_names_its_reason():
    s = snap(
        ok("a", 0.0, 0.0),
        ok("b", 120.0),
        ok("c", 40.0, unc=5_000.0),
        ok("d", -2_000_000.0),
        ok("e", 10.0, component_reference="x"),
        HostReport("f", status="unreachable", error="f: connection refused"),
        HostReport("g", offset_ns=math.nan, uncertainty_ns=math.nan),
    )
    d = by_host(decide(s, FeedRules(), reference="a", apply=True, sockets={"b": "/s/b"}))
    assert d["a"].action == "skip" and "reference" in d["a"].reason
    assert d["b"].action == "fed" and d["b"].socket == "/s/b" and not d["b"].step
    assert d["b"].estimate(3) == {
        "type": "estimate", "round": 3, "offset_ns": 120.0, "drift_ppb": 3.0, "t_ref_ns": T_REF,
        "duration_s": 1.0,
    }  # fmt: skip
    assert d["c"].action == "skip" and "--max-uncertainty" in d["c"].reason
    assert d["d"].action == "skip" and "--max-offset" in d["d"].reason and "--step" in d["d"].reason
    assert d["e"].action == "skip" and "not connected" in d["e"].reason
    assert d["f"].action == "skip" and "connection refused" in d["f"].reason
    assert d["g"].action == "skip" and "not solved" in d["g"].reason


def test_step_lets_a_large_offset_through_marked_for_confirmation():
    s = snap(ok("a", 0.0, 0.0), ok("d", -2_000_000.0), ok("b", 999_000.0))
    d = by_host(decide(s, FeedRules(step=True), reference="a", apply=False, sockets={}))
    assert d["d"].action == "feed" and d["d"].step
    assert d["b"].action == "feed" and not d["b"].step  # within the 1 ms bound


def test_a_scan_solved_against_another_reference_feeds_nobody():
    s = snap(ok("a", 5.0), ok("b", 0.0, 0.0), reference="b")
    d = decide(s, FeedRules(), reference="a", apply=True, sockets={})
    assert [x.action for x in d] == ["skip", "skip"]
    assert "reference is b" in d[1].reason


def test_the_threshold_is_strict():
    s = snap(ok("a", 0.0, 0.0), ok("b", 1.0, unc=1_000.0))
    d = by_host(
        decide(s, FeedRules(max_uncertainty_ns=1_000.0), reference="a", apply=1, sockets={})
    )  # type: ignore[arg-type]
    assert d["b"].action == "skip"


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("run/cwc.sock", "absolute"),
        ("/run/{name}.sock", "only placeholder"),
        ("/run/chrony/", "directory"),
        ("/" + "x" * 120 + "/{host}.sock", "at most 107"),
    ],
)
def test_bad_socket_paths(template, why):
    with pytest.raises(InputError, match=why):
        check_socket_template(template, ["gpu-001"])


def test_socket_path_length_counts_the_longest_host():
    template = "/" + "x" * 90 + "/{host}"
    check_socket_template(template, ["h1"])
    with pytest.raises(InputError, match="at most 107"):
        check_socket_template(template, ["h1", "a-rather-long-host-name"])


# Lines as Debian's chronyc 4.3 printed them for a chronyd fed by cwctl.
TRACKING = (
    "43574300,CWC,1,1796275384.235741740,0.000300000,-0.000300000,0.000300000,0.000,"
    "0.000,0.000,0.000000001,0.000003594,0.0,Normal\n"
)
SOURCES = (
    "#,*,CWC,0,1,377,2,-0.000000000,-0.000300000,0.000000020\n"
    "^,?,10.0.0.1,2,6,0,4294967295,0.0,0.0,0.0\n"
)
STATS = "CWC,3,2,4,0.000,0.000,-0.000000012,0.000000001\n"


def test_chronyc_csv():
    t = parse_tracking(TRACKING)
    assert t.ref_name == "CWC" and t.stratum == 1 and t.synchronised
    assert t.system_time_s == 3e-4  # slow of true time by 300 us
    srcs = parse_sources(SOURCES)
    assert srcs[0].state_word == "selected" and srcs[0].reach == 0o377 and srcs[0].poll == 1
    assert srcs[0].measured_offset_s == -3e-4 and srcs[1].last_rx_s is None
    assert parse_sourcestats(STATS)[0].samples == 3


def test_unsynchronised_tracking():
    text = "00000000,,0,0.0,0.0,0.0,0.0,0.000,0.000,0.000,1.0,1.0,0.0,Not synchronised\n"
    assert not parse_tracking(text).synchronised


def test_the_refclock_line_gathers_enough_samples_per_poll():
    assert poll_for(1.0) == 3 and poll_for(0.2) == 1 and poll_for(0.25) == 1
    assert 2 ** poll_for(0.3) / 0.3 >= 4  # chronyd's median filter wants 4 between polls
    assert refclock_line("/run/c.sock", 3) == "refclock SOCK /run/c.sock refid CWC poll 3 filter 8"


def _check(host: str, tracking: str | None) -> HostCheck:
    c = HostCheck(host, "/s", f"line-{host}", running=tracking is not None)
    c.tracking = parse_tracking(tracking) if tracking else None
    return c


def test_the_reference_is_the_best_synchronised_host_not_one_following_cwctl():
    def line(name: str, stratum: int, delay: float, disp: float) -> str:
        return f"0A000001,{name},{stratum},0.0,0.0,0.0,0.0,0.0,0.0,0.0,{delay},{disp},1.0,Normal"

    checks = [
        _check("a", line("10.0.0.1", 2, 0.010, 0.001)),  # root distance 6 ms
        _check("b", line("10.0.0.2", 3, 0.002, 0.0005)),  # 1.5 ms: best
        _check("c", line("CWC", 1, 1e-9, 1e-6)),  # follows cwctl itself: never
        _check("d", None),
    ]
    host, why = choose_reference(checks)
    assert host == "b" and "stratum 3" in why and "2 of 4" in why
    with pytest.raises(InputError, match="--reference"):
        choose_reference([checks[2], checks[3]])


def test_the_reference_needs_no_refclock():
    from cwctl.chrony.check import mark_reference
    from cwctl.report.feed import render_check_table

    ref = _check("a", TRACKING.strip())
    ref.problems = ["no refclock CWC in chronyd's sources: add 'line-a'"]
    other = _check("b", TRACKING.strip())
    other.problems = ["no refclock CWC in chronyd's sources: add 'line-b'"]
    mark_reference([ref, other], "a")
    assert ref.ready and ref.reference and not other.ready
    table = render_check_table([ref, other], ("a", "named with --reference"))
    assert "ready: the reference" in table and "add to chrony.conf on b:" in table
