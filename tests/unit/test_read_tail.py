"""``read_tail``: how the ssh and local sessions keep an agent's last stderr bytes (what
explains its exit), including when the stream breaks part-way."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

from cwctl.transport.hostrun import STDERR_KEEP, read_tail


def chunks(*parts: bytes, then: BaseException | None = None) -> Callable[[int], Awaitable[bytes]]:
    queue = list(parts)

    async def read(n: int) -> bytes:
        if queue:
            return queue.pop(0)[:n]
        if then is not None:
            raise then
        return b""

    return read


async def test_the_last_bytes_are_kept_across_chunks() -> None:
    read = chunks(b"a" * 4000, b"b" * 4000, "Traceback: é\n".encode())
    tail = await read_tail(read)
    assert len(tail.encode()) == STDERR_KEEP
    assert tail.endswith("b" * 100 + "Traceback: é\n")


async def test_a_broken_stream_keeps_what_came_before() -> None:
    read = chunks(b"agent: fatal\n", then=ConnectionResetError())
    assert await read_tail(read, stop_on=(OSError,)) == "agent: fatal\n"


async def test_a_real_child_s_stderr() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; sys.stderr.write('x' * 9000 + 'END')",
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    tail = await read_tail(proc.stderr.read, keep=10)
    await proc.wait()
    assert tail == "xxxxxxxEND"
