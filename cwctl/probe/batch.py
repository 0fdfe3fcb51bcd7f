"""Exchanges on their way out as ``probes`` records (columns, packed or not), or one
``probe`` record each.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).
"""

import base64
import struct
import time

from cwctl.probe.wire import RECORD_VERSION

BATCH_ROWS = 512  # rows per ``probes`` record at most
BATCH_S = 1.0  # and a batch goes out at least this often
BATCH_COLUMNS = ("dst", "sport", "pair", "idx", "t1", "t2", "t3", "t4")


class Batch:
    """Exchanges on their way out as one ``probes`` record (docs/records.md): one list
    per column, ``dst`` as an index into this agent's targets, 0 for a missing stamp."""

    def __init__(self, host, targets, gap_ns, pack):
        self.host = host
        self.hosts = list(targets)
        self.index = {name: i for i, name in enumerate(self.hosts)}
        self.gap_ns = gap_ns
        self.pack = pack
        self.rows = []  # one tuple per exchange, columns as BATCH_COLUMNS: no per-cell work
        self.ts = []
        self.nic = []  # per row: index into nics, -1 unnamed (multi-rail hosts)
        self.nics = []
        self.since = 0.0  # monotonic time of the oldest row

    def __len__(self):
        return len(self.rows)

    def add(self, peer, sport, pair, idx, ts, t1, t2, t3, t4, nic=None):
        if not self.rows:
            self.since = time.monotonic()
        self.rows.append((self.index[peer], sport, pair, idx, t1, t2, t3, t4))
        self.ts.append(ts)
        if nic is None:
            self.nic.append(-1)
        else:
            if nic not in self.nics:
                self.nics.append(nic)
            self.nic.append(self.nics.index(nic))

    def take(self):
        """The rows so far as one record; the batch starts empty again."""
        n = len(self.rows)
        rec = {"type": "probes", "v": RECORD_VERSION, "n": n, "src": self.host}
        rec["hosts"] = self.hosts
        rec["gap_ns"] = self.gap_ns
        rec["ts"] = self.ts[0] if self.ts.count(self.ts[0]) == n else self.ts
        for key, column in zip(BATCH_COLUMNS, zip(*self.rows)):  # noqa: B905 (3.8)
            if self.pack:  # base64 of little-endian int64: no number parsing at home
                rec[key] = base64.b64encode(struct.pack(f"<{n}q", *column)).decode("ascii")
            else:
                rec[key] = list(column)
        if self.nics:  # the NIC each probe left from: indices into nics
            rec["nics"] = list(self.nics)
            rec["nic"] = self.nic
        self.rows = []
        self.ts = []
        self.nic = []
        return rec


def probe_record(host, gap_ns, ex, ts):
    """One exchange as its own ``probe`` record (``batch`` 0: one record per exchange);
    ``ts`` names its stamps' source (``sw`` kernel, ``user``)."""
    answered = ex.t4 is not None
    rec = {
        "type": "probe",
        "v": RECORD_VERSION,
        "src": host,
        "dst": ex.peer,
        "sport": ex.sport,
        "pair": ex.pair,
        "idx": ex.idx,
        "gap_ns": gap_ns,
        "ts": ts,
        "t1": ex.t1,
        "t2": ex.t2 if answered else None,
        "t3": ex.t3 if answered else None,
        "t4": ex.t4 if answered else None,
    }
    if ex.nic is not None:
        rec["nic"] = ex.nic
    return rec
