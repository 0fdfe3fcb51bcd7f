"""cwctl.transport."""
