"""A real Slurm on this machine, for tests: slurmctld, one slurmd per network namespace.

``SlurmCluster(n)`` (a context manager) starts, under a unique prefix:

* a private ``munged`` (its own key, socket and pid file; slurm.conf points at it with
  ``AuthInfo=socket=``, so the system's munge, if any, is never used);
* a bridge in the root namespace (``10.204.X.1/24``, X from the pid) with one network
  namespace per node behind a veth pair (``10.204.X.(10+i)``);
* ``slurmctld`` in the root namespace, and per node a ``slurmd`` entered with
  ``nsenter --net=...`` plus ``unshare --uts --mount`` (its own hostname; ``ip netns
  exec`` would remount /sys and slurmd would die on cgroup checks), with ``%n`` spool
  and pid files, ``proctrack/linuxproc`` and ``task/none`` (no cgroups needed).

Everything lives under one temporary directory; ``env`` holds ``SLURM_CONF`` for the
clients (``srun``, ``scontrol``, ``sinfo``). Teardown kills what it started (by pid) and
deletes the namespaces and the bridge. REAL-PARTS.md (shared notes) has the measured facts.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import pytest

SLURM_BINARIES = ("slurmctld", "slurmd", "srun", "scontrol", "sinfo", "munged", "nsenter")


def missing_parts() -> list[str]:
    """What this machine lacks to run the cluster (empty: it can)."""
    missing = [b for b in SLURM_BINARIES if shutil.which(b) is None]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def skip_without_slurm() -> None:
    """Skip the calling test (or fixture) where this machine cannot run the cluster."""
    missing = missing_parts()
    if missing:
        pytest.skip(f"a real Slurm needs {', '.join(missing)} (.ci/run installs them)")


class SlurmError(RuntimeError):
    pass


class SlurmCluster:
    """``n`` Slurm nodes (``{prefix}n1``...) in namespaces, and their controller."""

    def __init__(
        self,
        n: int = 3,
        *,
        prefix: str | None = None,
        sshd: bool = False,
        attach: dict[str, tuple[str, str]] | None = None,
        controller_address: str | None = None,
        extra_conf: str = "",
    ) -> None:
        """``n`` nodes in namespaces of its own; or, with ``attach`` (node -> (existing
        network namespace, its address)) and the ``controller_address`` they reach, a
        slurmd in each of those (the testbed's hosts) and no network of its own."""
        pid = os.getpid()
        self.n = n
        self.prefix = prefix or f"sc{pid % 100000}"
        self.subnet = f"10.204.{pid % 250 + 1}"
        port = 20000 + (pid % 5000) * 2
        self.ctld_port, self.slurmd_port = port, port + 1
        self.nodes = [f"{self.prefix}n{i + 1}" for i in range(n)]
        self.addresses = {node: f"{self.subnet}.{10 + i + 1}" for i, node in enumerate(self.nodes)}
        self.controller_address = f"{self.subnet}.1"
        self.netns = {node: node for node in self.nodes}
        self.own_network = attach is None
        if attach is not None:
            if controller_address is None:
                raise ValueError("attach needs the controller_address the nodes reach")
            self.n = len(attach)
            self.nodes = list(attach)
            self.netns = {node: ns for node, (ns, _) in attach.items()}
            self.addresses = {node: addr for node, (_, addr) in attach.items()}
            self.controller_address = controller_address
        self.bridge = f"{self.prefix}br"
        self.dir = Path(tempfile.mkdtemp(prefix=f"cwctl-{self.prefix}-"))
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._procs: list[subprocess.Popen[bytes]] = []
        self._netns: list[str] = []
        self._links: list[str] = []
        self.with_sshd = sshd  # also an sshd per node (port 22 on its address): SSH vs srun
        self.extra_conf = extra_conf  # more slurm.conf lines (TaskProlog=...)

    # --- life ------------------------------------------------------------------------
    def __enter__(self) -> SlurmCluster:
        try:
            if self.own_network:
                self._network()
            self._munge()
            self._write_conf()
            self._start_daemons()
            if self.with_sshd:
                self._start_sshds()
            self.wait_idle()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self._procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        for ns in self._netns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for link in self._links:
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        self._netns.clear()
        self._links.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- parts -----------------------------------------------------------------------
    def _ip(self, *args: str, ns: str | None = None) -> None:
        argv = ["ip", *(["-n", ns] if ns else []), *args]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode:
            raise SlurmError(f"{' '.join(argv)}: {done.stderr.strip()}")

    def _network(self) -> None:
        self._ip("link", "add", self.bridge, "type", "bridge")
        self._links.append(self.bridge)
        self._ip("addr", "add", f"{self.controller_address}/24", "dev", self.bridge)
        self._ip("link", "set", self.bridge, "up")
        for i, node in enumerate(self.nodes):
            self._ip("netns", "add", node)
            self._netns.append(node)
            outer, inner = f"{self.prefix}v{i + 1}", f"{self.prefix}p{i + 1}"
            self._ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self._links.append(outer)
            self._ip("link", "set", inner, "netns", node)
            self._ip("link", "set", outer, "master", self.bridge)
            self._ip("link", "set", outer, "up")
            self._ip("link", "set", "lo", "up", ns=node)
            self._ip("addr", "add", f"{self.addresses[node]}/24", "dev", inner, ns=node)
            self._ip("link", "set", inner, "up", ns=node)

    def _munge(self) -> None:
        munge = self.dir / "munge"
        munge.mkdir()
        munge.chmod(0o755)  # the socket's directory must be world-executable
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = munge / "munge.sock"
        argv = [
            "munged", "--foreground", "--force",
            f"--socket={self.munge_socket}", f"--key-file={key}",
            f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        ]  # fmt: skip
        self._spawn(argv, "munged")
        self._wait(lambda: self.munge_socket.exists(), "munged socket")

    def _write_conf(self) -> None:
        state = self.dir / "state"
        spool = self.dir / "spool"
        state.mkdir()
        spool.mkdir()
        nodes = "\n".join(
            f"NodeName={node} NodeAddr={addr} CPUs=1 RealMemory=100 State=UNKNOWN"
            for node, addr in self.addresses.items()
        )
        self.conf.write_text(
            f"""ClusterName={self.prefix}
SlurmctldHost={self.prefix}ctl({self.controller_address})
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={state}
SlurmdSpoolDir={spool}/%n
SlurmctldPidFile={self.dir}/slurmctld.pid
SlurmdPidFile={self.dir}/slurmd-%n.pid
SlurmctldLogFile={self.dir}/slurmctld.log
SlurmdLogFile={self.dir}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/linear
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
MinJobAge=2
{nodes}
PartitionName=all Nodes=ALL Default=YES State=UP MaxTime=INFINITE
{self.extra_conf}"""
        )

    def _start_daemons(self) -> None:
        # its own UTS namespace too: slurmctld runs only where the hostname is SlurmctldHost
        ctld = f"hostname {self.prefix}ctl && exec slurmctld -D -i -f {self.conf}"
        self._spawn(["unshare", "--uts", "sh", "-c", ctld], "slurmctld")
        for node in self.nodes:
            # its own UTS namespace: the node's hostname is its own
            inner = f"hostname {node} && exec slurmd -D -N {node} -f {self.conf}"
            argv = [
                "nsenter", f"--net=/run/netns/{self.netns[node]}",
                "unshare", "--uts", "--mount", "--propagation", "private",
                "sh", "-c", inner,
            ]  # fmt: skip
            self._spawn(argv, f"slurmd-{node}")

    def _start_sshds(self) -> None:
        """One sshd per node namespace (one throw-away host key for all), root by key."""
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        ssh = self.dir / "ssh"
        ssh.mkdir()
        for name in ("host", "client"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / name)],
                check=True,
            )
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.identity = ssh / "client"
        self.known_hosts = ssh / "known_hosts"
        host_pub = (ssh / "host.pub").read_text().split()
        self.known_hosts.write_text(
            "".join(f"{addr} {host_pub[0]} {host_pub[1]}\n" for addr in self.addresses.values())
        )
        for node, addr in self.addresses.items():
            config = ssh / f"sshd-{node}.conf"
            config.write_text(
                f"ListenAddress {addr}:22\nHostKey {ssh / 'host'}\n"
                f"AuthorizedKeysFile {ssh / 'client.pub'}\nPidFile {ssh / node}.pid\n"
                "PubkeyAuthentication yes\nPasswordAuthentication no\nUsePAM no\n"
                "KbdInteractiveAuthentication no\nStrictModes no\n"
                "PermitRootLogin prohibit-password\nMaxStartups 100:30:200\n"
            )
            netns = f"--net=/run/netns/{self.netns[node]}"
            argv = ["nsenter", netns, sshd, "-D", "-e", "-f", str(config)]
            self._spawn(argv, f"sshd-{node}")

    def inventory_text(self, *, duration_s: float = 1.0) -> str:
        """An inventory of the nodes (names = Slurm node names), with SSH access when
        the cluster runs sshds."""
        ssh = ""
        if self.with_sshd:
            ssh = (
                f'[ssh]\nuser = "root"\nidentity = "{self.identity}"\n'
                f'known_hosts = "{self.known_hosts}"\n\n'
            )
        hosts = "".join(
            f'[[host]]\nname = "{node}"\naddress = "{addr}"\n\n'
            for node, addr in self.addresses.items()
        )
        return f'{ssh}[scheduler]\nkind = "slurm"\n\n[probe]\nduration = {duration_s}\n\n{hosts}'

    def _spawn(self, argv: list[str], name: str) -> None:
        log = open(self.dir / f"{name}.out", "wb")  # noqa: SIM115 (lives as long as the daemon)
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, close_fds=True
        )
        log.close()
        self._procs.append(proc)

    def _wait(self, ready: object, what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():  # type: ignore[operator]
                return
            for proc in self._procs:
                if proc.poll() is not None:
                    raise SlurmError(f"{proc.args[0]} exited ({proc.returncode}): {self.logs()}")
            time.sleep(0.05)
        raise SlurmError(f"timed out waiting for {what}: {self.logs()}")

    # --- clients ---------------------------------------------------------------------
    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=60)
        if check and done.returncode:
            raise SlurmError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
        return done

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_idle(self, timeout_s: float = 30.0) -> None:
        self._wait(
            lambda: (
                set(self.node_states().values()) == {"idle"} and len(self.node_states()) == self.n
            ),
            "every node idle",
            timeout_s,
        )

    def show_node(self, node: str) -> dict[str, str]:
        """``scontrol show node`` as key -> value (``-o``: one line, space separated)."""
        out = self.run("scontrol", "-o", "show", "node", node).stdout
        fields: dict[str, str] = {}
        key = None
        for token in out.split():
            if "=" in token:
                key, value = token.split("=", 1)
                fields[key] = value
            elif key is not None:  # a value with spaces (Reason=...)
                fields[key] += " " + token
        return fields

    def logs(self) -> str:
        parts = []
        for path in sorted(self.dir.glob("*.out")) + sorted(self.dir.glob("*.log")):
            text = path.read_text(errors="replace").strip().splitlines()[-3:]
            if text:
                parts.append(f"[{path.name}] " + " | ".join(text))
        return " ".join(parts)[-3000:]
