"""cwctl.tui."""
