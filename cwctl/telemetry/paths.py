"""Per-path statistics: every probe exchange seen as two directed one-way observations.

A probe record from A to B gives up to two observations: the probe itself (A -> B, sent
always, received when ``t2`` is known, delay from the solver's forward delay) and the
reply (B -> A, sent when the probe arrived, received when ``t4`` is known, delay from the
reverse delay). A record with ``t2 == 0`` is a lost probe (forward loss; no reply was
ever sent); ``t2 != 0`` with ``t4 == 0`` is a lost reply (reverse loss).

Statistics are grouped by directed path (src, dst) and by directed path and source port
(the ECMP flow: the source port picks the spine), all vectorised: one lexsort, then
quantiles read off each group's sorted run. No Python loop per probe or per path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.snapshot import PathReport

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Observations:
    """One row per directed one-way observation (probe or reply), column by column.

    ``src``/``dst`` index the table's hosts in the direction of travel; ``sport`` is the
    probing host's source port (the flow's identity in both directions); ``nic`` the
    probing host's NIC code (-1 unknown) and ``reverse`` whether this is the reply, so the
    NIC sits at the far end of the travel. ``owd_ns`` is NaN where the delay is unknown
    (lost, or a clock the solver could not place).
    """

    hosts: list[str]
    nics: list[str]
    src: npt.NDArray[np.int32]
    dst: npt.NDArray[np.int32]
    sport: npt.NDArray[np.int32]
    nic: npt.NDArray[np.int16]
    reverse: B
    t_ns: I64  # when the observation was sent (sender's clock; ordering within a path)
    received: B
    owd_ns: F64

    def __len__(self) -> int:
        return len(self.src)


def observations(table: ProbeTable, fwd_ns: F64, rev_ns: F64) -> Observations:
    """Both directions of every exchange (the reply only where one was sent: the probe
    arrived, ``t2 != 0``; a lost reply leaves ``t3`` and ``t4`` unknown)."""
    replied = table.t2 != 0
    cat = np.concatenate
    return Observations(
        hosts=table.hosts,
        nics=table.nics,
        src=cat([table.src, table.dst[replied]]),
        dst=cat([table.dst, table.src[replied]]),
        sport=cat([table.sport, table.sport[replied]]),
        nic=cat([table.nic, table.nic[replied]]),
        reverse=cat([np.zeros(len(table), bool), np.ones(int(replied.sum()), bool)]),
        t_ns=cat([table.t1, table.t2[replied]]),
        received=cat([table.t2 != 0, table.t4[replied] != 0]),
        owd_ns=cat([np.asarray(fwd_ns, np.float64), np.asarray(rev_ns, np.float64)[replied]]),
    )


@dataclass(frozen=True)
class GroupStats:
    """Counts and delay statistics of groups ``0..n-1`` (arrays indexed by group id)."""

    sent: I64
    received: I64
    owd_min_ns: F64  # NaN where the group has no delay sample
    owd_p50_ns: F64
    owd_p90_ns: F64
    owd_p99_ns: F64
    owd_max_ns: F64
    jitter_ns: F64  # mean |difference| of consecutive delays, in send order

    @property
    def loss(self) -> F64:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.sent > 0, 1.0 - self.received / np.maximum(self.sent, 1), 0.0)


def sorted_quantiles(values: F64, group: I64, n_groups: int, qs: tuple[float, ...]) -> list[F64]:
    """Linear-interpolated quantiles of ``values`` per group (NaNs skipped), vectorised."""
    ok = ~np.isnan(values)
    v, g = values[ok], group[ok]
    order = _group_order(g, v)
    v, g = v[order], g[order]
    counts = np.bincount(g, minlength=n_groups)
    starts = np.cumsum(counts) - counts
    out = []
    has = counts > 0
    for q in qs:
        pos = starts + q * np.maximum(counts - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, starts + np.maximum(counts - 1, 0))
        frac = pos - lo
        res = np.full(n_groups, np.nan)
        if len(v):
            lo_c, hi_c = np.minimum(lo, len(v) - 1), np.minimum(hi, len(v) - 1)
            res[has] = (v[lo_c] * (1 - frac) + v[hi_c] * frac)[has]
        out.append(res)
    return out


def _group_order(group: I64, value: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The order sorting rows by (group, value): one argsort of a combined key when it is
    exact (much faster than ``lexsort``), else ``lexsort``."""
    if not len(group):
        return np.zeros(0, np.intp)
    lo, hi = value.min(), value.max()
    span = float(hi - lo) + 1.0
    if np.issubdtype(value.dtype, np.integer):
        if span * (int(group.max()) + 1) < 2**62:
            return np.argsort(group * np.int64(span) + (value - lo), kind="stable")
    elif span * (int(group.max()) + 1) < 2**40:  # float: keeps ~1e-3 of a unit exact
        return np.argsort(group * span + (value - lo), kind="stable")
    return np.lexsort((value, group))


def group_stats(obs: Observations, group: I64, n_groups: int) -> GroupStats:
    """Statistics of the observations grouped by ``group`` (ids ``0..n_groups-1``)."""
    sent = np.bincount(group, minlength=n_groups).astype(np.int64)
    received = np.bincount(group, weights=obs.received, minlength=n_groups).astype(np.int64)
    mn, p50, p90, p99, mx = sorted_quantiles(
        obs.owd_ns, group, n_groups, (0.0, 0.5, 0.9, 0.99, 1.0)
    )
    return GroupStats(sent, received, mn, p50, p90, p99, mx, _jitter(obs, group, n_groups))


