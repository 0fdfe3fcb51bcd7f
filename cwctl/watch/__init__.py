"""``cwctl watch``: the fabric watched around the clock (docs/watch.md).

``rounds.py`` one round over one sliding scan session (scan, export, decide, act) and the
SIGHUP reload; ``decide.py`` the decisions and guard rails, pure (a fake clock tests
them); ``policy.py`` the policy file; ``act.py`` a decision carried out through the
actions' one front door (``ActionSession``, the CLI's and the TUI's too); ``metrics.py``
``/metrics`` and the textfile; ``service.py`` the process: the timer, the signals.
"""
