"""The agent's two pipes: records out on stdout, control lines in on stdin.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).
"""

import contextlib
import json
import os
import select
import sys
import time

from cwctl.probe.wire import RECORD_VERSION


class Output:
    """Records to stdout, buffered, written without blocking while probing.

    A slow reader (a busy SSH channel) must not stall the probe loop: fd 1 is made
    non-blocking and what does not fit stays queued until poll says it can go.
    """

    def __init__(self):
        self.buf = []
        self.size = 0
        self.pending = b""  # encoded, not yet accepted by the pipe
        self.broken = False
        self.host = "?"  # until the params name it

    def record(self, rec):
        line = json.dumps(rec, separators=(",", ":")) + "\n"
        self.buf.append(line)
        self.size += len(line)
        if self.size > 1 << 16:
            self.flush()

    def error(self, message, fatal=False):
        sys.stderr.write(f"cwctl-agent {self.host}: {message}\n")
        sys.stderr.flush()
        rec = {"type": "error", "v": RECORD_VERSION, "host": self.host, "message": message}
        rec["fatal"] = fatal
        self.record(rec)
        self.flush()

    @property
    def waiting(self):
        return bool(self.pending)

    def flush(self):
        """Write what the pipe takes now; the rest waits for ``waiting`` and POLLOUT."""
        if self.buf:
            self.pending += "".join(self.buf).encode()
            self.buf, self.size = [], 0
        while self.pending and not self.broken:
            try:
                written = os.write(1, self.pending)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.broken = True  # nobody listens any more: finish quietly
                return
            self.pending = self.pending[written:]

    def finish(self):
        """Everything out, blocking: the last records before exit."""
        with contextlib.suppress(OSError):
            os.set_blocking(1, True)
        self.flush()


class Control:
    """Line reader on stdin (fd 0) that never blocks: the bootstrap left it unbuffered."""

    def __init__(self):
        self.buf = b""
        self.eof = False
        self.backlog = []  # messages read along with an earlier one, not yet handled

    def read_lines(self):
        out, self.backlog = self.backlog, []
        try:
            chunk = os.read(0, 65536)
        except (BlockingIOError, InterruptedError):
            return out
        if not chunk:
            self.eof = True
            return out
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            line = line.strip()
            if line:
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = {"type": "garbage", "line": line[:80].decode("utf-8", "replace")}
                out.append(msg if isinstance(msg, dict) else {"type": "garbage"})
        return out

    def wait_line(self, deadline):
        """Block (poll) until one whole control line, EOF or the monotonic deadline."""
        poller = select.poll()
        poller.register(0, select.POLLIN)
        pending = []
        while not pending and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if poller.poll(left * 1000):
                pending = self.read_lines()
        if not pending:
            return None
        self.backlog = pending[1:]
        return pending[0]
