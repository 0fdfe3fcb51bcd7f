"""How the agent gets onto a host: its bytes and the one-line command that runs them.

The command is ``python3 -c CODE``; CODE reads a decimal length line from stdin, then
exactly that many bytes (the agent bundle), and execs them. The reads go straight to
file descriptor 0, unbuffered, so nothing past the bundle is consumed: stdin stays the
agent's control channel. Nothing is written to the remote disk.

The bundle is ``cwctl/probe/gpu.py`` (when present) followed by ``agent.py``; the agent
uses the ``GpuSampler`` that gpu.py defines. ``from __future__`` lines are hoisted to
the top, where Python requires them.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_PARTS = ("gpu.py", "agent.py")  # order matters: agent.py looks GpuSampler up at run time
_FUTURE = re.compile(r"^from __future__ import [^\n]*\n", re.MULTILINE)

# One line: read the length (byte by byte, so nothing more is taken), then the bundle.
BOOTSTRAP_CODE = (
    "import os,sys;f=os.fdopen(0,'rb',0,closefd=False);n=int(f.readline());b=bytearray();"
    "any(b.extend(c) or len(b)>=n for c in iter(lambda:f.read(n-len(b)),b''));"
    "len(b)==n or sys.exit(3);"
    "exec(compile(bytes(b),'cwctl-agent','exec'),{'__name__':'__cwctl_agent__'})"
)


@cache
def agent_bundle() -> bytes:
    """The agent's source: gpu.py (if it exists) then agent.py, as one script."""
    futures: list[str] = []
    bodies: list[str] = []
    for name in _PARTS:
        path = _HERE / name
        if not path.exists():
            continue
        text = path.read_text()
        futures += _FUTURE.findall(text)
        bodies.append(f"# --- {name} ---\n" + _FUTURE.sub("", text))
    head = "".join(dict.fromkeys(futures))  # each future import once, in first-seen order
    return (head + "\n".join(bodies)).encode()


def bootstrap_command(python: str = "python3") -> str:
    """The shell command line that starts an agent: ``python -c CODE``."""
    return shlex.join([python, "-c", BOOTSTRAP_CODE])


def bootstrap_argv(python: str) -> list[str]:
    """The same, as an argument vector (for local subprocesses, no shell)."""
    return [python, "-c", BOOTSTRAP_CODE]


def agent_payload(params: dict[str, Any]) -> bytes:
    """What to write to a fresh bootstrap's stdin: length line, bundle, params line."""
    bundle = agent_bundle()
    line = json.dumps({"type": "params", **params}, separators=(",", ":"))
    return f"{len(bundle)}\n".encode() + bundle + line.encode() + b"\n"
