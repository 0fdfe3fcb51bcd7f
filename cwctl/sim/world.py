"""What the simulator's parts share: the state actions change, a window's output, the
paths of a set of flows, and the view of the model that a window is drawn from.

``window``, ``truth`` and ``discovery`` draw a probing window from a ``SimWorld`` (what
``FabricModel`` holds); ``model`` builds one and asks them. Keeping these types here, below
all four, is what keeps the simulator's modules free of import cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.records.path import PathRecord
from cwctl.runtime.arrays import F64, I32
from cwctl.sim.addresses import SimAddresses
from cwctl.sim.clocks import Clocks
from cwctl.sim.delays import FixedDelays
from cwctl.sim.ecmp import U64
from cwctl.sim.fabric import Fabric
from cwctl.sim.faults import Fault
from cwctl.sim.params import SimParams


@dataclass
class ModelState:
    """What actions change. Absent ECMP weights are 1 (plain ECMP)."""

    ecmp_weight: dict[tuple[str, str], int] = field(default_factory=dict)  # (leaf, spine)
    excluded_nics: set[str] = field(default_factory=set)
    drained_hosts: set[str] = field(default_factory=set)
    # host pairs (names sorted) whose flows leave from source ports that avoid a spine:
    # host-side steering (cwctl reroute --at hosts), as the pair's NAT rules would make it
    steered: dict[tuple[str, str], str] = field(default_factory=dict)


@dataclass
class ProbeWindow:
    """One probing window's output: the records and what really happened."""

    table: ProbeTable
    truth: dict[str, Any]
    start_s: float
    duration_s: float
    paths: list[PathRecord] = field(default_factory=list)  # what the agents discovered
    # each path's key in the path cache (discovery.trace_keys)
    path_keys: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class FlowPaths:
    """Both directions of a set of flows: elements crossed (F x 11, -1 absent), queues
    (F x 4, the pad queue ``n_queues`` absent), base delay (ns), and whether the flow
    has no way through (all NICs excluded, an ECMP group of weight 0)."""

    src_nic: I32
    dst_nic: I32
    spine_fwd: I32
    spine_rev: I32
    fwd_elements: I32
    fwd_queues: I32
    fwd_base_ns: F64
    fwd_dark: npt.NDArray[np.bool_]
    rev_elements: I32
    rev_queues: I32
    rev_base_ns: F64
    rev_dark: npt.NDArray[np.bool_]


class SimWorld(Protocol):
    """The model as a window sees it (``FabricModel`` is one)."""

    params: SimParams
    fabric: Fabric
    faults: list[tuple[Fault, int]]
    addresses: SimAddresses
    switch_seeds: U64
    clocks: Clocks
    fixed: FixedDelays
    peers: dict[str, list[str]]
    state: ModelState
    path_cache: dict[int, PathRecord]  # by discovery.trace_keys
