"""XID events in the kernel log: the line parser and the ``/dev/kmsg`` watch.

Part of the agent bundle: standard library only, Python 3.8+ syntax, no annotations.
"""

import contextlib
import os
import re
import time

from cwctl.probe.gpu.readings import gpu_pci_key

# NVRM: Xid (PCI:0000:2b:00): 79, pid=..., name=..., GPU has fallen off the bus.
_XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+)\): (\d+),\s*(.*)"
)


def smi_parse_xid_lines(text):
    """XID reports in kernel log text (``dmesg``, ``journalctl -k`` or ``/dev/kmsg``).

    Returns ``[{"pci": "0000:2b:00", "code": 79, "text": "..."}]`` in log order.
    """
    out = []
    for line in text.splitlines():
        match = _XID_LINE.search(line)
        if match:
            out.append(
                {
                    "pci": gpu_pci_key(match.group(1)),
                    "code": int(match.group(2)),
                    "text": match.group(3).strip()[:200],
                }
            )
    return out


class GpuKmsgXidWatch:
    """XID lines the kernel logs during the window, read from ``/dev/kmsg``.

    ``start()`` seeks to the end of the log; ``stop()`` reads what was logged since.
    Where the log cannot be read (``dmesg_restrict``, a container), ``supported`` is
    False and the readings list ``xid`` as unsupported.
    """

    def __init__(self, path="/dev/kmsg"):
        self.path = path
        self.fd = None
        self.supported = False

    def start(self):
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
            self.supported = True
        except OSError:
            self.close()
            self.supported = False

    def stop(self):
        if self.fd is None:
            return []
        chunks = []
        try:
            while True:
                try:
                    chunk = os.read(self.fd, 65536)
                except BlockingIOError:
                    break
                except BrokenPipeError:  # records overwritten while we read: go on
                    continue
                if not chunk:
                    break
                chunks.append(chunk.decode("utf-8", "replace"))
        except OSError:
            pass
        finally:
            self.close()
        now = time.time_ns()
        events = smi_parse_xid_lines("".join(chunks))
        for event in events:
            event["t"] = now
        return events

    def close(self):
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
