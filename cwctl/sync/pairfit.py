"""The per-pair fit: offset and drift of host ``hi`` against host ``lo``, for every pair at once.

For an unordered pair (lo, hi) with ``theta(x) = clock_hi - clock_lo = a + b*x`` (``x``
in lo's clock, relative to ``t_ref``), every leg of every exchange gives a point on one
side of the line:

* legs lo→hi: ``(t_send, t_recv - t_send)`` lies ABOVE (it is theta plus a one-way delay),
* legs hi→lo: ``(t_recv, t_send - t_recv)`` lies BELOW (theta minus a one-way delay).

Probes from hi to lo are the mirror image, so both directions of probing merge.

The estimate is the max-margin line between the two clouds, as Huygens' SVM finds it,
computed robustly and for all pairs in one batch of numpy passes:

1. **Envelopes.** Each pair's time span is cut into ``W`` windows; in each, the lowest
   upper point and the highest lower point are the envelope points (``np.minimum.at`` over a
   (pair, side, window) key; no per-pair loop).
2. **Two parallel lines.** A least-squares fit of the upper envelope and of the lower
   envelope with one shared slope; theta is the midline between them. When both
   envelopes are straight (no noise) this is exactly the hard-margin SVM line; with
   noise, averaging ``W`` envelope points per side is far less sensitive to one
   extreme timestamp than the 2–3 hull vertices a hard margin rests on.
3. **Trim.** Envelope points further than ``TRIM_K`` robust deviations (per pair) from
   their line are dropped (a window whose every probe queued, a point in the forbidden
   zone) and the lines refitted, twice.

``margin.max_margin_refine`` then takes the hard-margin line at that slope (the
default, ``hybrid``) or searches the slope too (``margin``). Timestamps are int64 ns;
floats only after subtracting ``t_ref``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.runtime.sorting import unique_inverse
from cwctl.sync.coded import CodedFilter
from cwctl.sync.robust import F64, MAD_TO_SIGMA, IntP, median_per_group

TRIM_K: Final = 4.0
# Uncertainty floors per timestamp source (hw, sw, user): offset ns, and the trim floor.
SIGMA_FLOOR_NS: Final = (1.0, 20.0, 200.0)
TRIM_FLOOR_NS: Final = (5.0, 200.0, 2_000.0)
# A pair's envelope scatter is pooled with its source's typical scatter as if that were
# PRIOR_DOF residuals more (``_moderated_scatter``). Watch budget, 256 hosts, seed 1, hw,
# p99 offset error less the median: healthy 65 -> 36 ns, a dead spine 129 -> 38, a slow
# spine 127 -> 60; quick (load 0.4, seeds 4242, 3, 5) within 2 ns (2: the same; 8: slow
# spine 54, quick the same).
PRIOR_DOF: Final = 4.0
DRIFT_SIGMA_UNKNOWN_PPB: Final = 1e6  # a pair probed in one window only: no slope


@dataclass
class PairPoints:
    """Every usable leg of every exchange, as a point of one pair's two clouds."""

    n_hosts: int
    lo: IntP  # per pair
    hi: IntP
    source: npt.NDArray[np.int8]  # worst timestamp source code per pair
    pair_of: IntP  # per point
    flow_of: IntP  # per point: its flow (pair, initiating end, source port)
    flow_pair: IntP  # per flow: its pair
    upper: npt.NDArray[np.bool_]  # per point: True above theta, False below
    x_ns: F64  # lo's clock minus t_ref
    y_ns: F64
    t_ref_ns: int
    legs_total: npt.NDArray[np.int64]  # per pair: complete legs before the coded filter

    @property
    def n_pairs(self) -> int:
        return len(self.lo)

    def by_pair(self) -> PairPoints:
        """The same points with one flow per pair (both clouds of the pair together)."""
        return replace(self, flow_of=self.pair_of, flow_pair=np.arange(self.n_pairs))


