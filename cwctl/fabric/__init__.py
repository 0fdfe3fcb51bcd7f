"""The fabric's names and shape: ``names`` (how hosts, switches and links are
named) and ``topology`` (the paths between hosts, from traces or the inventory)."""
