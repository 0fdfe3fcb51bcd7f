"""The srun step's per-node stub without Slurm: the real bootstrap and stub in a
subprocess fed what srun would broadcast, and the operator side joining cut lines."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys

from cwctl.probe.bootstrap import BOOTSTRAP_CODE, agent_payload
from cwctl.scan.collection import HostInfo
from cwctl.transport.slurm import STUB, SrunStep, _split_payload


def frame(target: str, data: bytes) -> bytes:
    return f"{target} {len(data)}\n".encode() + data


def test_the_stub_passes_its_own_frames_and_reframes_the_agent_output() -> None:
    stub = STUB.read_bytes()
    params = {"host": "n1", "bind": "127.0.0.1", "duration_s": 0.1, "deadline_s": 5}
    head, line = _split_payload(agent_payload(params))
    other = agent_payload({**params, "host": "n2"})[len(head) :]
    stdin = (
        f"{len(stub)}\n".encode()
        + stub
        + frame("*", head)  # the bundle, once, for everybody
        + frame("n2", other)  # another node's params: not ours
        + frame("n1", line)
    )  # then srun's stdin ends: the agent's ends too
    done = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP_CODE],
        input=stdin,
        capture_output=True,
        timeout=60,
        env={**os.environ, "SLURMD_NODENAME": "n1"},
    )
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "@n1." and lines[-1] == "!0.", (lines[:2], lines[-2:], done.stderr)
    assert all(len(x) < 1000 for x in lines)  # srun never has to cut them
    body = [x for x in lines if x.startswith("=")]
    assert body and all(x.endswith(".") for x in body)
    out = b"".join(base64.b64decode(x[1:-1]) for x in body).decode()
    records = [json.loads(r) for r in out.splitlines() if r.strip()]
    assert records[0]["type"] == "hello" and records[0]["host"] == "n1"
    assert records[-1]["type"] == "summary"


def test_lines_srun_cut_are_joined_per_task_until_the_closing_dot() -> None:
    async def go() -> list[bytes]:
        step = SrunStep([HostInfo("n1", "10.0.0.1"), HostInfo("n2", "10.0.0.2")])
        step._piece("0", b"@n2.")
        step._piece("1", b"@n1.")
        data = b'{"type":"hello"}\n'
        encoded = b"=" + base64.b64encode(data) + b"."
        step._piece("0", encoded[:7])  # srun cut this line in three, labelled pieces
        step._piece("1", b"!0.")  # another task's line between the pieces
        step._piece("0", encoded[7:12])
        step._piece("0", encoded[12:])
        step._piece("0", b"!3.")
        n1, n2 = step.sessions["n1"], step.sessions["n2"]
        assert n1.ended.is_set() and n1.exit_code == 0
        assert n2.ended.is_set() and n2.exit_code == 3
        return [await n2.read(), await n2.read()]

    assert asyncio.run(go()) == [b'{"type":"hello"}\n', b""]
