"""cwctl.sim."""
