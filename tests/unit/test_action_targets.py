"""The action targets: one mechanism serves each element under each option set, on both
kinds of target, and the simulator's target answers what the inventory's does."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cwctl.actions import planner  # noqa: F401  (registers every mechanism)
from cwctl.actions.naming import Element, covering, covering_switch
from cwctl.actions.simulated import SimTarget
from cwctl.actions.target import MECHANISMS, RouteOptions, choose, same_fabric
from cwctl.scan.request import ScanRequest, SimOptions

ELEMENTS = [
    Element("switch", "spine2", spine="spine2"),
    Element("link", "leaf1-spine2", leaf="leaf1", spine="spine2"),
    Element("nic", "gpu-001/mlx5_1", host="gpu-001", nic="mlx5_1"),
]
OPTIONS = [
    RouteOptions(via=via, gateways=gateways)
    for via, gateways in itertools.product(("auto", "hosts"), ({}, {"10.0.0.1": "spine2"}))
]


@pytest.mark.parametrize("kind", ["ssh", "sim"])
def test_each_element_under_each_option_set_has_exactly_one_mechanism(kind: str) -> None:
    served = set()
    for element, options in itertools.product(ELEMENTS, OPTIONS):
        found = choose(kind, element, options)  # raises when two overlap
        if found is not None:
            served.add(found.name)
    assert served == {m.name for m in MECHANISMS[kind]}  # none registered in vain


def test_the_real_mechanisms_are_the_documented_four() -> None:
    assert {m.name for m in MECHANISMS["ssh"]} == {"switch-ecmp", "host-routes", "hosts", "nccl"}
    assert choose("ssh", ELEMENTS[0], OPTIONS[0]).name == "switch-ecmp"
    assert choose("ssh", ELEMENTS[0], OPTIONS[1]).name == "host-routes"
    assert choose("ssh", ELEMENTS[1], OPTIONS[2]).name == "hosts"
    assert choose("ssh", ELEMENTS[2], OPTIONS[1]).name == "nccl"
    assert choose("sim", ELEMENTS[2], OPTIONS[0]).name == "nic"


def _sim(seed: int = 1) -> SimTarget:
    return SimTarget(request=ScanRequest(sim=SimOptions(hosts=16, seed=seed)))


def test_the_sim_target_builds_its_model_only_when_asked_and_names_its_fabric() -> None:
    target = _sim()
    assert target._model is None
    context = target.context()
    assert context["source"] == "sim" and context["sim"]["hosts"] == 16
    shape = target.shape()
    assert len(shape.hosts) == 16 and shape.groups_per_leaf
    assert set(shape.serves("spine1")) <= set(shape.leaves)
    assert same_fabric(context) != same_fabric(_sim(seed=2).context())


@given(st.lists(st.sampled_from(["leaf1-spine2", "leaf2-spine2", "spine2"]), min_size=1))
def test_the_watch_and_the_planner_agree_on_the_switch_a_set_ends_on(names: list[str]) -> None:
    target = _sim()
    element, _ = covering("|".join(names), target)
    assert covering_switch(names) == element.name == "spine2"
