"""Fixtures for the agent transports (the fleet itself lives in ``sshfleet.py``)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.sshfleet import SSHFleet, wait_gone
from tests.testbed.fixture import fabric, testbed  # noqa: F401 (fixtures)


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[SSHFleet]:
    """An in-process SSH fleet; after the test, no agent it started may be left alive."""
    f = SSHFleet(tmp_path)
    try:
        yield f
    finally:
        await f.close()
    left = await wait_gone(f.pids)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"agent processes left running: {left}"
