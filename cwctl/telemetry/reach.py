"""Which probed host pairs each suspect crosses: the ground for naming the jobs it hurts.

A pair crosses a suspect when one of its exchange flows (either direction) crossed one of
the suspect's elements: on its discovered path, or possibly, on one of the equal-cost
alternatives of a path nobody discovered (``elements.py``'s rows, the same the
localiser weighed). Pairs are unordered; the leaf pairs they join are kept too, so that
a pair nobody probed can be judged by its leaves (``cwctl.jobs.affected``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import I64
from cwctl.scan.snapshot import Crossings, Suspect
from cwctl.telemetry.elements import Flows, Incidence


def _pairs(src: I64, dst: I64, n: int) -> tuple[I64, I64]:
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    code = np.unique(lo.astype(np.int64) * n + hi)
    return code // n, code % n


def _crossing_flows(inc: Incidence, codes: list[int]) -> npt.NDArray[np.bool_]:
    """Per flow of ``inc``: whether it crossed (certainly or on an alternative) any of
    ``codes``."""
    rows = inc.rows
    out = np.asarray(rows.certain[:, codes].sum(axis=1)).ravel() > 0
    alt = np.asarray(rows.matrix[:, codes].sum(axis=1)).ravel() > 0
    out[rows.flow[alt]] = True
    return out


def crossings(
    inc: Incidence,
    exchanges: Flows,
    suspects: Sequence[Suspect],
    leaf_of: Mapping[str, str],
) -> Crossings:
    """The ``Crossings`` of ``suspects`` over the loss rows ``inc`` of ``exchanges``."""
    hosts = list(exchanges.hosts)
    n = max(len(hosts), 1)
    leaves = [leaf_of.get(h) for h in hosts]
    out = Crossings(hosts, leaves, _pairs(exchanges.src, exchanges.dst, n))
    index = {name: i for i, name in enumerate(inc.names)}
    names = sorted({leaf for leaf in leaves if leaf is not None})
    code_of = {leaf: i for i, leaf in enumerate(names)}
    leaf_code = np.array([code_of.get(leaf, -1) if leaf else -1 for leaf in leaves], np.int64)
    for s in suspects:
        codes = [index[m] for m in s.members if m in index]
        if not codes or not len(exchanges):
            out.hit[s.element] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
            out.leaf_pairs[s.element] = set()
            continue
        on = _crossing_flows(inc, codes)
        lo, hi = _pairs(exchanges.src[on], exchanges.dst[on], n)
        out.hit[s.element] = (lo, hi)
        la, lb = leaf_code[lo], leaf_code[hi]
        placed = (la >= 0) & (lb >= 0)
        joined = _pairs(la[placed], lb[placed], len(names) + 1)
        out.leaf_pairs[s.element] = {
            (names[a], names[b]) for a, b in zip(*(x.tolist() for x in joined), strict=True)
        }
    return out
