"""Running ``ip``/``tc``/programs in the root namespace or inside one of the testbed's."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path


class TestbedError(RuntimeError):
    """A step of building, faulting or tearing down the testbed failed (message says which)."""

    __test__ = False


def missing_prerequisite() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "the namespace testbed needs root (network namespaces, veths, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the namespace testbed needs {tool!r} (apt install iproute2)"
    if sshd_binary() is None:
        return "the namespace testbed needs an OpenSSH sshd (apt install openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "the namespace testbed needs ssh-keygen (apt install openssh-client)"
    if not os.path.exists("/proc/self/ns/net"):
        return "this kernel has no network namespaces"
    return _netns_probe()


_PROBED: list[str | None] = []


def _netns_probe() -> str | None:
    """Make (and remove) one namespace with a veth: the test of "namespaces can be made"."""
    if not _PROBED:
        name = f"cwtbprobe{os.getpid()}"
        made = run(["ip", "netns", "add", name], check=False)
        why = None
        if made.returncode != 0:
            why = f"network namespaces cannot be made here: {made.stderr.strip()}"
        else:
            veth = run(
                [
                    "ip",
                    "-n",
                    name,
                    "link",
                    "add",
                    "probea",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "probeb",
                ],
                check=False,
            )
            if veth.returncode != 0:
                why = f"veth links cannot be made here: {veth.stderr.strip()}"
            run(["ip", "netns", "del", name], check=False)
        _PROBED.append(why)
    return _PROBED[0]


def sshd_binary() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return next((p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.path.exists(p)), None)


def run(
    args: Sequence[str], *, ns: str | None = None, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (inside namespace ``ns`` when given); raise TestbedError when it fails."""
    cmd = ["ip", "netns", "exec", ns, *args] if ns else list(args)
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise TestbedError(f"{' '.join(cmd)}: {detail[-1] if detail else proc.returncode}")
    return proc


def ip_batch(lines: Sequence[str], *, ns: str | None = None) -> None:
    """Many ``ip`` commands in one process (``ip -batch``): bring-up stays fast."""
    if not lines:
        return
    cmd = ["ip", *(["-n", ns] if ns else []), "-batch", "-"]
    proc = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()
        where = f" in {ns}" if ns else ""
        raise TestbedError(f"ip -batch{where}: {detail[-1] if detail else proc.returncode}")


def netns_list() -> set[str]:
    proc = run(["ip", "netns", "list"], check=False)
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}


def root_links() -> set[str]:
    proc = run(["ip", "-o", "link", "show"], check=False)
    names = set()
    for line in proc.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.add(parts[1].strip().split("@", 1)[0])
    return names


def netns_pids(ns: str) -> list[int]:
    proc = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_all(pids: Iterable[int]) -> None:
    pids = [p for p in pids if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            pids = [p for p in pids if alive(p)]
            if not pids:
                return
            time.sleep(0.02)


def alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap our own children (sysctl, sshd parents)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
