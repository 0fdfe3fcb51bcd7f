"""One scan of the simulator through the product's own path (``simulate``, ``analyse``):
64 hosts, 8 per leaf, 4 spines, the default window, for the localisation tests."""

from __future__ import annotations

from cwctl.scan.request import SimOptions
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import analyse
from cwctl.transport.sim import simulate


def sim_scan(seed: int, stamps: str, load: float, faults: tuple[str, ...] = ()) -> FabricSnapshot:
    """The snapshot of seed ``seed``'s fabric at ``load`` with ``stamps`` and ``faults``."""
    options = SimOptions(
        hosts=64, hosts_per_leaf=8, spines=4, seed=seed, faults=faults, timestamps=stamps,
        load=load,
    )  # fmt: skip
    return analyse(simulate(options))
