"""Localisation tally on the namespace testbed: N scans per fault kind, top-1 right or not.

    python -m tests.testbed.tally [--scans 10] [--duration 2] [--kinds healthy,down,...]

As root. Builds its own testbed (a fresh prefix), then for each kind runs ``--scans``
scans with ``cwctl scan --format json`` against the inventory the testbed wrote; a fault
goes on one direction of a leaf-spine link, rotating over all of them (leaf1>spine1,
spine1>leaf1, ...; eight with 2 leaves, twelve with ``--leaves 3``). A faulty scan
counts as right when the top suspect is that link or its spine, or a candidate set of
that spine and its links holding one of them ("exact"
counts only the link or spine by name), and the exit code is 3; a healthy one when there
is no suspect and the exit code is 0. Prints one table (and ``--json FILE`` keeps every
scan); tears the testbed down at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault, clear
from tests.testbed.fixture import unique_prefix
from tests.testbed.shell import missing_prerequisite


def directions() -> list[str]:
    """Every direction of every leaf-spine link, in the order the faults rotate."""
    return [
        d for leaf in L.LEAVES for spine in L.SPINES for d in (f"{leaf}>{spine}", f"{spine}>{leaf}")
    ]


FAULTS = {"down": "down", "lossy": "lossy=0.05", "congested": "congested"}


def names(suspect: dict[str, Any], link: str, spine: str) -> bool:
    """The suspect is the link or its spine; or, where the traces cannot tell (a one-way
    down link also kills the traceroutes that would cross it, so the localiser reports a
    candidate set, as DESIGN.md says it must), a set of the spine and its links that
    holds the link or the spine."""
    if suspect["element"] in (link, spine):
        return True
    near = {spine, *(f"{leaf}-{spine}" for leaf in L.LEAVES)}
    candidates = set(suspect.get("candidates") or ())
    return bool(candidates) and candidates <= near and bool(candidates & {link, spine})


def one_scan(bed: Testbed, duration: str) -> tuple[int, dict[str, Any]]:
    env = {**os.environ, "CWCTL_INVENTORY": str(bed.inventory)}
    proc = subprocess.run(
        [sys.executable, "-m", "cwctl.cli", "scan", "--duration", duration, "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        return proc.returncode, {"error": proc.stderr.strip()[-300:]}


def judge(kind: str, direction: str | None, rc: int, report: dict[str, Any]) -> dict[str, Any]:
    found = report.get("suspects", [])
    suspects = [s["element"] for s in found]
    row: dict[str, Any] = {"kind": kind, "fault": direction, "rc": rc, "suspects": suspects[:5]}
    hosts = report.get("hosts", [])
    row["hosts_ok"] = sum(h.get("status") == "ok" for h in hosts)
    offsets = [abs(h["offset_ns"]) for h in hosts if h.get("offset_ns") is not None]
    row["max_offset_ns"] = max(offsets) if offsets else None
    if direction is None:
        row["right"] = not suspects and rc == 0
        return row
    src, dst = direction.split(">")
    link = L.link(src, dst).name
    spine = src if src in L.SPINES else dst
    row["right"] = bool(found) and names(found[0], link, spine) and rc == 3
    row["exact"] = bool(suspects) and suspects[0] in (link, spine)
    row["top1_link"] = bool(suspects) and suspects[0] == link
    row["top1_set"] = bool(found) and link in (found[0].get("candidates") or ())
    row["top3"] = any(names(s, link, spine) for s in found[:3])
    if not row["right"]:  # what the scan saw instead, to look into
        row["telemetry"] = report.get("telemetry")
        row["unlocalised"] = report.get("unlocalised")
        row["agents"] = {h["name"]: h.get("agent") for h in hosts}
        row["lossy_paths"] = [
            (p["src"], p["dst"], p["loss"]) for p in report.get("paths", []) if p.get("loss")
        ]
    return row


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        f"{'kind':<10} {'scans':>5} {'right':>6} {'exact':>6} {'link top-1':>10} "
        f"{'set w/ link':>11} {'in top-3':>8} {'exit 3':>6} {'no suspect':>10}  "
        "most common wrong top-1"
    ]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        rs = [r for r in rows if r["kind"] == kind]
        wrong = Counter(
            (r["suspects"] or ["(none)"])[0] for r in rs if not r["right"] and r["fault"]
        )
        out.append(
            f"{kind:<10} {len(rs):>5} {sum(r['right'] for r in rs):>6} "
            f"{sum(r.get('exact', False) for r in rs):>6} "
            f"{sum(r.get('top1_link', False) for r in rs):>10} "
            f"{sum(r.get('top1_set', False) for r in rs):>11} "
            f"{sum(r.get('top3', False) for r in rs):>8} {sum(r['rc'] == 3 for r in rs):>6} "
            f"{sum(not r['suspects'] for r in rs):>10}  "
            + (", ".join(f"{k} x{v}" for k, v in wrong.most_common(3)) or "-")
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.testbed.tally", description=__doc__)
    parser.add_argument("--scans", type=int, default=10, help="scans per kind (default 10)")
    parser.add_argument("--duration", default="2", help="seconds of probing per scan")
    parser.add_argument("--kinds", default="healthy,down,lossy,congested")
    parser.add_argument("--icmp-ratelimit", type=int, default=None, metavar="MS")
    parser.add_argument("--json", type=Path, help="write every scan's verdict here")
    parser.add_argument("--leaves", type=int, default=2, metavar="N", help="2-4 (default 2)")
    args = parser.parse_args(argv)
    why = missing_prerequisite()
    if why:
        print(f"tally: {why}", file=sys.stderr)
        return 2
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k != "healthy" and k not in FAULTS]
    if bad or args.scans < 1 or args.leaves not in L.LEAF_COUNTS:
        print(
            f"tally: kinds are healthy, {', '.join(FAULTS)}; scans >= 1; leaves 2-4",
            file=sys.stderr,
        )
        return 2
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cwctl-tally-") as tmp:
        os.environ.setdefault("CWCTL_STATE_DIR", str(Path(tmp) / "state"))
        bed = Testbed(unique_prefix(), Path(tmp) / "bed", leaves=args.leaves)
        rotation = directions()
        try:
            bed.up(icmp_ratelimit_ms=args.icmp_ratelimit)
            for kind in kinds:
                for i in range(args.scans):
                    direction = None if kind == "healthy" else rotation[i % len(rotation)]
                    clear(bed)
                    if direction is not None:
                        apply_fault(bed, direction, FAULTS[kind])
                    rc, report = one_scan(bed, args.duration)
                    row = judge(kind, direction, rc, report)
                    rows.append(row)
                    print(
                        f"{kind:<10} {direction or '-':<14} rc={rc} right={row['right']!s:<5} "
                        f"top={row['suspects'][:3]}",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            bed.down()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
