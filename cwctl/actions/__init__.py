"""cwctl.actions."""
