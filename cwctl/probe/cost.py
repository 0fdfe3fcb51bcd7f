"""What the agent costs its host, measured by the agent itself, and when it was starved.

It runs on the far host under any Python 3.8+: standard library only. Shipped in the
agent bundle (``bootstrap.py``).

* CPU: ``resource.getrusage(RUSAGE_SELF)`` (user + system, every thread), over the
  agent's whole life and over its probing window alone.
* Wire: packets and bytes it sent and received on its UDP sockets, each counted with
  its IPv4 and UDP headers (28 bytes), what crosses the IP layer.
* Lateness: how late the agent ran against its own plan, two ways: its loop waking up
  after the poll timeout it asked for, and a probe answered long after the kernel
  stamped its arrival. Whenever that exceeds ``LATE_NS`` the agent was starved (not
  scheduled: a busy or CPU-limited host, a stopped process) and the span, in this host's
  clock, is kept: loss or delay measured then is the host's, not the network's.
"""

import resource
import time

IP_UDP_HEADER_BYTES = 28
LATE_NS = 50000000  # 50 ms behind its own plan: starved, not jitter
MERGE_NS = 100000000  # starved spans closer than this become one
MAX_SPANS = 64  # kept in the summary; later ones widen the last


def cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Cost:
    def __init__(self):
        self.born_cpu = cpu_s()
        self.born = time.monotonic()
        self.window_cpu = None  # (cpu at the start of probing, at its end)
        self.window_wall = None
        self.tx_packets = 0
        self.tx_bytes = 0
        self.rx_packets = 0
        self.rx_bytes = 0
        self.late_max_ns = 0
        self.late_sum_ns = 0
        self.ticks = 0
        self.spans = []  # [start_ns, end_ns] in this host's clock

    # --- counting -------------------------------------------------------------------
    def sent(self, size):
        self.tx_packets += 1
        self.tx_bytes += size + IP_UDP_HEADER_BYTES

    def received(self, size):
        self.rx_packets += 1
        self.rx_bytes += size + IP_UDP_HEADER_BYTES

    def probing_started(self):
        if self.window_cpu is None:
            self.window_cpu = [cpu_s(), None]
            self.window_wall = [time.monotonic(), None]

    def probing_ended(self):
        if self.window_cpu is not None and self.window_cpu[1] is None:
            self.window_cpu[1] = cpu_s()
            self.window_wall[1] = time.monotonic()

    # --- lateness -------------------------------------------------------------------
    def ran(self, planned_ns, now_ns):
        """The agent meant to run at ``planned_ns`` and runs at ``now_ns`` (wall clock)."""
        late = now_ns - planned_ns
        self.ticks += 1
        if late <= 0:
            return
        self.late_sum_ns += late
        if late > self.late_max_ns:
            self.late_max_ns = late
        if late > LATE_NS:
            self.starved(planned_ns, now_ns)

    def starved(self, start_ns, end_ns):
        spans = self.spans
        if spans and start_ns <= spans[-1][1] + MERGE_NS:
            spans[-1][0] = min(spans[-1][0], start_ns)
            spans[-1][1] = max(spans[-1][1], end_ns)
        elif len(spans) >= MAX_SPANS:
            spans[-1][1] = max(spans[-1][1], end_ns)
        else:
            spans.append([start_ns, end_ns])

    # --- the summary's "cost" object ---------------------------------------------------
    def summary(self):
        now_cpu, now = cpu_s(), time.monotonic()
        out = {
            "cpu_s": round(now_cpu - self.born_cpu, 6),
            "wall_s": round(now - self.born, 6),
            "tx_packets": self.tx_packets,
            "tx_bytes": self.tx_bytes,
            "rx_packets": self.rx_packets,
            "rx_bytes": self.rx_bytes,
            "late_max_ns": self.late_max_ns,
            "late_mean_ns": self.late_sum_ns // max(1, self.ticks),
            "starved": [list(span) for span in self.spans],
        }
        if self.window_cpu is not None:
            end_cpu = self.window_cpu[1] if self.window_cpu[1] is not None else now_cpu
            end = self.window_wall[1] if self.window_wall[1] is not None else now
            out["probe_cpu_s"] = round(end_cpu - self.window_cpu[0], 6)
            out["probe_wall_s"] = round(end - self.window_wall[0], 6)
        return out
