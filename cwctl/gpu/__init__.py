"""cwctl.gpu."""
