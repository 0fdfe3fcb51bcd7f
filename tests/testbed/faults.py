"""Faults on a directed link of the testbed, made with what this kernel has (no netem).

A fault sits on the egress of the sending end's interface, so it acts one way only and
the routing never notices (routes, neighbours and link state stay as they were):

- ``down``: an HTB root whose unclassified packets pass untouched, and a classic-BPF
  classifier sending every IPv4 packet to a class whose queue holds nothing (pfifo
  limit 0). ARP passes, so the other direction keeps working.
- ``lossy=P``: the same, but the classifier sends a random share P of the packets
  (``ld rand``, an unsigned compare against P * 2**32).
- ``congested[=MBIT]``: a tbf at MBIT (default 20 Mbit/s) with a ~40 KB queue, plus a
  background UDP flow at 1.5 times that rate whose 5-tuple the kernel itself hashes
  onto this link (asked with ``ip route get ... ipproto udp sport S dport D``, then
  checked on the qdisc's counters: bytes sent and drops must grow).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from tests.testbed import layout as L
from tests.testbed.shell import TestbedError, kill_all, run

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

_RAND = 0xFFFFF038  # SKF_AD_OFF + SKF_AD_RANDOM: classic BPF's "ld rand"
_MATCH = 0xFFFFFFFF  # cls_bpf: -1 = the filter's own classid


def drop_all_bytecode() -> str:
    return f"1,6 0 0 {_MATCH}"


def drop_share_bytecode(share: float) -> str:
    """A = random u32; A >= share * 2**32 -> no match (pass), else -> the drop class."""
    threshold = max(1, min(0xFFFFFFFF, round(share * 2**32)))
    return f"4,32 0 0 {_RAND},53 0 1 {threshold},6 0 0 0,6 0 0 {_MATCH}"


def directions(element: str) -> list[tuple[str, str]]:
    """``spine2>leaf1`` is one way; ``leaf1-spine2`` (a link's name) is both ways."""
    if ">" in element:
        src, _, dst = element.partition(">")
        if src not in L.NODES or dst not in L.NODES:
            raise TestbedError(f"{element!r}: unknown node (nodes: {', '.join(L.NODES)})")
        try:
            L.link(src, dst)
        except KeyError as e:
            raise TestbedError(f"{element!r}: {e.args[0]}") from None
        return [(src, dst)]
    try:
        a, b = L.split_link(element)
    except KeyError as e:
        raise TestbedError(str(e.args[0])) from None
    return [(a, b), (b, a)]


def interface(src: str, dst: str) -> str:
    return L.link(src, dst).end(src)[0]


def apply_fault(bed: Testbed, element: str, kind: str) -> None:
    for src, dst in directions(element):
        _clear_one(bed, src, dst)
        _apply_one(bed, src, dst, kind)
        bed.faults[f"{src}>{dst}"] = kind
        bed.save_state()


def clear(bed: Testbed, element: str | None = None) -> None:
    """Clear the faults on ``element`` (both ways for a link name), or all of them."""
    if element is None:
        pairs = [(lk.a, lk.b) for lk in L.LINKS] + [(lk.b, lk.a) for lk in L.LINKS]
    else:
        pairs = directions(element)
    for src, dst in pairs:
        _clear_one(bed, src, dst)
    bed.save_state()


def _clear_one(bed: Testbed, src: str, dst: str) -> None:
    key = f"{src}>{dst}"
    kill_all(bed.flows.pop(key, []))
    run(["tc", "qdisc", "del", "dev", interface(src, dst), "root"], ns=bed.ns(src), check=False)
    bed.faults.pop(key, None)


def _apply_one(bed: Testbed, src: str, dst: str, kind: str) -> None:
    name, _, arg = kind.partition("=")
    ns, dev = bed.ns(src), interface(src, dst)
    if name == "down" and not arg:
        _drop_class(ns, dev, drop_all_bytecode())
    elif name == "lossy":
        try:
            share = float(arg)
        except ValueError:
            share = -1.0
        if not 0.0 < share < 1.0:
            raise TestbedError(f"lossy={arg}: the share must be a number between 0 and 1")
        _drop_class(ns, dev, drop_share_bytecode(share))
    elif name == "congested":
        try:
            mbit = float(arg) if arg else 20.0
        except ValueError:
            mbit = -1.0
        if mbit <= 0:
            raise TestbedError(f"congested={arg}: the rate must be a positive Mbit/s figure")
        run(
            [
                "tc",
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                f"{mbit}mbit",
                "burst",
                "16kb",
                "limit",
                "40kb",
            ],
            ns=ns,
        )
        bed.flows[f"{src}>{dst}"] = start_flow_across(bed, src, dst, mbit * 1.5)
        bed.save_state()
        _check_congested(bed, src, dst)
    else:
        raise TestbedError(f"{kind!r}: faults are down, lossy=P, congested[=MBIT]")


def _drop_class(ns: str, dev: str, bytecode: str) -> None:
    run(
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "0"], ns=ns
    )
    run(
        [
            "tc",
            "class",
            "add",
            "dev",
            dev,
            "parent",
            "1:",
            "classid",
            "1:2",
            "htb",
            "rate",
            "10gbit",
            "quantum",
            "60000",
        ],
        ns=ns,
    )
    run(
        ["tc", "qdisc", "add", "dev", dev, "parent", "1:2", "handle", "20:", "pfifo", "limit", "0"],
        ns=ns,
    )
    run(
        [
            "tc",
            "filter",
            "add",
            "dev",
            dev,
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "bpf",
            "bytecode",
            bytecode,
            "classid",
            "1:2",
        ],
        ns=ns,
    )