@dataclass
class PairFits:
    """One row per unordered probed pair (lo's name < hi's): theta = clock_hi - clock_lo."""

    lo: IntP
    hi: IntP
    offset_ns: F64  # theta at lo-clock time t_ref
    drift_ppb: F64
    sigma_offset_ns: F64
    sigma_drift_ppb: F64
    delay_floor_ns: F64  # half the gap between the envelopes: the minimum one-way delay
    used: npt.NDArray[np.int64]  # envelope points in the final fit
    points: npt.NDArray[np.int64]  # legs that passed the coded filter
    dropped: npt.NDArray[np.int64]  # legs dropped by the coded filter
    forbidden: npt.NDArray[np.int64]  # legs on the wrong side of the line beyond the trim
    ok: npt.NDArray[np.bool_]  # both clouds non-empty: the pair has an estimate
    # where (lo's clock minus t_ref) the points the offset rests on lie, on average: the
    # offset at another slope b' is ``offset_ns + (drift_ppb - b') * 1e-9 * x_centre_ns``
    x_centre_ns: F64
    # the largest step between the floors of the pair's flows on one side, and whether
    # it stands beyond their noise (``margin.flow_floor_steps``): bimodal across flows
    flow_step_ns: F64
    bimodal: npt.NDArray[np.bool_]

    def select(self, mask: npt.NDArray[np.bool_]) -> PairFits:
        return PairFits(**{k: getattr(self, k)[mask] for k in self.__dataclass_fields__})


