"""NVIDIA's XID catalogue, the common codes: what each means and how bad it is for a host.

After NVIDIA's "Xid Errors" catalogue (docs.nvidia.com/deploy/xid-errors). ``fail``
codes are hardware or firmware faults whose resolution bucket is a GPU reset, a node
reboot or a repair: the host should be drained. ``warn`` codes are mostly application
faults (a bad kernel, a page fault) or recoverable events worth a look; an XID this
catalogue does not know is a ``warn`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

XidSeverity = Literal["warn", "fail"]


@dataclass(frozen=True, slots=True)
class XidInfo:
    code: int
    severity: XidSeverity
    description: str


def _entries(*rows: tuple[int, XidSeverity, str]) -> dict[int, XidInfo]:
    return {code: XidInfo(code, severity, text) for code, severity, text in rows}


XID_CATALOGUE: Final = _entries(
    (8, "warn", "GPU stopped processing"),
    (13, "warn", "graphics engine exception (application fault)"),
    (31, "warn", "GPU memory page fault (application fault)"),
    (32, "warn", "invalid or corrupted push buffer stream"),
    (38, "warn", "driver firmware error"),
    (43, "warn", "GPU stopped processing (channel reset, application fault)"),
    (45, "warn", "preemptive cleanup after previous errors"),
    (48, "fail", "double-bit ECC error"),
    (61, "warn", "internal micro-controller breakpoint/warning"),
    (62, "fail", "internal micro-controller halt"),
    (63, "warn", "ECC page retirement or row remapping recorded (reset the GPU)"),
    (64, "fail", "ECC page retirement or row remapping recording failure"),
    (68, "warn", "video decoder (NVDEC) exception"),
    (69, "warn", "graphics engine class error"),
    (74, "fail", "NVLink error"),
    (79, "fail", "GPU has fallen off the bus"),
    (92, "warn", "high single-bit ECC error rate"),
    (94, "warn", "contained ECC error (application terminated, reset the GPU)"),
    (95, "fail", "uncontained ECC error"),
    (109, "warn", "context switch timeout"),
    (119, "fail", "GSP RPC timeout"),
    (120, "fail", "GSP error"),
    (121, "fail", "C2C link error"),
    (140, "fail", "unrecovered ECC error"),
    (143, "fail", "GPU initialisation failure"),
    (154, "fail", "GPU recovery action changed (reset or reboot required)"),
)


def describe(code: int) -> XidInfo:
    """The catalogue entry of ``code``; an unknown code is a ``warn`` that says so."""
    info = XID_CATALOGUE.get(code)
    if info is None:
        return XidInfo(code, "warn", "not in cwctl's XID catalogue")
    return info
