"""A real OpenSSH sshd started by a test on loopback (``sshd`` fixture).

The sshd gets a throw-away config, host key and authorized key (``StrictModes no``,
``UsePAM no``) and listens on 127.0.0.2-4 at one free port: three "hosts". Tests that
use it skip only when there is no sshd binary (CI installs openssh-server). After each
test, no agent process may be left among sshd's descendants.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from cwctl.inventory import Host, Inventory, ProbeSettings, SSHDefaults
from tests.integration.sshfleet import free_tcp_port, wait_gone

SSHD = shutil.which("sshd") or next(
    (p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.path.exists(p)), None
)
needs_sshd = [
    pytest.mark.sshd,
    pytest.mark.skipif(SSHD is None, reason="no OpenSSH sshd binary (apt install openssh-server)"),
]
ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


@dataclass
class Sshd:
    proc: subprocess.Popen[bytes]
    port: int
    host_key: asyncssh.SSHKey
    client_key: asyncssh.SSHKey
    known_hosts: Path
    log: Path

    def agent_pids(self) -> list[int]:
        """Descendants of sshd that run the agent bootstrap."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
        out, todo = [], list(children.get(self.proc.pid, []))
        while todo:
            pid = todo.pop()
            todo += children.get(pid, [])
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                # the interpreter, not timeout(1) that bounds its lifetime
                if b"cwctl-agent" in cmdline and not cmdline.startswith(b"timeout\0"):
                    out.append(pid)
        return out

    def inventory(self, *, known_hosts: Path | None = None) -> Inventory:
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        return Inventory(
            hosts=tuple(
                Host(name=f"sshd-{i + 1}", address=a, port=self.port)
                for i, a in enumerate(ADDRESSES)
            ),
            ssh=SSHDefaults(
                user="root" if os.geteuid() == 0 else None,
                known_hosts=str(known_hosts or self.known_hosts),
                connect_timeout=5.0,
                python=python,
            ),
            probe=ProbeSettings(duration=0.5, rate=40.0, peers=2, ports=2),
        )

    @property
    def client_options(self) -> dict[str, object]:
        return {"config": None, "agent_path": None, "client_keys": [self.client_key]}


def _wait_listening(address: str, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"sshd exited at start ({proc.returncode}): {log.read_text()[-800:]}")
        with contextlib.suppress(OSError), socket.create_connection((address, port), 0.2):
            return
        time.sleep(0.05)
    pytest.fail(f"sshd did not listen on {address}:{port}: {log.read_text()[-800:]}")


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    assert SSHD is not None
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = tmp_path / "ssh_host_ed25519_key"
    key_path.write_bytes(host_key.export_private_key("openssh"))
    key_path.chmod(0o600)
    authorized = tmp_path / "authorized_keys"
    authorized.write_bytes(client_key.export_public_key("openssh"))
    port = free_tcp_port(ADDRESSES[0])
    listen = "".join(f"ListenAddress {a}:{port}\n" for a in ADDRESSES)
    config = tmp_path / "sshd_config"
    config.write_text(
        f"{listen}HostKey {key_path}\nAuthorizedKeysFile {authorized}\n"
        f"PidFile {tmp_path / 'sshd.pid'}\nPubkeyAuthentication yes\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "StrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\nLogLevel VERBOSE\n"
    )
    known = tmp_path / "known_hosts"
    line = host_key.export_public_key("openssh").decode().strip()
    known.write_text("".join(f"[{a}]:{port} {line}\n" for a in ADDRESSES))
    log = tmp_path / "sshd.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)], stdout=log_file, stderr=subprocess.STDOUT
        )
    try:
        for a in ADDRESSES:
            _wait_listening(a, port, proc, log)
        server = Sshd(proc, port, host_key, client_key, known, log)
        yield server
        left = asyncio.run(wait_gone(server.agent_pids(), 8.0))
        assert not left, f"agent processes left under sshd: {left}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
