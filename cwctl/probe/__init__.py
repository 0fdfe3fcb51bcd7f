"""cwctl.probe."""
