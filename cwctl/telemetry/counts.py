"""Trials and failures per flow, for each signal localisation weighs.

Loss is counted per exchange flow (prober, peer, source port, NIC): agents cannot tell
a lost probe from a lost reply, so a trial is a round trip and crosses the elements of
both directions. Delay is counted per directed flow (path, source port, NIC: one fixed
route): a probe is delayed when its one-way delay exceeds its route's floor (minimum) by
more than ``Thresholds.delay_factor`` times the median route's p90 excess. Each flow's floor is
kept too: a raised floor is the signal of a ``slow`` element (``floors.py``). With the
kernel's stamps a flow's floor is a low quantile, not its minimum, and each flow's
threshold holds its hosts' own stamp tails against it (``noise.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.runtime.arrays import F64, I64
from cwctl.telemetry.elements import Flows
from cwctl.telemetry.groups import Runs, run_quantiles
from cwctl.telemetry.noise import (
    HostNoise,
    floor_quantile,
    host_noise,
    noisy_stamps,
    route_spreads,
)
from cwctl.telemetry.paths import Observations, PathTable, group_ids, sorted_quantiles
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds


@dataclass(frozen=True)
class FlowCounts:
    """The two signals' trials and failures, per flow.

    Loss is counted per exchange (a round trip: agents cannot tell a lost probe from a
    lost reply, so a trial crosses both directions' elements), on ``exchanges`` (prober,
    peer, source port, NIC). Delay is counted per directed flow (``flows``), as one-way
    delays are measured per direction.
    """

    exchanges: Flows
    sent: F64
    lost: F64
    flows: Flows
    samples: F64  # delay samples (received with a known delay)
    delayed: F64
    excess_p50_ns: F64
    threshold_ns: float  # the delay threshold over each path's floor (NaN: no delays)
    floor_ns: float  # the median path's minimum one-way delay (NaN: no delays)
    flow_floor_ns: F64  # per flow, its minimum one-way delay (noisy stamps: a low quantile)
    # per flow, its own threshold: threshold_ns plus its hosts' stamp tails (noise.py)
    flow_threshold_ns: F64
    # of samples and delayed, those of the second probes of coded pairs (and their replies)
    second_samples: F64
    second_delayed: F64


def flow_counts(
    table: ProbeTable,
    obs: Observations,
    pt: PathTable,
    usable_rows: npt.NDArray[np.bool_],
    usable_obs: npt.NDArray[np.bool_],
    *,
    typical_ns: float | None = None,
    floor_ns: float | None = None,
    noise: HostNoise | None = None,
    leaf_of: Mapping[str, str] | None = None,
    thresholds: Thresholds = THRESHOLDS,
) -> FlowCounts:
    """Count loss per exchange flow and delay per directed flow, over what is usable.

    Both group by refinements of the path table's (path, source port) groups, whose ids
    follow (src, dst, sport) order: grouping by (port id, nic, ...) gives the same ids
    as grouping by the full tuple, over much smaller keys. ``typical_ns`` (the median
    route's p90 excess), ``floor_ns`` (the median route's floor) and ``noise`` (each
    host's own stamp tail, ``leaf_of`` its leaf) come from these routes unless given: a
    table taken a block of pairs at a time passes the whole scan's (``route_medians``,
    ``route_noise``).
    """
    u = usable_obs
    (xid, xkeys), (fid, keys), no_reply, owd, second = _ids(table, obs, pt, usable_rows, u)
    exchanges, sent, lost = _exchange_counts(table, pt, xid, xkeys, no_reply)
    # delay: the share of delays above the threshold over the floor
    n = len(keys)
    # the floor is per flow (one 5-tuple one way: one route): ECMP siblings differ in
    # cable length, and a path's probes from one port and the replies to its peer's
    # probes from the same port number are two 5-tuples, hashed apart (a slow spine on
    # one of them is no delay of the other's)
    qid = keys[:, 0]
    noisy = noisy_stamps(table)
    t = thresholds
    q = floor_quantile(noisy, t)
    if typical_ns is None or floor_ns is None or noise is None:  # these routes' own
        route_floor = route_floors_ns(pt, q)
        route_excess, route_floors = route_medians(pt, t, route_floor)
        if typical_ns is None:
            typical_ns = median_or_nan(route_excess)
        if floor_ns is None:
            floor_ns = median_or_nan(route_floors)
        if noise is None:
            noise = HostNoise.none(len(table.hosts))
            if noisy:
                noise = route_noise(pt, route_floor, typical_ns, leaf_of or {}, t)
    has = ~np.isnan(owd)
    floor, p50_owd = _flow_quantiles(owd, fid, n, has, obs, pt, u, q)
    excess = owd - floor[fid]
    threshold = float(t.delay_factor * typical_ns) if np.isfinite(typical_ns) else float("nan")
    fports = pt.port_key[qid]
    flow_threshold = threshold + t.delay_factor * noise.extra(fports[:, 0], fports[:, 1])
    samples = _count(fid, has, n)
    over = excess > flow_threshold[fid]  # (NaN > x is False)
    delayed = _count(fid, over, n)
    p50 = p50_owd - floor
    flows = Flows(
        hosts=obs.hosts,
        nics=obs.nics,
        src=fports[:, 0],
        dst=fports[:, 1],
        sport=fports[:, 2],
        nic=keys[:, 1],
        reverse=keys[:, 2].astype(bool),
    )
    return FlowCounts(
        exchanges, sent, lost, flows, samples, delayed, p50, threshold, floor_ns, floor,
        flow_threshold, _count(fid, has & second, n), _count(fid, over & second, n),
    )  # fmt: skip


def _ids(
    table: ProbeTable,
    obs: Observations,
    pt: PathTable,
    usable_rows: npt.NDArray[np.bool_],
    u: npt.NDArray[np.bool_],
) -> tuple[tuple[I64, I64], tuple[I64, I64], npt.NDArray[np.bool_], F64, npt.NDArray[np.bool_]]:
    """Exchange ids and keys, flow ids and keys, and per usable exchange whether its
    reply never came, per usable observation its delay and whether a pair's second."""
    port_id = pt.port_id if pt.port_id is not None else group_ids(obs.src, obs.dst, obs.sport)[0]
    derived = _derived_ids(table, obs, pt, port_id) if usable_rows.all() and u.all() else None
    if derived is not None:
        exchange_ids, flow_ids = derived
        return exchange_ids, flow_ids, table.t4 == 0, obs.owd_ns, obs.second
    # loss: one trial per exchange (the observations open with the table's rows,
    # the probes), failed when the reply never came back
    rows = usable_rows
    xid, xkeys = group_ids(port_id[: len(table)][rows], table.nic[rows])
    no_reply = table.t4[rows] == 0
    # delay: per directed flow
    fid, keys = group_ids(port_id[u], obs.nic[u], obs.reverse[u])
    return (xid, xkeys), (fid, keys), no_reply, obs.owd_ns[u], obs.second[u]


