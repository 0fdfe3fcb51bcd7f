"""``python -m cwctl``: the ``cwctl`` command (``python -m cwctl.cli`` is the same)."""

from cwctl.cli import main

if __name__ == "__main__":
    main()
