"""Against a real Slurm (slurmctld, one slurmd per network namespace, a private munged):
drain with a reason, resume, rollback, checked with ``scontrol show node`` and ``srun``;
and a whole scan whose agents run as one ``srun`` step (``cwctl scan --via slurm``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurmbed import SlurmCluster, skip_without_slurm
from typer.testing import CliRunner

from cwctl.cli import app

pytestmark = pytest.mark.slurm

REASON = "cwctl: lossy NIC; it's 'quoted' & long"


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    skip_without_slurm()
    with SlurmCluster(3) as cluster:
        yield cluster


@pytest.fixture
def env(slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """CLI environment: the cluster's SLURM_CONF, a private state dir; the inventory."""
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    inv = tmp_path / "inv.toml"
    hosts = "".join(
        f'[[host]]\nname = "{node}"\naddress = "{addr}"\n\n'
        for node, addr in slurm.addresses.items()
    )
    # rate 100 (not the default 2): the scan test counts records from a 1 s window
    probe = "[probe]\nduration = 1.0\nrate = 100\n\n"
    inv.write_text(f'[scheduler]\nkind = "slurm"\n\n{probe}{hosts}')
    return inv


def run(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


def test_drain_resume_and_rollback_against_real_slurm(slurm: SlurmCluster, env: Path) -> None:
    node = slurm.nodes[1]
    plan = run("drain", node, "-i", str(env), "--reason", REASON)
    assert plan.exit_code == 0, plan.output  # type: ignore[attr-defined]
    assert slurm.show_node(node)["State"] == "IDLE"  # a dry run changes nothing

    drained = run("drain", node, "-i", str(env), "--reason", REASON, "--apply", "--yes")
    assert drained.exit_code == 0, drained.output  # type: ignore[attr-defined]
    shown = slurm.show_node(node)
    assert "DRAIN" in shown["State"].split("+")
    assert shown["Reason"].startswith(REASON)  # scontrol appends [user@time]
    assert slurm.node_states()[node] == "drained"
    # the scheduler keeps work off it: an immediate job on every node cannot start
    refused = slurm.run("srun", f"-N{slurm.n}", "--immediate=1", "true", check=False)
    assert refused.returncode != 0
    assert slurm.node_states()[slurm.nodes[0]] == "idle"  # the others untouched

    resumed = run("resume", node, "-i", str(env), "--apply", "--yes")
    assert resumed.exit_code == 0, resumed.output  # type: ignore[attr-defined]
    assert "DRAIN" not in slurm.show_node(node)["State"]
    slurm.wait_idle()

    again = run("drain", node, "-i", str(env), "--reason", REASON, "--apply", "--yes",
                "--suspect", f"{node}/eth1")  # fmt: skip
    assert again.exit_code == 0, again.output  # type: ignore[attr-defined]
    # the reason Slurm keeps names the suspect that caused the drain
    assert slurm.show_node(node)["Reason"].startswith(f"{REASON} (suspect {node}/eth1)")
    undo = run("rollback", "--apply", "--yes")  # undoes the last drain: a resume
    assert undo.exit_code == 0, undo.output  # type: ignore[attr-defined]
    assert "DRAIN" not in slurm.show_node(node)["State"]
    slurm.wait_idle()


def test_drain_of_a_node_slurm_does_not_know_fails_and_says_so(
    slurm: SlurmCluster, env: Path, tmp_path: Path
) -> None:
    inv = tmp_path / "other.toml"
    ghost = '[[host]]\nname = "ghost1"\naddress = "10.9.9.9"\n'
    inv.write_text(f'[scheduler]\nkind = "slurm"\n\n{ghost}')
    result = run("drain", "ghost1", "-i", str(inv), "--apply", "--yes")
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    assert "step 1 failed" in result.stderr  # type: ignore[attr-defined]
    assert json.loads(run("journal", "--format", "json").stdout)["entries"]  # type: ignore[attr-defined]


def test_scan_through_one_srun_step(slurm: SlurmCluster, env: Path) -> None:
    result = run("scan", "-i", str(env), "--via", "slurm", "--format", "json", "--duration", "1")
    assert result.exit_code in (0, 3), result.output  # type: ignore[attr-defined]
    report = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert report["source"] == "slurm"
    hosts = {h["name"]: h for h in report["hosts"]}
    assert set(hosts) == set(slurm.nodes)
    assert all(h["status"] == "ok" for h in hosts.values()), hosts
    # one kernel clock behind every namespace: the true offsets are all zero
    for h in hosts.values():
        assert abs(h["offset_ns"]) < 200_000, h
    pairs = {(p["src"], p["dst"]) for p in report["paths"]}
    assert len(pairs) == slurm.n * (slurm.n - 1)  # every node probed and answered
    assert all(p["received"] > 0 for p in report["paths"])
    assert report["records"] > 100


def test_a_drained_node_is_left_out_and_the_others_are_scanned(
    slurm: SlurmCluster, env: Path
) -> None:
    node = slurm.nodes[0]
    slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=cwctl test")
    try:
        result = run("scan", "-i", str(env), "--via", "slurm", "--format", "json")
    finally:
        slurm.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
        slurm.wait_idle()
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    hosts = {h["name"]: h for h in json.loads(result.stdout)["hosts"]}  # type: ignore[attr-defined]
    assert hosts[node]["status"] == "unreachable"
    assert "drained" in hosts[node]["error"]
    assert all(hosts[n]["status"] == "ok" for n in slurm.nodes[1:]), hosts


def test_via_slurm_needs_an_inventory() -> None:
    result = run("scan", "--sim", "--via", "slurm")
    assert result.exit_code == 2
    assert "--via slurm" in result.stderr and "--sim" in result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]


def test_a_host_slurm_does_not_know_is_unreachable_and_the_others_scan(
    slurm: SlurmCluster, env: Path, tmp_path: Path
) -> None:
    inv = tmp_path / "with-ghost.toml"
    ghost = '[[host]]\nname = "ghost9"\naddress = "10.204.255.9"\n'
    inv.write_text(env.read_text() + ghost)
    result = run("scan", "-i", str(inv), "--via", "slurm", "--format", "json")
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    hosts = {h["name"]: h for h in json.loads(result.stdout)["hosts"]}  # type: ignore[attr-defined]
    assert hosts["ghost9"]["status"] == "unreachable"
    assert "not a node of this Slurm cluster" in hosts["ghost9"]["error"]
    assert all(hosts[n]["status"] == "ok" for n in slurm.nodes), hosts


def test_watch_rounds_through_srun_steps(slurm: SlurmCluster, env: Path) -> None:
    """``cwctl watch --via slurm``: each round is one srun step over the same session."""
    result = run("watch", "-i", str(env), "--via", "slurm", "--rounds", "2", "--interval", "0")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    lines = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]  # type: ignore[attr-defined]
    assert lines[0]["event"] == "start" and lines[0]["source"] == "slurm"
    rounds = [x for x in lines if x["event"] == "round"]
    assert [r["reached"] for r in rounds] == [slurm.n, slurm.n]
    assert all(r["records"] > 100 for r in rounds)
