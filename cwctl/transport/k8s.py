"""Kubernetes: the ephemeral per-node pods that would run a scan's agents.

``agent_pods(inventory, ...)`` gives one bare Pod per inventory host (the host name is
the Kubernetes node name), as a ``v1 List`` that ``kubectl apply -f`` takes (JSON is
YAML). Each pod:

* is pinned to its node with ``nodeName`` (no scheduler: a cordoned node still runs it,
  as an agent must run where the fabric is measured) and tolerates every taint;
* uses the host's network (``hostNetwork``): the agent binds the host's fabric address
  and its probes cross the real NICs and switches;
* runs the same one-line bootstrap as over SSH (``python3 -c CODE``) with ``stdin``
  open (``stdinOnce``): ``kubectl attach -i POD`` carries the bundle and params in and
  the records out, one attach per host, as one SSH session per host does;
* never restarts (``restartPolicy: Never``), dies on its own after
  ``activeDeadlineSeconds`` whatever happens to the operator, mounts nothing, has no
  service account token, runs as nobody with no capabilities and a read-only root:
  the agent needs none (kernel timestamps, UDP on ephemeral ports, /sys reads).

Only manifests are generated (``cwctl inventory pods``, docs/k8s.md); no API server is
faked in tests. Pods are named ``cwctl-agent-<node>-<scan>`` so two scans never meet.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from cwctl.probe.bootstrap import bootstrap_argv

if TYPE_CHECKING:  # the CLI reads the defaults below at start-up: keep this module light
    from cwctl.inventory import Inventory

DEFAULT_IMAGE = "python:3.12-slim"
DEFAULT_NAMESPACE = "cwctl"
DEFAULT_DEADLINE_S = 120  # activeDeadlineSeconds: Kubernetes ends a pod after this
LABEL = "app.kubernetes.io/name"
# cwctl's own keys under one prefix, the drain's too (cwctl.actions.k8s: cwctl.io/...)
SCAN_LABEL = "cwctl.io/scan"
NODE_ANNOTATION = "cwctl.io/node"
_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def pod_name(node: str, scan_id: str) -> str:
    """A DNS-1123 name for ``node``'s agent pod of scan ``scan_id`` (at most 63 chars)."""
    stem = _DNS_LABEL.sub("-", node.lower()).strip("-") or "node"
    tail = f"-{scan_id}"
    return f"cwctl-agent-{stem}"[: 63 - len(tail)].rstrip("-") + tail


def agent_pod(
    node: str,
    *,
    scan_id: str,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    python: str = "python3",
    deadline_s: int = DEFAULT_DEADLINE_S,
) -> dict[str, Any]:
    """The pod that runs ``node``'s agent for one scan."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(node, scan_id),
            "namespace": namespace,
            "labels": {LABEL: "cwctl-agent", SCAN_LABEL: scan_id},
            "annotations": {NODE_ANNOTATION: node},
        },
        "spec": {
            "nodeName": node,
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "restartPolicy": "Never",
            "activeDeadlineSeconds": deadline_s,
            "terminationGracePeriodSeconds": 2,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "agent",
                    "image": image,
                    # the agent's own alarm too: the pod's deadline holds inside it
                    "command": bootstrap_argv(python, lifetime_s=deadline_s),
                    "stdin": True,
                    "stdinOnce": True,
                    "tty": False,
                    "resources": {
                        "requests": {"cpu": "20m", "memory": "48Mi"},
                        "limits": {"cpu": "500m", "memory": "128Mi"},
                    },
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65534,
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def agent_pods(
    inventory: Inventory,
    *,
    scan_id: str,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    deadline_s: int = DEFAULT_DEADLINE_S,
) -> dict[str, Any]:
    """Every inventory host's agent pod, as one ``v1 List`` for ``kubectl apply -f``."""
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?", scan_id):
        raise ValueError(f"scan id {scan_id!r}: 1-16 of a-z, 0-9 and '-', not at the ends")
    items = [
        agent_pod(
            h.name,
            scan_id=scan_id,
            namespace=namespace,
            image=image,
            python=inventory.endpoint(h).python,
            deadline_s=deadline_s,
        )
        for h in inventory.hosts
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}
