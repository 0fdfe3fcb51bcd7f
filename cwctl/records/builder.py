"""``ProbeTableBuilder``: records streamed in, one ``ProbeTable`` out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np

from cwctl.records.probe import ProbeRecord, decode_probe
from cwctl.records.probes import decode_probes
from cwctl.records.schema import TS_CODE
from cwctl.records.table import COLUMNS, DTYPES, ProbeBatch, ProbeTable, concat_chunks


class ProbeTableBuilder:
    """Accumulates records as they stream in and builds a ``ProbeTable``.

    Single rows (``add``) go into Python lists of ints (cheap to append); ``probes``
    batches (``add_batch``) and whole tables (``extend_table``) are appended as numpy
    chunks. Rows keep their arrival order whichever way they came.
    """

    _MERGE_CHUNKS: Final = 256  # small chunks merged into one past this many

    def __init__(self, hosts: Iterable[str] = ()) -> None:
        self.hosts: list[str] = []
        self._host_code: dict[str, int] = {}
        self.nics: list[str] = []
        self._nic_code: dict[str, int] = {}
        self._rows: dict[str, list[int]] = {name: [] for name in COLUMNS}
        self._chunks: list[dict[str, np.ndarray]] = []  # sealed, large
        self._recent: list[dict[str, np.ndarray]] = []  # small, merged now and then
        for name in hosts:
            self.host_code(name)

    def host_code(self, name: str) -> int:
        code = self._host_code.get(name)
        if code is None:
            code = self._host_code[name] = len(self.hosts)
            self.hosts.append(name)
        return code

    def _nic(self, name: str | None) -> int:
        if name is None:
            return -1
        code = self._nic_code.get(name)
        if code is None:
            code = self._nic_code[name] = len(self.nics)
            self.nics.append(name)
        return code

    def __len__(self) -> int:
        chunks = [*self._chunks, *self._recent]
        return len(self._rows["src"]) + sum(len(c["src"]) for c in chunks)

    def add(self, rec: ProbeRecord) -> None:
        rows = self._rows
        rows["src"].append(self.host_code(rec.src))
        rows["dst"].append(self.host_code(rec.dst))
        rows["sport"].append(rec.sport)
        rows["pair"].append(rec.pair)
        rows["idx"].append(rec.idx)
        rows["gap_ns"].append(rec.gap_ns)
        rows["ts"].append(TS_CODE[rec.ts])
        rows["t1"].append(rec.t1)
        rows["t2"].append(rec.t2 or 0)
        rows["t3"].append(rec.t3 or 0)
        rows["t4"].append(rec.t4 or 0)
        rows["nic"].append(self._nic(rec.nic))

    def add_record(self, rec: Mapping[str, Any], *, where: str = "record") -> None:
        """Decode a ``probe`` record dict and add it; raise ``RecordError`` if malformed."""
        self.add(decode_probe(rec, where=where))

    def add_batch(self, rec: Mapping[str, Any] | ProbeBatch, *, where: str = "record") -> int:
        """Add a ``probes`` record (a dict, or already decoded); the rows added.

        A malformed batch raises ``RecordError`` and adds nothing.
        """
        batch = rec if isinstance(rec, ProbeBatch) else decode_probes(rec, where=where)
        self.extend_table(batch)
        return len(batch)

    def extend_table(self, table: ProbeTable) -> None:
        host_map = np.array([self.host_code(h) for h in table.hosts], np.int32)
        nic_map = np.array([self._nic(n) for n in table.nics] + [-1], np.int16)
        chunk = {name: getattr(table, name) for name in COLUMNS}
        if len(table):
            chunk["src"] = host_map[table.src]
            chunk["dst"] = host_map[table.dst]
            chunk["nic"] = nic_map[table.nic]  # -1 indexes the trailing -1
        self._append_chunk(chunk)

    def _seal_rows(self) -> None:
        """Single rows so far become a chunk, so that later chunks stay after them."""
        if self._rows["src"]:
            rows = {name: np.asarray(self._rows[name], DTYPES[name]) for name in COLUMNS}
            self._recent.append(rows)
            self._rows = {name: [] for name in COLUMNS}

    def _append_chunk(self, chunk: dict[str, np.ndarray]) -> None:
        self._seal_rows()
        self._recent.append(chunk)
        if len(self._recent) >= self._MERGE_CHUNKS:  # a long scan: thousands of batches
            self._chunks.append(concat_chunks(self._recent))
            self._recent = []

    def build(self) -> ProbeTable:
        """The table; the builder gives its chunks up (build once), so the peak is about
        one table plus one column, not two tables (``concat_chunks``)."""
        self._seal_rows()
        chunks, self._chunks, self._recent = [*self._chunks, *self._recent], [], []
        columns = concat_chunks(chunks)
        return ProbeTable(hosts=list(self.hosts), nics=list(self.nics), **columns)


def concat_tables(tables: Sequence[ProbeTable]) -> ProbeTable:
    """One table from several (host lists are merged; indices remapped)."""
    builder = ProbeTableBuilder()
    for table in tables:
        builder.extend_table(table)
    return builder.build()
