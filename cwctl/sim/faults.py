"""Fault specs of the simulator: ``KIND:NAME[:MODE][@T]`` (docs/simulator.md, Faults).

``KIND`` is ``switch``, ``link``, ``nic`` or ``host``; ``NAME`` an element name as
docs/scan-json.md spells it (``spine2``, ``leaf1-spine2``, ``gpu-001-leaf1``, ``gpu-001/mlx5_0``,
``gpu-001``); ``MODE`` one of

``down``               drops everything that crosses the element (the default)
``lossy[=P]``          drops each crossing probe with probability P (default 0.02)
``congested[=LEVEL]``  the element's egress queues run at utilisation LEVEL (default 0.9)
``slow[=NS]``          adds NS nanoseconds to every crossing probe (default 5000)
``flap[=PERIOD]``      down for the first half of every PERIOD seconds (default 0.5)
``silent``             a switch that forwards as usual but never answers TTL expiry
                       (path discovery sees an unknown hop; not a fault of the data path)

and ``@T`` starts the fault T seconds after the simulation's first window began.
``parse_fault`` checks the syntax; ``Fabric.element`` (in ``fabric.py``) checks the name.
Every problem is an ``InputError`` whose one line quotes the bad spec.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from cwctl.errors import InputError
from cwctl.runtime.arrays import F64

KINDS: Final = ("switch", "link", "nic", "host")
DEFAULT_VALUE: Final = {
    "down": None,
    "lossy": 0.02,
    "congested": 0.9,
    "slow": 5000.0,
    "flap": 0.5,
    "silent": None,
}
MODES: Final = tuple(DEFAULT_VALUE)


@dataclass(frozen=True)
class Fault:
    """One parsed fault: what, where, how much, from when (seconds into the simulation)."""

    kind: str
    name: str
    mode: str = "down"
    value: float | None = None
    at_s: float = 0.0
    text: str = ""  # the spec as given (for messages); ``spec`` is the normalised form

    @property
    def spec(self) -> str:
        mode = self.mode if self.value is None else f"{self.mode}={self.value:g}"
        at = f"@{self.at_s:g}" if self.at_s else ""
        return f"{self.kind}:{self.name}:{mode}{at}"


def _number(text: str, spec: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--fault {spec!r}: {what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise InputError(f"--fault {spec!r}: {what} must be finite, got {text!r}")
    return value


def _mode_value(mode: str, text: str | None, spec: str) -> float | None:
    if mode in ("down", "silent"):
        if text is not None:
            raise InputError(f"--fault {spec!r}: mode {mode!r} takes no value")
        return None
    if text is None:
        return DEFAULT_VALUE[mode]
    value = _number(text, spec, f"the value of {mode!r}")
    if mode == "lossy" and not 0.0 < value <= 1.0:
        raise InputError(f"--fault {spec!r}: lossy=P needs 0 < P <= 1, got {text}")
    if mode == "congested" and not 0.0 < value < 1.0:
        raise InputError(f"--fault {spec!r}: congested=LEVEL needs 0 < LEVEL < 1, got {text}")
    if mode == "slow" and value <= 0:
        raise InputError(f"--fault {spec!r}: slow=NS needs NS > 0, got {text}")
    if mode == "flap" and value <= 0:
        raise InputError(f"--fault {spec!r}: flap=PERIOD needs PERIOD > 0 seconds, got {text}")
    return value


def parse_fault(spec: str) -> Fault:
    """``KIND:NAME[:MODE][@T]`` as a ``Fault``; raise ``InputError`` quoting ``spec``."""
    text = spec.strip()
    at_s = 0.0
    if "@" in text:
        text, at_text = text.rsplit("@", 1)
        at_s = _number(at_text, spec, "the start time @T")
        if at_s < 0:
            raise InputError(f"--fault {spec!r}: the start time @T must be >= 0 seconds")
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise InputError(
            f"--fault {spec!r}: expected KIND:NAME[:MODE][@T], e.g. switch:spine2:down"
        )
    kind, name = parts[0].lower(), parts[1]
    if kind not in KINDS:
        raise InputError(f"--fault {spec!r}: unknown kind {parts[0]!r} (one of {', '.join(KINDS)})")
    mode_text = parts[2] if len(parts) == 3 else "down"
    mode, _, value_text = mode_text.partition("=")
    mode = mode.lower()
    if mode not in MODES:
        raise InputError(f"--fault {spec!r}: unknown mode {mode!r} (one of {', '.join(MODES)})")
    value = _mode_value(mode, value_text if "=" in mode_text else None, spec)
    return Fault(kind=kind, name=name, mode=mode, value=value, at_s=at_s, text=spec)


def fault_active(
    fault_mode: str, value: float | None, at_s: float, t_ns: F64
) -> npt.NDArray[np.bool_]:
    """When a fault acts, per probe: from ``at_s`` on (without one, on every probe: the
    first probe leaves its send stamp's error before time 0); ``flap`` only in the down
    half-periods."""
    active = t_ns >= at_s * 1e9 if at_s > 0 else np.ones(len(t_ns), bool)
    if fault_mode == "flap":
        half_ns = float(value or 0.5) * 1e9 / 2
        phase = np.floor((t_ns - at_s * 1e9) / half_ns).astype(np.int64)
        active &= phase % 2 == 0
    return active
