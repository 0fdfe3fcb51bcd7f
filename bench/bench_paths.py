"""Path discovery: what it costs to learn which spine every flow crosses, with and without
the switches' ICMP rate limit.

The namespace testbed (tests/testbed/: 8 hosts, 2 leaves, 2 spines, kernel L4 ECMP,
sshd per host) is scanned over SSH as an operator would, scan after scan through one
source (so known paths are not traced again), until every traced 5-tuple that crosses
the spines has its spine named, or ``MAX_SCANS``. Twice: the switches at Linux's
default ``net.ipv4.icmp_ratelimit = 1000`` (the inventory saying so), and with the limit
off (``0``, the inventory saying so). Per 100 flows (5-tuples, both directions counted
apart): trace packets sent, ICMP answers the routers gave, seconds of probing and of
scanning (SSH set-up included). Needs root, ``ip``, ``tc`` and ``sshd``; says so otherwise.
Run: ``.venv/bin/python -m bench paths``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from cwctl.scan.request import ScanRequest
from cwctl.transport.ssh import SSHSource

SCAN_S = 2.0
MAX_SCANS = 8


def _run(bed: object, limit_ms: int) -> dict[str, float]:
    from tests.testbed import layout as L
    from tests.testbed.inventory import with_icmp_ratelimit
    from tests.testbed.shell import run

    for switch in (*L.SPINES, *L.LEAVES):
        run(["sysctl", "-qw", f"net.ipv4.icmp_ratelimit={limit_ms}"], ns=bed.ns(switch))  # type: ignore[attr-defined]
    inventory = Path(bed.dir) / f"inventory-{limit_ms}.toml"  # type: ignore[attr-defined]
    text = Path(bed.inventory).read_text()  # type: ignore[attr-defined]
    inventory.write_text(with_icmp_ratelimit(text, limit_ms))
    request = ScanRequest(inventory=inventory, duration_s=SCAN_S)
    source = SSHSource(request)
    sent = answers = scans = 0
    wall = 0.0
    flows = named = 0
    for scans in range(1, MAX_SCANS + 1):  # noqa: B007 (the count is the result)
        started = time.perf_counter()
        c = asyncio.run(source.scan(request))
        wall += time.perf_counter() - started
        traced = [s.get("trace") or {} for s in c.summaries.values()]
        sent += sum(t.get("sent", 0) for t in traced)
        answers += sum(t.get("answers", 0) for t in traced)
        cross = [p for p in c.paths if len(p.hops) == 3]
        flows, named = len(cross), sum(p.hops[1] is not None for p in cross)
        if flows and named == flows:
            break
    per = 100.0 / max(1, flows)
    return {
        "limit": limit_ms,
        "scans": scans,
        "flows": flows,
        "named": named,
        "sent_100": sent * per,
        "answers_100": answers * per,
        "probe_s_100": scans * SCAN_S * per,
        "wall_s_100": wall * per,
    }


def main(argv: list[str] | None = None) -> None:
    from tests.testbed.bed import Testbed
    from tests.testbed.shell import missing_prerequisite

    why = missing_prerequisite()
    if why:
        print(f"skipped: {why}")
        return
    with tempfile.TemporaryDirectory(prefix="cwctl-bench-paths-") as tmp:
        bed = Testbed(f"bp{os.getpid() % 100000:x}"[:8], tmp)
        try:
            bed.up(icmp_ratelimit_ms=0)
            rows = [_run(bed, 1000), _run(bed, 0)]
        finally:
            left = bed.down()
            if left:
                print(f"testbed left behind: {left}")
    print(
        f"testbed: 8 hosts, 2 spines; scans of {SCAN_S:g} s over SSH through one source until"
        " every traced cross-spine 5-tuple has its spine named. Per 100 cross-spine flows"
        " (the same-leaf flows traced alongside need no ICMP answer; their packets count)"
    )
    print(
        f"{'icmp limit':>10} {'scans':>5} {'flows':>5} {'named':>5} {'packets/100':>11}"
        f" {'answers/100':>11} {'probing s/100':>13} {'scan s/100':>10}"
    )
    for r in rows:
        limit = f"{r['limit']:.0f} ms" if r["limit"] else "off"
        print(
            f"{limit:>10} {r['scans']:>5.0f} {r['flows']:>5.0f} {r['named']:>5.0f}"
            f" {r['sent_100']:>11.0f} {r['answers_100']:>11.0f} {r['probe_s_100']:>13.2f}"
            f" {r['wall_s_100']:>10.2f}"
        )
    slow, fast = rows
    print(
        f"rate limit on/off: {slow['probe_s_100'] / fast['probe_s_100']:.1f}x the probing time;"
        " answers per flow stay about one (only the spine's TTL is asked)"
    )


if __name__ == "__main__":
    main()
