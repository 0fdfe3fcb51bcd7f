"""cwctl.tui: the scan pipeline, continuously, in a Textual app (``cwctl tui``).

``make_app(source)`` builds the app around a ``ScanSource`` (``source.py``): the CLI
hands it a ``cwctl.session.ScanSession``, tests a ``FixedSource``.
"""
