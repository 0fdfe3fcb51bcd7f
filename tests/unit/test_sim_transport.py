"""The sim transport: a Collection like every other transport's, plus truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cwctl.errors import InputError
from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.scan.truthpaths import plain_truth
from cwctl.session import ScanSession
from cwctl.sim import FabricModel, SetEcmpWeight
from cwctl.transport.sim import SimSource, model_for, simulate

SMALL = SimOptions(hosts=16, hosts_per_leaf=4, spines=2, seed=4)


async def test_the_sim_source_gives_a_sim_collection_with_truth():
    options = SimOptions(hosts=16, hosts_per_leaf=4, spines=2, faults=("switch:spine2:congested",))
    events = []
    request = ScanRequest(sim=options, duration_s=0.5, overrides=ProbeOverrides(rate=100.0))
    session = ScanSession(request, progress=lambda event, fields: events.append(event))
    collection = await session.collect()
    assert collection.source == "sim"
    assert collection.params["simulated"] is True
    assert collection.params["faults"] == ["switch:spine2:congested=0.9"]
    assert collection.duration_s == 0.5
    edges = sum(len(p) for p in collection.peers.values())
    assert len(collection.table) == edges * 50 * 2  # rate 100 for 0.5 s, pairs of two
    assert collection.host_names == [f"gpu-{i:03d}" for i in range(1, 17)]
    assert collection.hosts[5].leaf == "leaf2"
    assert collection.topology is not None and collection.topology.leaf_of["gpu-016"] == "leaf4"
    assert all(s.status == "ok" for s in collection.status.values())
    truth = collection.truth
    assert truth is not None and truth["faults"] == ["spine2"]
    assert set(truth["offset_ns"]) == set(collection.host_names)
    json.dumps(plain_truth(truth))
    assert events == ["started", "records", "done"]


def test_simulate_is_deterministic_and_the_seed_matters():
    a, b = simulate(SMALL, 0.3), simulate(SMALL, 0.3)
    c = simulate(SimOptions(hosts=16, hosts_per_leaf=4, spines=2, seed=5), 0.3)
    assert np.array_equal(a.table.t4, b.table.t4) and a.truth == b.truth
    assert not np.array_equal(a.table.t4, c.table.t4)
    assert a.peers != c.peers or not np.array_equal(a.table.t1, c.table.t1)


def test_a_kept_model_shows_an_action_on_the_next_scan():
    model = model_for(
        options=SimOptions(hosts=16, hosts_per_leaf=4, spines=2, faults=("switch:spine1:down",))
    )
    first = simulate(model=model, duration_s=0.3)
    model.apply(SetEcmpWeight("spine1", 0))
    second = simulate(model=model, duration_s=0.3)
    assert not first.table.complete.all() and second.table.complete.all()
    assert second.params["window"] == 2


async def test_a_sim_source_continues_in_time_and_keeps_changes():
    options = SimOptions(hosts=16, hosts_per_leaf=4, spines=2, faults=("switch:spine1:down@0.6",))
    request = ScanRequest(sim=options, duration_s=0.5)
    source = SimSource(request)
    first = await source.scan(request)
    second = await source.scan(request)
    assert (first.params["window_start_s"], second.params["window_start_s"]) == (0.0, 0.5)
    assert first.table.complete.all() and not second.table.complete.all()  # @0.6 came
    source.model.apply(SetEcmpWeight("spine1", 0))
    third = await source.scan(request)
    assert third.table.complete.all()
    fresh = await SimSource(request).scan(request)  # another source: a new model, window 1
    assert fresh.params["window"] == 1 and np.array_equal(fresh.table.t1, first.table.t1)


def test_bad_sim_options_are_input_errors():
    with pytest.raises(InputError, match="spine7"):
        simulate(SimOptions(faults=("switch:spine7:down",)), 0.1)
    with pytest.raises(InputError, match="--timestamps"):
        simulate(SimOptions(timestamps="gps"), 0.1)
    with pytest.raises(InputError, match="at least 2 hosts"):
        FabricModel(["gpu-001"], None)


INVENTORY = """
[probe]
duration = 0.4
rate = 50
peers = 2
ports = 2

[[switch]]
name = "spineA"
role = "spine"

[[switch]]
name = "torA"
role = "leaf"
uplinks = ["spineA"]

[[switch]]
name = "torB"
role = "leaf"
uplinks = ["spineA"]

[[host]]
name = "node-a"
address = "10.0.0.1"
leaf = "torA"
nics = ["eth0", "eth1"]

[[host]]
name = "node-b"
address = "10.0.0.2"
leaf = "torA"

[[host]]
name = "node-c"
address = "10.0.0.3"
leaf = "torB"

[[host]]
name = "stray"
address = "10.0.0.9"
"""


async def test_sim_with_an_inventory_rehearses_its_topology(tmp_path: Path):
    path = tmp_path / "inventory.toml"
    path.write_text(INVENTORY)
    options = SimOptions(faults=("link:torB-spineA:down",))
    collection = await ScanSession(ScanRequest(inventory=path, sim=options)).collect()
    assert collection.host_names == ["node-a", "node-b", "node-c", "stray"]
    assert collection.duration_s == 0.4  # the inventory's [probe] duration
    assert collection.params["rate"] == 50 and collection.params["ports"] == 2
    assert {h.name: h.address for h in collection.hosts}["node-c"] == "10.0.0.3"
    assert collection.hosts[3].leaf is None  # a host without a leaf hangs off a hidden switch
    table = collection.table
    assert table.nics == ["eth0", "eth1"]  # node-a has two NICs: its records name them
    a = table.hosts.index("node-a")
    assert (table.nic[table.src == a] >= 0).all() and (table.nic[table.src != a] == -1).all()
    c = table.hosts.index("node-c")
    touches_c = (table.src == c) | (table.dst == c)
    stray = table.hosts.index("stray")
    via_spine = touches_c & (table.src != stray) & (table.dst != stray)
    assert touches_c.any() and not table.complete[via_spine].any()
    assert table.complete[~touches_c].all()
    with pytest.raises(InputError, match="no switch named 'leaf1'"):
        await ScanSession(
            ScanRequest(inventory=path, sim=SimOptions(faults=("switch:leaf1",)))
        ).collect()


def test_cli_scan_sim_json_has_truth_and_says_it_is_simulated():
    from cwctl.cli import app

    result = CliRunner().invoke(
        app,
        ["scan", "--sim", "--hosts", "16", "--hosts-per-leaf", "4", "--spines", "2",
         "--fault", "switch:spine2:congested", "--duration", "0.5", "--format", "json"],
    )  # fmt: skip
    assert result.exit_code in (0, 3), result.output
    report = json.loads(result.stdout)
    assert report["source"] == "sim"
    assert report["truth"]["faults"] == ["spine2"]
    assert len(report["truth"]["offset_ns"]) == 16
