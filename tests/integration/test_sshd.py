"""The ssh transport against a real OpenSSH sshd, started by the test on loopback.

The sshd gets a throw-away config, host key and authorized key (``StrictModes no``,
``UsePAM no``) and listens on 127.0.0.2-4 at one free port: three "hosts". The test
skips only when there is no sshd binary (CI installs openssh-server). After each test,
no agent process may be left among sshd's descendants.
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
from dataclasses import dataclass, replace
from pathlib import Path

import asyncssh
import pytest

from cwctl.inventory import Host, Inventory, ProbeSettings, SSHDefaults
from cwctl.pipeline import ScanRequest
from cwctl.transport.ssh import collect_ssh, scan_inventory
from tests.integration.sshfleet import free_tcp_port, wait_gone

SSHD = shutil.which("sshd") or next(
    (p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.path.exists(p)), None
)
pytestmark = [
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
                if b"cwctl-agent" in Path(f"/proc/{pid}/cmdline").read_bytes():
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


async def test_full_scan_through_real_sshd(sshd: Sshd) -> None:
    connected: list[dict] = []
    c = await scan_inventory(
        sshd.inventory(),
        ScanRequest(),
        lambda e, f: connected.append(f) if e == "connected" else None,
        client_options=sshd.client_options,
    )
    names = ["sshd-1", "sshd-2", "sshd-3"]
    errors = {n: s.error for n, s in c.status.items() if s.status != "ok"}
    assert not errors, f"{errors}\nsshd log: {sshd.log.read_text()[-1500:]}"
    assert sorted(f["host"] for f in connected) == names
    assert [c.hello[n]["address"] for n in names] == list(ADDRESSES)
    t = c.table
    for src, dsts in c.peers.items():
        for dst in dsts:
            rows = (t.src == t.host_index(src)) & (t.dst == t.host_index(dst)) & t.complete
            assert rows.sum() > 0, (src, dst)
    assert t.timestamp_source == "sw"
    assert all(c.summaries[n]["reason"] == "done" for n in names)


async def test_unknown_host_key_refused_by_real_sshd(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    c = await scan_inventory(
        sshd.inventory(known_hosts=empty), ScanRequest(), None, client_options=sshd.client_options
    )
    for name in ("sshd-1", "sshd-2", "sshd-3"):
        assert c.status[name].status == "unreachable"
        assert sshd.host_key.get_fingerprint() in c.status[name].error
        assert name in c.status[name].error


async def test_cancelled_scan_leaves_no_agent_under_real_sshd(sshd: Sshd) -> None:
    started = asyncio.Event()
    task = asyncio.create_task(
        scan_inventory(
            sshd.inventory(),
            ScanRequest(duration_s=30.0),
            lambda e, f: started.set() if e == "started" else None,
            client_options=sshd.client_options,
        )
    )
    await asyncio.wait_for(started.wait(), 30.0)
    await asyncio.sleep(0.3)
    pids = sshd.agent_pids()
    assert len(pids) == 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(pids, 5.0) == []


async def test_scan_from_an_inventory_file(sshd: Sshd, tmp_path: Path) -> None:
    """The path `cwctl scan -i FILE` takes: load_inventory, then the ssh transport."""
    inv = sshd.inventory()
    hosts = "".join(
        f'[[host]]\nname = "{h.name}"\naddress = "{h.address}"\nport = {h.port}\n'
        for h in inv.hosts[:2]
    )
    user = f'user = "{inv.ssh.user}"\n' if inv.ssh.user else ""
    path = tmp_path / "inventory.toml"
    path.write_text(
        f'[ssh]\n{user}known_hosts = "{sshd.known_hosts}"\npython = "{inv.ssh.python}"\n'
        "connect_timeout = 5\n\n[probe]\nduration = 0.5\nrate = 40\npeers = 1\nports = 1\n\n"
        + hosts
    )
    c = await collect_ssh(ScanRequest(inventory=path), None, client_options=sshd.client_options)
    assert {n: s.status for n, s in c.status.items()} == {"sshd-1": "ok", "sshd-2": "ok"}
    assert c.params["rate"] == 40 and c.params["ports"] == 1
    assert set(c.table.sport.tolist()) == {
        c.hello["sshd-1"]["sports"][0],
        c.hello["sshd-2"]["sports"][0],
    }


async def test_real_sshd_failures_are_reported_per_host(sshd: Sshd) -> None:
    """One host fine, one without the Python it is told to use, one refusing the login."""
    inv = sshd.inventory()
    ok, no_python, no_login = inv.hosts
    inv = replace(
        inv,
        hosts=(
            ok,
            replace(no_python, python="/nonexistent/python3"),
            replace(no_login, user="cwctl-no-such-user"),
        ),
    )
    c = await scan_inventory(inv, ScanRequest(), None, client_options=sshd.client_options)
    assert c.status["sshd-1"].status == "ok"
    assert c.status["sshd-2"].status == "error"
    assert "sshd-2: no Python to run the agent" in c.status["sshd-2"].error
    assert c.status["sshd-3"].status == "unreachable"
    assert "authentication refused as cwctl-no-such-user" in c.status["sshd-3"].error
