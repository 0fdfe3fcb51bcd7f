"""Kubernetes workloads, read from ``kubectl get pods -o json``: the running pods by node.

A job is the pods of one workload: the ``training.kubeflow.org/job-name`` label
(PyTorchJob and its kin), else ``job-name`` (a batch Job), else the pod's controller
(``ownerReferences``), else the pod alone; its id is ``NAMESPACE/NAME``, its user the
namespace. Each pod label is a mark a policy may name (``label:KEY``). Pods of a
DaemonSet (on every node: not a job) and cwctl's own agent pods are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cwctl.errors import InputError
from cwctl.jobs.model import Job, to_hosts

KUBECTL_ARGV = (
    "kubectl", "get", "pods", "--all-namespaces",
    "--field-selector=status.phase=Running", "-o", "json",
)  # fmt: skip
WORKLOAD_LABELS = ("training.kubeflow.org/job-name", "job-name")
AGENT_LABEL = ("app.kubernetes.io/name", "cwctl-agent")  # cwctl.transport.k8s's pods


def _is_job(meta: Mapping[str, Any]) -> bool:
    labels = meta.get("labels") or {}
    if labels.get(AGENT_LABEL[0]) == AGENT_LABEL[1]:
        return False
    return not any(
        o.get("controller") and o.get("kind") == "DaemonSet"
        for o in meta.get("ownerReferences") or ()
    )


def _workload(meta: Mapping[str, Any]) -> str:
    labels = meta.get("labels") or {}
    for key in WORKLOAD_LABELS:
        if labels.get(key):
            return str(labels[key])
    for owner in meta.get("ownerReferences") or ():
        if owner.get("controller") and owner.get("name"):
            return str(owner["name"])
    return str(meta.get("name", "?"))


def parse_pods(text: str, known: Mapping[str, str]) -> list[Job]:
    """The workloads of a ``kubectl get pods -o json`` List (running pods with a node)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"kubectl get pods: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise InputError("kubectl get pods: not a List with items")
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for pod in doc["items"]:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        status = pod.get("status") or {}
        node = spec.get("nodeName")
        if not node or status.get("phase", "Running") != "Running" or not _is_job(meta):
            continue
        namespace = str(meta.get("namespace", "default"))
        key = (namespace, _workload(meta))
        group = groups.setdefault(key, {"nodes": [], "marks": {}})
        if node not in group["nodes"]:
            group["nodes"].append(str(node))
        for label, value in (meta.get("labels") or {}).items():
            group["marks"][f"label:{label}"] = str(value)
    return [
        Job(f"{ns}/{name}", ns, name, tuple(g["nodes"]), to_hosts(g["nodes"], known), g["marks"])
        for (ns, name), g in groups.items()
    ]
