"""Regenerate docs/commands/*.md: each command run for real, its output pasted verbatim.

    .venv/bin/python docs/commands/generate.py

Runs against the simulated fabric (seeded, so the numbers repeat), ``--local`` agents
and temporary files; a private CWCTL_STATE_DIR, so the operator's journal and simulator
state are untouched. Each page: what the command is for, the command line, its exit
code, and its output (stdout and stderr as a terminal shows them, without colour).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CWCTL = [sys.executable, "-m", "cwctl.cli"]
MAX_LINES = 60
SETUP = "(setup)"  # an example's note: run it, do not show it
KEY = "id_ed25519"  # the example inventory's identity, a file in the pages' directory


def run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[str, int]:
    proc = subprocess.run(
        [*CWCTL, *args], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    if len(lines) > MAX_LINES:
        cut = len(lines) - MAX_LINES
        lines = [*lines[:MAX_LINES], f"... ({cut} more lines)"]
    return "\n".join(lines), proc.returncode


def block(args: list[str], env: dict[str, str], cwd: Path, note: str = "") -> str:
    out, code = run(args, env, cwd)
    shown = "cwctl " + shlex.join(args).replace(str(cwd) + "/", "")
    text = f"```\n$ {shown}\n{out}\n```\n\nexit {code}"
    return text + (f" ({note})" if note else "") + "\n"


SIM16 = ["--sim", "--hosts", "16", "--hosts-per-leaf", "4"]  # a 16-host fabric, 4 leaves
SPINE3_DOWN = ["reroute", *SIM16, "--fault", "switch:spine3:down", "spine3"]
SIM_SETUP = ["reroute", *SIM16, "spine3", "--apply", "--yes"]  # the sim page starts here
JOBS_SIM = ["--sim", "-i", "inventory.example.toml", "--jobs", "2"]  # job-env's fabric


def drain_args(inventory: str) -> list[str]:
    return [
        "drain", "gpu-007", "-i", inventory,
        "--reason", "NIC flaps", "--suspect", "gpu-007/mlx5_1",
    ]  # fmt: skip


PAGES: list[tuple[str, str, list[tuple[str, list[str]]]]] = [
    (
        "scan",
        "One scan: probe, solve clocks, measure paths, report. Exit 3 when it finds "
        "problems (suspects, unreachable hosts, loss no suspect explains).",
        [
            (
                "A simulated fabric with a congested spine, as a table:",
                ["scan", "--sim", "--fault", "switch:spine2:congested"],
            ),
            (SETUP, ["scan", *SIM16, "--duration", "0.5", "--save-records", "saved.jsonl.gz"]),
            (
                "Saved records analysed again (--replay; `--local N` probes real agents on "
                "loopback, but how busy the machine is decides their answer, and this page's "
                "must not change with it):",
                ["scan", "--replay", "saved.jsonl.gz"],
            ),
            (
                "Prometheus text, bounded per host (per-path series with --prom-paths):",
                ["scan", *SIM16, "--duration", "0.5", "--format", "prom"],
            ),
            (
                "Bad input is one line, before any work:",
                ["scan", "--sim", "--reference", "gpu-999"],
            ),
        ],
    ),
    (
        "tui",
        "The scan pipeline, continuously, in a terminal UI (docs/tui.md shows the "
        "screen and every key). Without a terminal it refuses in one line.",
        [
            ("Started into a pipe:", ["tui", "--sim"]),
        ],
    ),
    (
        "reroute",
        "Plan steering traffic around a suspect; --apply carries it out (journalled, "
        "undone by rollback).",
        [
            ("The plan (a dry run) around a dead spine of the simulated fabric:", SPINE3_DOWN),
            ("Applied, with a verifying rescan:", [*SPINE3_DOWN, "--apply", "--yes", "--verify"]),
        ],
    ),
    (
        "rebalance",
        "Measure each leaf uplink's load from the hosts' sockets and move colliding elephant "
        "flows, established ones too, so that each leaf's uplinks carry near-equal load "
        "(real hosts only: docs/actions.md shows a run on the namespace fabric, "
        "docs/cli.md its JSON). Its refusals are one line, before any host is read.",
        [
            ("A fabric whose leaves name no uplinks:", ["rebalance", "-i", "no-key.toml"]),
            (
                "An element to avoid that the fabric does not have:",
                ["rebalance", "-i", "inventory.example.toml", "--avoid", "spine9"],
            ),
        ],
    ),
    (
        "journal",
        "List the actions cwctl has applied (after the reroute above).",
        [
            ("", ["journal"]),
        ],
    ),
    (
        "rollback",
        "Undo an applied action: the latest, or the one named.",
        [
            ("The undo plan of the latest action, then carried out:", ["rollback"]),
            ("", ["rollback", "--apply", "--yes"]),
        ],
    ),
    (
        "sim",
        "The simulated fabric's state that actions left behind.",
        [
            (SETUP, SIM_SETUP),
            (f"After `cwctl {shlex.join(SIM_SETUP)}`:", ["sim", "status"]),
            ("", ["sim", "reset"]),
            ("", ["sim", "status"]),
        ],
    ),
    (
        "sync",
        "Scan every --interval seconds and feed each host's chronyd the solved offset "
        "through a SOCK refclock (--apply); by default a dry run that says what it would "
        "feed and why not (docs/sync.md). sync check asks each chronyd what it lacks.",
        [
            (
                "A dry run on the simulator (it has no chronyd: the first host is the "
                "reference; offsets beyond 1 ms are not fed without --step):",
                ["sync", "--sim", "--hosts", "8", "--count", "1"],
            ),
            (
                "Each host's chronyd, over the scan's transport (here: no chronyd running):",
                ["sync", "check", "--local", "3"],
            ),
        ],
    ),
    (
        "drain",
        "Take a host out of the scheduler: Slurm with a reason, Kubernetes cordon with "
        "the reason and the suspect in annotations and a taint.",
        [
            ("Kubernetes, a dry run (the inventory names the scheduler):", drain_args("k8s.toml")),
            ("Slurm, a dry run:", drain_args("slurm.toml")),
        ],
    ),
    (
        "resume",
        "Put a drained host back into the scheduler.",
        [
            ("Slurm, a dry run:", ["resume", "gpu-007", "-i", "slurm.toml"]),
        ],
    ),
    (
        "watch",
        "Scan every --interval, export Prometheus /metrics (--listen) or a textfile, and, "
        "only with --policy, reroute or drain round persistent suspects and restore them "
        "when clean (docs/watch.md). Decisions are JSON lines on stderr.",
        [
            (
                "One round for cron (exit 3: it found a suspect):",
                ["watch", *SIM16, "--fault", "link:leaf1-spine2:down", "--once"],
            ),
            (
                "The example policy (docs/watch-policy.example.toml) over five rounds: named "
                "three rounds running, rerouted, verified by a rescan:",
                [
                    "watch",
                    *SIM16,
                    "--fault",
                    "link:leaf1-spine2:down",
                    "--interval",
                    "0",
                    "--rounds",
                    "5",
                    "--policy",
                    "policy.toml",
                ],
            ),  # fmt: skip
            (
                "A broken policy: every problem with its file and line, before any scan:",
                ["watch", "--sim", "--policy", "broken-policy.toml"],
            ),
        ],
    ),
    (
        "job-env",
        "The NCCL/Gloo environment for a job's hosts, from the journal of applied NIC "
        "and steering actions: for eval before torchrun, or a Slurm TaskProlog "
        "(docs/jobs.md).",
        [
            (SETUP, ["reroute", *JOBS_SIM, "gpu-003/mlx5_1", "--apply", "--yes"]),
            (
                "After `cwctl reroute --sim -i inventory.example.toml gpu-003/mlx5_1 --apply`, "
                "for simulated job 4100 (on gpu-003):",
                ["job-env", *JOBS_SIM, "4100"],
            ),
            ("For a Slurm node list:", ["job-env", *JOBS_SIM, "--nodes", "gpu-[001-003]"]),
        ],
    ),
    (
        "inventory",
        "Check an inventory file and print what it describes; print Kubernetes "
        "pods for the agents.",
        [
            ("The example inventory:", ["inventory", "check", "-i", "inventory.example.toml"]),
            (
                "An identity this machine cannot read: refused as a scan would refuse it:",
                ["inventory", "check", "-i", "no-key.toml"],
            ),
            (
                "A broken one: every problem with its file and line:",
                ["inventory", "check", "-i", "broken.toml"],
            ),
        ],
    ),
]


def prepare(cwd: Path) -> dict[str, str]:
    """The files the examples name, written into ``cwd``, and the environment they run
    in (a private state directory, no colour, 80 columns)."""
    env = {**os.environ, "CWCTL_STATE_DIR": str(cwd / "state"), "NO_COLOR": "1",
           "COLUMNS": "80", "PYTHONPATH": str(ROOT)}  # fmt: skip
    env.pop("CWCTL_INVENTORY", None)
    # the example's identity, readable here: `inventory check` reads it as a scan would
    example = (ROOT / "inventory.example.toml").read_text()
    (cwd / "inventory.example.toml").write_text(
        example.replace('"~/.ssh/id_ed25519"', f'"{KEY}"', 1)
    )
    (cwd / KEY).write_text("(a private key's place: checked readable, never used)\n")
    (cwd / "no-key.toml").write_text(
        '[ssh]\nidentity = "~/.ssh/no_such_key"\n\n[[host]]\nname = "gpu-001"\n'
        'address = "10.0.1.1"\n'
    )
    host = '[[host]]\nname = "gpu-007"\naddress = "10.0.1.7"\nnics = ["mlx5_0", "mlx5_1"]\n'
    (cwd / "k8s.toml").write_text(f'[scheduler]\nkind = "k8s"\nhost = "k8s-ctl"\n\n{host}')
    (cwd / "slurm.toml").write_text(f'[scheduler]\nkind = "slurm"\nhost = "slurm-ctl"\n\n{host}')
    (cwd / "broken.toml").write_text(
        '[[host]]\nname = "gpu-001"\naddress = "10.0.1.1"\nleaf = "leaf9"\n\n'
        '[[host]]\nname = "gpu-001"\naddress = "10.0.1.2"\ncolour = "blue"\n'
    )
    (cwd / "policy.toml").write_text((ROOT / "docs" / "watch-policy.example.toml").read_text())
    (cwd / "broken-policy.toml").write_text(
        '[act]\nrounds = 0\nhold = 60\n\n[[allow]]\nkind = "host"\naction = "reroute"\n'
    )
    return env


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cwctl-docs-") as tmp:
        cwd = Path(tmp)
        env = prepare(cwd)
        index = ["# cwctl, command by command\n",
                 "Each page shows real output, made by `docs/commands/generate.py` (run it to "
                 "regenerate; seeded simulator, so the numbers repeat). "
                 "`tests/unit/test_docs_commands.py` runs every example again and checks its "
                 "exit code.\n"]  # fmt: skip
        for name, what, examples in PAGES:
            parts = [f"# `cwctl {name}`\n", what + "\n"]
            for note, args in examples:
                if note == SETUP:
                    run(args, env, cwd)
                    continue
                if note:
                    parts.append(note + "\n")
                parts.append(block(args, env, cwd))
            (HERE / f"{name}.md").write_text("\n".join(parts))
            index.append(f"- [`cwctl {name}`]({name}.md): {what}")
        (HERE / "README.md").write_text("\n".join(index) + "\n")


if __name__ == "__main__":
    main()
