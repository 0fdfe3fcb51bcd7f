"""cwctl: an operator's CLI and TUI for GPU clusters.

Clock sync, fabric telemetry and control from one workstation. The domain core
(inventory, records, topology, sync, telemetry, actions, transports) lives in this
package and never imports the shells (typer, textual, rich): see ``cwctl.cli`` and
``cwctl.tui`` for those.
"""

__version__ = "0.1.0"
