"""A second fault beside a first, paths unknown: each true element is in a suspect, as
itself or in a candidate set (issue 21: "truth in the set 100 % without paths").

Without path records every cross-leaf flow may have crossed any spine, and the
explanation is a mixture over those alternatives (``telemetry/explain.py``). Three ways
it lost an element, each a bench precision scan rebuilt here (the same model, seed,
stamps, load and faults; ``bench/bench_precision.py``):

- the second look weighed the leaf's links against "one of the spines" (which also took
  the busy healthy queues elsewhere) and kept the spines alone, with no way back for the
  link (#472, a congested link at load 0.6);
- a link delaying 10.5 % of its probes beside a queued spine, its floor 10 %, gained most
  at the coarse grid's 7 % and was refused, though its gain still rose at the floor
  (#131, the independent model);
- a link's alternative and a spine's each took half of a delayed flow, so no flow was
  the link's "more likely than not" and its shift read zero (#488); two queued spines
  the same way, and nothing was named (#273).

The scans come from the simulator (its hidden hash) and the independent record model:
nothing here shares the localiser's code.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from cwctl import settings
from cwctl.fabric.topology import leaf_spine
from cwctl.records.path import PathTable
from cwctl.scan.collection import Collection
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot
from cwctl.telemetry.explain import explain
from cwctl.transport.sim import run_model
from tests.unit.telemetry_synth import Synth, make


def _blind(collection: Collection) -> FabricSnapshot:
    """The scan's snapshot without its path records (discovery off, or every trace failed)."""
    solution = solve(collection.table)
    return build_snapshot(replace(collection, paths=PathTable()), solution)


def _sim(seed: int, load: float, faults: list[str]) -> Collection:
    names, topo = leaf_spine(64, 8, 4)
    model = FabricModel(
        names, topo, params=SimParams(timestamps="hw", load=load), seed=seed, faults=faults
    )
    return run_model(model, settings.PROBE_DURATION_S)


def _synth(seed: int, stamps: str, load: float, **faults: dict[str, float]) -> Collection:
    synth = Synth(
        n_hosts=64, per_leaf=8, spines=4, peers=settings.PROBE_PEERS,
        pairs=int(settings.PROBE_RATE * settings.PROBE_DURATION_S), rate=settings.PROBE_RATE,
        queue_ns=1500.0 * load, seed=seed, discovered=0.7, stamps=stamps, clock_ns=1e6,
        drift_ppb=2e4, sw_early_share=0.2, **faults,  # type: ignore[arg-type]
    )  # fmt: skip
    collection, _ = make(synth)
    return collection


def _all_covered(snap: FabricSnapshot, truth: list[str]) -> None:
    assert snap.verdict == "problems"
    assert all(any(s.covers(x) for s in snap.suspects) for x in truth), [
        s.element for s in snap.suspects
    ]


@pytest.mark.parametrize(("seed", "link"), [(472, "leaf5-spine1"), (772, "leaf1-spine4")])
def test_a_congested_link_at_load_0_6_is_in_its_leaf_s_set(seed: int, link: str) -> None:
    # both were "one of spine1 .. spine4", a set without the link
    snap = _blind(_sim(seed, 0.6, [f"link:{link}:congested=0.95"]))
    _all_covered(snap, [link])
    leaf = link.split("-")[0]
    assert all(m.startswith(f"{leaf}-") for m in snap.suspects[0].members), snap.suspects[0]


@pytest.mark.parametrize(
    ("seed", "stamps", "load", "link", "spine"),
    [(131, "sw", 0.6, "leaf5-spine2", "spine3"), (467, "sw", 0.5, "leaf7-spine4", "spine1")],
)
def test_a_queued_link_beside_a_queued_spine_is_named_with_it(
    seed: int, stamps: str, load: float, link: str, spine: str
) -> None:
    snap = _blind(_synth(seed, stamps, load, delay_ns={link: 6000.0, spine: 6000.0}))
    _all_covered(snap, [link, spine])


def test_a_congested_link_beside_a_congested_spine_is_named_with_it() -> None:
    # the link was chosen, then dropped: no flow was its "more likely than not"
    snap = _blind(_sim(488, 0.4, ["link:leaf5-spine4:congested", "switch:spine3:congested"]))
    _all_covered(snap, ["leaf5-spine4", "spine3"])


def test_two_queued_spines_are_each_in_a_set() -> None:
    # was "unlocalised delay on 662 paths", no suspect
    snap = _blind(_synth(273, "hw", 0.6, delay_ns={"spine1": 6000.0, "spine3": 6000.0}))
    _all_covered(snap, ["spine1", "spine3"])


def test_an_element_whose_rate_clears_its_floor_is_chosen_wherever_the_grid_falls() -> None:
    """One of 32 links fails 10 % of its trials, its floor 9 %: the greedy's coarse grid
    (steps of about 1.9 times) fits 7 % better than 13.5 %, and 7 % is under the floor;
    at the floor the gain still rises, so the link is chosen, and its rate refitted is
    10 % (at the first step the background still holds some of its failures: the best
    rate then is 8.7-10.8 %, under the floor on the fine grid too)."""
    links, per_link, trials, background, rate = 32, 20, 1000.0, 0.01, 0.10
    flows = links * per_link
    incidence = np.zeros((flows, links))
    incidence[np.arange(flows), np.arange(flows) // per_link] = 1
    faulty = incidence[:, 0] > 0
    failing = 1 - (1 - background) * (1 - rate)
    n = np.full(flows, trials)
    k = np.where(faulty, round(trials * failing), round(trials * background))
    fit = explain(sp.csr_matrix(incidence), n, k.astype(np.float64), min_rate=0.09)
    assert list(fit.rates) == [0]
    assert fit.rates[0] == pytest.approx(rate, abs=0.004)
