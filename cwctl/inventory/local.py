"""What this machine must hold for an inventory's hosts to be reached: the files its
``[ssh]`` names. ``cwctl inventory check`` asks the same questions the SSH transport
asks before its first connection, so a file that passes the check does not then stop
a scan (exit 2) on an unreadable key."""

from __future__ import annotations

import os
from pathlib import Path

from cwctl.inventory.model import Inventory


def identity_problem(inv: Inventory) -> str | None:
    """``[ssh] identity`` that this user cannot read, in the transport's words."""
    if not inv.ssh.identity:
        return None
    identity = Path(inv.ssh.identity).expanduser()
    if os.access(identity, os.R_OK):
        return None
    where = inv.path or "inventory"
    return (
        f"{where}: [ssh] identity {str(identity)!r} cannot be read "
        "(fix the path, or remove the key to use ssh-agent and ~/.ssh/config)"
    )


def known_hosts_problem(inv: Inventory) -> str | None:
    """``[ssh] known_hosts`` that exists and cannot be read (a missing file is an empty
    one: ``--accept-new-host-keys`` fills it)."""
    path = Path(inv.ssh.known_hosts or "~/.ssh/known_hosts").expanduser()
    if not path.exists() or os.access(path, os.R_OK):
        return None
    return f"{inv.path or 'inventory'}: [ssh] known_hosts {str(path)!r} cannot be read"


def local_problems(inv: Inventory) -> list[str]:
    """Every file a scan over SSH would refuse to start without, one line each."""
    return [p for p in (identity_problem(inv), known_hosts_problem(inv)) if p is not None]
