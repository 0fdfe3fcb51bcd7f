"""A real leaf-spine fabric on one machine: network namespaces, kernel ECMP, sshd per node.

Run by hand (as root) with ``python -m tests.testbed up|down|fault|clear|status|path``
(docs/testbed.md), or from tests through the ``testbed`` fixture (tests/testbed/fixture.py).
"""
