"""The probe record format (``cwctl.rec/1``) and the columnar store the solver reads.

One record format crosses every boundary: the probe agent prints it as JSON lines,
the simulator generates it, the solver and telemetry read it. ``docs/records.md``
documents every field; this package is the one place that encodes and decodes it:
``schema`` (constants, field validators), ``probe`` (one ``probe`` record), ``lines``
(JSON lines in and out), ``probes`` (the columnar ``probes`` decoder), ``table`` (the
``ProbeTable`` store), ``builder`` (records streamed into a table) and ``path`` (the
``path`` record of a discovered path, and the ``PathTable`` of a scan). The names below
are the package's public face: import them from ``cwctl.records``.

Record types (the ``type`` key):

``hello``   an agent's host facts and bound ports, first line of every agent.
``probe``   one exchange of a coded pair: four timestamps (ns since the epoch, each
            in the clock of the host that took it) and the pair's identity.
``gpu``     a GPU sample of one host (see ``docs/records.md``).
``summary`` an agent's closing counts.
``error``   something an agent could not do; it goes on where it can.
``probes``  many exchanges in one line, column by column (the agent's normal output):
            the same rows as ``probe`` records, decoded with numpy (``decode_probes``).
``path``    the hops of one traced 5-tuple (``decode_path``, ``PathTable``).

A ``probe`` record, sent by ``src`` (A) to ``dst`` (B)::

    {"type": "probe", "v": 1, "src": "gpu-001", "dst": "gpu-002", "sport": 40001,
     "pair": 17, "idx": 0, "gap_ns": 20000, "ts": "sw",
     "t1": 1700000000000000000, "t2": 1700000000000012345,
     "t3": 1700000000000015000, "t4": 1700000000000027000}

``t1`` A sends the probe (A's clock), ``t2`` B receives it (B's clock), ``t3`` B sends
the reply (B's clock), ``t4`` A receives the reply (A's clock). With ``theta`` the
offset of B's clock from A's, ``t2 - t1 = d_fwd + theta`` and ``t4 - t3 = d_rev - theta``.
A lost exchange has ``t2``, ``t3`` and ``t4`` null (or only ``t3`` and ``t4``, when the
reply was lost after B stamped the probe). ``idx`` is 0 or 1: the two probes of coded
pair ``pair``, sent ``gap_ns`` apart. ``ts`` says which clock stamped: ``hw`` (NIC
hardware), ``sw`` (kernel software stamps) or ``user`` (``time.time_ns()`` fallback).
An optional ``nic`` names the interface the probe left from.
"""

from cwctl.records.builder import ProbeTableBuilder, concat_tables
from cwctl.records.lines import encode_line, parse_line
from cwctl.records.path import PathRecord, PathTable, decode_path, hop_switches
from cwctl.records.probe import ProbeRecord, decode_probe
from cwctl.records.probes import decode_probes
from cwctl.records.schema import (
    BATCH_ROWS_MAX,
    RECORD_TYPES,
    RECORD_VERSION,
    TS_CODE,
    TS_SOURCES,
)
from cwctl.records.table import ProbeBatch, ProbeTable, pack_column

__all__ = [
    "BATCH_ROWS_MAX",
    "RECORD_TYPES",
    "RECORD_VERSION",
    "TS_CODE",
    "TS_SOURCES",
    "PathRecord",
    "PathTable",
    "ProbeBatch",
    "ProbeRecord",
    "ProbeTable",
    "ProbeTableBuilder",
    "concat_tables",
    "decode_path",
    "decode_probe",
    "decode_probes",
    "encode_line",
    "hop_switches",
    "pack_column",
    "parse_line",
]
