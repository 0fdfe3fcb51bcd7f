"""How the agent gets onto a host: its bundle and the one-line command that runs it.

The command is ``python3 -c CODE [LIFETIME]``. CODE first arms ``signal.alarm(LIFETIME)``
when it is given: the agent's hard lifetime, counted from its first instruction, enforced
by the kernel (SIGALRM's default action ends the process, whatever Python is doing), so it
holds where ``timeout(1)`` is missing and whatever cwctl does. Then CODE reads a decimal
length line from stdin, then exactly that many bytes (``assembler.py``), and execs them.
The reads go straight to file descriptor 0, unbuffered, so nothing past them is
consumed. The assembler reads the module frames that follow the same way, creates each
module of ``AGENT_MODULES`` under its real dotted name and calls ``AGENT_MAIN``'s
``main()``; the params line comes next, and stdin stays the agent's control channel.
Nothing is written to the remote disk.
"""

from __future__ import annotations

import importlib.util
import json
import math
import shlex
import zlib
from functools import cache
from pathlib import Path
from typing import Any

# THE list of modules shipped to every host, in the order the far side runs them: a
# module after the bundled modules it imports, a package before its modules. A new
# agent module goes here (tests/unit/test_agent_bundle.py checks the order and that
# each is stdlib-only Python 3.8).
AGENT_MODULES = (
    "cwctl.probe.wire",
    "cwctl.probe.auth",
    "cwctl.probe.cost",
    "cwctl.probe.stamps",
    "cwctl.probe.hostfacts",
    "cwctl.probe.batch",
    "cwctl.probe.params",
    "cwctl.probe.channel",
    "cwctl.probe.rails",
    "cwctl.probe.trace",
    "cwctl.probe.inflight",
    "cwctl.probe.errqueue",
    "cwctl.probe.sender",
    "cwctl.probe.exchanges",
    "cwctl.probe.gpu",
    "cwctl.probe.gpu.readings",
    "cwctl.probe.gpu.smi",
    "cwctl.probe.gpu.xid",
    "cwctl.probe.gpu.nvml",
    "cwctl.probe.gpu.sampler",
    "cwctl.probe.clockwatch",
    "cwctl.probe.chronysock",
    "cwctl.probe.agent",
)
AGENT_MAIN = "cwctl.probe.agent"  # its main() runs the agent

_ASSEMBLER = Path(__file__).resolve().with_name("assembler.py")

# One line: read the length (byte by byte, so nothing more is taken), then the assembler.
# "cwctl-agent" in it is how ps (and tests/integration/test_sshd.py) spot an agent.
BOOTSTRAP_CODE = (
    "import os,sys,signal;sys.argv[1:] and signal.alarm(int(sys.argv[1]));"
    "f=os.fdopen(0,'rb',0,closefd=False);n=int(f.readline());b=bytearray();"
    "any(b.extend(c) or len(b)>=n for c in iter(lambda:f.read(n-len(b)),b''));"
    "len(b)==n or sys.exit(3);"
    "exec(compile(bytes(b),'cwctl-agent','exec'),{'__name__':'__cwctl_assembler__'})"
)


def module_source(name: str) -> bytes:
    """The source of one of cwctl's modules, found as an import would find it."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(name)
    return Path(spec.origin).read_bytes()


@cache
def agent_sources() -> dict[str, bytes]:
    """Every bundled module's source, by dotted name, in bundle order."""
    return {name: module_source(name) for name in AGENT_MODULES}


@cache
def agent_bundle() -> bytes:
    """What follows the length line: the assembler, one frame per module, the run line."""
    parts = [_ASSEMBLER.read_bytes()]
    for name, source in agent_sources().items():
        data = zlib.compress(source, 9)
        parts.append(f"{name} {len(data)}\n".encode() + data)
    parts.append(f"run {AGENT_MAIN}\n".encode())
    return b"".join(parts)


KILL_AFTER_S = 5  # timeout(1)'s -k: SIGKILL this long after its SIGTERM


def lifetime_arg(lifetime_s: float) -> str:
    """A hard lifetime as the bootstrap's argument: whole seconds, at least 1."""
    return str(max(1, math.ceil(lifetime_s)))


def bootstrap_argv(python: str, *, lifetime_s: float | None = None) -> list[str]:
    """The agent's command as an argument vector (local subprocesses, the srun step).

    With ``lifetime_s`` the agent cannot outlive it, whatever happens to it or to us: the
    bootstrap arms ``signal.alarm`` before it reads anything, and SIGALRM, left at its
    default action, ends the process (a hung cwctl that never closes the agent's stdin,
    an agent stuck in a blocking write). Every launcher passes the same lifetime, one per
    scan (``transport.base.hard_lifetime_s``): the agent's own deadline plus slack, so a
    healthy agent always ends first, on its deadline, on ``stop`` or on stdin EOF.
    """
    tail = [] if lifetime_s is None else [lifetime_arg(lifetime_s)]
    return [python, "-c", BOOTSTRAP_CODE, *tail]


def bootstrap_command(
    python: str = "python3", *, lifetime_s: float | None = None, outer_guard: bool = True
) -> str:
    """The same as one shell command line (over SSH), with ``timeout(1)`` as outer guard.

    With ``lifetime_s``, ``timeout(1)`` (coreutils, busybox) runs the agent too, sends
    SIGTERM (and SIGCONT, so a stopped agent gets it) at the lifetime and SIGKILL
    ``KILL_AFTER_S`` later: an agent stopped with SIGSTOP and never continued cannot take
    its own alarm, and SSH would leave it running (closing a channel without a terminal
    signals nothing). Where ``timeout`` is missing the plain command runs, its alarm armed.
    Without ``outer_guard`` only the alarm: an agent that re-arms it (a feeder's lease)
    may live past ``lifetime_s``.
    """
    plain = shlex.join(bootstrap_argv(python, lifetime_s=lifetime_s))
    if lifetime_s is None or not outer_guard:
        return plain
    bounded = shlex.join(
        ["timeout", "-k", str(KILL_AFTER_S), lifetime_arg(lifetime_s),
         *bootstrap_argv(python, lifetime_s=lifetime_s)]
    )  # fmt: skip
    return f"command -v timeout >/dev/null 2>&1 && exec {bounded}; exec {plain}"


def agent_payload(params: dict[str, Any]) -> bytes:
    """What to write to a fresh bootstrap's stdin: length line, bundle, params line."""
    size = len(_ASSEMBLER.read_bytes())
    line = json.dumps({"type": "params", **params}, separators=(",", ":"))
    return f"{size}\n".encode() + agent_bundle() + line.encode() + b"\n"
