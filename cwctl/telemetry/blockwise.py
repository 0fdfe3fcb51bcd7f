"""A scan's path statistics and flow counts: in one pass, or a block of pairs at a time.

Everything telemetry computes per row is per directed path and flow, and a directed
path's observations come from the rows of one unordered host pair (its probes one way,
the replies to the other host's probes the other way). So a large table is taken a
block of pairs at a time (``sync.blocks.pair_blocks``, as the clock fit cuts them):
the observations and path table of a block at a time, never of the whole table, two
blocks at once on two cores (``runtime.blockpool``). Two quantities are the whole
scan's, not a block's: the median route's p90 excess (the delay threshold) and the
median route's floor, so there are two passes: the path statistics and those medians,
then the flow counts. The result is the same as one pass at any block size (paths and
flows in the same order); memory is the table plus two blocks' temporaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.runtime.arrays import F64, I64, B, IntP
from cwctl.runtime.blockpool import map_blocks
from cwctl.scan.collection import Collection
from cwctl.scan.pathreports import PathReports
from cwctl.scan.snapshot import HostReport, Suspect
from cwctl.sync import ClockSolution, one_way_delays
from cwctl.sync.blocks import pair_blocks
from cwctl.telemetry.busy import busy_mask, starved_spans
from cwctl.telemetry.counts import (
    FlowCounts,
    flow_counts,
    median_or_nan,
    route_floors_ns,
    route_medians,
    route_spread,
)
from cwctl.telemetry.elements import Flows
from cwctl.telemetry.noise import HostNoise, floor_quantile, host_noise, noisy_stamps
from cwctl.telemetry.paths import Observations, PathTable, observations, path_reports, path_table
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds
from cwctl.telemetry.verdicts import dead_hosts

BLOCK_ROWS = 500_000  # two blocks are worked at once (``cwctl.runtime.blockpool``)

# pass 1 of a block: its path reports, its routes' p90 excesses and floors, their spreads
_BlockStatistics = tuple[PathReports, F64, F64, tuple[I64, I64, F64] | None]


@dataclass
class Measured:
    paths: PathReports
    counts: FlowCounts
    dead: list[Suspect]  # hosts that answered nothing
    busy_counts: dict[str, int] = field(default_factory=dict)  # per starved host: rows
    busy_exchanges: int = 0


def _paths(
    table: ProbeTable, solution: ClockSolution, *, counts_only: bool = False
) -> tuple[Observations, PathTable]:
    """The observations and their path table; ``counts_only``: what flow counts given
    the scan's medians read (``path_table``'s ``routes_only``, no ``port_delays``)."""
    fwd, rev = one_way_delays(table, solution)
    obs = observations(table, fwd, rev)
    del fwd, rev  # copied into the observations
    return obs, path_table(obs, routes_only=counts_only, port_delays=not counts_only)


class _Usable:
    """Which rows and observations count: not a host that is down or dead, not an
    exchange with a starved agent (busy)."""

    def __init__(
        self,
        collection: Collection,
        solution: ClockSolution,
        hosts: list[HostReport],
        thresholds: Thresholds,
    ):
        table = collection.table
        down = {h.name for h in hosts if h.status != "ok"}
        self.excluded = np.array([name in down for name in table.hosts] + [False])
        self.rows = ~self.excluded[table.src] & ~self.excluded[table.dst]
        self.spans = starved_spans(collection)
        self.offsets = np.asarray(solution.offset_ns, np.float64)
        self.busy_counts: dict[str, int] = {}
        self.busy_exchanges = 0
        if self.spans:  # a starved agent's exchanges are the host's business
            busy = busy_mask(
                table.hosts, table.src, table.dst, table.t1, self.spans, self.offsets,
                counts=self.busy_counts,
            )  # fmt: skip
            self.rows &= ~busy
            self.busy_exchanges = int(busy.sum())
        # a host that answered nothing is one dead host, not lossy paths through it
        leaf_of = dict(collection.topology.leaf_of) if collection.topology is not None else {}
        self.dead, dead_host = dead_hosts(table, self.rows, leaf_of, thresholds)
        if self.dead:
            self.rows &= ~dead_host[table.src] & ~dead_host[table.dst]
            self.excluded = self.excluded | dead_host

    def observations(self, obs: Observations) -> B:
        usable = ~self.excluded[obs.src] & ~self.excluded[obs.dst]
        if self.spans:
            usable &= ~busy_mask(obs.hosts, obs.src, obs.dst, obs.t_ns, self.spans, self.offsets)
        return usable


def measure(
    collection: Collection,
    solution: ClockSolution,
    hosts: list[HostReport],
    block_rows: int | None = None,
    *,
    thresholds: Thresholds = THRESHOLDS,
) -> Measured:
    """Path reports and flow counts (see the module docstring); ``block_rows`` defaults
    to ``BLOCK_ROWS``."""
    table = collection.table
    block_rows = block_rows or BLOCK_ROWS
    t = thresholds
    usable = _Usable(collection, solution, hosts, t)
    leaf_of = dict(collection.topology.leaf_of) if collection.topology is not None else {}
    if len(table) <= block_rows:
        obs, pt = _paths(table, solution)
        counts = flow_counts(
            table, obs, pt, usable.rows, usable.observations(obs), leaf_of=leaf_of, thresholds=t
        )
        paths = path_reports(pt)
    else:
        blocks = pair_blocks(table, block_rows)
        noisy = noisy_stamps(table)
        quantile = floor_quantile(noisy, t)

        def statistics(rows: IntP) -> _BlockStatistics:  # pass 1
            _, pt = _paths(table.select(rows), solution)
            route_floor = route_floors_ns(pt, quantile)
            excess, floors = route_medians(pt, t, route_floor)
            spread = route_spread(pt, route_floor, t) if noisy else None
            return path_reports(pt), excess, floors, spread

        first = map_blocks(statistics, blocks)
        paths = PathReports.joined([block_paths for block_paths, *_ in first])
        typical = median_or_nan(np.concatenate([excess for _, excess, _, _ in first]))
        floor = median_or_nan(np.concatenate([floors for _, _, floors, _ in first]))
        noise = HostNoise.none(len(table.hosts))
        if noisy:
            spreads = [spread for *_, spread in first if spread is not None]
            src, dst, spread = (np.concatenate(col) for col in zip(*spreads, strict=True))
            noise = host_noise(table.hosts, (src, dst, spread), typical, leaf_of, t)
        del first

        def counted(rows: IntP) -> FlowCounts:  # pass 2: against the whole scan's medians
            block = table.select(rows)
            obs, pt = _paths(block, solution, counts_only=True)
            return flow_counts(
                block, obs, pt, usable.rows[rows], usable.observations(obs),
                typical_ns=typical, floor_ns=floor, noise=noise, thresholds=t,
            )  # fmt: skip

        parts = map_blocks(counted, blocks)
        counts = _joined(parts)
        paths = paths.in_host_order()  # as one pass gives them
    return Measured(paths, counts, usable.dead, usable.busy_counts, usable.busy_exchanges)


def _joined(parts: list[FlowCounts]) -> FlowCounts:
    """The blocks' counts as one, flows in the order one pass gives them."""
    cat = np.concatenate

    def flows(which: str) -> Flows:
        fs = [getattr(p, which) for p in parts]
        return Flows(
            hosts=fs[0].hosts,
            nics=fs[0].nics,
            src=cat([f.src for f in fs]),
            dst=cat([f.dst for f in fs]),
            sport=cat([f.sport for f in fs]),
            nic=cat([f.nic for f in fs]),
            reverse=cat([f.reverse for f in fs]),
        )

    def sorted_flows(f: Flows) -> tuple[Flows, npt.NDArray[np.intp]]:
        order = np.lexsort((f.reverse, f.nic, f.sport, f.dst, f.src))
        return (
            Flows(f.hosts, f.nics, f.src[order], f.dst[order], f.sport[order],
                  f.nic[order], f.reverse[order]),
            order,
        )  # fmt: skip

    exchanges, xo = sorted_flows(flows("exchanges"))
    directed, fo = sorted_flows(flows("flows"))
    return FlowCounts(
        exchanges=exchanges,
        sent=cat([p.sent for p in parts])[xo],
        lost=cat([p.lost for p in parts])[xo],
        flows=directed,
        samples=cat([p.samples for p in parts])[fo],
        delayed=cat([p.delayed for p in parts])[fo],
        excess_p50_ns=cat([p.excess_p50_ns for p in parts])[fo],
        threshold_ns=parts[0].threshold_ns,
        floor_ns=parts[0].floor_ns,
        flow_floor_ns=cat([p.flow_floor_ns for p in parts])[fo],
        flow_threshold_ns=cat([p.flow_threshold_ns for p in parts])[fo],
        second_samples=cat([p.second_samples for p in parts])[fo],
        second_delayed=cat([p.second_delayed for p in parts])[fo],
    )
