"""Kubernetes: take a node out of scheduling with the reason and the suspect on it, put it
back; optionally evict its pods.

Draining is three steps, each undone by rollback:

- ``kubectl cordon NODE`` (undo: ``uncordon``);
- ``kubectl annotate node NODE cwctl.io/drain-reason=REASON cwctl.io/suspect=ELEMENT
  --overwrite``: the whole reason, and the suspect that caused it (the node itself when
  none was named), for ``kubectl describe node`` and anything that watches nodes (undo:
  remove both annotations);
- ``kubectl taint node NODE cwctl.io/drained=SUSPECT:NoSchedule --overwrite``: a taint
  says why in ``kubectl get nodes -o wide``-style tooling; its value is the suspect
  reduced to what a label value may hold (undo: remove the taint).

``--evict`` adds ``kubectl drain NODE --ignore-daemonsets`` (evicted pods are not brought
back by an undo; uncordoning lets new ones be scheduled there).
"""

from __future__ import annotations

import re

from cwctl.actions.drainreason import cited
from cwctl.actions.plan import Step

REASON_KEY = "cwctl.io/drain-reason"
SUSPECT_KEY = "cwctl.io/suspect"
TAINT_KEY = "cwctl.io/drained"
_LABEL_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """``text`` as a Kubernetes label (and taint) value: at most 63 characters of
    ``[A-Za-z0-9._-]``, starting and ending alphanumeric (``gpu-001/mlx5_1`` ->
    ``gpu-001_mlx5_1``); empty when nothing is left."""
    value = _LABEL_BAD.sub("_", text)[:63]
    return value.strip("._-")


def _annotate(node: str, reason: str, suspect: str) -> tuple[str, ...]:
    return (
        "kubectl", "annotate", "node", node,
        f"{REASON_KEY}={reason}", f"{SUSPECT_KEY}={suspect}", "--overwrite",
    )  # fmt: skip


def _unannotate(node: str) -> tuple[str, ...]:
    return ("kubectl", "annotate", "node", node, f"{REASON_KEY}-", f"{SUSPECT_KEY}-")


def _taint(node: str, suspect: str) -> tuple[str, ...]:
    value = label_value(suspect) or "cwctl"
    return ("kubectl", "taint", "node", node, f"{TAINT_KEY}={value}:NoSchedule", "--overwrite")


def _untaint(node: str) -> tuple[str, ...]:
    return ("kubectl", "taint", "node", node, f"{TAINT_KEY}:NoSchedule-")


def drain_steps(
    where: str, node: str, reason: str, *, evict: bool = False, suspect: str | None = None
) -> list[Step]:
    blame = suspect or node
    steps = [
        Step(
            host=where,
            description=f"kubernetes: cordon {node} ({cited(reason)})",
            argv=("kubectl", "cordon", node),
            undo_argv=("kubectl", "uncordon", node),
            undo_description=f"kubernetes: uncordon {node}",
        ),
        Step(
            host=where,
            description=f"kubernetes: annotate {node} with the reason and suspect {blame}",
            argv=_annotate(node, reason, blame),
            undo_argv=_unannotate(node),
            undo_description=f"kubernetes: remove cwctl's annotations from {node}",
        ),
        Step(
            host=where,
            description=f"kubernetes: taint {node} {TAINT_KEY}={label_value(blame) or 'cwctl'}",
            argv=_taint(node, blame),
            undo_argv=_untaint(node),
            undo_description=f"kubernetes: remove the {TAINT_KEY} taint from {node}",
        ),
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
        ),
        Step(
            host=where,
            description=f"kubernetes: remove the {TAINT_KEY} taint from {node}",
            argv=_untaint(node),
            undo_argv=_taint(node, node),
            undo_description=f"kubernetes: taint {node} again",
        ),
        Step(
            host=where,
            description=f"kubernetes: remove cwctl's annotations from {node}",
            argv=_unannotate(node),
            undo_argv=_annotate(node, reason, node),
            undo_description=f"kubernetes: annotate {node} again ({cited(reason)})",
        ),
    ]
