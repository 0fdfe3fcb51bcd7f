"""The FabricSnapshot: what one scan found, rendered alike by the CLI and the TUI.

``FabricSnapshot.to_json()`` is the ``cwctl.scan/1`` schema (docs/scan-json.md) (documented
field by field in ``docs/scan-json.md``). Additions only; a breaking change gets a new
schema name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cwctl.scan.pathreports import PathReport, json_chunks, json_number
from cwctl.scan.truthpaths import plain_truth

SCAN_SCHEMA = "cwctl.scan/1"
SuspectKind = Literal["switch", "link", "nic", "host", "set"]  # set: candidates of kinds


@dataclass
class HostReport:
    name: str
    status: str = "ok"  # ok | unreachable | error
    error: str | None = None
    offset_ns: float | None = None  # this host's clock minus the reference's
    drift_ppb: float | None = None
    uncertainty_ns: float | None = None
    component_reference: str | None = None  # the reference of its connected component
    gpus: list[dict[str, Any]] = field(default_factory=list)
    gpu_verdict: str | None = None  # ok | warn | fail | None (no GPU data)
    gpu_reason: str | None = None
    leaf: str | None = None  # the leaf switch it hangs off, when the topology says
    agent: dict[str, Any] | None = None  # what its agent cost, and whether it was busy
    jobs: list[str] | None = None  # ids of the running jobs on it (None: no scheduler read)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "offset_ns": json_number(self.offset_ns),
            "drift_ppb": json_number(self.drift_ppb),
            "uncertainty_ns": json_number(self.uncertainty_ns),
            "gpus": self.gpus,
        }
        if self.component_reference is not None:
            out["component_reference"] = self.component_reference
        if self.leaf is not None:
            out["leaf"] = self.leaf
        if self.gpu_verdict is not None:
            out["gpu_verdict"] = self.gpu_verdict
            out["gpu_reason"] = self.gpu_reason
        if self.agent is not None:
            out["agent"] = self.agent
        if self.jobs is not None:
            out["jobs"] = self.jobs
        return out


@dataclass
class Suspect:
    element: str
    kind: SuspectKind
    score: float  # in [0, 1]
    evidence: str
    # when the data cannot tell which: every element that could be it (``element`` then
    # joins them with "|"); empty when the suspect is named outright
    candidates: list[str] = field(default_factory=list)
    # the running jobs it hurts (``cwctl.jobs.affected``): {"id", "user", "name", "nodes",
    # "paths_hit", "paths"}; None when no scheduler was read (no key in the JSON)
    jobs: list[dict[str, Any]] | None = None
    # a set of candidates of different kinds (kind "set"): theirs, in candidates' order
    kinds: list[str] = field(default_factory=list)

    @property
    def members(self) -> list[str]:
        """The elements it may be: its candidates, or itself."""
        return list(self.candidates) or [self.element]

    def covers(self, element: str) -> bool:
        """Whether ``element`` is this suspect or one of its candidates."""
        return element == self.element or element in self.members

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "element": self.element,
            "kind": self.kind,
            "score": round(self.score, 4),
            "evidence": self.evidence,
        }
        if self.candidates:
            out["candidates"] = list(self.candidates)
        if self.jobs is not None:
            out["jobs"] = self.jobs
        if self.kinds:
            out["kinds"] = list(self.kinds)
        return out


@dataclass
class Crossings:
    """Which probed host pairs each suspect's paths cross: what says whose job it hurts.

    ``hosts`` and ``leaves`` (a host's leaf, None unknown) are indexed by the pair arrays;
    ``probed`` is every probed unordered pair ``(lo, hi)`` (int arrays, lo < hi, unique);
    ``hit[element]`` the pairs one of whose flows crossed the suspect ``element`` (or one of
    its candidates) on its discovered path, or may have on an unknown one; ``leaf_pairs``
    the unordered leaf pairs with such a flow (an unprobed pair between them likely
    crosses it too). Not part of the JSON."""

    hosts: list[str]
    leaves: list[str | None]
    probed: tuple[Any, Any]
    hit: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    leaf_pairs: dict[str, set[tuple[str, str]]] = field(default_factory=dict)


@dataclass
class FabricSnapshot:
    source: str
    reference: str | None
    duration_s: float
    hosts: list[HostReport]
    # a scan's: ``PathReports`` (cwctl/scan/pathreports.py), the same reports as columns
    paths: Sequence[PathReport] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)
    # bad flows no suspect explains (telemetry/verdicts.py): {"paths", "flows", "signals",
    # "evidence"}; None when every loss and delay beyond the thresholds is explained
    unlocalised: dict[str, Any] | None = None
    timestamp_source: str = "none"  # hw | sw | user | none
    sync: dict[str, Any] = field(default_factory=dict)  # solver quality figures
    truth: dict[str, Any] | None = None
    records: int = 0
    telemetry: dict[str, Any] = field(default_factory=dict)  # thresholds and baselines used
    t_ref_ns: int | None = None  # the instant (reference time) the offsets hold at
    # records that cannot be right (telemetry/consistency.py): [{"check", "rows_left_out",
    # "detail"}]; a scan with any is never healthy
    consistency: list[dict[str, Any]] = field(default_factory=list)
    crossings: Crossings | None = None  # which probed pairs each suspect crosses
    jobs: dict[str, Any] | None = None  # the scheduler read: {"scheduler", "running"[, "error"]}
    # why the window could not have seen a fault of the documented sensitivity (too few
    # probes, elements too thinly crossed: telemetry/window.py); empty when it could
    inconclusive: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        """A summary, not every path: asyncio's runner formats the scan task (and so its
        result) when it puts back the SIGINT handler, and the full repr of a 10 000-host
        snapshot is hundreds of megabytes (seconds of CPU at the end of every scan)."""
        return (
            f"FabricSnapshot(source={self.source!r}, hosts={len(self.hosts)}, "
            f"paths={len(self.paths)}, suspects={[s.element for s in self.suspects[:5]]!r}, "
            f"records={self.records})"
        )

    @property
    def unreachable(self) -> list[HostReport]:
        return [h for h in self.hosts if h.status != "ok"]

    @property
    def busy_with_loss(self) -> list[str]:
        """Busy hosts (starved agents) on a path that lost probes. Their exchanges are left
        out of localisation, so the loss blames no element; but the scan cannot vouch for
        those paths either, and so it is not healthy."""
        busy = {h.name for h in self.hosts if h.agent and h.agent.get("busy")}
        if not busy:
            return []
        lossy = {h for p in self.paths if p.received < p.sent for h in (p.src, p.dst)}
        return sorted(busy & lossy)

    @property
    def found(self) -> bool:
        """Whether the scan found problems (anything but an inconclusive window)."""
        return bool(
            self.suspects or self.unreachable or self.unlocalised is not None
            or self.busy_with_loss or self.consistency
        )  # fmt: skip

    @property
    def healthy(self) -> bool:
        """Nothing found, by a window that could have seen it (exit 0)."""
        return not self.found and not self.inconclusive

    @property
    def verdict(self) -> str:
        """``problems``, else ``inconclusive`` (the window could not tell), else ``healthy``."""
        return "problems" if self.found else "inconclusive" if self.inconclusive else "healthy"

    def verdict_reasons(self) -> list[str]:
        """The verdict in words: what was found, or why the window could not tell."""
        out = []
        if self.suspects:
            out.append(f"{len(self.suspects)} suspects, first {self.suspects[0].element}")
        if self.unreachable:
            out.append(f"{len(self.unreachable)} hosts unreachable")
        if self.unlocalised is not None:
            out.append(str(self.unlocalised.get("evidence", "unlocalised loss or delay")))
        busy = self.busy_with_loss
        if busy:
            out.append(f"{len(busy)} busy hosts on paths that lost probes")
        if self.consistency:
            out.append(f"{len(self.consistency)} consistency checks failed: records left out")
        return out or list(self.inconclusive)

    def to_json(self, *, paths: bool = True) -> dict[str, Any]:
        """The ``cwctl.scan/1`` object; without ``paths`` its long lists are left to the
        writer (``report.render_bytes``): ``paths`` empty (``report.jsonenc.encode_chunks``
        writes it a chunk at a time) and the truth's paths as their ``TruthPaths``."""
        out: dict[str, Any] = {
            "schema": SCAN_SCHEMA,
            "source": self.source,
            "reference": self.reference,
            "duration_s": self.duration_s,
            "timestamp_source": self.timestamp_source,
            "records": self.records,
            "sync": self.sync,
            "hosts": [h.to_json() for h in self.hosts],
            "paths": [p for c in json_chunks(self.paths, len(self.paths) or 1) for p in c]
            if paths
            else [],
            "suspects": [s.to_json() for s in self.suspects],
            "verdict": self.verdict,
            "reasons": self.verdict_reasons(),
        }
        if self.unlocalised is not None:
            out["unlocalised"] = self.unlocalised
        if self.t_ref_ns is not None:
            out["t_ref_ns"] = self.t_ref_ns
        if self.jobs is not None:
            out["jobs"] = self.jobs
        if self.telemetry:
            out["telemetry"] = self.telemetry
        if self.consistency:
            out["consistency"] = self.consistency
        if self.truth is not None:
            out["truth"] = plain_truth(self.truth) if paths else self.truth
        return out
