"""Counting what a UDP flow delivers across the testbed (the checks' ground truth)."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

from tests.testbed import layout as L
from tests.testbed.shell import TestbedError, run

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

_RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
sys.stdin.readline()                       # the sender is done
s.settimeout(0.3)
n = 0
try:
    while True:
        s.recv(2048)
        n += 1
except socket.timeout:
    pass
print(n, flush=True)
"""
_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
for _ in range(int(sys.argv[5])):
    s.sendto(b"x" * 64, (sys.argv[3], int(sys.argv[4])))
    time.sleep(0.0005)
"""


def delivered(
    bed: Testbed, sender: str, receiver: str, sport: int, dport: int, count: int = 200
) -> int:
    """Send ``count`` UDP packets sender:sport -> receiver:dport; how many arrived."""
    py = sys.executable
    src, dst = L.probe_address(sender), L.probe_address(receiver)
    rx = subprocess.Popen(
        ["ip", "netns", "exec", bed.ns(receiver), py, "-c", _RECEIVER, dst, str(dport)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert rx.stdout is not None and rx.stdin is not None
        if rx.stdout.readline().strip() != "ready":
            raise TestbedError(f"receiver on {receiver} did not start")
        run([py, "-c", _SENDER, src, str(sport), dst, str(dport), str(count)], ns=bed.ns(sender))
        out, _ = rx.communicate("done\n", timeout=30)
        return int(out.strip())
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


def link_tx_packets(bed: Testbed, src: str, dst: str) -> int:
    """Packets src's interface towards dst has sent (``ip -s link``)."""
    from tests.testbed.faults import interface

    out = run(["ip", "-s", "-o", "link", "show", "dev", interface(src, dst)], ns=bed.ns(src))
    # "... TX: bytes packets errors dropped carrier collsns \    BYTES PACKETS ..."
    fields = out.stdout.split("TX:")[1].split("\\")[1].split()
    return int(fields[1])
