"""Kubernetes: cordon a node (``kubectl cordon NODE``), uncordon it; optionally evict
its pods (``kubectl drain NODE --ignore-daemonsets``: evicted pods are not brought
back by an undo; uncordoning lets new ones be scheduled there)."""

from __future__ import annotations

from cwctl.actions.plan import Step


def drain_steps(where: str, node: str, reason: str, *, evict: bool = False) -> list[Step]:
    steps = [
        Step(
            host=where,
            description=f"kubernetes: cordon {node} ({reason})",
            argv=("kubectl", "cordon", node),
            undo_argv=("kubectl", "uncordon", node),
            undo_description=f"kubernetes: uncordon {node}",
        )
    ]
    if evict:
        steps.append(
            Step(
                host=where,
                description=f"kubernetes: evict the pods of {node} (not undone by rollback)",
                argv=("kubectl", "drain", node, "--ignore-daemonsets"),
                undo_argv=None,
            )
        )
    return steps


def resume_steps(where: str, node: str, reason: str) -> list[Step]:
    return [
        Step(
            host=where,
            description=f"kubernetes: uncordon {node}",
            argv=("kubectl", "uncordon", node),
            undo_argv=("kubectl", "cordon", node),
            undo_description=f"kubernetes: cordon {node} again",
        )
    ]
