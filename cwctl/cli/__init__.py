"""The typer shell: parse flags, call the core, print. Nothing else lives here.

``app`` is the typer application; importing this package registers every command
(``scan``, ``tui``, the control commands, ``sync``, ``inventory check``) on it.
"""

from __future__ import annotations

# Importing the command modules registers their commands, in the order --help lists them.
# isort: off
from cwctl.cli import scan  # noqa: F401
from cwctl.cli import tui  # noqa: F401
from cwctl.cli import actions  # noqa: F401
from cwctl.cli import rebalance  # noqa: F401
from cwctl.cli import jobenv  # noqa: F401
from cwctl.cli import sim  # noqa: F401
from cwctl.cli import sync  # noqa: F401
from cwctl.cli import watch  # noqa: F401

# isort: on
from cwctl.cli.app import app, run_guarded
from cwctl.runtime.allocator import tune

__all__ = ["app", "main", "run_guarded"]


def main() -> None:
    """Console-script entry point (the allocator tuned first: ``cwctl.runtime.allocator``)."""
    tune()
    app()
