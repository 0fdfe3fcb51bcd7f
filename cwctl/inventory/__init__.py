"""The inventory (docs/inventory.md): hosts, switches, defaults.

``model`` holds the dataclasses, ``load`` reads and validates a file (every problem one
``FILE:LINE: key ...`` line), ``addresses`` checks the keys path discovery and switch
access use, ``summary`` is what ``cwctl inventory check`` prints.
"""

from cwctl.inventory.load import load_inventory, parse_inventory
from cwctl.inventory.model import (
    Endpoint,
    Host,
    Inventory,
    InventoryError,
    ProbeSettings,
    Scheduler,
    SSHDefaults,
    Switch,
)
from cwctl.inventory.summary import summarize

__all__ = [
    "Endpoint",
    "Host",
    "Inventory",
    "InventoryError",
    "ProbeSettings",
    "SSHDefaults",
    "Scheduler",
    "Switch",
    "load_inventory",
    "parse_inventory",
    "summarize",
]