# -- which way the kernel sends a flow --------------------------------------------------
def next_hop(
    bed: Testbed, node: str, src: str, dst: str, sport: int, dport: int, from_node: str | None
) -> str:
    """The neighbour ``node`` forwards UDP src:sport -> dst:dport to (asks the kernel)."""
    args = ["ip", "-j", "route", "get", dst, "from", src]
    if from_node is not None:
        args += ["iif", interface(node, from_node)]
    args += ["ipproto", "udp", "sport", str(sport), "dport", str(dport)]
    out = json.loads(run(args, ns=bed.ns(node)).stdout)
    dev = out[0]["dev"]
    for lk in L.links_of(node):
        if lk.end(node)[0] == dev:
            return lk.other(node)
    raise TestbedError(f"{node} routes {dst} out of {dev}, not a fabric link")


def flow_path(bed: Testbed, sender: str, receiver: str, sport: int, dport: int) -> list[str]:
    """The nodes a UDP flow from host ``sender`` to host ``receiver`` crosses, per kernel."""
    src, dst = L.probe_address(sender), L.probe_address(receiver)
    path, prev, node = [sender], None, sender
    while node != receiver:
        nxt = (
            L.leaf_of(sender)
            if node == sender
            else next_hop(bed, node, src, dst, sport, dport, prev)
        )
        prev, node = node, nxt
        path.append(node)
        if len(path) > 8:
            raise TestbedError(f"routing loop from {sender} to {receiver}: {path}")
    return path


def crosses(path: list[str], src: str, dst: str) -> bool:
    return any(a == src and b == dst for a, b in itertools.pairwise(path))


def flow_across(bed: Testbed, src: str, dst: str, *, dport: int = 9) -> tuple[str, str, int, int]:
    """(sender, receiver, sport, dport) of a UDP flow the kernel sends over src -> dst."""
    if src in L.HOSTS or dst in L.HOSTS:
        host = src if src in L.HOSTS else dst
        far = next(h for h in L.HOSTS if L.leaf_of(h) != L.leaf_of(host))
        pairs = [(host, far)] if src in L.HOSTS else [(far, host)]
    elif src in L.LEAVES:
        pairs = [(s, r) for s in L.hosts_of(src) for r in L.HOSTS if L.leaf_of(r) != src]
    else:
        pairs = [(s, r) for r in L.hosts_of(dst) for s in L.HOSTS if L.leaf_of(s) != dst]
    for sender, receiver in pairs[:2]:
        for sport in range(40000, 40064):
            if crosses(flow_path(bed, sender, receiver, sport, dport), src, dst):
                return sender, receiver, sport, dport
    raise TestbedError(f"found no UDP flow the kernel sends over {src} -> {dst}")


_SENDER = """
import socket, sys, time
src, dst = sys.argv[1], sys.argv[3]
sport, dport, bps = int(sys.argv[2]), int(sys.argv[4]), float(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, sport))
payload, tick = bytes(1400), 0.005
per_tick, credit, t = bps / 8 / 1428 * tick, 0.0, time.monotonic()
while True:
    credit += per_tick
    while credit >= 1:
        credit -= 1
        try:
            s.sendto(payload, (dst, dport))
        except OSError:
            pass
    t += tick
    wait = t - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    else:
        t = time.monotonic()
"""
_SINK = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.bind((sys.argv[1], int(sys.argv[2])))
time.sleep(1e9)
"""


def start_flow_across(bed: Testbed, src: str, dst: str, mbit: float) -> list[int]:
    """A background UDP flow at ``mbit`` Mbit/s over src -> dst; returns its pids."""
    sender, receiver, sport, dport = flow_across(bed, src, dst)
    py = sys.executable if sys.executable else "python3"
    sink = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            bed.ns(receiver),
            py,
            "-c",
            _SINK,
            L.probe_address(receiver),
            str(dport),
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    flow = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            bed.ns(sender),
            py,
            "-c",
            _SENDER,
            L.probe_address(sender),
            str(sport),
            L.probe_address(receiver),
            str(dport),
            str(mbit * 1e6),
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return [flow.pid, sink.pid]


def qdisc_counters(bed: Testbed, src: str, dst: str) -> dict[str, int]:
    """The root qdisc's ``bytes``, ``packets`` and ``drops`` on src's interface to dst."""
    out = run(
        ["tc", "-s", "-j", "qdisc", "show", "dev", interface(src, dst), "root"], ns=bed.ns(src)
    )
    q = json.loads(out.stdout)[0]
    return {
        "bytes": int(q.get("bytes", 0)),
        "packets": int(q.get("packets", 0)),
        "drops": int(q.get("drops", 0)),
    }


def _check_congested(bed: Testbed, src: str, dst: str) -> None:
    """The background flow really crosses the shaped link: sent bytes and drops grow."""
    first = qdisc_counters(bed, src, dst)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = qdisc_counters(bed, src, dst)
        if now["bytes"] - first["bytes"] > 200_000 and now["drops"] > first["drops"]:
            return
    raise TestbedError(
        f"congested {src}>{dst}: the background flow does not fill the link "
        f"(counters {first} -> {qdisc_counters(bed, src, dst)})"
    )
