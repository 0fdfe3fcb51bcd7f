"""The last-path guard counts the paths that can carry traffic, not only those
configured: 3 of 4 spines down, the fourth (congested) is never taken out, in the
simulator's ECMP groups and in a Linux leaf's route (next hops flagged dead/linkdown)."""

from __future__ import annotations

import pytest

from cwctl.actions import simulated
from cwctl.actions.switchroute import plan_switch_reroute
from cwctl.errors import InputError
from cwctl.scan.request import SimOptions
from cwctl.transport.sim import model_for
from tests.unit.test_switchroute import Tables, fabric, leaf2_route

DOWN = ["switch:spine1:down", "switch:spine2:down", "switch:spine3:down"]


def model(*faults: str) -> simulated.FabricModel:
    return model_for(options=SimOptions(hosts=32, spines=4, faults=tuple(faults)))


def test_the_last_spine_up_is_not_taken_out_though_the_others_have_weight() -> None:
    m = model(*DOWN, "switch:spine4:congested")
    with pytest.raises(InputError, match="leaf1: spine4 is its last healthy spine"):
        simulated.ecmp_steps(m, "spine4", list(m.fabric.leaves))
    steps = simulated.ecmp_steps(m, "spine1", list(m.fabric.leaves))  # a dead one: fine
    assert len(steps) == len(m.fabric.leaves)


def test_a_link_down_counts_for_its_leaf_only() -> None:
    m = model("link:leaf1-spine1:down", "link:leaf1-spine2:down", "link:leaf1-spine3:down")
    with pytest.raises(InputError, match="leaf1: spine4 is its last healthy spine"):
        simulated.ecmp_steps(m, "spine4", ["leaf1"])
    assert len(simulated.ecmp_steps(m, "spine4", ["leaf2"])) == 1


async def test_a_leaf_route_whose_other_next_hop_is_dead_is_not_cut() -> None:
    route = leaf2_route()
    route["nexthops"][0]["flags"] = ["linkdown"]  # spine1's hop: its link is down
    runner = Tables({"leaf1": [], "leaf2": [route]})
    with pytest.raises(InputError, match="spine2 is the last healthy path"):
        await plan_switch_reroute(fabric(), "spine2", "spine2", None, runner)
    route["nexthops"][0]["flags"] = []
    found = await plan_switch_reroute(fabric(), "spine2", "spine2", None, runner)
    assert len(found.steps) == 1
