"""Per-path statistics: every probe exchange seen as two directed one-way observations.

A probe record from A to B gives up to two observations: the probe itself (A -> B, sent
always, received when ``t2`` is known, delay from the solver's forward delay) and the
reply (B -> A, sent when the probe arrived, received when ``t4`` is known, delay from the
reverse delay). A record with ``t2 == 0`` is a lost probe (forward loss; no reply was
ever sent); ``t2 != 0`` with ``t4 == 0`` is a lost reply (reverse loss).

Statistics are grouped by directed path (src, dst) and by directed path and source port
(the ECMP flow: the source port picks the spine), all vectorised (``groups.py``): the
observations are grouped once, by port, with one sort of a packed key; a path's rows are
its ports' runs together; quantiles and jitter sort each group as a row of a padded
block. Every figure is exact (the same as sorting each group on its own). No Python loop
per probe; one per path only to build the reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.runtime.arrays import F64, I64, B
from cwctl.scan.pathreports import PathReports, PortColumns
from cwctl.telemetry.groups import (
    Runs,
    group_ids,
    group_quantiles,
    merged_runs,
    run_jitter,
    run_quantiles,
    runs,
)

__all__ = [
    "GroupStats",
    "Observations",
    "PathTable",
    "group_ids",
    "group_stats",
    "observations",
    "path_reports",
    "path_table",
    "sorted_quantiles",
]


@dataclass(frozen=True)
class Observations:
    """One row per directed one-way observation (probe or reply), column by column.

    ``src``/``dst`` index the table's hosts in the direction of travel; ``sport`` is the
    probing host's source port (the flow's identity in both directions); ``nic`` the
    probing host's NIC code (-1 unknown) and ``reverse`` whether this is the reply, so the
    NIC sits at the far end of the travel. ``owd_ns`` is NaN where the delay is unknown
    (lost, or a clock the solver could not place). ``second``: the second probe of its
    coded pair, or the reply to one.
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
    second: B

    def __len__(self) -> int:
        return len(self.src)


def observations(table: ProbeTable, fwd_ns: F64, rev_ns: F64) -> Observations:
    """Both directions of every exchange (the reply only where one was sent: the probe
    arrived, ``t2 != 0``; a lost reply leaves ``t3`` and ``t4`` unknown)."""
    replied = table.t2 != 0
    second = table.idx == 1
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
        second=cat([second, second[replied]]),
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
    return group_quantiles(values, group, n_groups, qs)


QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)  # min, p50, p90, p99, max


def group_stats(obs: Observations, group: I64, n_groups: int) -> GroupStats:
    """Statistics of the observations grouped by ``group`` (ids ``0..n_groups-1``)."""
    ok = ~np.isnan(obs.owd_ns)
    r = runs(group[ok], n_groups)
    sent = np.bincount(group, minlength=n_groups).astype(np.int64)
    received = np.bincount(group, weights=obs.received, minlength=n_groups).astype(np.int64)
    return _stats(sent, received, r, obs.owd_ns[ok], obs.t_ns[ok])


def _stats(
    sent: I64,
    received: I64,
    r: Runs,
    owd_by_row: F64,
    t_by_row: I64,
    owd_in_run_order: F64 | None = None,
    t_in_run_order: I64 | None = None,
    jitter: bool = True,
) -> GroupStats:
    """``r``: the runs over the rows with a delay, whose delays and send times are
    ``owd_by_row`` and ``t_by_row`` (the delays in run order if known); without
    ``jitter`` its column is NaN."""
    if owd_in_run_order is None:
        owd_in_run_order = owd_by_row[r.rows]
    mn, p50, p90, p99, mx = run_quantiles(r, owd_in_run_order, QUANTILES)
    if not jitter:
        return GroupStats(sent, received, mn, p50, p90, p99, mx, np.full(len(sent), np.nan))
    jitter_ns = run_jitter(r, owd_by_row, t_by_row, owd_in_run_order, t_in_run_order)
    return GroupStats(sent, received, mn, p50, p90, p99, mx, jitter_ns)


def _unmeasured(sent: I64, received: I64) -> GroupStats:
    """Counts only: delay statistics not computed (NaN)."""
    nan = np.full(len(sent), np.nan)
    return GroupStats(sent, received, nan, nan, nan, nan, nan, nan)


@dataclass(frozen=True)
class PathTable:
    """Per directed path and per (path, source port): the statistics, as arrays."""

    hosts: list[str]
    path_key: I64  # (n_paths, 2): src, dst host indices
    path: GroupStats
    port_key: I64  # (n_ports, 3): src, dst, sport
    port: GroupStats
    port_path: I64  # the path id of each (path, port) group
    port_id: I64 | None = None  # the (path, port) group of each observation
    port_runs: Runs | None = None  # the observations with a delay, grouped by port
    port_rows: I64 | None = None  # those observations' indices, in the runs' order
    port_owd: F64 | None = None  # their one-way delays, in the runs' order


