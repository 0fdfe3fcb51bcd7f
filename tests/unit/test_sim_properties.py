"""Invariants of every simulated window, over random small fabrics, seeds and faults."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.records import ProbeTableBuilder, decode_probe
from cwctl.scan.truthpaths import plain_truth
from cwctl.sim import FabricModel, SimParams

ELEMENTS = st.sampled_from(
    ["switch:spine1", "switch:leaf1", "link:leaf1-spine1", "host:gpu-002", "nic:gpu-003/mlx5_0"]
)
MODES = st.sampled_from(
    ["down", "lossy=0.3", "congested=0.8", "slow=2000", "flap=0.1", "down@0.05"]
)


@settings(max_examples=12, deadline=None)
@given(
    hosts=st.integers(3, 12),
    per_leaf=st.integers(1, 6),
    spines=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
    faults=st.lists(st.tuples(ELEMENTS, MODES), max_size=2),
    timestamps=st.sampled_from(["hw", "sw"]),
    load=st.floats(0.0, 0.9),
)
def test_every_window_is_well_formed(hosts, per_leaf, spines, seed, faults, timestamps, load):
    specs = [f"{element}:{mode}" for element, mode in faults]
    params = SimParams(rate=40, peers=3, timestamps=timestamps, load=load)
    model = FabricModel.leaf_spine(hosts, per_leaf, spines, params=params, seed=seed, faults=specs)
    window = model.probe(0.2)
    t = window.table
    edges = sum(len(p) for p in model.peers.values())
    assert len(t) == edges * 8 * 2
    assert (t.src != t.dst).all()
    done = t.complete
    # a lost exchange is lost whole, as the agent writes it
    assert ((t.t2 == 0) == (t.t4 == 0)).all() and ((t.t3 == 0) == (t.t4 == 0)).all()
    # causality in each clock: B answers after it received, A hears after it sent
    assert (t.t3[done] > t.t2[done]).all()
    assert (t.t4[done] > t.t1[done]).all()
    rtt = (t.t4 - t.t1) - (t.t3 - t.t2)
    assert (rtt[done] > 0).all()
    # records decode like the agent's
    builder = ProbeTableBuilder(t.hosts)
    for rec in list(t.iter_records())[:50]:
        builder.add(decode_probe(rec))
    assert len(builder.build()) == min(50, len(t))
    truth = window.truth
    json.dumps(plain_truth(truth))  # JSON once its paths are the list of dicts
    assert set(truth["offset_ns"]) == set(t.hosts)
    sent = sum(p["sent"] for p in truth["paths"])
    got = sum(p["received"] for p in truth["paths"])
    assert got >= 2 * int(done.sum())  # both ways of every complete exchange arrived
    assert len(t) <= sent <= 2 * len(t) and got <= sent  # every probe; replies if sent
    # determinism
    again = FabricModel.leaf_spine(hosts, per_leaf, spines, params=params, seed=seed, faults=specs)
    assert np.array_equal(again.probe(0.2).table.t4, t.t4)


@given(st.integers(0, 2**32 - 1))
def test_ip_text_is_ipaddress_canonical_text(value: int) -> None:
    import ipaddress

    from cwctl.sim.addresses import ip_text, ip_texts

    assert ip_text(value) == str(ipaddress.IPv4Address(value))
    assert ip_texts(np.array([value], np.uint64)) == [ip_text(value)]
