"""Forged and replayed datagrams at running agents (real UDP on loopback, the local
transport) change neither offsets nor loss: every one is dropped and counted by reason.

The attacker (``attacker.py``) sniffs the scan's datagrams on ``lo`` and sends, with the
same spoofed 5-tuple, a replay of each, a forged reply to each probe and a forged
follow-up to each reply moving ``t3`` by 5 ms. Before probes were signed the same attack
moved two of three loopback clocks by 0.77 and 1.77 ms (their truth: 0, one clock).
"""

from __future__ import annotations

import os
import secrets

import pytest

from cwctl.request import ScanRequest
from cwctl.session import scan
from cwctl.transport import plan
from tests.integration.attacker import Attacker

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")

BOUND_NS = 50_000  # the truth is 0 (one clock); unattacked loopback scans are within ~µs


async def test_forged_and_replayed_datagrams_change_neither_offsets_nor_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the nonce is public (it travels in the clear): fixing it lets the attacker pick this
    # scan's datagrams out of other tests' on the same loopback; the key stays secret
    nonce = secrets.token_bytes(8)
    monkeypatch.setattr(
        plan, "scan_auth", lambda: {"key": secrets.token_hex(32), "nonce": nonce.hex()}
    )
    with Attacker(skew_ns=5_000_000, nonce=nonce) as attacker:
        # rate 100: over a hundred datagrams of each forgery in 1.5 s
        snapshot = await scan(ScanRequest(local=3, duration_s=1.5, overrides={"rate": 100.0}))
    assert attacker.sent.get("forged_follow", 0) > 100, attacker.sent
    assert attacker.sent.get("forged_reply", 0) > 100 and attacker.sent.get("replay", 0) > 100
    offsets = {h.name: h.offset_ns for h in snapshot.hosts}
    assert all(o is not None and abs(o) < BOUND_NS for o in offsets.values()), offsets
    assert snapshot.paths and all(p.loss == 0 for p in snapshot.paths)
    assert all(p.sent == p.received for p in snapshot.paths)
    for host in snapshot.hosts:
        dropped = (host.agent or {}).get("dropped") or {}
        assert dropped.get("bad_mac", 0) > 0 and dropped.get("replay", 0) > 0, (host.name, dropped)
    report = snapshot.to_json()
    assert all("dropped" in h["agent"] for h in report["hosts"])
