"""The probe agent's extra CPU time for GPU sampling, per second of probing window.

What this machine can measure (it has no GPU):

1. ``none``: ``GpuSampler.start()`` / ``stop()`` through the real pynvml, whose
   ``nvmlInit`` fails here (no library): the cost every GPU-less host pays.
2. ``nvidia-smi replay``: the sampler's own work on the nvidia-smi path (parsing one
   round of recorded 8xH100 output at start and at stop, building the record) -- NOT
   nvidia-smi's own CPU time, which on a real host is the larger part.

Each line compares the process's CPU time (all threads, ``time.process_time``) over a
window with the sampler on against the same window with it off (an idle sleep).
Run: ``.venv/bin/python -m bench gpu``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from cwctl.probe.gpu.readings import gpu_build, gpu_record
from cwctl.probe.gpu.sampler import GpuSampler
from cwctl.probe.gpu.smi import SMI_QUERY_FIELDS, smi_readings

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu"
WINDOW_S = 1.0
ROUNDS = 3


def _cpu_over_window(work_start: Callable[[], object], work_stop: Callable[[], object]) -> float:
    """CPU seconds spent over one window: ``work_start``, sleep, ``work_stop``."""
    cpu0 = time.process_time()
    work_start()
    time.sleep(WINDOW_S)
    work_stop()
    return time.process_time() - cpu0


def _median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def _no_gpu_window() -> float:
    sampler = GpuSampler("bench-host", nvidia_smi=False)
    return _cpu_over_window(sampler.start, sampler.stop)


def _replay_window() -> float:
    texts = {
        when: [
            (DATA / f"h100x8_query_{when}.csv").read_text(),
            SMI_QUERY_FIELDS,
            (DATA / f"h100x8_nvlink_e_{when}.txt").read_text(),
            (DATA / "h100x8_nvlink_s.txt").read_text(),
            (DATA / f"h100x8_q_{when}.txt").read_text(),
        ]
        for when in ("before", "after")
    }
    state: dict[str, list[dict]] = {}

    def start() -> None:
        state["before"] = smi_readings(*texts["before"])

    def stop() -> None:
        after = smi_readings(*texts["after"])
        rec = gpu_record("bench-host", "nvidia-smi", "ok", gpu_build(state["before"], after), 1)
        json.dumps(rec)

    return _cpu_over_window(start, stop)


def _idle_window() -> float:
    return _cpu_over_window(lambda: None, lambda: None)


def main() -> None:
    print(f"window {WINDOW_S:.1f} s, median of {ROUNDS} rounds; CPU = process time, all threads")
    print(
        f"{'sampler':<34} {'cpu on ms':>10} {'cpu off ms':>11} {'extra ms/s':>11} "
        f"{'on/off':>8} {'% of a core':>12}"
    )
    for label, window in (
        ("none (real pynvml, no GPU here)", _no_gpu_window),
        ("nvidia-smi replay (parse only)", _replay_window),
    ):
        on = _median([window() for _ in range(ROUNDS)])
        off = _median([_idle_window() for _ in range(ROUNDS)])
        extra_per_s = max(on - off, 0.0) / WINDOW_S
        ratio = on / off if off > 0 else float("inf")
        print(
            f"{label:<34} {on * 1e3:>10.2f} {off * 1e3:>11.3f} {extra_per_s * 1e3:>11.2f} "
            f"{ratio:>8.1f} {extra_per_s * 100:>11.3f}%"
        )
    print(
        "not measured here: NVML calls on a real GPU (8 GPUs x ~40 calls per reading, plus the"
        " XID wait thread waking every 250 ms), nor nvidia-smi's own CPU (4 processes per"
        " reading); run this bench on a GPU host for those."
    )


if __name__ == "__main__":
    main()
