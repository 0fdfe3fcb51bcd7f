"""The Kubernetes agent pods: one per inventory host, pinned, host network, ephemeral,
unprivileged; the container's command is the working agent bootstrap (run here)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.probe.bootstrap import agent_payload

INVENTORY = (
    '[[host]]\nname = "gpu-001"\naddress = "10.0.0.1"\n\n'
    '[[host]]\nname = "GPU_002.rack-with-a-very-long-name-that-goes-on-and-on"\n'
    'address = "10.0.0.2"\npython = "/opt/py/bin/python3"\n'
)
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def pods(tmp_path: Path, *extra: str) -> object:
    inv = tmp_path / "inv.toml"
    inv.write_text(INVENTORY)
    return CliRunner().invoke(app, ["inventory", "pods", "-i", str(inv), *extra])


def test_one_pinned_ephemeral_unprivileged_pod_per_host(tmp_path: Path) -> None:
    result = pods(tmp_path, "--scan-id", "s42", "--deadline", "60")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    listing = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    items = listing["items"]
    assert [p["spec"]["nodeName"] for p in items] == [
        "gpu-001",
        "GPU_002.rack-with-a-very-long-name-that-goes-on-and-on",
    ]
    names = [p["metadata"]["name"] for p in items]
    assert len(set(names)) == 2
    for pod in items:
        name = pod["metadata"]["name"]
        assert DNS_LABEL.fullmatch(name) and len(name) <= 63 and name.endswith("-s42")
        spec = pod["spec"]
        assert spec["hostNetwork"] is True
        assert spec["restartPolicy"] == "Never"
        assert spec["activeDeadlineSeconds"] == 60
        assert spec["automountServiceAccountToken"] is False
        assert "volumes" not in spec
        (container,) = spec["containers"]
        assert container["stdin"] and container["stdinOnce"] and not container["tty"]
        ctx = container["securityContext"]
        assert ctx["runAsNonRoot"] and not ctx["allowPrivilegeEscalation"]
        assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert items[1]["spec"]["containers"][0]["command"][0] == "/opt/py/bin/python3"


def test_without_flags_the_cli_and_the_library_give_the_same_pods(tmp_path: Path) -> None:
    from cwctl.inventory import parse_inventory
    from cwctl.transport.k8s import agent_pods

    result = pods(tmp_path)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    listing = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert listing == agent_pods(parse_inventory(INVENTORY), scan_id="scan")
    pod = listing["items"][0]
    assert pod["metadata"]["namespace"] == "cwctl"
    assert pod["spec"]["activeDeadlineSeconds"] == 120
    assert pod["spec"]["containers"][0]["image"] == "python:3.12-slim"


def test_the_pod_command_starts_an_agent_from_its_stdin(tmp_path: Path) -> None:
    listing = json.loads(pods(tmp_path).stdout)  # type: ignore[attr-defined]
    command = listing["items"][0]["spec"]["containers"][0]["command"]
    params = {"host": "gpu-001", "bind": "127.0.0.1", "duration_s": 0.1, "deadline_s": 5}
    done = subprocess.run(
        [sys.executable, *command[1:]],
        input=agent_payload(params),  # then EOF on stdin: the agent ends
        capture_output=True,
        timeout=60,
    )
    kinds = [json.loads(line)["type"] for line in done.stdout.splitlines() if line.strip()]
    assert kinds[0] == "hello" and kinds[-1] == "summary", done.stderr


def test_a_bad_scan_id_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = pods(tmp_path, "--scan-id", "Not Valid")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "--scan-id" in result.stderr  # type: ignore[attr-defined]
