"""``python -m tests.testbed``: bring the namespace fabric up, fault it, tear it down."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault, clear, flow_path
from tests.testbed.shell import TestbedError, missing_prerequisite

USAGE_EXAMPLES = """\
examples:
  python -m tests.testbed up                       # build it, print the inventory path
  cwctl scan -i /run/cwctl-testbed/cwtb/inventory.toml
  python -m tests.testbed fault leaf1-spine2 down  # both ways; 'leaf1>spine2' is one way
  python -m tests.testbed fault spine2>leaf1 lossy=0.05
  python -m tests.testbed fault leaf1>spine2 congested=20
  python -m tests.testbed path gpu-001 gpu-005 40001 50000   # where the kernel sends it
  python -m tests.testbed clear                    # all faults
  python -m tests.testbed down                     # everything, from any state
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.testbed",
        description="A 2-spine, 2-leaf, 8-host fabric in network namespaces (--leaves: 2-4).",
        epilog=USAGE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--prefix", default="cwtb", help="name prefix (default: cwtb)")
    parser.add_argument(
        "--dir", type=Path, help="working files (default: /run/cwctl-testbed/PREFIX)"
    )
    parser.add_argument(
        "--leaves",
        type=int,
        choices=L.LEAF_COUNTS,
        metavar="N",
        help="leaves, 4 hosts each (2-4; default: 2, or as the testbed was built)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="build the testbed and write its inventory")
    up.add_argument(
        "--icmp-ratelimit",
        type=int,
        metavar="MS",
        help="net.ipv4.icmp_ratelimit on the switches (kernel default 1000; 0 = off)",
    )
    sub.add_parser("down", help="remove everything with this prefix, from any state")
    fault = sub.add_parser("fault", help="put a fault on a link (A-B both ways, A>B one way)")
    fault.add_argument("element", help="leaf1-spine2 (both ways) or spine2>leaf1 (one way)")
    fault.add_argument("kind", help="down | lossy=P | congested[=MBIT]")
    cl = sub.add_parser("clear", help="clear the faults on a link, or all faults")
    cl.add_argument("element", nargs="?")
    sub.add_parser("status", help="what exists and which faults are on")
    path = sub.add_parser("path", help="the nodes a UDP flow between two hosts crosses")
    path.add_argument("sender")
    path.add_argument("receiver")
    path.add_argument("sport", type=int)
    path.add_argument("dport", type=int)
    args = parser.parse_args(argv)

    why = missing_prerequisite()
    if why:
        print(f"testbed: {why}", file=sys.stderr)
        return 2
    workdir = args.dir or Path("/run/cwctl-testbed") / args.prefix
    try:
        bed = Testbed(args.prefix, workdir, leaves=args.leaves)
        return _dispatch(bed, args)
    except TestbedError as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("testbed: interrupted; torn down", file=sys.stderr)
        return 130


def _dispatch(bed: Testbed, args: argparse.Namespace) -> int:
    if args.command == "up":
        bed.up(icmp_ratelimit_ms=args.icmp_ratelimit)
        print(f"testbed {bed.prefix!r} is up: {len(L.NODES)} namespaces {bed.prefix}-*")
        print(f"inventory: {bed.inventory}")
        print(f"try:       cwctl scan -i {bed.inventory}")
        print(
            f"           ssh -i {bed.identity} -o UserKnownHostsFile={bed.known_hosts} "
            f"root@{bed.mgmt('leaf1')} ip route"
        )
        return 0
    if args.command == "down":
        left = bed.down()
        if left:
            print(f"testbed: could not remove: {', '.join(left)}", file=sys.stderr)
            return 1
        if bed.dir.parent == Path("/run/cwctl-testbed"):
            shutil.rmtree(bed.dir, ignore_errors=True)
        print(f"testbed {bed.prefix!r} is down")
        return 0
    if not bed.exists():
        raise TestbedError(f"no testbed with prefix {bed.prefix!r}: run up first")
    if args.command == "fault":
        apply_fault(bed, args.element, args.kind)
    elif args.command == "clear":
        clear(bed, args.element)
    elif args.command == "path":
        for name in (args.sender, args.receiver):
            if name not in L.HOSTS:
                raise TestbedError(f"{name!r} is not a host ({', '.join(L.HOSTS)})")
        print(" > ".join(flow_path(bed, args.sender, args.receiver, args.sport, args.dport)))
        return 0
    faults = ", ".join(f"{k} {v}" for k, v in sorted(bed.faults.items())) or "none"
    print(f"testbed {bed.prefix!r}: up, management slot {bed.slot}, faults: {faults}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
