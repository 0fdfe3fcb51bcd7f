"""cwctl.tui: the scan pipeline, continuously, in a Textual app (``cwctl tui``).

``make_app(source)`` builds the app around a ``ScanSource`` (``source.py``); the
pipeline's own is ``PipelineSource(request)``, tests pass a ``FixedSource``.
"""
