"""A chunk of paths' JSON written from their columns, without a dict per path or port.

Each column is written by orjson at once (numpy arrays: its float and integer writers
are the ones it uses for Python numbers, so every figure's text is the same) and cut
into its figures; a path's object and its ports' are then templates filled with those
texts. The bytes are exactly those of orjson over the reports' ``to_json`` dicts:
keys in the same order, NaN as null as for None, the spreads only where known
(``tests/unit/test_scan_pathreports.py`` holds them to it). Infinite figures are left
to the caller (``PathReports.json_items``): a report's JSON writes them by rules of its
own, and no scan has them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import orjson

from cwctl.runtime.arrays import F64

_PATH = (
    b'{"src":%b,"dst":%b,"sent":%b,"received":%b,"loss":%b,"owd_min_ns":%b,'
    b'"owd_p50_ns":%b,"owd_p99_ns":%b,"owd_max_ns":%b,"jitter_ns":%b,"excess_ns":%b,'
    b'"ports":[%b]%b%b}'
)
_PORT = b'{"sport":%b,"sent":%b,"received":%b,"loss":%b,"owd_p50_ns":%b,"owd_p99_ns":%b}'
_P50_SPREAD = b',"port_p50_spread_ns":'
_LOSS_SPREAD = b',"port_loss_spread":'


def texts(column: npt.NDArray[np.generic]) -> list[bytes]:
    """Each value of a 1-D column as orjson writes it (NaN: null)."""
    if not len(column):
        return []
    return orjson.dumps(np.ascontiguousarray(column), option=orjson.OPT_SERIALIZE_NUMPY)[
        1:-1
    ].split(b",")


def paths_text(
    host_texts: list[bytes],
    ints: npt.NDArray[np.int64],
    floats: F64,
    port_bounds: list[int],
    port_ints: npt.NDArray[np.int32],
    port_floats: F64,
) -> bytes:
    """The JSON objects of paths (``PathReports``' rows: ``ints``, ``floats``) joined by
    commas, no brackets: ``host_texts`` each host's name as a JSON string,
    ``port_bounds`` each path's first port row and, last, the end of the last one's,
    within ``port_ints``/``port_floats``."""
    if not len(ints):
        return b""
    ports = [
        _PORT % row
        for row in zip(
            *(texts(port_ints[:, i]) for i in range(3)),
            *(texts(port_floats[:, i]) for i in range(3)),
            strict=True,
        )
    ]
    sent, received = ints[:, 2].tolist(), ints[:, 3].tolist()
    # the loss as the report reckons it, in Python's float arithmetic and rounding
    loss = orjson.dumps(
        [round(1.0 - r / s, 6) if s else 0.0 for s, r in zip(sent, received, strict=True)]
    )
    mn, p99 = floats[:, 0], floats[:, 2]
    p50_spread, loss_spread = floats[:, 5], floats[:, 6]
    tails_p50 = [
        b"" if x == b"null" else _P50_SPREAD + x for x in texts(p50_spread)
    ]  # None: no key (NaN)
    tails_loss = [b"" if x == b"null" else _LOSS_SPREAD + x for x in texts(loss_spread)]
    lo, hi = port_bounds[0], port_bounds[1:]
    starts = [b - lo for b in port_bounds[:-1]]
    ends = [b - lo for b in hi]
    return b",".join(
        _PATH % (
            host_texts[s], host_texts[d], n_sent, n_received, n_loss, f_min, f_p50, f_p99,
            f_max, f_jitter, f_excess, b",".join(ports[a:b]), t_p50, t_loss,
        )
        for s, d, n_sent, n_received, n_loss, f_min, f_p50, f_p99, f_max, f_jitter, f_excess,
        a, b, t_p50, t_loss in zip(
            ints[:, 0].tolist(), ints[:, 1].tolist(), texts(ints[:, 2]), texts(ints[:, 3]),
            loss[1:-1].split(b","), texts(mn), texts(floats[:, 1]), texts(p99),
            texts(floats[:, 3]), texts(floats[:, 4]), texts(p99 - mn), starts, ends,
            tails_p50, tails_loss,
            strict=True,
        )
    )  # fmt: skip