def _jitter(obs: Observations, group: I64, n_groups: int) -> F64:
    ok = ~np.isnan(obs.owd_ns)
    g, t, d = group[ok], obs.t_ns[ok], obs.owd_ns[ok]
    order = _group_order(g, t)
    g, d = g[order], d[order]
    same = g[1:] == g[:-1]
    step = np.abs(np.diff(d))[same]
    total = np.bincount(g[1:][same], weights=step, minlength=n_groups)
    count = np.bincount(g[1:][same], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def group_ids(*columns: npt.NDArray[Any]) -> tuple[I64, npt.NDArray[Any]]:
    """Dense group ids of rows by several integer columns, and each group's key tuple."""
    cols = [np.asarray(c, np.int64) for c in columns]
    if not len(cols[0]):
        return np.zeros(0, np.int64), np.zeros((0, len(cols)), np.int64)
    # mixed-radix key over the columns' dense ranks (1-D unique: far faster than axis=0)
    key = np.zeros(len(cols[0]), np.int64)
    for col in cols:
        lo, hi = int(col.min()), int(col.max())
        if hi - lo < 1 << 20:  # small range (host indices, ports, flags): offset, no sort
            radix, rank = hi - lo + 1, col - lo
        else:
            values, rank = np.unique(col, return_inverse=True)
            radix, rank = len(values), rank.reshape(-1)
        if int(key.max(initial=0)) >= 2**62 // radix:
            _, key = np.unique(key, return_inverse=True)
        key = key * radix + rank
    top = int(key.max())
    if top < 1 << 24:  # a dense table of keys instead of a sort
        present = np.zeros(top + 1, bool)
        present[key] = True
        inverse = (np.cumsum(present) - 1)[key]
        first = np.empty(int(present.sum()), np.int64)
        first[inverse[::-1]] = np.arange(len(key) - 1, -1, -1)
    else:
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    keys = np.stack([c[first] for c in cols], axis=1)
    return inverse.reshape(-1).astype(np.int64), keys


@dataclass(frozen=True)
class PathTable:
    """Per directed path and per (path, source port): the statistics, as arrays."""

    hosts: list[str]
    path_key: I64  # (n_paths, 2): src, dst host indices
    path: GroupStats
    port_key: I64  # (n_ports, 3): src, dst, sport
    port: GroupStats
    port_path: I64  # the path id of each (path, port) group


def path_table(obs: Observations) -> PathTable:
    """Group the observations by directed path and by (path, source port)."""
    pid, pkeys = group_ids(obs.src, obs.dst)
    qid, qkeys = group_ids(obs.src, obs.dst, obs.sport)
    n_ports = len(qkeys)
    port_path = np.zeros(n_ports, np.int64)
    port_path[qid] = pid
    return PathTable(
        hosts=obs.hosts,
        path_key=pkeys,
        path=group_stats(obs, pid, len(pkeys)),
        port_key=qkeys,
        port=group_stats(obs, qid, n_ports),
        port_path=port_path,
    )


def _lists(stats: GroupStats, names: tuple[str, ...]) -> dict[str, list[Any]]:
    """Columns as plain Python lists, NaN as None: no numpy scalar work per path."""
    out: dict[str, list[Any]] = {}
    for name in names:
        col = getattr(stats, name)
        if col.dtype.kind == "f":
            out[name] = np.where(np.isnan(col), None, col).tolist()
        else:
            out[name] = col.tolist()
    return out


def path_reports(pt: PathTable) -> list[PathReport]:
    """One ``PathReport`` per directed path, with the per-source-port split in ``extra``."""
    by_path = np.argsort(pt.port_path, kind="stable")
    bounds = np.searchsorted(pt.port_path[by_path], np.arange(len(pt.path_key) + 1)).tolist()
    order = by_path.tolist()
    q = _lists(pt.port, ("sent", "received", "owd_p50_ns", "owd_p99_ns"))
    q_loss = np.round(pt.port.loss, 6).tolist()
    sports = pt.port_key[:, 2].tolist()
    p = _lists(
        pt.path,
        ("sent", "received", "owd_min_ns", "owd_p50_ns", "owd_p99_ns", "owd_max_ns", "jitter_ns"),
    )
    out = []
    for i, (s, d) in enumerate(pt.path_key.tolist()):
        ports = [
            {
                "sport": sports[j],
                "sent": q["sent"][j],
                "received": q["received"][j],
                "loss": q_loss[j],
                "owd_p50_ns": q["owd_p50_ns"][j],
                "owd_p99_ns": q["owd_p99_ns"][j],
            }
            for j in order[bounds[i] : bounds[i + 1]]
        ]
        extra: dict[str, Any] = {"ports": ports}
        p50s = [x["owd_p50_ns"] for x in ports if x["owd_p50_ns"] is not None]
        if len(p50s) > 1:
            extra["port_p50_spread_ns"] = max(p50s) - min(p50s)
        if len(ports) > 1:
            losses = [x["loss"] for x in ports]
            extra["port_loss_spread"] = round(max(losses) - min(losses), 6)
        out.append(
            PathReport(
                src=pt.hosts[s],
                dst=pt.hosts[d],
                sent=p["sent"][i],
                received=p["received"][i],
                owd_min_ns=p["owd_min_ns"][i],
                owd_p50_ns=p["owd_p50_ns"][i],
                owd_p99_ns=p["owd_p99_ns"][i],
                owd_max_ns=p["owd_max_ns"][i],
                jitter_ns=p["jitter_ns"][i],
                extra=extra,
            )
        )
    return out
