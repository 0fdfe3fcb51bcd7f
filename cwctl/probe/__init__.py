"""The probe agent: stdlib-only modules that run on remote hosts (``agent.py`` is the
main loop, ``gpu/`` the GPU sampler), the assembler that imports them from memory there
(``assembler.py``) and the bootstrap that ships them as one bundle (``bootstrap.py``,
whose ``AGENT_MODULES`` lists what goes)."""
