"""The hard-margin (SVM-like) line between a pair's two clouds, for every pair at once.

``solve(method="hybrid")`` (the default) keeps the envelope fit's slope and takes the
widest gap at that slope: its midline is the offset. ``method="margin"`` also searches
the slope for the widest gap (golden section). See ``docs/sync.md``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cwctl.runtime.sorting import grouped_order
from cwctl.sync.pairfit import F64, TRIM_FLOOR_NS, PairFits, PairPoints

# The gap's edges at the chosen slope: the mean of the BAND_POINTS points nearest the gap
# on each side, not the single extreme one. A kernel's stamps (sw) are late or early by a
# lognormal, whose lower tail has no hard floor: the single lowest point of hundreds is a
# noisy order statistic, the mean of the lowest three far less so, and three points of
# hundreds are mostly clear of queueing. Quick budget, --load 0.4, sw stamps, p99: 256
# hosts seed 4242 148 -> 134 ns, seeds 1-5 182/152/164/185/129 -> 162/124/165/182/136;
# 64 hosts seeds 1-5 131/126/138/238/150 -> 123/142/170/187/135 (better on average, not on
# every seed). hw stamps: 256 hosts seed 4242 31.1 -> 29.7 ns, within 1 ns elsewhere.
BAND_POINTS = 3
# Kernel stamps on a busy CPU (the namespace fabric beside a saturating flow) show a
# second shape: a dense lower edge with a sparse tail of legs 300-400 ns *faster* than
# it, on one direction of a pair and not the other, so the three lowest points of that
# side sit in the tail and the midline moves by half its depth (+-200 ns a pair, p99
# 41-234 ns over 33 scans). A side's tail is "sparse" when its 5th percentile stands
# more than FAST_TAIL_RATIO times the body's spread (25th minus 5th percentile) above
# the mean of its BAND_POINTS lowest points: 0.3-1.8 on the simulator's lognormal stamps
# and on the idle fabric, median 3.0 beside the flow. Such a pair is measured at its
# dense edge on both sides: the mean of the lowest DENSE_EDGE_SHARE of each side's
# points (11 saved scans replayed: p99 mean 77 -> 31 ns, worst 152 -> 64 ns; idle unchanged).
# A side's BAND_POINTS nearest points may stand on two floors: in a sparse window (the
# watch budget: a handful of legs a flow) the nearest may be the one leg of a flow that
# crossed healthy spines and the next two legs of a flow through a slow spine, 5 us
# higher, and the edge's mean moves by 3 us. Points beyond BAND_SPREAD_K times the
# source's median spread of its sides (the BAND_POINTS-th nearest minus the nearest)
# from the nearest are left out of the edge.
BAND_SPREAD_K = 5.0
FAST_TAIL_RATIO = 2.5
DENSE_EDGE_SHARE = 0.1
MIN_SHAPE_POINTS = 40  # fewer points on a side: its percentiles say nothing of its shape


def max_margin_refine(
    points: PairPoints,
    fits: PairFits,
    *,
    iterations: int = 48,
    search: bool = True,
    only: np.ndarray | None = None,
) -> PairFits:
    """The exact hard-margin line per pair, by golden-section search over the slope.

    For a slope ``b`` the widest gap between the clouds is
    ``min_upper(y - b x) - max_lower(y - b x)``, a concave function of ``b`` (a minimum of
    linear functions minus a maximum of linear ones), so a golden-section search finds
    its maximum; all pairs advance together, one ``minimum.at`` pass per step. Points
    the envelope fit judged to be in the forbidden zone are left out first (soft margin
    by trimming). Returns fits with offset and drift replaced.
    """
    kept = _trimmed(points, fits)
    if search:
        b = _widest_slope(kept, fits, iterations)
        if only is not None:  # the slope searched for these pairs alone
            b = np.where(only, b, fits.drift_ppb * 1e-9)
    else:  # keep the envelope fit's slope: the widest margin at that slope
        b = fits.drift_ppb * 1e-9
    # the margin at the chosen slope, per flow (a flow is the whole pair unless the
    # points were split by flow): theta is the mean midline of the flows with both clouds
    pair_of, x = kept.pair_of, kept.x_ns
    ranks = _Ranks.of(
        kept.y_ns - b[pair_of] * x, kept.flow_of, kept.upper, len(points.flow_pair), x
    )
    top, bottom, centre = _flow_edges(points, ranks)
    return _pair_midlines(points, fits, b, top, bottom, centre)


def _trimmed(points: PairPoints, fits: PairFits) -> PairPoints:
    """The points less those the envelope fit put in the forbidden zone: a soft margin."""
    pair_of, upper, x, y = points.pair_of, points.upper, points.x_ns, points.y_ns
    src = np.minimum(points.source.astype(np.intp), len(TRIM_FLOOR_NS) - 1)
    theta_at = fits.offset_ns[pair_of] + fits.drift_ppb[pair_of] * 1e-9 * x
    over = np.where(upper, theta_at - y, y - theta_at)
    keep = over <= np.asarray(TRIM_FLOOR_NS)[src][pair_of]
    return replace(
        points,
        flow_of=points.flow_of[keep],
        pair_of=pair_of[keep],
        upper=upper[keep],
        x_ns=x[keep],
        y_ns=y[keep],
    )


def _widest_slope(kept: PairPoints, fits: PairFits, iterations: int) -> F64:
    """Per pair, the slope of the widest gap: a golden-section search about the fit's."""
    n_pairs, pair_of, upper, x, y = kept.n_pairs, kept.pair_of, kept.upper, kept.x_ns, kept.y_ns
    span = 10 * np.minimum(fits.sigma_drift_ppb, 1e5) * 1e-9 + 1e-9

    def margin(b: F64) -> F64:
        top, bottom = _envelopes(y - b[pair_of] * x, pair_of, upper, n_pairs)
        return top - bottom

    lo_b = fits.drift_ppb * 1e-9 - span
    hi_b = fits.drift_ppb * 1e-9 + span
    ratio = (np.sqrt(5) - 1) / 2
    c = hi_b - ratio * (hi_b - lo_b)
    d = lo_b + ratio * (hi_b - lo_b)
    mc, md = margin(c), margin(d)
    for _ in range(max(iterations, 0)):
        left = mc > md  # maximum lies in [lo_b, d]
        hi_b = np.where(left, d, hi_b)
        lo_b = np.where(left, lo_b, c)
        c_new = hi_b - ratio * (hi_b - lo_b)
        d_new = lo_b + ratio * (hi_b - lo_b)
        c, d = c_new, d_new
        mc, md = margin(c), margin(d)
    return (lo_b + hi_b) / 2