def path_table(
    obs: Observations, *, routes_only: bool = False, port_delays: bool = True
) -> PathTable:
    """Group the observations by directed path and by (path, source port).

    Ports are numbered in (src, dst, sport) order, so each path's ports are consecutive:
    the rows are grouped once, by port, and a path's rows are its ports' runs together.
    ``routes_only``: what flow counts need (the ports' delay quantiles), no path delay
    statistics and no jitter; without ``port_delays`` not the ports' quantiles either
    (NaN): flow counts given the scan's medians (``telemetry/blockwise.py``'s second
    pass) read only the ports' runs.
    """
    qid, qkeys = group_ids(obs.src, obs.dst, obs.sport)
    port_path, pkeys = group_ids(qkeys[:, 0], qkeys[:, 1])
    n_ports, n_paths = len(qkeys), len(pkeys)
    sent = np.bincount(qid, minlength=n_ports).astype(np.int64)
    received = sent - np.bincount(qid[~obs.received], minlength=n_ports)
    path_sent = np.bincount(port_path, weights=sent, minlength=n_paths).astype(np.int64)
    path_received = np.bincount(port_path, weights=received, minlength=n_paths).astype(np.int64)
    ok = ~np.isnan(obs.owd_ns)
    if ok.all():  # (no copies)
        by_port = runs(qid, n_ports)
        owd, t, obs_rows = obs.owd_ns, obs.t_ns, by_port.rows
    else:
        by_port = runs(qid[ok], n_ports)
        owd, t, obs_rows = obs.owd_ns[ok], obs.t_ns[ok], np.flatnonzero(ok)[by_port.rows]
    by_path = merged_runs(by_port, port_path, n_paths)  # the same run order
    in_order, t_in_order = owd[by_port.rows], t[by_port.rows]
    return PathTable(
        hosts=obs.hosts,
        path_key=pkeys,
        path=_unmeasured(path_sent, path_received)
        if routes_only
        else _stats(path_sent, path_received, by_path, owd, t, in_order, t_in_order),
        port_key=qkeys,
        port=_stats(sent, received, by_port, owd, t, in_order, t_in_order, jitter=not routes_only)
        if port_delays
        else _unmeasured(sent, received),
        port_path=port_path,
        port_id=qid,
        port_runs=by_port,
        port_rows=obs_rows,
        port_owd=in_order,
    )


def path_reports(pt: PathTable) -> PathReports:
    """One ``PathReport`` per directed path (as ``PathReports``' columns), with its
    per-source-port split (rows of one ``PortColumns`` the paths share) and the spreads
    over its ports."""
    n_paths = len(pt.path_key)
    if not n_paths:
        return PathReports.empty(pt.hosts)
    by_path = np.argsort(pt.port_path, kind="stable")
    bounds = np.searchsorted(pt.port_path[by_path], np.arange(n_paths + 1))
    q_loss = np.round(pt.port.loss, 6)[by_path]
    q_p50 = pt.port.owd_p50_ns[by_path]
    ints = np.column_stack([pt.port_key[:, 2], pt.port.sent, pt.port.received])[by_path]
    ports = PortColumns(
        ints.astype(np.int32),  # a port number and one window's counts: 12 bytes, not 24
        np.column_stack([q_loss, q_p50, pt.port.owd_p99_ns[by_path]]),
    )
    # per path over its ports: the spread of the p50s (those known) and of the losses
    n_ports = np.diff(bounds)
    starts = np.minimum(bounds[:-1], max(len(by_path) - 1, 0))
    with np.errstate(invalid="ignore"):
        known = np.add.reduceat(~np.isnan(q_p50), starts) if len(by_path) else n_ports
        p50_wide = np.fmax.reduceat(q_p50, starts) - np.fmin.reduceat(q_p50, starts)
        loss_wide = np.maximum.reduceat(q_loss, starts) - np.minimum.reduceat(q_loss, starts)
    p50_spread = np.where((n_ports == 0) | (known <= 1), np.nan, p50_wide)
    # rounded as Python rounds (numpy's round can differ in the last place)
    loss_spread = np.array([round(x, 6) for x in loss_wide.tolist()], np.float64)
    loss_spread[n_ports <= 1] = np.nan
    stats = pt.path
    floats = np.column_stack([
        stats.owd_min_ns, stats.owd_p50_ns, stats.owd_p99_ns, stats.owd_max_ns,
        stats.jitter_ns, p50_spread, loss_spread,
    ])  # fmt: skip
    path_ints = np.column_stack([pt.path_key[:, 0], pt.path_key[:, 1], stats.sent, stats.received])
    return PathReports(pt.hosts, path_ints.astype(np.int64), floats, bounds.astype(np.int64), ports)
