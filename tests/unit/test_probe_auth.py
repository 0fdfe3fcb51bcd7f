"""The probe MAC (``cwctl/probe/auth.py``): sealed datagrams open only with the scan's
key and nonce, any change is refused, and the parser never raises on any bytes
(hypothesis). The agent's guard: peers only, each probe answered once, answers only from
the peer and port probed."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cwctl.probe.auth import SEALED_SIZE, Auth, Guard
from cwctl.probe.bootstrap import BOOTSTRAP_CODE, agent_payload
from cwctl.probe.wire import KIND_FOLLOW, KIND_PROBE, KIND_REPLY, KIND_TRACE, WIRE, encode
from cwctl.transport.plan import ScanPlan

KEY, NONCE = bytes(range(32)), b"\x01" * 8
REPLY = encode(KIND_REPLY, 2**40 + 7, idx=1, flags=3, rid=99, a=10**18, b=10**18 + 5)


def test_sealed_datagrams_round_trip_and_keep_the_header_last() -> None:
    auth = Auth(KEY, NONCE)
    sealed = auth.seal(REPLY)
    assert len(sealed) == SEALED_SIZE and sealed.endswith(REPLY)
    assert auth.open(sealed) == (KIND_REPLY, 3, 1, 99, 2**40 + 7, 10**18, 10**18 + 5)
    assert auth.dropped == {}


@given(st.integers(0, SEALED_SIZE * 8 - 1))
def test_any_flipped_bit_is_refused(bit: int) -> None:
    auth = Auth(KEY, NONCE)
    sealed = bytearray(auth.seal(REPLY))
    sealed[bit // 8] ^= 1 << (bit % 8)
    assert auth.open(bytes(sealed)) is None
    assert sum(auth.dropped.values()) == 1
    assert set(auth.dropped) <= {"bad_mac", "other_scan", "malformed"}


def test_another_key_or_scan_is_refused_and_counted_by_reason() -> None:
    mine = Auth(KEY, NONCE)
    assert mine.open(Auth(os.urandom(32), NONCE).seal(REPLY)) is None
    assert mine.open(Auth(KEY, b"\x02" * 8).seal(REPLY)) is None
    assert mine.open(REPLY) is None  # unsigned probe traffic where signing is on
    assert mine.dropped == {"bad_mac": 1, "other_scan": 1, "malformed": 1}
    trace = encode(KIND_TRACE, 5, idx=3)
    assert mine.open(trace) is not None  # path tracing carries no timestamps: unsigned


@given(st.binary(max_size=3 * SEALED_SIZE))
def test_the_parser_never_raises_and_accepts_nothing_forged(data: bytes) -> None:
    auth = Auth(KEY, NONCE)
    fields = auth.open(data)
    if fields is not None:  # only an unsigned path-tracing datagram can pass
        assert len(data) == WIRE.size and fields[0] >= KIND_TRACE
    plain = Auth()
    out = plain.open(data)
    assert out is None or len(out) == 7


@given(st.binary(min_size=8, max_size=8), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_a_guessed_mac_on_a_forged_follow_up_is_refused(tag: bytes, seq: int, t3: int) -> None:
    auth = Auth(KEY, NONCE)
    header = encode(KIND_FOLLOW, seq, a=t3)
    forged = NONCE + tag + header
    assert auth.open(forged) is None or tag == auth.mac(NONCE, header)


def test_guard_answers_peers_once_and_takes_answers_only_from_the_peer_probed() -> None:
    guard = Guard({"key": KEY.hex(), "nonce": NONCE.hex()})
    # before its start message (the peer table) came, a signed probe is a peer's
    assert guard.accept_probe(("10.0.0.1", 39999), 1)
    guard.set_peers({"a": ("10.0.0.1", 5000), "b": ("10.0.0.2", 5000)}, {"10.0.1.1": "a"})
    assert guard.accept_probe(("10.0.0.1", 40001), 7)
    assert not guard.accept_probe(("10.0.0.1", 40001), 7)  # the same probe again
    assert not guard.accept_probe(("10.0.0.1", 40002), 7)  # again, from another port
    assert not guard.accept_probe(("10.0.1.1", 40001), 7)  # again, from the peer's other rail
    assert guard.accept_probe(("10.0.0.2", 40001), 7)  # another peer's seq 7
    assert not guard.accept_probe(("10.9.9.9", 40001), 8)
    ex = SimpleNamespace(idx=1)
    assert guard.accept_answer(ex, ("10.0.0.2", 5000), ("10.0.0.2", 5000), 1, False)
    assert not guard.accept_answer(ex, ("10.0.0.2", 5001), ("10.0.0.2", 5000), 1, False)
    assert not guard.accept_answer(ex, ("10.0.0.2", 5000), ("10.0.0.2", 5000), 0, False)
    assert not guard.accept_answer(None, ("10.0.0.2", 5000), None, 1, False)
    assert not guard.accept_answer(ex, ("10.0.0.2", 5000), ("10.0.0.2", 5000), 1, True)
    assert guard.dropped == {"replay": 4, "unknown_peer": 1, "unexpected": 3}


def test_a_forgotten_probe_replayed_late_is_still_a_replay() -> None:
    guard = Guard(None, limit=4)
    guard.set_peers({"a": ("10.0.0.1", 5000)})
    assert all(guard.accept_probe(("10.0.0.1", 40001 + s % 3), s) for s in range(1, 11))
    assert len(guard.seen) == 4  # bounded
    assert not any(guard.accept_probe(("10.0.0.1", 40009), s) for s in range(1, 11))
    assert guard.dropped == {"replay": 10}


def test_a_fresh_key_per_scan_sent_on_stdin_never_on_the_command_line() -> None:
    one, two = (ScanPlan(hosts=[], settings=None, duration_s=1, source="local") for _ in "ab")  # type: ignore[arg-type]
    assert one.auth["key"] != two.auth["key"] and one.auth["nonce"] != two.auth["nonce"]
    assert len(bytes.fromhex(one.auth["key"])) == 32
    payload = agent_payload({"host": "h", "auth": one.auth})
    assert one.auth["key"].encode() in payload.splitlines()[-1]  # the params line, on stdin
    assert one.auth["key"] not in BOOTSTRAP_CODE  # the command line is fixed


def test_an_unsigned_agent_still_works_without_a_key() -> None:
    plain = Auth()
    assert plain.seal(REPLY) == REPLY and plain.open(REPLY) is not None
    with pytest.raises(ValueError):
        Auth(KEY, None)
    assert Auth.from_params({}).on is False
    assert KIND_PROBE < KIND_TRACE


def test_the_table_report_names_hosts_that_refused_forged_datagrams() -> None:
    from cwctl.report.summary import summary_lines
    from cwctl.scan.snapshot import FabricSnapshot, HostReport

    hosts = [
        HostReport("gpu-001", agent={"dropped": {"bad_mac": 3, "replay": 2, "unexpected": 9}}),
        HostReport("gpu-002", agent={"dropped": {"unexpected": 4}}),  # late answers only
        HostReport("gpu-003", agent={"dropped": {}}),
    ]
    snapshot = FabricSnapshot(source="ssh", reference="gpu-001", duration_s=1.0, hosts=hosts)
    (line,) = [x for x in summary_lines(snapshot) if x.startswith("refused datagrams")]
    assert line.startswith("refused datagrams: gpu-001 (bad_mac 3, replay 2): forged")
    quiet = [HostReport("gpu-002", agent={"dropped": {"unexpected": 4}})]
    calm = FabricSnapshot(source="ssh", reference="gpu-002", duration_s=1.0, hosts=quiet)
    assert not [x for x in summary_lines(calm) if x.startswith("refused")]
