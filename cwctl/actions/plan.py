"""An action plan as data: what will run where, and what undoes it.

A ``Step`` runs on one host (an inventory host, the scheduler's host, ``"local"`` for
this machine, or ``"sim"`` for the simulator's model). Real steps carry ``argv`` (a list
of arguments, never a shell string; shown with ``shlex.join``) and ``undo_argv``;
simulator steps carry a model ``change`` and its inverse ``undo_change`` (dicts, see
``simulated.py``). Plans round-trip through JSON (``to_json`` / ``from_json``): the
journal stores them, ``rollback`` reads them back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
import shlex
from dataclasses import dataclass, field
from typing import Any

LOCAL = "local"  # a step that runs on this machine
SIM = "sim"  # a step that changes the simulator's model


@dataclass(frozen=True)
class Step:
    host: str
    description: str
    argv: tuple[str, ...] = ()
    undo_argv: tuple[str, ...] | None = None  # None: this step cannot be undone
    change: dict[str, Any] | None = None  # simulator steps only
    undo_change: dict[str, Any] | None = None
    undo_description: str = ""

    @property
    def reversible(self) -> bool:
        return self.undo_argv is not None or self.undo_change is not None

    def inverse(self) -> Step:
        """The step that undoes this one (and is undone by it)."""
        if not self.reversible:
            raise ValueError(f"step {self.description!r} cannot be undone")
        return Step(
            host=self.host,
            description=self.undo_description or f"undo: {self.description}",
            argv=tuple(self.undo_argv or ()),
            undo_argv=tuple(self.argv) if self.argv else None,
            change=self.undo_change,
            undo_change=self.change,
            undo_description=self.description,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "description": self.description}
        if self.change is not None:
            out["change"] = self.change
            out["undo_change"] = self.undo_change
        else:
            out["argv"] = list(self.argv)
            out["undo_argv"] = list(self.undo_argv) if self.undo_argv is not None else None
        if self.undo_description:
            out["undo_description"] = self.undo_description
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        undo = data.get("undo_argv")
        return cls(
            host=str(data["host"]),
            description=str(data["description"]),
            argv=tuple(str(a) for a in data.get("argv") or ()),
            undo_argv=tuple(str(a) for a in undo) if undo is not None else None,
            change=data.get("change"),
            undo_change=data.get("undo_change"),
            undo_description=str(data.get("undo_description", "")),
        )


@dataclass
class ActionPlan:
    """What an action will do: ``kind`` (reroute, drain, resume, rollback) of ``element``."""

    kind: str
    element: str
    reason: str
    steps: list[Step]
    context: dict[str, Any] = field(default_factory=dict)  # where it runs: sim / inventory
    notes: list[str] = field(default_factory=list)  # what the operator should know
    id: str = field(default_factory=lambda: new_plan_id())
    created: str = field(default_factory=lambda: utc_now())
    rollback_of: str | None = None
    # what the plan was made on, per target (the route, NCCL value or model state read
    # while planning): journalled with the intent, compared again before applying
    prior: dict[str, Any] = field(default_factory=dict)
    # host-side steering: the method, the suspect and the source-port pools per pair
    # (steer.py), or the RoCE source-port sets; empty for every other action
    steering: dict[str, Any] = field(default_factory=dict)
    # the running jobs it touches, read while planning (``cwctl.actions.jobs``): each
    # {"id", "user", "name", "nodes", "how", "marks"}; None when no scheduler was read
    jobs: list[dict[str, Any]] | None = None

    def fingerprint(self) -> str:
        """A short hash of ``prior``: equal fingerprints, same state planned on."""
        text = json.dumps(self.prior, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "created": self.created,
            "kind": self.kind,
            "element": self.element,
            "reason": self.reason,
            "context": self.context,
            "steps": [s.to_json() for s in self.steps],
            "notes": list(self.notes),
        }
        if self.rollback_of is not None:
            out["rollback_of"] = self.rollback_of
        if self.prior:
            out["prior"] = self.prior
        if self.steering:
            out["steering"] = self.steering
        if self.jobs is not None:
            out["jobs"] = self.jobs
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ActionPlan:
        return cls(
            id=str(data["id"]),
            created=str(data["created"]),
            kind=str(data["kind"]),
            element=str(data["element"]),
            reason=str(data.get("reason", "")),
            steps=[Step.from_json(s) for s in data.get("steps", [])],
            context=dict(data.get("context", {})),
            notes=[str(n) for n in data.get("notes", [])],
            rollback_of=data.get("rollback_of"),
            prior=dict(data.get("prior") or {}),
            steering=dict(data.get("steering") or {}),
            jobs=list(data["jobs"]) if isinstance(data.get("jobs"), list) else None,
        )


SUDO = ("sudo", "-n", "--")  # -n: fail at once rather than wait for a password


def with_sudo(plan: ActionPlan) -> ActionPlan:
    """The plan with every command (and its undo) run through ``sudo -n --``; the
    simulator's steps are left as they are."""

    def wrap(argv: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if argv is None else (*SUDO, *argv)

    plan.steps = [
        step
        if step.change is not None
        else Step(
            host=step.host,
            description=step.description,
            argv=wrap(step.argv) or (),
            undo_argv=wrap(step.undo_argv),
            undo_description=step.undo_description,
        )
        for step in plan.steps
    ]
    return plan


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_plan_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx``: sorts by time, unique enough for one operator's journal."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


def show_argv(argv: tuple[str, ...], *, full: bool) -> str:
    """``shlex.join(argv)``; unless ``full``, a multi-line argument (a ``python3 -c``
    program) is shown as ``<N-line program>``: the rest of the command stays exact."""
    if full:
        return shlex.join(argv)
    parts = []
    for arg in argv:
        if "\n" in arg.strip():
            parts.append(f"<{arg.count(chr(10)) + 1}-line program, -v shows it>")
        else:
            parts.append(shlex.quote(arg))
    return " ".join(parts)


def format_plan(plan: ActionPlan, *, full: bool = False) -> str:
    """The plan as text: each step, where it runs, the exact command and its undo
    (``full``: programs passed as arguments in full, too)."""
    out = [f"plan {plan.id}: {plan.kind} {plan.element}"]
    if plan.reason:
        out.append(f"reason: {plan.reason}")
    if plan.rollback_of:
        out.append(f"undoes: {plan.rollback_of}")
    if not plan.steps:
        out.append("no steps: nothing needs to change")
    for i, step in enumerate(plan.steps, 1):
        out.append(f"{i:>2}. [{step.host}] {step.description}")
        if step.change is not None:
            out.append(f"    undo: {step.undo_description or '(cannot be undone)'}")
            continue
        out.append(f"    run:  {show_argv(step.argv, full=full)}")
        undo = (
            show_argv(step.undo_argv, full=full)
            if step.undo_argv is not None
            else "(cannot be undone)"
        )
        out.append(f"    undo: {undo}")
    out += format_jobs(plan.jobs)
    out += [f"note: {n}" for n in plan.notes]
    return "\n".join(out) + "\n"


def format_jobs(jobs: list[dict[str, Any]] | None) -> list[str]:
    """The plan's lines on the running jobs it touches (none without a scheduler)."""
    if jobs is None:
        return []
    if not jobs:
        return ["jobs: no running job is touched"]
    out = [f"jobs touched ({len(jobs)}):"]
    for j in jobs:
        n = j.get("nodes", 0)
        out.append(
            f"  {j.get('id')} {j.get('user')}/{j.get('name')} ({n} node{'s' * (n != 1)}): "
            f"{j.get('how')}"
        )
    return out