def _exchange_counts(
    table: ProbeTable, pt: PathTable, xid: I64, xkeys: I64, no_reply: npt.NDArray[np.bool_]
) -> tuple[Flows, F64, F64]:
    """The exchange flows, and per flow the exchanges sent and lost."""
    nx = len(xkeys)
    sent = np.bincount(xid, minlength=nx).astype(np.float64)
    lost = _count(xid, no_reply, nx)
    xports = pt.port_key[xkeys[:, 0]]
    exchanges = Flows(
        hosts=table.hosts,
        nics=table.nics,
        src=xports[:, 0],
        dst=xports[:, 1],
        sport=xports[:, 2],
        nic=xkeys[:, 1],
        reverse=np.zeros(nx, bool),
    )
    return exchanges, sent, lost


def route_floors_ns(pt: PathTable, q: float) -> F64:
    """Each route's floor: its ``q`` quantile (``noise.floor_quantile``: the minimum,
    unless the stamps are noisy)."""
    if q == 0.0 or pt.port_runs is None or pt.port_owd is None:
        return pt.port.owd_min_ns
    (low,) = run_quantiles(pt.port_runs, pt.port_owd, (q,))
    return low


def route_medians(
    pt: PathTable, thresholds: Thresholds, floor_ns: F64 | None = None
) -> tuple[F64, F64]:
    """Per route with enough samples: its p90 excess over its floor (``floor_ns``, else
    its minimum), and its floor (the inputs of ``typical_ns`` and ``floor_ns``)."""
    port = pt.port
    floor = port.owd_min_ns if floor_ns is None else floor_ns
    excess_p90 = port.owd_p90_ns - floor
    enough = (port.received >= thresholds.min_route_samples) & ~np.isnan(excess_p90)
    return excess_p90[enough], floor[enough]


def route_spread(pt: PathTable, floor_ns: F64, thresholds: Thresholds) -> tuple[I64, I64, F64]:
    """The routes' spreads over their floors, with their ends (``noise.route_spreads``)."""
    key, port = pt.port_key, pt.port
    return route_spreads(key[:, 0], key[:, 1], port.received, port.owd_p90_ns, floor_ns, thresholds)


