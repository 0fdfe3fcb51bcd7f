"""Slurm: drain a node (``scontrol update NodeName=H State=DRAIN Reason=R``), resume it.

``Reason`` is one argv element whatever it holds (spaces, quotes, ``;``): scontrol
reads each argument as one ``key=value``; over SSH the argv is quoted with
``shlex.join`` for the remote shell.
"""

from __future__ import annotations

from cwctl.actions.drainreason import cited
from cwctl.actions.plan import Step


def drain_argv(node: str, reason: str) -> tuple[str, ...]:
    return ("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")


def resume_argv(node: str) -> tuple[str, ...]:
    return ("scontrol", "update", f"NodeName={node}", "State=RESUME")


def drain_steps(where: str, node: str, reason: str) -> list[Step]:
    return [
        Step(
            host=where,
            description=f"slurm: drain {node} ({cited(reason)})",
            argv=drain_argv(node, reason),
            undo_argv=resume_argv(node),
            undo_description=f"slurm: resume {node}",
        )
    ]


def resume_steps(where: str, node: str, reason: str) -> list[Step]:
    return [
        Step(
            host=where,
            description=f"slurm: resume {node}",
            argv=resume_argv(node),
            undo_argv=drain_argv(node, reason),
            undo_description=f"slurm: drain {node} again ({cited(reason)})",
        )
    ]
