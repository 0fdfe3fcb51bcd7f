"""Where cwctl keeps what it did: ``$CWCTL_STATE_DIR``, else ``$XDG_STATE_HOME/cwctl``,
else ``~/.local/state/cwctl`` (the journal, the simulator's saved state, the lock)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    explicit = os.environ.get("CWCTL_STATE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path("~/.local/state").expanduser()
    return base / "cwctl"
