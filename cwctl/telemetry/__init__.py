"""cwctl.telemetry."""
