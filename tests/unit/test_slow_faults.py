"""A slow spine (every link of it with the same raised floor) is the spine, top-1, not a
host or a set of its links; on the simulator's hidden hash, hw and sw stamps."""

from __future__ import annotations

import numpy as np
import pytest

from cwctl.request import SimOptions
from cwctl.session import analyse
from cwctl.sim.faults import fault_active
from cwctl.transport.sim import simulate


@pytest.mark.parametrize(
    ("seed", "spine", "stamps"), [(3, "spine1", "hw"), (1, "spine3", "sw"), (172, "spine1", "hw")]
)
def test_a_slow_spine_is_the_top_suspect(seed: int, spine: str, stamps: str) -> None:
    # seed 3, spine1 (64 hosts) was blamed on gpu-058, spine1 fourth (issue 21)
    options = SimOptions(seed=seed, faults=(f"switch:{spine}:slow",), timestamps=stamps)
    snap = analyse(simulate(options))
    top = snap.suspects[0]
    assert (top.element, top.candidates) == (spine, []), [s.element for s in snap.suspects]
    assert top.evidence.startswith("slow: ") and snap.verdict == "problems"
    assert not [s for s in snap.suspects if s.kind == "host"]


def test_a_fault_without_a_start_acts_on_the_first_probe_too() -> None:
    # the first probe leaves its send stamp's error before time 0: it crossed the slow
    # spine too (it did not, and was every flow's floor: the slow spine raised nothing)
    t_ns = np.array([-150.0, 0.0, 5e8])
    assert fault_active("slow", 5000.0, 0.0, t_ns).all()
    assert fault_active("slow", 5000.0, 0.25, t_ns).tolist() == [False, False, True]
