"""The simulated fabric behind ``--sim`` (docs/simulator.md): a seeded, vectorised model.

``FabricModel`` is the model (topology, clocks, delays, faults, and the state actions
change); ``cwctl.transport.sim`` turns its windows into ``Collection``s.
"""

from cwctl.sim.faults import Fault, parse_fault
from cwctl.sim.model import (
    DrainHost,
    ExcludeNic,
    FabricModel,
    IncludeNic,
    ModelState,
    ProbeWindow,
    ResumeHost,
    SetEcmpWeight,
)
from cwctl.sim.params import SimParams

__all__ = [
    "DrainHost",
    "ExcludeNic",
    "FabricModel",
    "Fault",
    "IncludeNic",
    "ModelState",
    "ProbeWindow",
    "ResumeHost",
    "SetEcmpWeight",
    "SimParams",
    "parse_fault",
]
