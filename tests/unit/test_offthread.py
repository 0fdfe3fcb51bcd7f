"""Work off the event loop never holds the process open (issue 35, item 8: the TUI's q
at 512 hosts waited out the solve in flight, joined by asyncio.run's executor)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from cwctl.offthread import in_thread


async def test_the_result_and_the_error_come_back_from_a_daemon_thread() -> None:
    def where(x: int) -> tuple[int, bool, str]:
        return x * 2, threading.current_thread().daemon, threading.current_thread().name

    doubled, daemon, name = await in_thread(where, 21)
    assert doubled == 42 and daemon and name == "cwctl-where"

    def boom() -> None:
        raise ValueError("bad window")

    with pytest.raises(ValueError, match="bad window"):
        await in_thread(boom)


SCRIPT = """
import asyncio, threading
from cwctl.offthread import in_thread

never = threading.Event()

async def main():
    task = asyncio.ensure_future(in_thread(never.wait))  # a solve that outlives the app
    await asyncio.sleep(0.05)
    task.cancel()  # the app quits: its worker is cancelled

asyncio.run(main())
print("exited")
"""


def test_a_process_quits_while_the_work_still_runs() -> None:
    # with asyncio.to_thread, asyncio.run joins the executor: this never returns
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "exited\n", done.stderr


async def test_a_scans_solve_runs_on_a_daemon_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from cwctl.request import ScanRequest, SimOptions
    from cwctl.session import ScanSession

    seen: list[bool] = []
    analyse = ScanSession._analyse

    def recording(self: ScanSession, collection: object) -> object:
        seen.append(threading.current_thread().daemon)
        return analyse(self, collection)  # type: ignore[arg-type]

    monkeypatch.setattr(ScanSession, "_analyse", recording)
    request = ScanRequest(sim=SimOptions(hosts=8, hosts_per_leaf=4, spines=2), duration_s=0.3)
    async with ScanSession(request) as session:
        await session.scan()
    assert seen == [True]  # the TUI's q no longer waits for it (asyncio.run joins the pool)
