"""The watch's [rebalance] guard rails (when it measures, which flows stay put, what it
never moves onto) and the uplinks' series in /metrics. The rebalance itself, on real
sockets and a real fabric, is judged by tests/integration/test_rebalance_testbed.py."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cwctl.scan.snapshot import FabricSnapshot, Suspect
from cwctl.watch.metrics import WatchMetrics, registry_of
from cwctl.watch.policy import Rebalancing
from cwctl.watch.rebalancing import Rebalancer, suspects_of


def test_it_measures_at_most_every_every_s_and_waits_after_a_failure() -> None:
    r = Rebalancer(Rebalancing(every_s=30, flow_hold_s=600))
    assert r.due(0.0)
    r.last = 0.0
    assert not r.due(29.9) and r.due(30.0)
    r.quiet_until = 600.0  # a rebalance failed or was undone at 0
    assert not r.due(599.0) and r.due(600.0)


def test_a_moved_flow_is_pinned_for_its_hold_and_suspects_are_avoided() -> None:
    r = Rebalancer(Rebalancing(flow_hold_s=600, target=1.3, min_gain=0.2, interval_s=1))
    r.moved = {"a:1>b:5201": 100.0, "c:2>d:5201": 0.0}
    snap = FabricSnapshot("ssh", None, 2.0, [], suspects=[
        Suspect("leaf1-spine2", "link", 0.9, "loss"),
        Suspect("spine2|leaf1-spine2", "set", 0.6, "loss", candidates=["spine2", "leaf1-spine2"]),
        Suspect("gpu-001/mlx5_0", "nic", 0.7, "loss"),
    ])  # fmt: skip
    options = r.options(650.0, snap)
    assert options.pinned == {"a:1>b:5201"}  # c's move is 650 s old: free again
    assert options.avoid == {"leaf1-spine2", "spine2"}  # a NIC is not a fabric link
    assert (options.target, options.min_gain, options.interval_s) == (1.3, 0.2, 1.0)
    assert suspects_of(None) == frozenset()


UPLINKS = {
    "links": [
        {"link": f"leaf{i}>spine{j}", "group": f"leaf{i} up", "load_bps": 1e8 * j,
         "flows": j, "elephants": j, "queueing_p50_us": 40.0 if j == 2 else None}
        for i in (1, 2) for j in (1, 2)
    ],
    "max_over_mean": {"leaf1 up": 1.33, "leaf2 up": 1.33},
}  # fmt: skip


def test_uplink_series_are_per_directed_link_never_per_flow() -> None:
    metrics = WatchMetrics()
    metrics.set_uplinks(UPLINKS)
    text = generate_latest(registry_of(metrics)).decode()
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("cwctl_uplink")
    }
    key = (("group", "leaf1 up"), ("link", "leaf1>spine2"))
    assert got[("cwctl_uplink_load_bps", key)] == 2e8
    assert got[("cwctl_uplink_elephants", key)] == 2
    assert got[("cwctl_uplink_queueing_p50_seconds", key)] == 40e-6
    assert got[("cwctl_uplink_max_over_mean", (("group", "leaf2 up"),))] == 1.33
    assert len(got) == 4 + 4 + 2 + 2  # links x 2, queueing where known, groups
    assert "cwctl_uplink" not in generate_latest(registry_of(WatchMetrics())).decode()


def test_the_probes_queueing_lands_on_the_links_their_discovered_paths_cross() -> None:
    import numpy as np

    from cwctl.records.path import PathRecord, PathTable
    from cwctl.scan.pathreports import PathPorts, PathReport, PortColumns
    from cwctl.watch.probequeue import probe_queueing, with_probes

    # gpu-001 -> gpu-005: port 40000 up spine2 (p50 60 us over the floor), 40001 up
    # spine1 (10 us), 40002 never traced, 40003 no delay; a same-leaf path crosses none
    ints = np.array([[40000, 10, 10], [40001, 10, 10], [40002, 10, 10], [40003, 10, 0]])
    floats = np.array([[0, 160e3, 0], [0, 110e3, 0], [0, 900e3, 0], [1, np.nan, np.nan]])
    columns = PortColumns(ints, floats)
    paths = [PathReport("gpu-001", "gpu-005", 40, 30, 100e3, 140e3, 170e3,
                        ports=PathPorts(columns, 0, 4))]  # fmt: skip
    switch = {"10.0.1.1": "leaf1", "10.9.0.1": "spine1", "10.9.0.2": "spine2",
              "10.0.2.1": "leaf2"}  # fmt: skip
    leaf_of = {"gpu-001": "leaf1", "gpu-005": "leaf2"}

    def record(sport: int, spine: str) -> PathRecord:
        hops = (None, spine, None)  # the agents trace the spine's TTL alone
        return PathRecord("gpu-001", "gpu-005", "probe", "10.0.1.5", sport, "10.0.2.5",
                          9000, hops, True, 0)  # fmt: skip

    table = PathTable.of([record(40000, "10.9.0.2"), record(40001, "10.9.0.1"),
                          record(40003, "10.9.0.2")])  # fmt: skip
    snap = FabricSnapshot("ssh", None, 2.0, [], paths=paths)
    got = probe_queueing(snap, table, switch, leaf_of)
    assert got == {"leaf1>spine2": 60.0, "spine2>leaf2": 60.0, "leaf1>spine1": 10.0,
                   "spine1>leaf2": 10.0}  # fmt: skip
    assert probe_queueing(None, table, switch, leaf_of) == {}
    assert probe_queueing(snap, None, switch, leaf_of) == {}
    rows = with_probes(UPLINKS, got)["links"]
    assert [r["probe_queueing_p50_us"] for r in rows] == [10.0, 60.0, None, None]
    metrics = WatchMetrics()
    metrics.set_uplinks(with_probes(UPLINKS, got))
    text = generate_latest(registry_of(metrics)).decode()
    assert text.count("cwctl_uplink_probe_queueing_p50_seconds{") == 2
