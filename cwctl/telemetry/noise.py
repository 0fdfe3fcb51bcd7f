"""The stamps' own noise: each flow's floor and each host's spread, learned before a
probe is called delayed.

With the NIC's stamps (``hw``) a flow's minimum one-way delay is its floor and every
host's probes spread alike: one fabric-wide threshold over the floor serves. The
kernel's stamps (``sw``, ``user``) are off by a few hundred ns each, and on a share of
them by microseconds: a heavy tail, and each host's kernel has its own. Two things then
go wrong with the minimum and one threshold: a stamp that erred the short way (a send
stamp taken after the packet left) puts the minimum microseconds below the flow's true
floor, so nearly every probe of the flow reads as delayed; and a host with a heavier
tail than the rest has every flow delayed beyond the fabric's threshold, so it is blamed
(or its flows are "unlocalised delay") on a healthy fabric.

So, with noisy stamps:

floor   a flow's (and a route's) floor is its ``noisy_floor_q`` quantile, not its
        minimum: a stamp the short way is a minority of any flow's probes;
spread  a route's spread is its p90 over that floor; a host's, as sender and as
        receiver, the median spread of its routes (a fault on one spine or link is a
        minority of them), and its own *extra* spread is how far that median stands
        above its leaf's hosts' (their median: a congested leaf raises all of a leaf's
        hosts alike, a kernel's tail is one host's), at most ``max_extra_of_typical``
        times the fabric's typical spread.

A flow's threshold is then ``delay_factor`` times the fabric's typical spread, plus as
much again of its sender's extra as sender and its receiver's as receiver: each host's
tail is held against it, the fabric's is not. A host queue as steady as a kernel's tail
(every flow of one host, both ways, nobody else's) is what this cannot tell from stamps;
the absolute line (``window.py``) still names a queue far above every floor. The knobs
are ``Thresholds``' (``thresholds.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cwctl.records import TS_CODE, ProbeTable
from cwctl.runtime.arrays import F64, I64
from cwctl.sync.robust import median_per_group
from cwctl.telemetry.thresholds import Thresholds


def noisy_stamps(table: ProbeTable) -> bool:
    """Whether any of the table's stamps is a kernel's or user space's (not the NIC's)."""
    return bool(len(table.ts)) and int(np.max(table.ts)) > TS_CODE["hw"]


def floor_quantile(noisy: bool, thresholds: Thresholds) -> float:
    """The quantile of a flow's delays that is its floor: the minimum, unless noisy."""
    return thresholds.noisy_floor_q if noisy else 0.0


@dataclass(frozen=True)
class HostNoise:
    """Each host's extra spread (ns) over its leaf's, as sender and as receiver (host
    order of the table, plus a trailing 0 for an unknown host)."""

    send_ns: F64
    recv_ns: F64

    @classmethod
    def none(cls, n_hosts: int) -> HostNoise:
        return cls(np.zeros(n_hosts + 1), np.zeros(n_hosts + 1))

    def extra(self, src: npt.NDArray[np.integer], dst: npt.NDArray[np.integer]) -> F64:
        """The extra spread of each flow from ``src`` to ``dst`` (host indices)."""
        return np.asarray(self.send_ns[src] + self.recv_ns[dst], np.float64)


def route_spreads(
    src: I64, dst: I64, received: I64, p90_ns: F64, floor_ns: F64, thresholds: Thresholds
) -> tuple[I64, I64, F64]:
    """The routes whose spread counts (``min_route_samples``): their src, dst and spread."""
    spread = p90_ns - floor_ns
    enough = (received >= thresholds.min_route_samples) & np.isfinite(spread)
    return src[enough], dst[enough], spread[enough]


def host_noise(
    hosts: list[str],
    spreads: tuple[I64, I64, F64],
    typical_ns: float,
    leaf_of: Mapping[str, str],
    thresholds: Thresholds,
) -> HostNoise:
    """Each host's extra spread over its leaf's (module docstring), from the routes'
    spreads (``route_spreads``, the whole scan's)."""
    n = len(hosts)
    src, dst, spread = spreads
    if not len(spread) or not np.isfinite(typical_ns):
        return HostNoise.none(n)
    cap = thresholds.max_extra_of_typical * typical_ns
    leaf = np.array([leaf_of.get(h, "") for h in hosts], dtype=object)
    _, leaf_id = np.unique(leaf, return_inverse=True)
    n_leaves = int(leaf_id.max()) + 1 if n else 0
    out = []
    for ends in (src, dst):
        med = median_per_group(spread, ends.astype(np.int64), n)  # NaN: no route
        known = np.isfinite(med)
        base = median_per_group(med[known], leaf_id[known].astype(np.int64), n_leaves)
        extra = np.clip(np.nan_to_num(med - base[leaf_id]), 0.0, cap)
        out.append(np.append(extra, 0.0))
    return HostNoise(out[0], out[1])
