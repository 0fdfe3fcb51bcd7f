"""GPU health: verdicts from the agent's ``gpu`` records (NVML or nvidia-smi readings).

Public API (the contract telemetry uses): ``assess(records) -> GpuHealth`` for one
host's ``gpu`` records; ``GpuHealth.verdict`` is ``ok``/``warn``/``fail``/``none``.
"""
