"""The probe agent on its own: old-Python syntax, stdlib only, wire format, lifecycle."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cwctl.probe import stamps, wire
from cwctl.probe.bootstrap import (
    agent_payload,
    bootstrap_argv,
)
from cwctl.probe.params import AgentParams
from cwctl.records import ProbeTableBuilder, decode_probe, parse_line


def _python38() -> str | None:
    """A Python 3.8 to run the agent under: $CWCTL_TEST_PYTHON38, python3.8 on the PATH,
    or pyenv's; only one that really answers as 3.8 (a pyenv shim may not)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [os.environ.get("CWCTL_TEST_PYTHON38"), shutil.which("python3.8")]
    candidates += [str(p) for p in sorted(root.glob("versions/3.8*/bin/python3.8"))]
    for python in filter(None, candidates):
        try:
            out = subprocess.run(
                [python, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
        except OSError:
            continue
        if out.strip() == "True":
            return python
    return None


PYTHON38 = _python38()


def test_wire_round_trip_and_tail_parsing() -> None:
    packet = wire.encode(wire.KIND_REPLY, 2**40 + 7, idx=1, flags=3, rid=99, a=10**18, b=5)
    assert len(packet) == wire.WIRE.size
    fields = (wire.KIND_REPLY, 3, 1, 99, 2**40 + 7, 10**18, 5)
    assert wire.decode(packet) == fields
    # a TX stamp loops the packet back with link, IP and UDP headers in front
    assert wire.decode(b"\x00" * 42 + packet) == fields
    assert wire.decode(packet[1:]) is None
    assert wire.decode(b"XXXX" + packet[4:]) is None


def test_kernel_stamp_reads_both_control_messages() -> None:
    ns = 1_700_000_000_123_456_789
    spec = struct.pack("@ll", ns // 10**9, ns % 10**9)
    assert stamps.kernel_stamp([(socket.SOL_SOCKET, stamps.SO_TIMESTAMPNS, spec)]) == ns
    three = spec + struct.pack("@llll", 0, 0, 0, 0)
    assert stamps.kernel_stamp([(socket.SOL_SOCKET, stamps.SO_TIMESTAMPING, three)]) == ns
    assert stamps.kernel_stamp([(0, 11, b"\x00" * 16)]) == 0
    assert stamps.kernel_stamp([]) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux ioctls")
def test_interface_and_its_timestamping_capabilities() -> None:
    assert stamps.interface_of("127.0.0.9") == "lo"  # in lo's 127.0.0.0/8
    assert stamps.interface_of("203.0.113.77") is None  # TEST-NET-3: on no interface here
    caps = stamps.nic_timestamping("lo")
    assert caps["iface"] == "lo" and caps["hw"] is False
    assert caps["so_timestamping"] & stamps.SOF_TIMESTAMPING_SOFTWARE
    assert stamps.nic_timestamping("no-such-if0") == {}


def start_agent(params: dict[str, Any], python: str = sys.executable) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        bootstrap_argv(python),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    base = {"host": "a", "bind": "127.0.0.2", "ports": 2, "duration_s": 0.5, "deadline_s": 20}
    proc.stdin.write(agent_payload({**base, **params}))
    proc.stdin.flush()
    return proc


def records(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> list[dict[str, Any]]:
    """Every record until the agent exits; its stdin stays open (EOF would stop it)."""
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait(timeout_s)
    if proc.stdin is not None and not proc.stdin.closed:
        proc.stdin.close()
    if proc.stderr is not None:
        proc.stderr.close()
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def expand(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``probes`` batches as the ``probe`` records they stand for (decoded, then written
    back one per row), everything else as it is: what the old path would have printed."""
    out: list[dict[str, Any]] = []
    for rec in recs:
        if rec["type"] == "probes":
            builder = ProbeTableBuilder()
            builder.add_batch(parse_line(json.dumps(rec)), where="agent batch")
            out.extend(builder.build().iter_records())
        else:
            if rec["type"] == "probe":
                decode_probe(rec)  # every probe record the agent prints is valid
            out.append(rec)
    return out


def hello_of(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    return json.loads(proc.stdout.readline())


def test_agent_exits_on_stdin_eof_with_a_summary() -> None:
    proc = start_agent({})
    hello = hello_of(proc)
    assert hello["type"] == "hello" and hello["host"] == "a"
    assert hello["address"] == "127.0.0.2" and len(hello["sports"]) == 2
    assert hello["pid"] == proc.pid  # the bootstrap execs in place: no stray process
    for key in ("hostname", "kernel", "clocksource", "vm", "ts_caps", "python"):
        assert key in hello
    if sys.platform.startswith("linux"):
        assert hello["ts_caps"]["iface"] == "lo"
        assert hello["ts_caps"]["rx_sw"] and hello["ts_caps"]["tx_sw"]
    proc.stdin.close()
    recs = records(proc)
    assert recs[-1]["type"] == "summary"
    assert recs[-1]["reason"] == "stdin closed"
    assert proc.returncode == 0


def test_control_lines_sent_with_the_params_are_not_lost() -> None:
    proc = subprocess.Popen(
        bootstrap_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None
    params = {"host": "a", "bind": "127.0.0.2", "ports": 1, "deadline_s": 20}
    proc.stdin.write(agent_payload(params) + b'{"type": "stop"}\n')
    proc.stdin.flush()
    recs = records(proc)
    assert [r["type"] for r in recs if r["type"] != "gpu"] == ["hello", "summary"]
    assert recs[-1]["reason"] == "stopped"


def test_agent_exits_on_sigterm_and_at_its_deadline() -> None:
    proc = start_agent({})
    hello_of(proc)
    proc.send_signal(signal.SIGTERM)
    recs = records(proc)
    assert recs[-1]["reason"] == f"signal {int(signal.SIGTERM)}"
    started = time.monotonic()
    proc = start_agent({"deadline_s": 0.5})
    recs = records(proc)
    assert recs[-1]["reason"] == "deadline"
    assert time.monotonic() - started < 8.0


def test_agent_that_cannot_bind_says_so_and_fails() -> None:
    proc = start_agent({"bind": "203.0.113.1"})  # TEST-NET-3: not an address of this host
    recs = records(proc)
    assert recs[-1]["type"] == "error" and recs[-1]["fatal"] is True
    assert "cannot bind 203.0.113.1" in recs[-1]["message"]
    assert proc.returncode == 2


def run_pair(
    python: str, params: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two agents probing each other for half a second: their lines, as printed."""
    a = start_agent({"host": "a", "bind": "127.0.0.2", "rate": 40, **(params or {})}, python)
    b = start_agent({"host": "b", "bind": "127.0.0.3", "rate": 40, **(params or {})}, python)
    ha, hb = hello_of(a), hello_of(b)
    peers = {"a": [ha["address"], ha["port"]], "b": [hb["address"], hb["port"]]}
    start_ns = time.time_ns() + 200_000_000
    for proc, target in ((a, "b"), (b, "a")):
        msg = {"type": "start", "peers": peers, "probe": [target], "start_ns": start_ns}
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
    return [ha, *records(a)], [hb, *records(b)]


@pytest.mark.parametrize(
    ("params", "kind", "max_rows"),
    [
        ({"batch_s": 0.1}, "probes", 512),  # packed batches (the default), 0.1 s apart
        ({"batch": 7, "pack": False}, "probes", 7),  # list columns, the row cap
        ({"batch": 0}, "probe", 1),  # one record per exchange (debugging, the old path)
    ],
)
def test_two_agents_exchange_coded_pairs(params: dict[str, Any], kind: str, max_rows: int) -> None:
    lines, rb = run_pair(sys.executable, params)
    assert {r["type"] for r in lines} - {"hello", "summary", "gpu"} == {kind}
    batches = [r for r in lines if r["type"] == "probes"]
    assert all(1 <= r["n"] <= max_rows for r in batches)
    if batches:
        packed = isinstance(batches[0]["t1"], str)
        assert packed == params.get("pack", True)
    if max_rows == 512:  # 0.5 s of probing, a batch every 0.1 s: not one line at exit
        assert len(batches) >= 3
    ra, rb = expand(lines), expand(rb)
    probes = [r for r in ra if r["type"] == "probe"]
    assert {r["dst"] for r in probes} == {"b"}
    # rate 40 for 0.5 s, two probes a pair (a pair overdue by a stall is skipped)
    assert 30 <= len(probes) <= 2 * 20
    assert {r["idx"] for r in probes} == {0, 1}
    complete = [r for r in probes if r["t4"] is not None]
    assert len(complete) >= len(probes) - 2
    for r in complete:
        assert r["t1"] < r["t2"] <= r["t3"] < r["t4"]  # one clock: causality holds
    summary = ra[-1]
    assert summary["sent"] == {"b": len(probes)}
    assert summary["complete"] == {"b": len(complete)}
    assert summary["rx"] == {"b": rb[-1]["sent"]["a"]}
    if sys.platform.startswith("linux"):
        assert {r["ts"] for r in complete} == {"sw"}


@pytest.mark.skipif(PYTHON38 is None, reason="no Python 3.8 interpreter on this machine")
def test_agent_runs_on_python_3_8() -> None:
    assert PYTHON38 is not None
    lines, _ = run_pair(PYTHON38)
    assert any(r["type"] == "probes" for r in lines)  # base64 and struct packing on 3.8
    ra = expand(lines)
    hello = ra[0]
    assert hello["python"].startswith("3.8")
    assert sum(1 for r in ra if r["type"] == "probe" and r["t4"]) >= 30
    assert ra[-1]["type"] == "summary"


@pytest.mark.parametrize(
    ("rate", "peers", "tick_ms"),
    [(100.0, 7, 20.0), (2.0, 7, 1000 / 14), (2.0, 10, 50.0), (2.0, 1, 500 / 6)],
)
def test_the_loop_waits_for_the_next_pair_up_to_a_sixth_of_the_timeout(
    rate: float, peers: int, tick_ms: float
) -> None:
    # at the watch budget (2 pairs/s to 7 peers) a 20 ms tick woke the loop 3-4 times
    # between pairs, about 0.4 % of a core for nothing on `cwctl scan --local 8`
    from cwctl.probe.channel import Output
    from cwctl.probe.exchanges import TICK_S, Agent

    agent = Agent(
        AgentParams({"host": "a", "bind": "127.0.0.2", "rate": rate, "timeout_s": 0.5}), Output()
    )
    try:
        assert agent.tick_ns == (TICK_S * 1e9 if agent.rx_kernel and agent.tx_kernel else 0)
        names = [f"p{i}" for i in range(peers)]
        msg = {"peers": {n: ["127.0.0.3", 9000 + i] for i, n in enumerate(names)}, "probe": names}
        agent.start({**msg, "start_ns": time.time_ns()})
        if agent.rx_kernel and agent.tx_kernel:
            assert agent.tick_ns / 1e6 == pytest.approx(tick_ms, rel=1e-6)
        else:  # user-time stamps: every wait would show in them
            assert agent.tick_ns == 0
    finally:
        agent.close()


def test_sparse_agents_complete_every_exchange_and_are_never_starved() -> None:
    # one peer at 4 pairs/s: the loop sleeps 83 ms between wake-ups, a reply and its
    # follow-up wait a tick each, and none of it is the host's starving (cost.LATE_NS)
    lines, _ = run_pair(sys.executable, {"rate": 4, "duration_s": 2.0})
    probes = [r for r in expand(lines) if r["type"] == "probe"]
    assert len(probes) >= 14
    assert all(r["t4"] is not None for r in probes)
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["cost"]["starved"] == [], summary["cost"]