def _flow_edges(points: PairPoints, ranks: _Ranks) -> tuple[F64, F64, F64]:
    """Per flow, the gap's edges and their points' mean x, at the dense edge past a fast tail."""
    n_flows = len(points.flow_pair)
    flow_source = np.repeat(points.source[points.flow_pair], 2)
    within = _band_tolerance(ranks.spread(BAND_POINTS), flow_source)
    top, bottom = ranks.edges(np.full(2 * n_flows, BAND_POINTS, np.intp), within)
    centre = ranks.centre
    noisy = points.source[points.flow_pair] >= 1  # per flow: kernel or user-space stamps
    if noisy.any():
        tail = ranks.fast_tail(top, bottom).reshape(-1, 2).any(axis=1) & noisy
        if tail.any():
            dense = np.maximum(BAND_POINTS, np.rint(DENSE_EDGE_SHARE * ranks.count))
            d_top, d_bottom = ranks.edges(dense.astype(np.intp))
            top = np.where(tail, d_top, top)
            bottom = np.where(tail, d_bottom, bottom)
            centre = np.where(np.repeat(tail, 2), ranks.centre, centre)
    return top, bottom, centre


def _pair_midlines(
    points: PairPoints, fits: PairFits, b: F64, top: F64, bottom: F64, centre: F64
) -> PairFits:
    """``fits`` at slope ``b``, each pair at the mean midline and half-gap of its flows' edges."""
    n_pairs = points.n_pairs
    both = np.isfinite(top) & np.isfinite(bottom)
    fp = points.flow_pair[both]
    count = np.bincount(fp, minlength=n_pairs).astype(np.float64)
    safe = np.maximum(count, 1.0)
    mid = np.bincount(fp, (top[both] + bottom[both]) / 2, n_pairs) / safe
    gap = np.bincount(fp, (top[both] - bottom[both]) / 2, n_pairs) / safe
    x_flow = (centre[0::2] + centre[1::2]) / 2
    x_centre = np.bincount(fp, x_flow[both], n_pairs) / safe
    out = PairFits(**{k: getattr(fits, k) for k in fits.__dataclass_fields__})
    good = (count > 0) & fits.ok
    out.offset_ns = np.where(good, mid, fits.offset_ns)
    out.drift_ppb = np.where(good, b * 1e9, fits.drift_ppb)
    out.delay_floor_ns = np.where(good, gap, fits.delay_floor_ns)
    out.x_centre_ns = np.where(good, x_centre, fits.x_centre_ns)
    return out