def route_noise(
    pt: PathTable,
    floor_ns: F64,
    typical_ns: float,
    leaf_of: Mapping[str, str],
    thresholds: Thresholds,
) -> HostNoise:
    """The hosts' own stamp tails learned from these routes (``noise.host_noise``)."""
    spreads = route_spread(pt, floor_ns, thresholds)
    return host_noise(pt.hosts, spreads, typical_ns, leaf_of, thresholds)


def median_or_nan(values: F64) -> float:
    """The median of ``values``, NaN when there are none."""
    return float(np.median(values)) if len(values) else float("nan")


def _derived_ids(
    table: ProbeTable, obs: Observations, pt: PathTable, port_id: npt.NDArray[np.integer]
) -> tuple[tuple[I64, I64], tuple[I64, I64]] | None:
    """Exchange and flow ids and keys (as ``group_ids`` of (port, nic) over the probes and
    of (port, nic, reverse) over all observations would give them) read off the port ids,
    when every observation is usable, one NIC is seen and the observations are the probes
    then the replies; else None."""
    nt, n_ports = len(table), len(pt.port_key)
    if not nt or len(obs) < nt or np.min(obs.nic) != np.max(obs.nic):
        return None
    if obs.reverse[:nt].any() or not obs.reverse[nt:].all():
        return None
    nic = int(obs.nic[0])
    probes, replies = port_id[:nt], port_id[nt:]
    has_probe = np.bincount(probes, minlength=n_ports) > 0
    has_reply = np.bincount(replies, minlength=n_ports) > 0
    # exchanges: the ports probes were sent on, in port order
    x_port = np.flatnonzero(has_probe)
    xid = (np.cumsum(has_probe) - 1)[probes]
    xkeys = np.stack([x_port, np.full(len(x_port), nic)], axis=1)
    # flows: each port's probes, then its replies
    per_port = has_probe.astype(np.int64) + has_reply
    first = np.cumsum(per_port) - per_port
    fid = np.concatenate([first[probes], first[replies] + has_probe[replies]])
    flow_port = np.repeat(np.arange(n_ports), per_port)
    reverse = np.arange(len(flow_port)) - first[flow_port] + ~has_probe[flow_port]
    keys = np.stack([flow_port, np.full(len(flow_port), nic), reverse], axis=1)
    return (xid, xkeys), (fid, keys)


def _count(group: I64, mask: npt.NDArray[np.bool_], n: int) -> F64:
    """How many rows of each group the mask marks (as floats), indexing only the marked
    rows or only the others, whichever are fewer."""
    marked = int(np.count_nonzero(mask))
    if marked <= len(mask) // 2:
        return np.bincount(group[mask], minlength=n).astype(np.float64)
    return (np.bincount(group, minlength=n) - np.bincount(group[~mask], minlength=n)).astype(
        np.float64
    )


def _flow_quantiles(
    owd: F64,
    fid: I64,
    n: int,
    has: npt.NDArray[np.bool_],
    obs: Observations,
    pt: PathTable,
    usable: npt.NDArray[np.bool_],
    q: float = 0.0,
) -> tuple[F64, F64]:
    """The floor (``q`` quantile: the minimum by default) and median delay per flow.
    Flows split routes only by NIC and direction; when the path table's runs (by route,
    rows ascending: probes before replies) already list each flow's rows together, those
    runs serve, without a second sort."""
    qs = (q, 0.5)
    r, rows = pt.port_runs, pt.port_rows
    if r is None or rows is None or not usable.all():
        lo, mid = sorted_quantiles(owd, fid, n, qs)
        return lo, mid
    everything = bool(has.all())
    counts = np.bincount(fid if everything else fid[has], minlength=n).astype(np.int64)
    by_flow = Runs(r.rows, counts, np.cumsum(counts) - counts)
    one_nic = np.min(obs.nic) == np.max(obs.nic)
    probes_first = bool(np.all(obs.reverse[1:] >= obs.reverse[:-1]))
    if everything and one_nic and probes_first and pt.port_owd is not None:
        # flows split routes only into probes and replies, which each run (rows
        # ascending, probes first) already lists in turn: the runs' delays serve as they are
        lo, mid = run_quantiles(by_flow, pt.port_owd, qs)
        return lo, mid
    if np.array_equal(has, ~np.isnan(obs.owd_ns)):
        in_order = fid[rows]
        if not len(in_order) or bool(np.all(in_order[1:] >= in_order[:-1])):
            lo, mid = run_quantiles(by_flow, owd[rows], qs)
            return lo, mid
    lo, mid = sorted_quantiles(owd, fid, n, qs)
    return lo, mid
