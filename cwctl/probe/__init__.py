"""The probe agent (``agent.py``, stdlib only, runs on remote hosts), its GPU sampler
(``gpu.py``, bundled in front of it) and the bootstrap that delivers both (``bootstrap.py``)."""
