"""Transports: how a scan reaches its hosts and brings their probe records home.

``base``  the orchestrator every agent transport shares (fan-out, two-phase start,
          record streaming, per-host status)
``local`` agents as subprocesses on this machine's loopback addresses
``ssh``   agents on inventory hosts through asyncssh
``sim``   no agents: the simulated fabric produces the records
"""
