"""A plan is stale when what it changes changed, not when something beside it did."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cwctl.actions import nccl, prior
from cwctl.actions.plan import ActionPlan


def read(path: Path, key: str = "NCCL_IB_HCA") -> str:
    argv = nccl.read_argv(sys.executable, str(path), key)
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def with_devices(seen: str, devices: list[str]) -> str:
    return json.dumps({**json.loads(seen), "devices": devices}) + "\n"


def test_an_nccl_plan_is_stale_when_its_file_changes_not_when_an_interface_comes(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA=^=mlx5_3\n")
    argv = nccl.read_argv(sys.executable, str(conf), "NCCL_IB_HCA")
    seen = read(conf)
    plan = ActionPlan("reroute", "gpu-001/mlx5_1", "r", [])
    plan.prior["nccl:gpu-001"] = {"host": "gpu-001", "read": argv, "seen": seen}

    def now(text: str) -> dict[str, object]:
        return {"nccl:gpu-001": {"host": "gpu-001", "read": argv, "seen": text}}

    assert prior.stale(plan, now(seen)) == []
    # a container's veth appeared on the host meanwhile: the file is as it was
    moved = with_devices(seen, [*json.loads(seen)["devices"], "vethc0ffee"])
    assert prior.stale(plan, now(moved)) == []
    conf.write_text("NCCL_IB_HCA=^=mlx5_0\n")
    assert prior.stale(plan, now(read(conf))) == ["nccl:gpu-001"]
    conf.unlink()
    assert prior.stale(plan, now(read(conf))) == ["nccl:gpu-001"]
    assert prior.stale(plan, now("<unreadable: exit 255>")) == ["nccl:gpu-001"]
