"""Bring the testbed up and tear it down: namespaces, veths, routes, sshd per node.

``Testbed(prefix, workdir).up()`` builds everything and writes, under ``workdir``,
``inventory.toml``, ``known_hosts`` and the SSH identity ``id_ed25519``; ``down()``
removes everything named with the prefix, from any state (half-built, faulted, after a
crash), and may be called as often as wanted. Every name in the root namespace is the
prefix plus a fixed suffix (``{prefix}br``, ``{prefix}m0``...) and every namespace is
``{prefix}-{node}``: two testbeds with different prefixes never collide.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.testbed import layout as L
from tests.testbed.inventory import write_inventory
from tests.testbed.shell import (
    TestbedError,
    ip_batch,
    kill_all,
    netns_list,
    netns_pids,
    root_links,
    run,
    sshd_binary,
)

PREFIX = re.compile(r"^[a-z][a-z0-9]{0,7}$")
_LOCK = Path("/run/cwctl-testbed.lock")
_SWITCH_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    "net.ipv4.fib_multipath_hash_policy=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
)
SSHD_NICE = -10
_HOST_SYSCTLS = ("net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")


class Testbed:
    """One testbed: its prefix (names), its working directory (files) and its state."""

    __test__ = False  # not a pytest test class

    def __init__(self, prefix: str, workdir: Path | str, leaves: int | None = None) -> None:
        """``leaves`` (2-4) lays the fabric out for this process (see layout.set_leaves);
        None: as the state file says (a bed already up), else 2."""
        if not PREFIX.match(prefix):
            raise TestbedError(
                f"prefix {prefix!r}: 1-8 lowercase letters/digits starting with a letter"
            )
        self.prefix = prefix
        self.dir = Path(workdir)
        self.state_file = self.dir / "testbed.json"
        state = self._load_state()
        self.leaves: int = state.get("leaves", 2) if leaves is None else leaves
        try:
            L.set_leaves(self.leaves)
        except ValueError as e:
            raise TestbedError(str(e)) from None
        self.slot: int = state.get("slot", -1)
        self.flows: dict[str, list[int]] = state.get("flows", {})
        self.faults: dict[str, str] = state.get("faults", {})

    # -- names -------------------------------------------------------------------------
    def ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    def mgmt_veth(self, node: str) -> str:
        return f"{self.prefix}m{L.NODES.index(node)}"

    @property
    def inventory(self) -> Path:
        return self.dir / "inventory.toml"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def identity(self) -> Path:
        return self.dir / "id_ed25519"

    def mgmt(self, node: str) -> str:
        return L.mgmt_address(self.slot, node)

    # -- state ---------------------------------------------------------------------------
    def _load_state(self) -> dict:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return state if state.get("prefix") == self.prefix else {}

    def save_state(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "prefix": self.prefix,
                    "slot": self.slot,
                    "leaves": self.leaves,
                    "flows": self.flows,
                    "faults": self.faults,
                },
                indent=1,
            )
        )
        os.replace(tmp, self.state_file)

    def exists(self) -> bool:
        return any(self.ns(n) in netns_list() for n in L.NODES)

    # -- up ------------------------------------------------------------------------------
    def up(self, *, icmp_ratelimit_ms: int | None = None) -> None:
        """Build the whole testbed; on any failure or signal, tear down what was made."""
        if self.exists():
            raise TestbedError(f"a testbed with prefix {self.prefix!r} exists: run down first")
        with _signals_raise():
            try:
                self._up(icmp_ratelimit_ms)
            except BaseException:
                self.down()
                raise

    def _up(self, icmp_ratelimit_ms: int | None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "run").mkdir(exist_ok=True)
        with _lock():
            self.slot = _free_slot()
            self.save_state()
            ip_batch(self._root_lines())
        for node in L.NODES:
            ip_batch(self._node_lines(node), ns=self.ns(node))
        self._sysctls(icmp_ratelimit_ms)
        self._ssh_keys()
        write_inventory(self)
        self._start_sshds()

    def _root_lines(self) -> list[str]:
        lines = [f"netns add {self.ns(n)}" for n in L.NODES]
        lines += [
            f"link add {self.bridge} type bridge",
            f"addr add {L.mgmt_gateway(self.slot)}/{L.mgmt_prefix_len()} dev {self.bridge}",
            f"link set {self.bridge} up",
        ]
        for lk in L.LINKS:
            a_if, b_if = lk.end(lk.a)[0], lk.end(lk.b)[0]
            lines.append(
                f"link add {a_if} netns {self.ns(lk.a)} type veth "
                f"peer name {b_if} netns {self.ns(lk.b)}"
            )
        for node in L.NODES:
            veth = self.mgmt_veth(node)
            lines += [
                f"link add {veth} type veth peer name {L.MGMT_IF} netns {self.ns(node)}",
                f"link set {veth} master {self.bridge} up",
            ]
        return lines

    def _node_lines(self, node: str) -> list[str]:
        lines = [
            "link set lo up",
            f"addr add {self.mgmt(node)}/{L.mgmt_prefix_len()} dev {L.MGMT_IF}",
            f"link set {L.MGMT_IF} up",
        ]
        for lk in L.links_of(node):
            ifname, mine, _ = lk.end(node)
            lines += [f"addr add {mine}/{lk.prefix_len} dev {ifname}", f"link set {ifname} up"]
        if node in L.HOSTS:
            ifname, _, gateway = L.link(node, L.leaf_of(node)).end(node)
            lines.append(f"route add default via {gateway} dev {ifname} proto static")
        elif node in L.LEAVES:
            for other in L.LEAVES:
                if other == node:
                    continue
                hops = " ".join(
                    f"nexthop via {L.link(node, s).end(node)[2]} dev {s} weight 1" for s in L.SPINES
                )
                lines.append(f"route add {L.host_subnet(other)} proto static {hops}")
        else:
            for leaf in L.LEAVES:
                _, _, via = L.link(leaf, node).end(node)
                lines.append(f"route add {L.host_subnet(leaf)} via {via} dev {leaf} proto static")
        return lines

    def reset_routes(self) -> None:
        """Put every static route back as ``up`` made it (after a test changed some), and
        take away every rule and table of its own a reroute may have left (a test that
        failed before its rollback): rules after ``main``'s are left alone."""
        for node in L.NODES:
            lines = [ln for ln in self._node_lines(node) if ln.startswith("route add")]
            ip_batch(
                [ln.replace("route add", "route replace", 1) for ln in lines], ns=self.ns(node)
            )
            rules = run(["ip", "rule", "show"], ns=self.ns(node)).stdout
            for pref, table in re.findall(r"^(\d+):.* lookup (\d+)\s*$", rules, re.M):
                run(["ip", "rule", "del", "priority", pref], ns=self.ns(node), check=False)
                run(["ip", "route", "flush", "table", table], ns=self.ns(node), check=False)

    def _sysctls(self, icmp_ratelimit_ms: int | None) -> None:
        """Written to /proc/sys inside each namespace (no procps needed)."""
        procs = []
        for node in L.NODES:
            settings = list(_HOST_SYSCTLS if node in L.HOSTS else _SWITCH_SYSCTLS)
            if icmp_ratelimit_ms is not None and node not in L.HOSTS:
                settings.append(f"net.ipv4.icmp_ratelimit={icmp_ratelimit_ms}")
            script = "".join(
                f"echo {v} > /proc/sys/{k.replace('.', '/')} && "
                for k, v in (kv.split("=") for kv in settings)
            )
            cmd = ["ip", "netns", "exec", self.ns(node), "sh", "-c", script + "true"]
            procs.append(subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True))
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise TestbedError(f"sysctl in the testbed: {err.strip()}")

    def _ssh_keys(self) -> None:
        keys = self.dir / "keys"
        keys.mkdir(exist_ok=True)
        jobs = [(self.identity, "cwctl-testbed operator")]
        jobs += [(keys / node, f"{self.prefix}-{node}") for node in L.NODES]
        procs = []
        for path, comment in jobs:
            for old in (path, path.with_suffix(".pub")):
                old.unlink(missing_ok=True)
            cmd = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in procs:
            if p.wait() != 0:
                raise TestbedError(
                    f"ssh-keygen: {p.stderr.read().decode().strip() if p.stderr else ''}"
                )
        lines = []
        for node in L.NODES:
            key = " ".join((keys / f"{node}.pub").read_text().split()[:2])
            lines.append(f"{self.mgmt(node)} {key}\n")
        self.known_hosts.write_text("".join(lines))

    def _sshd_config(self, node: str) -> Path:
        conf = self.dir / "run" / f"sshd-{node}.conf"
        conf.write_text(
            f"ListenAddress {self.mgmt(node)}:22\n"
            f"HostKey {self.dir / 'keys' / node}\n"
            f"AuthorizedKeysFile {self.identity}.pub\n"
            f"PidFile {self.dir / 'run' / f'sshd-{node}.pid'}\n"
            "PubkeyAuthentication yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\n"
            "PermitRootLogin prohibit-password\nMaxStartups 64:30:128\nLogLevel INFO\n"
        )
        return conf

    def _start_sshds(self) -> None:
        sshd = sshd_binary()
        if sshd is None:
            raise TestbedError("no OpenSSH sshd binary (apt install openssh-server)")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation dir
        procs = []
        for node in L.NODES:
            log = self.dir / "run" / f"sshd-{node}.log"
            cmd = [sshd, "-f", str(self._sshd_config(node)), "-E", str(log)]
            # nice -10: twelve "machines" share this one's cores; what cwctl starts through
            # sshd (the agents) should not read as CPU-starved because of other work here
            cmd = ["nice", "-n", str(SSHD_NICE), "ip", "netns", "exec", self.ns(node), *cmd]
            procs.append((node, subprocess.Popen(cmd)))
        for node, p in procs:
            if p.wait() != 0:
                raise TestbedError(f"sshd on {node} did not start: see {self.dir}/run")
        deadline = time.monotonic() + 10.0
        waiting = set(L.NODES)
        while waiting and time.monotonic() < deadline:
            for node in sorted(waiting):
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection((self.mgmt(node), 22), 0.2),
                ):
                    waiting.discard(node)
            if waiting:
                time.sleep(0.05)
        if waiting:
            raise TestbedError(f"sshd not listening on {', '.join(sorted(waiting))}")

    # -- down ----------------------------------------------------------------------------
    def down(self) -> list[str]:
        """Remove every namespace, link and process of this prefix; returns what was left."""
        with _signals_ignored():
            namespaces = [self.ns(n) for n in L.NODES if self.ns(n) in netns_list()]
            kill_all(pid for ns in namespaces for pid in netns_pids(ns))
            kill_all(pid for pids in self.flows.values() for pid in pids)
            for ns in namespaces:
                run(["ip", "netns", "del", ns], check=False)
            names = root_links()
            for name in [self.bridge, *(self.mgmt_veth(n) for n in L.NODES)]:
                if name in names:
                    run(["ip", "link", "del", name], check=False)
            self.flows, self.faults = {}, {}
            if self.state_file.exists():
                self.save_state()
            return self.leftovers()

    def leftovers(self) -> list[str]:
        """What of this prefix still exists (namespaces, root links); empty after down()."""
        names = root_links()
        left = [f"netns {self.ns(n)}" for n in L.NODES if self.ns(n) in netns_list()]
        left += [
            f"link {x}" for x in [self.bridge, *(self.mgmt_veth(n) for n in L.NODES)] if x in names
        ]
        return left


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    with open(_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _free_slot() -> int:
    out = run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    used = [
        ipaddress.ip_interface(a).network for a in re.findall(r"inet (192\.168\.201\.[\d./]+)", out)
    ]
    for slot in range(0, L.SLOTS, L.mgmt_span()):
        net = ipaddress.ip_network(L.mgmt_network(slot))
        if not any(net.overlaps(u) for u in used):
            return slot
    raise TestbedError("all 16 management slots of 192.168.201.0/24 are in use: run down")


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM/SIGHUP during bring-up behave like Ctrl-C, so the cleanup runs."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """Teardown is not interrupted half-way by a second Ctrl-C."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    try:
        old = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}
    except ValueError:  # not the main thread: signals are not ours to change
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