def flow_floor_steps(flows: PairPoints, fits: PairFits) -> F64:
    """Per pair: the largest step between its flows' floors on one side (each flow's
    nearest point to the gap at the pair's slope, the upper and lower clouds apart).
    Paths differ by some hundreds of ns on a healthy fabric (hw stamps, 256 hosts:
    median 120-360 ns, p99.9 0.8-1.3 us); a slow element on some of a pair's flows adds
    its delay to theirs (a slow spine: median 4.7 us)."""
    n_pairs = flows.n_pairs
    n_flows = len(flows.flow_pair)
    pair_of, upper, x = flows.pair_of, flows.upper, flows.x_ns
    if len(x) == 0:
        return np.zeros(n_pairs)
    v = flows.y_ns - fits.drift_ppb[pair_of] * 1e-9 * x
    signed = np.where(upper, v, -v)  # the nearest point to the gap is the smallest
    side = flows.flow_of * 2 + (~upper)
    nearest = np.full(2 * n_flows, np.inf)
    np.minimum.at(nearest, side, signed)
    has = np.isfinite(nearest)
    # per (pair, side): the slowest flow's floor minus the fastest's
    pair_side = np.repeat(flows.flow_pair * 2, 2) + np.tile([0, 1], n_flows)
    lo = np.full(2 * n_pairs, np.inf)
    hi = np.full(2 * n_pairs, -np.inf)
    np.minimum.at(lo, pair_side[has], nearest[has])
    np.maximum.at(hi, pair_side[has], nearest[has])
    return np.where(hi > lo, hi - lo, 0.0).reshape(-1, 2).max(axis=1)


def _band_tolerance(spread: F64, source: np.ndarray) -> F64:
    """Per side: how far beyond its nearest point a point may stand and still count
    towards the edge, ``BAND_SPREAD_K`` times the median ``spread`` of the sides of its
    timestamp source (a point beyond it stands on another floor: see ``BAND_SPREAD_K``)."""
    out = np.full(len(spread), np.inf)
    for code in np.unique(source):
        mine = source == code
        pool = spread[mine]
        pool = pool[np.isfinite(pool)]
        if len(pool):
            out[mine] = BAND_SPREAD_K * max(float(np.median(pool)), 1.0)
    return out


