"""The SOCK sample cwctl writes, read back the way chronyd reads it (its documented
``struct sock_sample``, declared here with ctypes, not cwctl's struct format), and the
feeder agent writing to a real Unix datagram socket."""

from __future__ import annotations

import asyncio
import ctypes
import json
import socket
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cwctl.chrony.feeders import FeederSettings, close_feeder, open_feeder
from cwctl.probe.chronysock import host_offset_ns, pack_sample, sample_now
from cwctl.transport.hostrun import HostFailure
from cwctl.transport.local import launch_local, local_hosts


class Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class SockSample(ctypes.Structure):
    """chrony's refclock_sock.c: timeval, double offset, int pulse, leap, _pad, magic."""

    _fields_ = [
        ("tv", Timeval),
        ("offset", ctypes.c_double),
        ("pulse", ctypes.c_int),
        ("leap", ctypes.c_int),
        ("_pad", ctypes.c_int),
        ("magic", ctypes.c_int),
    ]


def decode(data: bytes) -> SockSample:
    assert len(data) == ctypes.sizeof(SockSample)
    return SockSample.from_buffer_copy(data)


def test_sample_has_chronys_layout_and_magic():
    s = decode(pack_sample(1_700_000_000_123_456_789, -2.5e-4))
    assert (s.tv.tv_sec, s.tv.tv_usec) == (1_700_000_000, 123_456)
    assert s.offset == -2.5e-4
    assert (s.pulse, s.leap, s.magic) == (0, 0, 0x534F434B)


def test_a_host_ahead_of_the_reference_gets_a_negative_chrony_offset():
    # cwctl: offset_ns = host clock - reference clock = +500 us (the host is ahead).
    # chrony: offset = true time - system time; true time is the reference's.
    now = time.time_ns()
    est = {"offset_ns": 500_000.0, "drift_ppb": 0.0, "t_ref_ns": now}
    tv_ns, offset_s, data = sample_now(est, now)
    host_time = tv_ns
    true_time = host_time - 500_000
    assert offset_s == pytest.approx((true_time - host_time) * 1e-9, abs=1e-15)
    assert decode(data).offset == offset_s < 0
    assert tv_ns <= now and now - tv_ns < 1000  # stamped now, to the microsecond


@given(
    off=st.floats(-5e6, 5e6),
    drift=st.floats(-1e5, 1e5),
    dt_s=st.floats(0, 600),
)
def test_the_offset_follows_the_drift_to_the_samples_instant(off, drift, dt_s):
    # the offset at host reading t solves x = off + drift*(t - x - t_ref)*1e-9, where
    # t - x is the same instant on the reference's clock
    t_ref = 1_800_000_000_000_000_000
    t = t_ref + int(dt_s * 1e9)
    x = host_offset_ns({"offset_ns": off, "drift_ppb": drift, "t_ref_ns": t_ref}, t)
    assert x == pytest.approx(off + drift * ((t - t_ref) - x) * 1e-9, abs=1e-6)


def _listen(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(0.0)
    return sock


def _drain(sock: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(sock.recv(256))
        except BlockingIOError:
            return out


async def test_the_feeder_agent_writes_samples_and_exits_when_cwctl_goes(tmp_path):
    path = tmp_path / "cwc.sock"
    listener = _listen(path)
    info = local_hosts(2)[1]
    settings = FeederSettings(period_s=0.05, hold_s=60, idle_exit_s=60)
    feeder = await open_feeder(launch_local, info, settings.params(info.name, str(path)))
    try:
        assert feeder.hello is not None and feeder.hello["socket"] == str(path)
        assert _drain(listener) == []  # nothing before an estimate
        t_ref = time.time_ns()
        await feeder.send(
            {"type": "estimate", "round": 7, "offset_ns": -250_000.0, "drift_ppb": 0.0,
             "t_ref_ns": t_ref}
        )  # fmt: skip
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            got += _drain(listener)
        assert len(got) >= 5
        for data in got:
            s = decode(data)
            assert s.magic == 0x534F434B and s.pulse == 0
            # host behind: positive (to tens of ns on a busy machine: clockwatch's reading
            # of how the clock was steered, two clock reads apart)
            assert s.offset == pytest.approx(250e-6, abs=1e-7)
            assert abs(s.tv.tv_sec * 10**9 + s.tv.tv_usec * 1000 - time.time_ns()) < 30e9
        await feeder.send({"type": "withdraw", "reason": "test"})
        await asyncio.sleep(0.3)
        _drain(listener)
        await asyncio.sleep(0.3)
        assert _drain(listener) == []  # withdrawn: quiet
    finally:
        await close_feeder(feeder)
    assert feeder.summary is not None and feeder.summary["reason"] == "stdin closed"
    assert feeder.tallies[7].samples >= 5
    proc = feeder.session.proc  # type: ignore[attr-defined]
    assert proc.returncode == 0  # it exited by itself on EOF
    listener.close()


async def test_a_feeder_without_a_socket_says_why(tmp_path):
    info = local_hosts(2)[1]
    params = FeederSettings().params(info.name, str(tmp_path / "absent.sock"))
    with pytest.raises(HostFailure, match=r"no socket at .*absent\.sock"):
        await open_feeder(launch_local, info, params)


async def test_a_stale_estimate_is_not_fed(tmp_path):
    path = tmp_path / "cwc.sock"
    listener = _listen(path)
    info = local_hosts(2)[1]
    settings = FeederSettings(period_s=0.05, hold_s=5, idle_exit_s=60)
    feeder = await open_feeder(launch_local, info, settings.params(info.name, str(path)))
    try:
        old = time.time_ns() - 10 * 10**9  # measured 10 s ago, held 5 s
        await feeder.send(
            {"type": "estimate", "round": 1, "offset_ns": 1.0, "drift_ppb": 0.0, "t_ref_ns": old}
        )
        await asyncio.sleep(0.5)
        assert _drain(listener) == []
    finally:
        await close_feeder(feeder)
        listener.close()
    assert json.dumps(feeder.summary) and feeder.summary["sent"] == 0  # type: ignore[index]
