"""cwctl sync: feeding chronyd with the clock offsets a scan measures (docs/sync.md)."""
