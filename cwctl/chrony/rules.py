"""What ``cwctl sync`` may feed to each host's chronyd, and why not: the safety rules.

Per scan, each host gets one ``FeedDecision``:

* the reference host is never fed (its clock *is* the time the others follow);
* a host that was not solved, or is relative to another component's reference, or
  whose scan was not solved against the chosen reference, is not fed;
* a host whose error bar (``uncertainty_ns``) is not under ``max_uncertainty_ns`` is
  not fed;
* a host whose offset is beyond ``max_offset_ns`` (default 1 ms) is fed only with
  ``step`` and a confirmation (``--step`` and ``--yes``, or a yes at the prompt).

Also here: the operator's socket paths, checked before any work (``socket_path``,
``check_socket_template``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from cwctl import settings
from cwctl.errors import InputError
from cwctl.units import fmt_ns, parse_ns

SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes with its NUL


# fed (--apply), feed (dry run: would feed), skip (the reason says why), failed (--apply:
# the feeder could not start or send; ``error`` says why)
Action = Literal["fed", "feed", "skip", "failed"]


def socket_path(template: str, host: str) -> str:
    """The socket path for ``host``: ``{host}`` in the template becomes its name."""
    return template.replace("{host}", host)


def check_socket_template(template: str, hosts: list[str], flag: str = "--socket") -> None:
    """Absolute, no placeholder but ``{host}``, short enough for every host's name."""
    if not template.startswith("/"):
        raise InputError(f"{flag} {template!r}: give an absolute path (chronyd's refclock SOCK)")
    if "\0" in template or "\n" in template:
        raise InputError(f"{flag} {template!r}: a path cannot hold NUL or newline")
    rest = template.replace("{host}", "")
    if "{" in rest or "}" in rest:
        raise InputError(f"{flag} {template!r}: the only placeholder is {{host}}")
    if template.endswith("/"):
        raise InputError(f"{flag} {template!r}: names a directory, not a socket")
    for host in hosts or [""]:
        path = socket_path(template, host)
        if len(path.encode()) > SUN_PATH_MAX:
            raise InputError(
                f"{flag} {template!r}: {path} is {len(path.encode())} bytes, "
                f"a Unix socket path holds at most {SUN_PATH_MAX}"
            )


@dataclass(frozen=True)
class FeedRules:
    max_uncertainty_ns: float = parse_ns(settings.SYNC_MAX_UNCERTAINTY)
    max_offset_ns: float = parse_ns(settings.SYNC_MAX_OFFSET)
    step: bool = False  # may offsets beyond max_offset_ns be fed (after a confirmation)?


@dataclass
class FeedDecision:
    """One host in one round: feed it (``offset_ns`` at ``t_ref_ns``) or why not."""

    host: str
    action: Action
    reason: str = ""
    offset_ns: float | None = None
    drift_ppb: float | None = None
    uncertainty_ns: float | None = None
    t_ref_ns: int | None = None
    duration_s: float = 0.0  # the scan's probing window, t_ref_ns its middle
    socket: str | None = None
    step: bool = False  # beyond max_offset_ns, fed because --step was confirmed
    samples: int = 0  # samples the host's feeder sent for this round
    failed: int = 0  # sends that failed
    last_offset_s: float | None = None  # the last sample's chrony offset (true - system)
    error: str | None = None  # the feeder's last complaint
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def feeds(self) -> bool:
        return self.action in ("fed", "feed")

    def estimate(self, round_no: int) -> dict[str, Any]:
        """The control line the host's feeder gets."""
        return {
            "type": "estimate",
            "round": round_no,
            "offset_ns": self.offset_ns,
            "drift_ppb": self.drift_ppb or 0.0,
            "t_ref_ns": self.t_ref_ns,
            "duration_s": self.duration_s,
        }


def decide(
    snapshot: Any,
    rules: FeedRules,
    *,
    reference: str,
    apply: bool,
    sockets: dict[str, str],
) -> list[FeedDecision]:
    """Every host of ``snapshot``: feed or skip, with the reason (module docstring).

    Offsets beyond the bound come back as ``feed``/``fed`` with ``step=True`` when
    ``rules.step`` allows them: the caller confirms each, or turns it into a skip.
    """
    go: Action = "fed" if apply else "feed"
    out = []
    for h in snapshot.hosts:
        d = FeedDecision(
            host=h.name,
            action="skip",
            offset_ns=h.offset_ns,
            drift_ppb=h.drift_ppb,
            uncertainty_ns=h.uncertainty_ns,
            t_ref_ns=snapshot.t_ref_ns,
            duration_s=snapshot.duration_s,
            socket=sockets.get(h.name),
        )
        d.reason = _why_not(h, snapshot, rules, reference)
        if not d.reason:
            d.action = go
            d.step = abs(h.offset_ns) > rules.max_offset_ns
        out.append(d)
    return out


def _why_not(h: Any, snapshot: Any, rules: FeedRules, reference: str) -> str:
    if h.name == reference:
        return "the reference: never fed"
    if h.status != "ok":
        return f"{h.status}: {h.error or 'no agent'}"
    if snapshot.reference != reference:
        return f"this scan's reference is {snapshot.reference}, not {reference}: nothing fed"
    if snapshot.t_ref_ns is None:
        return "no solution"
    if h.offset_ns is None or not math.isfinite(h.offset_ns):
        return "offset not solved (no usable probes)"
    if h.component_reference is not None:
        return f"relative to {h.component_reference}, not connected to {reference}"
    if h.uncertainty_ns is None or not math.isfinite(h.uncertainty_ns):
        return "no error bar"
    if h.uncertainty_ns >= rules.max_uncertainty_ns:
        return (
            f"error bar ±{fmt_ns(h.uncertainty_ns)} not under "
            f"--max-uncertainty {fmt_ns(rules.max_uncertainty_ns)}"
        )
    if abs(h.offset_ns) > rules.max_offset_ns and not rules.step:
        return (
            f"offset {fmt_ns(h.offset_ns, signed=True)} beyond --max-offset "
            f"{fmt_ns(rules.max_offset_ns)} (feeding it takes --step and a confirmation)"
        )
    return ""