def _envelopes(v: F64, group: np.ndarray, upper: np.ndarray, n: int) -> tuple[F64, F64]:
    """Per group, the lowest ``v`` of the upper cloud and the highest of the lower one
    (inf and -inf where a group has none): the two edges of the gap."""
    top = np.full(n, np.inf)
    bottom = np.full(n, -np.inf)
    np.minimum.at(top, group[upper], v[upper])
    np.maximum.at(bottom, group[~upper], v[~upper])
    return top, bottom


class _Ranks:
    """Every (group, side)'s points in order from the gap outwards: upper points from the
    lowest, lower points from the highest, as ``signed`` values (lower ones negated)."""

    def __init__(
        self,
        side: np.ndarray,
        signed: F64,
        start: np.ndarray,
        count: np.ndarray,
        x: F64 | None = None,
    ):
        self.side, self.signed, self.start, self.count = side, signed, start, count
        self.x = x
        self.centre: F64 = np.zeros(0)  # per side: the mean x of the last ``edges`` points

    @classmethod
    def of(
        cls, v: F64, group: np.ndarray, upper: np.ndarray, n: int, x: F64 | None = None
    ) -> _Ranks:
        side = group * 2 + (~upper)
        signed = np.where(upper, v, -v)  # the points nearest the gap first on both sides
        order = grouped_order(signed, side, 2 * n)  # np.lexsort((signed, side)), faster
        ranked = side[order]
        start = np.searchsorted(ranked, np.arange(2 * n))
        count = np.bincount(ranked, minlength=2 * n)
        return cls(ranked, signed[order], start, count, None if x is None else x[order])

    def edges(self, k: np.ndarray, within: F64 | None = None) -> tuple[F64, F64]:
        """Per group, the two edges: the mean of each side's ``k[side]`` nearest points,
        of those within ``within[side]`` of its nearest if given (and, where the ranks
        know their points' x, their mean x in ``centre``)."""
        near = (np.arange(len(self.side)) - self.start[self.side]) < k[self.side]
        if within is not None and len(self.side):
            nearest = self.signed[np.minimum(self.start, len(self.side) - 1)]
            near &= self.signed - nearest[self.side] <= within[self.side]
        used = np.bincount(self.side[near], minlength=len(k)).astype(np.float64)
        safe = np.maximum(used, 1.0)
        mean = np.bincount(self.side[near], self.signed[near], len(k)) / safe
        mean[used == 0] = np.inf
        if self.x is not None:
            self.centre = np.bincount(self.side[near], self.x[near], len(k)) / safe
        return mean[0::2], -mean[1::2]

    def spread(self, k: int) -> F64:
        """Per side: how far its ``k``-th nearest point stands beyond its nearest (NaN
        where it has fewer than ``k``)."""
        if len(self.side) == 0:
            return np.full(len(self.count), np.nan)
        last = len(self.signed) - 1
        first = self.signed[np.minimum(self.start, last)]
        kth = self.signed[np.minimum(self.start + k - 1, last)]
        return np.where(self.count >= k, kth - first, np.nan)

    def quantile(self, q: float) -> F64:
        """Per side, the value of rank ``q`` (0 nearest the gap); NaN on an empty side."""
        last = len(self.signed) - 1
        at = np.minimum(self.start + np.floor(q * (self.count - 1)).astype(np.intp), last)
        return np.where(self.count > 0, self.signed[np.maximum(at, 0)], np.nan)

    def fast_tail(self, top: F64, bottom: F64) -> np.ndarray:
        """Per side: its nearest points (``top``, ``bottom``: ``edges`` at
        ``BAND_POINTS``) stand far out from a dense edge (see ``FAST_TAIL_RATIO``)."""
        nearest = np.column_stack([top, -bottom]).ravel()  # back to signed, per side
        q5, q25 = self.quantile(0.05), self.quantile(0.25)
        body = np.maximum(q25 - q5, 1.0)
        with np.errstate(invalid="ignore"):
            return (self.count >= MIN_SHAPE_POINTS) & ((q5 - nearest) > FAST_TAIL_RATIO * body)
