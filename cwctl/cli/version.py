"""``cwctl --version``: the version, and the commit it was built from where that is known:
a git checkout (an editable install, ``make``'s venv) asks git; a wheel installed from a
git URL has the commit in its ``direct_url.json`` (PEP 610); anything else says
``commit unknown`` rather than guess."""

from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from cwctl import __version__

ROOT = Path(__file__).resolve().parents[2]  # the checkout, when cwctl runs from one


def _git_commit() -> str | None:
    if not (ROOT / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=True)  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "cwctl"],
            capture_output=True, text=True, timeout=5,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return f"{commit}, modified" if dirty.stdout.strip() else commit


def _installed_commit() -> str | None:
    try:
        text = metadata.distribution("cwctl").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    try:
        commit = json.loads(text or "{}").get("vcs_info", {}).get("commit_id")
    except (ValueError, AttributeError):
        return None
    return str(commit)[:12] if commit else None


def version_text() -> str:
    """``cwctl 0.1.0 (commit 1a2b3c4d5e6f, Python 3.11.7)``."""
    commit = _git_commit() or _installed_commit() or "unknown"
    return f"cwctl {__version__} (commit {commit}, Python {platform.python_version()})"
