"""Jobs as cwctl sees them: who runs what on which hosts, whatever the scheduler."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class Job:
    """One running job (Slurm) or workload (Kubernetes pods of one owner).

    ``nodes`` are the scheduler's node names; ``hosts`` those of them the inventory (or
    the simulated fabric) knows, the hosts cwctl can say anything about. ``marks`` are what
    a policy may call a job protected by: ``comment`` and ``qos`` (Slurm), ``label:KEY``
    (Kubernetes), each to its value."""

    id: str
    user: str
    name: str
    nodes: tuple[str, ...]
    hosts: tuple[str, ...] = ()
    marks: Mapping[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The job in a report: ``{"id", "user", "name", "nodes"}`` (nodes: a count)."""
        return {"id": self.id, "user": self.user, "name": self.name, "nodes": len(self.nodes)}

    def label(self) -> str:
        """``id (user/name, N nodes)`` for a plan's lines."""
        n = len(self.nodes)
        return f"{self.id} ({self.user}/{self.name}, {n} node{'s' * (n != 1)})"


@dataclass(frozen=True)
class JobRead:
    """What one read of the scheduler gave: its jobs, or why there are none to show.

    ``scheduler`` is ``slurm``, ``k8s`` or ``sim``; ``error`` (one line) when the
    scheduler was asked and did not answer: the scan goes on, the report says so;
    ``warnings`` the rows of its answer that were skipped (a malformed row is never the
    failure of the whole read)."""

    scheduler: str
    jobs: tuple[Job, ...] = ()
    error: str | None = None
    warnings: tuple[str, ...] = ()  # rows of the scheduler's output skipped, one line each

    @cached_property
    def map(self) -> JobMap:
        return JobMap(self.jobs)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scheduler": self.scheduler, "running": len(self.jobs)}
        if self.error is not None:
            out["error"] = self.error
        if self.warnings:
            out["skipped"] = list(self.warnings)
        return out


class JobMap:
    """Jobs by host: which jobs run on each inventory host."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self.jobs = tuple(jobs)
        self._by_host: dict[str, list[Job]] = {}
        for job in self.jobs:
            for host in job.hosts:
                self._by_host.setdefault(host, []).append(job)

    def __len__(self) -> int:
        return len(self.jobs)

    def on(self, host: str) -> list[Job]:
        """The jobs with a node on ``host``."""
        return list(self._by_host.get(host, ()))

    def on_any(self, hosts: Iterable[str]) -> list[Job]:
        """The jobs with a node on any of ``hosts``, each once, in map order."""
        wanted = {id(j) for h in hosts for j in self._by_host.get(h, ())}
        return [j for j in self.jobs if id(j) in wanted]


def to_hosts(nodes: Iterable[str], known: Mapping[str, str]) -> tuple[str, ...]:
    """The inventory hosts of scheduler ``nodes``: ``known`` maps a name the scheduler
    may use (the host's name, its short name, its address) to the host."""
    out: list[str] = []
    for node in nodes:
        host = known.get(node) or known.get(node.split(".", 1)[0])
        if host is not None and host not in out:
            out.append(host)
    return tuple(out)
