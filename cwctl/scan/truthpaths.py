"""A simulated window's true per-path figures (``truth["paths"]``) as columns.

At 10 000 hosts the truth lists 200 000 directed paths: as dicts they held 54-77 MB
through the whole analysis and took 0.12 s to make. ``TruthPaths`` keeps the same
figures in a few arrays and is the sequence of those dicts wherever one is read
(made per item, never held). A report's JSON writes them from the columns
(``json_text``, the bytes of the dicts' own JSON); ``plain_truth`` is the truth with
the dicts as a list, for any other writer (the record file, the feed, ``to_json``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np
import orjson

from cwctl.runtime.arrays import F64, I64
from cwctl.scan.pathtext import texts

_PATH = (
    b'{"src":%b,"dst":%b,"sent":%b,"received":%b,"loss":%b,"owd_min_ns":%b,'
    b'"owd_p50_ns":%b,"owd_p99_ns":%b}'
)


class TruthPaths(Sequence[dict[str, Any]]):
    """Path ``i``: from ``hosts[ends[i, 0]]`` to ``hosts[ends[i, 1]]``, ``counts[i]``
    sent and received, ``loss[i]``, and ``owd[i]`` its min, p50 and p99 (each None in
    the dicts where nothing was received)."""

    __slots__ = ("counts", "ends", "hosts", "loss", "owd")

    def __init__(self, hosts: list[str], ends: I64, counts: I64, loss: F64, owd: F64) -> None:
        self.hosts, self.ends, self.counts, self.loss, self.owd = hosts, ends, counts, loss, owd

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return (
                self._dicts(*i.indices(len(self))[:2])
                if i.step in (None, 1)
                else [self[j] for j in range(*i.indices(len(self)))]
            )
        j = range(len(self))[i]  # negative and out-of-range indices as a list's
        return self._dicts(j, j + 1)[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for lo in range(0, len(self), 4096):
            yield from self._dicts(lo, min(lo + 4096, len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TruthPaths | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a list

    def __repr__(self) -> str:
        return f"TruthPaths({len(self)} paths)"

    def to_json(self) -> list[dict[str, Any]]:
        return self._dicts(0, len(self))

    def _dicts(self, lo: int, hi: int) -> list[dict[str, Any]]:
        hosts = self.hosts
        return [
            {
                "src": hosts[s],
                "dst": hosts[d],
                "sent": sent,
                "received": got,
                "loss": loss,
                "owd_min_ns": q[0] if got else None,
                "owd_p50_ns": q[1] if got else None,
                "owd_p99_ns": q[2] if got else None,
            }
            for (s, d), (sent, got), loss, q in zip(
                self.ends[lo:hi].tolist(), self.counts[lo:hi].tolist(),
                self.loss[lo:hi].tolist(), self.owd[lo:hi].tolist(),
                strict=True,
            )
        ]  # fmt: skip

    def json_text(self) -> bytes:
        """The JSON of ``to_json()`` (compact, as orjson writes it), from the columns."""
        if not len(self) or not np.isfinite(self.owd[self.counts[:, 1] > 0]).all():
            return orjson.dumps(self.to_json())  # an infinite figure: as the dicts say
        names = [orjson.dumps(h) for h in self.hosts]
        owd = np.where(self.counts[:, 1:2] > 0, self.owd, np.nan)  # None: null
        body = b",".join(
            _PATH % (names[s], names[d], sent, got, loss, q0, q1, q2)
            for (s, d), sent, got, loss, q0, q1, q2 in zip(
                self.ends.tolist(), texts(self.counts[:, 0]), texts(self.counts[:, 1]),
                texts(self.loss), texts(owd[:, 0]), texts(owd[:, 1]), texts(owd[:, 2]),
                strict=True,
            )
        )  # fmt: skip
        return b"[" + body + b"]"


def plain_truth(truth: Mapping[str, Any]) -> dict[str, Any]:
    """``truth`` with its paths as a list of dicts (what JSON writers other than the
    report's take)."""
    paths = truth.get("paths")
    return {**truth, "paths": paths.to_json()} if isinstance(paths, TruthPaths) else dict(truth)
