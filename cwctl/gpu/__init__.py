"""GPU health: verdicts from the agent's ``gpu`` records (NVML or nvidia-smi readings).

Public API (the contract telemetry uses): ``assess(records) -> GpuHealth`` for one
host's ``gpu`` records; ``GpuHealth.verdict`` is ``ok``/``warn``/``fail``/``none``, the
host's worst GPU's. ``GpuHealth.gpus`` holds one dict per GPU with stable keys
(``docs/records-gpu.md``), each with its own ``verdict`` and ``reason``.
"""

from cwctl.gpu.verdict import GpuHealth, assess
from cwctl.gpu.xid import XID_CATALOGUE, describe

__all__ = ["XID_CATALOGUE", "GpuHealth", "assess", "describe"]