def pair_points(
    table: ProbeTable, filt: CodedFilter, t_ref_ns: int, *, by_flow: bool = True
) -> PairPoints:
    """The two clouds of every pair, from the rows and legs the coded filter kept.

    With ``by_flow`` each flow (initiating end, source port) of a pair keeps its own
    envelope: ECMP gives each flow its own path each way, with its own minimum delay.
    """
    n = len(table.hosts)
    complete = table.complete
    src = table.src.astype(np.intp)
    dst = table.dst.astype(np.intp)
    # a pair's "lo" end is the host with the smaller name, so the host order of the
    # table cannot change which clock a pair's fit is expressed in
    rank = np.empty(n, np.intp)
    rank[np.argsort(np.asarray(table.hosts, dtype=object), kind="stable")] = np.arange(n)
    flip = rank[src] > rank[dst]
    lo = np.where(flip, dst, src)
    hi = np.where(flip, src, dst)
    key = lo.astype(np.int64) * n + hi
    keys, pair_of_row = unique_inverse(key[complete], n * n)
    row_pair = np.full(len(table), -1, np.intp)
    row_pair[complete] = pair_of_row
    pair_lo = (keys // n).astype(np.intp)
    pair_hi = (keys % n).astype(np.intp)
    source = np.zeros(len(keys), np.int8)
    np.maximum.at(source, pair_of_row, table.ts[complete])
    legs_total = np.bincount(pair_of_row, minlength=len(keys)).astype(np.int64) * 2

    if by_flow:
        flow_key = (row_pair[complete].astype(np.int64) * 2 + flip[complete]) * 65536 + (
            table.sport[complete].astype(np.int64) & 0xFFFF
        )
        flow_keys, flow_of_row = unique_inverse(flow_key, max(len(keys), 1) * 2 * 65536)
        row_flow = np.full(len(table), -1, np.intp)
        row_flow[complete] = flow_of_row
        flow_pair = (flow_keys // (2 * 65536)).astype(np.intp)
    else:  # one flow per pair
        row_flow = row_pair
        flow_pair = np.arange(len(keys), dtype=np.intp)

    t1, t2, t3, t4 = table.t1, table.t2, table.t3, table.t4
    fwd = complete & filt.fwd_ok
    rev = complete & filt.rev_ok
    # forward leg: lo->hi gives an upper point at lo's send time; hi->lo a lower point
    f_flip = flip[fwd]
    fx = np.where(f_flip, t2[fwd], t1[fwd])
    fy = np.where(f_flip, t1[fwd] - t2[fwd], t2[fwd] - t1[fwd])
    # reply leg: hi->lo when lo initiated (lower point), lo->hi when hi initiated (upper)
    r_flip = flip[rev]
    rx = np.where(r_flip, t3[rev], t4[rev])
    ry = np.where(r_flip, t4[rev] - t3[rev], t3[rev] - t4[rev])
    return PairPoints(
        n_hosts=n,
        lo=pair_lo,
        hi=pair_hi,
        source=source,
        pair_of=np.concatenate([row_pair[fwd], row_pair[rev]]),
        flow_of=np.concatenate([row_flow[fwd], row_flow[rev]]),
        flow_pair=flow_pair,
        upper=np.concatenate([~f_flip, r_flip]),
        x_ns=(np.concatenate([fx, rx]) - t_ref_ns).astype(np.float64),
        y_ns=np.concatenate([fy, ry]).astype(np.float64),
        t_ref_ns=t_ref_ns,
        legs_total=legs_total,
    )


def _windows(points: PairPoints) -> int:
    """How many time windows: about a dozen legs per window and side, 2 to 32 windows."""
    if points.n_pairs == 0:
        return 1
    per_side = len(points.x_ns) / (2 * len(points.flow_pair))
    return int(np.clip(per_side // 12, 2, 32))


def envelope_points(
    points: PairPoints, windows: int
) -> tuple[IntP, npt.NDArray[np.bool_], F64, F64]:
    """The lowest upper point and highest lower point of each (flow, side, window)."""
    x, y, flow = points.x_ns, points.y_ns, points.flow_of
    if len(x) == 0:
        empty = np.zeros(0)
        return np.zeros(0, np.intp), np.zeros(0, np.bool_), empty, empty
    # windows per flow, from its own first to last point: a constant added to one
    # host's clock moves a flow's points together and leaves the choice unchanged
    n_flows = len(points.flow_pair)
    x0 = np.full(n_flows, np.inf)
    x1 = np.full(n_flows, -np.inf)
    np.minimum.at(x0, flow, x)
    np.maximum.at(x1, flow, x)
    width = np.maximum((x1 - x0) / windows, 1.0)
    rel = (x - x0[flow]) / width[flow]
    window = np.minimum(rel.astype(np.intp), windows - 1)
    group = (flow * 2 + (~points.upper)) * windows + window
    signed = np.where(points.upper, y, -y)  # minimise: lowest upper, highest lower
    best = np.full(n_flows * 2 * windows, np.inf)
    np.minimum.at(best, group, signed)
    best_rows = np.flatnonzero(signed == best[group])
    # ties (stamps are whole ns) go to the earliest point: row order must not matter
    order = np.lexsort((x[best_rows], group[best_rows]))
    _, first = np.unique(group[best_rows[order]], return_index=True)
    pick = best_rows[order[first]]
    return flow[pick], points.upper[pick], x[pick], y[pick]


@dataclass
class _Lines:
    """Per flow: upper and lower intercepts and point counts; per pair: the shared slope."""

    a_up: F64
    a_lo: F64
    x_up: F64  # per flow: the mean x of the upper and lower points
    x_lo: F64
    n_up: npt.NDArray[np.int64]
    n_lo: npt.NDArray[np.int64]
    slope: F64  # per pair
    sxx: F64  # per pair


def _fit_lines(
    flow_pair: IntP, n_pairs: int, flow_of: IntP, upper: npt.NDArray[np.bool_], x: F64, y: F64
) -> _Lines:
    """Least squares: one intercept per (flow, side), one slope per pair."""
    n_flows = len(flow_pair)
    g = flow_of * 2 + np.where(upper, 0, 1)
    m = n_flows * 2
    cnt = np.bincount(g, minlength=m).astype(np.float64)
    safe = np.maximum(cnt, 1.0)
    mx = np.bincount(g, x, m) / safe
    my = np.bincount(g, y, m) / safe
    dx = x - mx[g]
    dy = y - my[g]
    pair = flow_pair[flow_of]
    sxx = np.bincount(pair, dx * dx, n_pairs).astype(np.float64)
    sxy = np.bincount(pair, dx * dy, n_pairs)
    slope = np.divide(sxy, sxx, out=np.zeros(n_pairs), where=sxx > 0)
    intercept = my - np.repeat(slope[flow_pair], 2) * mx
    cnt_i = cnt.astype(np.int64)
    return _Lines(
        intercept[0::2], intercept[1::2], mx[0::2], mx[1::2], cnt_i[0::2], cnt_i[1::2], slope, sxx
    )


def _keep_one_per_side(
    keep: npt.NDArray[np.bool_], abs_resid: F64, flow_of: IntP, upper: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """``keep``, with the best point restored on every (flow, side) the trim emptied."""
    group = flow_of * 2 + np.where(upper, 0, 1)
    n = int(group.max()) + 1 if len(group) else 0
    kept = np.bincount(group[keep], minlength=n)
    emptied = (kept == 0) & (np.bincount(group, minlength=n) > 0)
    if not emptied.any():
        return keep
    best = np.full(n, np.inf)
    np.minimum.at(best, group, abs_resid)
    restore = emptied[group] & (abs_resid == best[group])
    return keep | restore


def fit_pairs(points: PairPoints, *, windows: int | None = None, trim_rounds: int = 2) -> PairFits:
    """The envelope fit of every pair (see the module docstring)."""
    n_pairs = points.n_pairs
    flow_pair = points.flow_pair
    w = windows or _windows(points)
    flow_of, upper, x, y = envelope_points(points, w)
    pair_of = flow_pair[flow_of]
    src = np.minimum(points.source.astype(np.intp), len(SIGMA_FLOOR_NS) - 1)
    trim_floor = np.asarray(TRIM_FLOOR_NS)[src]
    keep = np.ones(len(x), np.bool_)
    for round_ in range(trim_rounds + 1):
        lines = _fit_lines(flow_pair, n_pairs, flow_of[keep], upper[keep], x[keep], y[keep])
        a_flow = np.where(upper, lines.a_up[flow_of], lines.a_lo[flow_of])
        resid = y - a_flow - lines.slope[pair_of] * x
        if round_ == trim_rounds:
            break
        mad = median_per_group(np.abs(resid[keep]), pair_of[keep], n_pairs)
        tol = np.maximum(TRIM_K * MAD_TO_SIGMA * np.nan_to_num(mad), trim_floor)
        keep = _keep_one_per_side(np.abs(resid) <= tol[pair_of], np.abs(resid), flow_of, upper)

    # a flow counts towards theta when it has both envelopes; theta is their mean
    both = (lines.n_up > 0) & (lines.n_lo > 0)
    n_both = np.bincount(flow_pair[both], minlength=n_pairs).astype(np.float64)
    ok = n_both > 0
    safe_n = np.maximum(n_both, 1.0)
    mid = np.where(both, (lines.a_up + lines.a_lo) / 2, 0.0)
    half_gap = np.where(both, (lines.a_up - lines.a_lo) / 2, 0.0)
    offset = np.bincount(flow_pair, mid, n_pairs) / safe_n
    floor_ns = np.bincount(flow_pair, half_gap, n_pairs) / safe_n
    x_mid = np.where(both, (lines.x_up + lines.x_lo) / 2, 0.0)
    x_centre = np.bincount(flow_pair, x_mid, n_pairs) / safe_n
    inv_n = np.where(both, 1 / np.maximum(lines.n_up, 1) + 1 / np.maximum(lines.n_lo, 1), 0.0)
    inv_n_pair = np.bincount(flow_pair, inv_n, n_pairs) / safe_n**2
    n_up = np.bincount(flow_pair, lines.n_up, n_pairs).astype(np.int64)
    n_lo = np.bincount(flow_pair, lines.n_lo, n_pairs).astype(np.int64)
    slope, sxx = lines.slope, lines.sxx
    # scatter of the kept envelope points about their lines
    n_flows_pair = np.bincount(flow_pair, minlength=n_pairs)
    dof = n_up + n_lo - n_flows_pair * 2 - 1
    ss = np.bincount(pair_of[keep], resid[keep] ** 2, n_pairs)
    own = np.sqrt(ss / np.maximum(dof, 1))
    # the offset's sigma from the scatter pooled with the source's; the slope's from the
    # pair's own (pooled only where it has none): a sparse pair whose few points scatter
    # widely keeps that weight in the drift solve (pooled, 256 hosts at 10 pairs/s beside
    # a congested spine, seeds 1-3: drift max 41-173 ppb; pooled 117-458; before, 89-140)
    scatter = _moderated_scatter(own, dof, ok, src)
    slope_scatter = _moderated_scatter(own, dof, ok, src, prior=0.0)
    sigma_floor = np.asarray(SIGMA_FLOOR_NS)[src]
    sigma_off = np.sqrt(scatter**2 * inv_n_pair / 4 + sigma_floor**2)
    has_slope = sxx > 0
    sigma_drift = np.where(
        has_slope,
        np.sqrt((slope_scatter**2 + sigma_floor**2) / np.where(has_slope, sxx, 1.0)) * 1e9,
        DRIFT_SIGMA_UNKNOWN_PPB,
    )

    # legs on the wrong side of the fitted theta line by more than the trim tolerance
    theta_at = offset[points.pair_of] + slope[points.pair_of] * points.x_ns
    over = np.where(points.upper, theta_at - points.y_ns, points.y_ns - theta_at)
    bad = over > trim_floor[points.pair_of]
    counted = np.bincount(points.pair_of, minlength=n_pairs).astype(np.int64)
    return PairFits(
        lo=points.lo,
        hi=points.hi,
        offset_ns=offset,
        drift_ppb=slope * 1e9,
        sigma_offset_ns=sigma_off,
        sigma_drift_ppb=sigma_drift,
        delay_floor_ns=floor_ns,
        used=(n_up + n_lo).astype(np.int64),
        points=counted,
        dropped=points.legs_total - counted,
        forbidden=np.bincount(points.pair_of[bad], minlength=n_pairs).astype(np.int64),
        ok=ok,
        x_centre_ns=x_centre,
        flow_step_ns=np.zeros(n_pairs),
        bimodal=np.zeros(n_pairs, np.bool_),
    )


def with_flow_slopes(fits: PairFits, flows: PairFits) -> PairFits:
    """``fits`` (one envelope per pair) with the slope of ``flows`` (the same pairs, one
    envelope per flow) where that has one, and its offset moved to that slope.

    A pair's flows take their own ECMP paths, each with its own floor; in one envelope
    a window whose lowest leg crossed a slower path than its neighbour's reads the step
    as a slope (a slow spine at the watch budget: drifts ppm off), where each flow's own
    line keeps it out. The offset stays the pair's: a flow's own path each way is as
    asymmetric as its spines are, the pair's fastest legs each way are not."""
    has = flows.sigma_drift_ppb < DRIFT_SIGMA_UNKNOWN_PPB
    slope = np.where(has, flows.drift_ppb, fits.drift_ppb)
    out = replace(fits)
    out.offset_ns = fits.offset_ns + (fits.drift_ppb - slope) * 1e-9 * fits.x_centre_ns
    out.drift_ppb = slope
    out.sigma_drift_ppb = np.where(has, flows.sigma_drift_ppb, fits.sigma_drift_ppb)
    return out


def _moderated_scatter(
    scatter: F64,
    dof: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    source: IntP,
    prior: float = PRIOR_DOF,
) -> F64:
    """Each pair's envelope scatter, pooled with its timestamp source's typical one
    (the median of the measured pairs'), as if that were ``PRIOR_DOF`` residuals more.

    A pair with as many envelope points as its lines have parameters (three: two lines
    and a slope) has no residual to measure its scatter by, and one with a point more
    has one: either line fits whatever its points are. At 10 pairs/s beside a congested
    spine one pair's three queued points gave a drift 2.6 ppm off with the floor's
    1 ns, and its host came out 2.3 ppm off, every flow of it "delayed" (10 000 hosts);
    at the watch budget beside a dead spine one pair with one residual read 2.8 ns for
    an offset 250 ns off and moved its host by 200 ns (256 hosts). With the pool, such
    a pair takes its source's typical scatter; pairs of tens of points keep their own."""
    out = scatter.copy()
    dof = np.maximum(dof, 0).astype(np.float64)
    for s in np.unique(source[ok]):
        mine = (source == s) & ok
        pool = scatter[mine & (dof > 0)]
        if len(pool):
            typical = float(np.median(pool))
            weight = dof[mine] + prior
            var = (dof[mine] * scatter[mine] ** 2 + prior * typical**2) / np.maximum(weight, 1)
            out[mine] = np.where(weight > 0, np.sqrt(var), typical)
    return out
