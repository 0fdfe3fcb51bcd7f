"""``python -m cwctl.cli``."""

from cwctl.cli import main

main()
