"""``solve(table)``: coded filter, per-pair envelope fit, network-effect solve, error bars.

The steps, each in its own module:

1. ``coded.coded_filter``: drop the legs of coded pairs whose spacing was disturbed.
2. ``pairfit.fit_pairs``: offset and drift of every probed pair (max-margin midline
   between the two envelopes).
3. ``floors.weigh_floors``: a pair whose delay floor stands above its ends' other
   pairs' (every leg one way met a standing queue) gets that excess, the bound of its
   bias, added to its sigma.
4. ``network.ls_solve``: weighted least squares over the probe graph, drifts first,
   then offsets (corrected for the pair fits being in the lower host's clock), one
   reference per connected component; the offsets are then reweighted a few times
   (Huber IRLS), because a pair's error is not Gaussian: under ECMP its fastest
   forward and reverse paths may cross different spines, which biases that pair by
   half their difference while the pairs whose fastest paths match are unbiased.
5. ``uncertainty``: per host, a bound on the offset error from the residuals and the
   graph.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from cwctl.records import TS_SOURCES, ProbeTable
from cwctl.runtime.arrays import F64
from cwctl.runtime.blockpool import map_blocks
from cwctl.sync.blocks import BLOCK_ROWS, ONE_PASS_ROWS, merge_filters, merge_fits, pair_blocks
from cwctl.sync.coded import CodedFilter, coded_filter
from cwctl.sync.floors import weigh_floors
from cwctl.sync.margin import flow_floor_steps, max_margin_refine
from cwctl.sync.network import ProbeGraph, build_graph, ls_solve, tree_solve
from cwctl.sync.pairfit import PairFits, fit_pairs, pair_points, with_flow_slopes
from cwctl.sync.robust import MAD_TO_SIGMA, median_per_group
from cwctl.sync.scoreslope import score_slopes
from cwctl.sync.solution import ClockSolution

Method = Literal["envelope", "margin", "hybrid", "score"]
UNCERTAINTY_SIGMAS = 3.0
ROBUST_ROUNDS = 4  # Huber IRLS rounds of the offset solve
ROBUST_K = 1.5
# then, with NIC stamps, rounds of a redescending (Cauchy) weight: see ``robust_factor``
CAUCHY_ROUNDS = 3
CAUCHY_K = 1.0
# timestamp sources whose pair drifts come from every point (``scoreslope``): sw, user
SCORE_SLOPE_SOURCES = (1, 2)
BIMODAL_K = 3.0  # a pair's flows' floors apart by this many coded-filter tolerances


def window_middle(table: ProbeTable) -> int:
    """``t_ref_ns``: the middle of the probing window (send times of complete exchanges)."""
    complete = table.complete
    if not complete.any():
        return int(table.t1.min() + (table.t1.max() - table.t1.min()) // 2) if len(table) else 0
    t1 = table.t1[complete]
    lo, hi = int(t1.min()), int(t1.max())
    return lo + (hi - lo) // 2


def reference_index(table: ProbeTable, reference: str | None) -> int | None:
    if reference is None:
        return None
    try:
        return table.hosts.index(reference)
    except ValueError:
        return None


def host_window_middle(table: ProbeTable, host: int) -> int:
    """The middle of the window in ``host``'s clock: its own stamps, first to last."""
    complete = table.complete
    mine_a = complete & (table.src == host)
    mine_b = complete & (table.dst == host)
    stamps = np.concatenate(
        [table.t1[mine_a], table.t4[mine_a], table.t2[mine_b], table.t3[mine_b]]
    )
    if len(stamps) == 0:
        return window_middle(table)
    lo, hi = int(stamps.min()), int(stamps.max())
    return lo + (hi - lo) // 2


def rebase(fits: PairFits, shift_ns: int) -> None:
    """Move every pair's offset from ``t_ref`` to ``t_ref + shift_ns`` along its slope."""
    fits.offset_ns = fits.offset_ns + fits.drift_ppb * 1e-9 * float(shift_ns)
    fits.x_centre_ns = fits.x_centre_ns - float(shift_ns)


def fit_table(
    table: ProbeTable,
    method: Method = "hybrid",
    *,
    by_flow: bool = False,
    windows: int | None = None,
    search_noisy: bool = False,
    flow_slopes: bool = True,
) -> tuple[CodedFilter, PairFits, int]:
    """Coded filter and pair fits (pairs with an estimate only), at a provisional t_ref.
    ``search_noisy``: with ``hybrid``, the pairs stamped by a kernel or in user space
    search their slope for the widest gap too (as ``margin``), the pairs with NIC stamps
    keep the envelope's (the sliding solve over a long history: ``incremental.py``).
    ``flow_slopes``: the slopes from the flows' envelopes (``with_flow_slopes``); the
    sliding solve's windows of several scans keep the pair's (see ``incremental.py``)."""
    t_prov = window_middle(table)
    filt = coded_filter(table)
    # the slope from the flows' envelopes (each flow its own intercepts, so a flow
    # whose path is slower, or queued, does not tilt the line), the offset and its
    # sigma from the pair's clouds (whose scatter holds its flows' floors apart)
    flows = pair_points(table, filt, t_prov, by_flow=True)
    points = flows if by_flow else flows.by_pair()
    fits = fit_pairs(points, windows=windows)
    if flow_slopes and not by_flow:
        fits = with_flow_slopes(fits, fit_pairs(flows, windows=windows))
    if method == "score":
        # opt-in: better sw drifts (docs/sync.md), but not exactly invariant to a constant
        # added to one clock (tests/unit/test_sync_scoreslope.py shows tens of ns)
        fits = score_slopes(points, fits, SCORE_SLOPE_SOURCES)
    if method in ("margin", "hybrid", "score"):
        search = method == "margin" or (search_noisy and bool((points.source >= 1).any()))
        only = None if method == "margin" or not search else points.source >= 1
        fits = max_margin_refine(points, fits, search=search, only=only)
    if not by_flow:  # the self-check: a pair whose flows stand on different floors
        fits.flow_step_ns = flow_floor_steps(flows, fits)
        fits.bimodal = fits.flow_step_ns > bimodal_step_ns(filt, points.source)
    return filt, fits.select(fits.ok), t_prov


def bimodal_step_ns(filt: CodedFilter, source: npt.NDArray[np.int8]) -> F64:
    """Per pair: the step between its flows' floors beyond which it is bimodal,
    ``BIMODAL_K`` times the coded filter's tolerance of its timestamp source (the
    scan's own queueing jitter, 3 robust deviations of the coded pairs' spacing
    errors): hw 420-480 ns at the watch budget and load 0.2, so a step beyond 1.3-1.5
    us, which 0.1 % of healthy pairs reach and most pairs beside a slow spine do.
    Without coded pairs (no tolerance) no pair is called bimodal."""
    by_code = np.full(len(TS_SOURCES), np.inf)
    for name, value in filt.tolerance_ns.items():
        by_code[TS_SOURCES.index(name)] = BIMODAL_K * value
    return by_code[np.minimum(source.astype(np.intp), len(TS_SOURCES) - 1)]


def fit_blocks(
    table: ProbeTable,
    method: Method = "hybrid",
    *,
    by_flow: bool = False,
    windows: int | None = None,
    block_rows: int = BLOCK_ROWS,
    search_noisy: bool = False,
    flow_slopes: bool = True,
) -> tuple[dict[str, Any], PairFits, int]:
    """``fit_table`` a block of pairs at a time (``blocks.py``): the filter's quality,
    the fits (in pair order) and the provisional reference time they are all at."""
    t_prov = window_middle(table)

    def fit_one(rows: np.ndarray) -> tuple[CodedFilter, PairFits] | None:
        block = table.select(rows)
        if not block.complete.any():
            return None
        filt, fits, t_block = fit_table(
            block,
            method,
            by_flow=by_flow,
            windows=windows,
            search_noisy=search_noisy,
            flow_slopes=flow_slopes,
        )
        rebase(fits, t_prov - t_block)
        kept = CodedFilter(filt.fwd_ok[:0], filt.rev_ok[:0], filt.tolerance_ns, filt.counts)
        return kept, fits

    done = [d for d in map_blocks(fit_one, pair_blocks(table, block_rows)) if d is not None]
    filters = [filt for filt, _ in done]
    parts = [fits for _, fits in done]
    return merge_filters(filters), merge_fits(parts, len(table.hosts)), t_prov


@dataclass
class NetworkResult:
    """What the graph solve gives before it becomes a ``ClockSolution``."""

    offset_ns: F64
    drift_ppb: F64
    uncertainty_ns: F64
    residual_ns: F64  # per pair: pair offset minus solved difference
    solved_diff_ns: F64
    pair_offset_ns: F64  # the pair offsets as used (clock-corrected to reference time)
    iterations: int
    chi2: float
    robust_factor: F64  # per pair: the Huber weight factor of the last round


def network_solve(
    graph: ProbeGraph,
    fits: PairFits,
    *,
    network: bool = True,
    x0_offset: F64 | None = None,
    x0_drift: F64 | None = None,
    laplacian_offset: Any = None,
    preconditioner: Any = None,
    robust_factor: F64 | None = None,
    robust_rounds: int | None = None,
    graph_slope: bool = True,
    redescend: bool = False,
) -> NetworkResult:
    """Drifts, then offsets, over the graph (or along the BFS tree if not ``network``).
    ``graph_slope``: each pair's offset at the graph's slope (else at its own).
    ``redescend``: after the Huber rounds, ``CAUCHY_ROUNDS`` with the Cauchy weight (NIC
    stamps: ``robust_factor``); ``robust_rounds`` (a warm start) are rounds of the last
    weight."""
    w_off = 1.0 / fits.sigma_offset_ns**2
    w_drift = 1.0 / fits.sigma_drift_ppb**2
    iterations = 0
    if network:
        drift, info = ls_solve(graph, fits.drift_ppb, w_drift, x0=x0_drift)
        iterations += info.iterations
    else:
        drift = tree_solve(graph, fits.drift_ppb)
    # each pair's offset at the graph's slope, not its own: a sparse pair's slope can be
    # ppm off where its points sit together far from t_ref, and its own line carried
    # the error to t_ref as an offset of microseconds with the sigma of its points
    slope_ppb = drift[fits.hi] - drift[fits.lo] if network and graph_slope else fits.drift_ppb
    at_slope = fits.offset_ns + (fits.drift_ppb - slope_ppb) * 1e-9 * fits.x_centre_ns
    # the pair fits are at t_ref in lo's clock, i.e. at reference time t_ref - x_lo:
    # move them to reference time t_ref along that slope
    solvable = graph.component >= 0
    if x0_offset is None or not np.all(np.isfinite(x0_offset[solvable])):
        first = tree_solve(graph, at_slope)
    else:
        first = x0_offset
    values = at_slope + slope_ppb * 1e-9 * first[fits.lo]
    factor = np.ones(len(values)) if robust_factor is None else robust_factor
    if network:
        offset, info = ls_solve(
            graph,
            values,
            w_off * factor,
            x0=first,
            laplacian=laplacian_offset if robust_factor is None else None,
            preconditioner=preconditioner,
        )
        iterations += info.iterations
        if robust_rounds is None:
            rounds = [False] * ROBUST_ROUNDS + [True] * (CAUCHY_ROUNDS if redescend else 0)
        else:
            rounds = [redescend] * robust_rounds
        for cauchy in rounds:
            r = values - (offset[fits.hi] - offset[fits.lo])
            factor = robust_factor_of(np.abs(r) * np.sqrt(w_off), cauchy=cauchy)
            offset, info = ls_solve(graph, values, w_off * factor, x0=offset)
            iterations += info.iterations
    else:
        offset = tree_solve(graph, values)
    solved = offset[fits.hi] - offset[fits.lo]
    residual = values - solved
    dof = max(len(values) - graph.n_free, 1)
    chi2 = float(np.sum(w_off * residual**2) / dof) if len(values) > graph.n_free else 1.0
    unc = uncertainty(graph, fits, residual, w_off, max(chi2, 1.0))
    return NetworkResult(offset, drift, unc, residual, solved, values, iterations, chi2, factor)


def robust_factor_of(z: F64, *, cauchy: bool) -> F64:
    """Per pair, the weight factor of one reweighting round, from its residual in its own
    sigmas ``z`` and their robust scale. Huber: a pair whose residual is far beyond its
    own noise is most likely biased (its fastest forward and reverse ECMP paths differ,
    a static asymmetry): it keeps a weight that shrinks as 1/|residual|. Cauchy (NIC
    stamps, after Huber): that weight shrinks as 1/residual^2. With NIC stamps half of
    the cross-leaf pairs are such mixtures (256 hosts, quick, no asymmetric link: pair
    error median 32 ns, same-leaf 2 ns), biased by +-50-300 ns, and Huber's weights of
    0.2-0.5 on them still moved whole leaves by up to 20 ns; with kernel stamps the
    pairs' errors are the stamps' noise, not a mixture, and Cauchy was worse there (p99
    less the median 115-134 -> 118-146 ns over seeds 1-5, 4242: docs/sync.md)."""
    scale = max(MAD_TO_SIGMA * float(np.median(z)), 1.0) if len(z) else 1.0
    if cauchy:
        return np.maximum(1.0 / (1.0 + (z / (CAUCHY_K * scale)) ** 2), 1e-3)
    return np.clip(ROBUST_K * scale / np.maximum(z, 1e-12), 1e-3, 1.0)


def uncertainty(graph: ProbeGraph, fits: PairFits, residual: F64, weights: F64, chi2: float) -> F64:
    """Per host, the half-width of the window its true offset lies in (fbclock-style).

    The variance of a host's solved offset is about ``chi2 * (1/D_host + 1/D_ref)``,
    with ``D`` the weighted degree (the effective resistance to the reference on an
    expander graph), scaled by the reduced chi-square of the residuals;
    ``UNCERTAINTY_SIGMAS`` of those, plus an allowance for static path asymmetry, which
    no statistic can see where it is common to all of a host's paths (its own cable):
    the larger of the median absolute residual of the host's edges and the robust
    spread (1.4826 x median absolute residual) of the whole graph: the asymmetry the
    loops do reveal, taken as the scale of the asymmetry they cannot.
    The reference's own window is 0 by definition.
    """
    n = graph.n_hosts
    deg_w = np.bincount(fits.lo, weights, n) + np.bincount(fits.hi, weights, n)
    ends = np.concatenate([fits.lo, fits.hi])
    abs_r = np.abs(np.concatenate([residual, residual]))
    med_r = np.nan_to_num(median_per_group(abs_r, ends, n))
    comp = graph.component
    ref_of = np.where(comp >= 0, graph.references[np.maximum(comp, 0)], 0)
    with np.errstate(divide="ignore"):
        var = chi2 * (1 / deg_w + 1 / deg_w[ref_of])
    spread = MAD_TO_SIGMA * float(np.median(np.abs(residual))) if len(residual) else 0.0
    out = UNCERTAINTY_SIGMAS * np.sqrt(var) + np.maximum(med_r, spread)
    out[comp < 0] = np.nan
    out[graph.references] = 0.0
    return out


EDGE_DICTS_MAX = 50_000


def edge_table(fits: PairFits, result: NetworkResult) -> dict[str, Any]:
    """``ClockSolution.edge_table``: one row per pair with an estimate."""
    return {
        "src": fits.lo,
        "dst": fits.hi,
        "pair_offset_ns": np.round(result.pair_offset_ns, 3),
        "solved_diff_ns": np.round(result.solved_diff_ns, 3),
        "residual_ns": np.round(result.residual_ns, 3),
        "drift_ppb": np.round(fits.drift_ppb, 3),
        "sigma_ns": np.round(fits.sigma_offset_ns, 3),
        "delay_floor_ns": np.round(fits.delay_floor_ns, 1),
        "used": fits.used,
        "points": fits.points,
        "dropped": fits.dropped,
        "forbidden": fits.forbidden,
        "flow_step_ns": np.round(fits.flow_step_ns, 1),
        "bimodal": fits.bimodal,
    }


def empty_solution(table: ProbeTable, reference: str | None, note: str) -> ClockSolution:
    n = len(table.hosts)
    nan = np.full(n, np.nan)
    return ClockSolution(
        hosts=list(table.hosts),
        offset_ns=nan.copy(),
        drift_ppb=nan.copy(),
        uncertainty_ns=nan.copy(),
        reference=None,
        t_ref_ns=window_middle(table),
        component_reference=[None] * n,
        quality={"note": note, "timestamp_source": table.timestamp_source},
    )


def solve(
    table: ProbeTable,
    *,
    reference: str | None = None,
    method: Method = "hybrid",
    network: bool = True,
    by_flow: bool = False,
    windows: int | None = None,
    block_rows: int | None = None,
) -> ClockSolution:
    """Every host's offset and drift against the reference (see the module docstring).

    Tables longer than ``block_rows`` are fitted a block of pairs at a time
    (``fit_blocks``), which bounds the fit's memory by the block, not the table; by
    default those longer than ``ONE_PASS_ROWS``, in blocks of ``BLOCK_ROWS``.

    ``reference`` is a host name (else the best-connected host); ``method`` ``margin``
    replaces the envelope fit by the exact hard-margin line; ``network=False`` skips the
    network effect (pairs chained along a BFS tree), for comparison.
    """
    started = time.perf_counter()
    if not table.complete.any():
        return empty_solution(table, reference, "no complete probe exchange")
    one_pass = ONE_PASS_ROWS if block_rows is None else block_rows
    if len(table) > one_pass:  # bounded memory: a block of pairs at a time
        filter_quality, fits, t_prov = fit_blocks(
            table, method, by_flow=by_flow, windows=windows, block_rows=block_rows or BLOCK_ROWS
        )
    else:
        filt, fits, t_prov = fit_table(table, method, by_flow=by_flow, windows=windows)
        filter_quality = filt.quality()
    fitted_s = time.perf_counter() - started
    if len(fits.lo) == 0:
        return empty_solution(table, reference, "no pair with probes in both directions")
    names = list(table.hosts)
    weigh_floors(fits, len(names))  # a pair slower than its ends' others: biased, weighed so
    graph = build_graph(len(names), fits.lo, fits.hi, names, reference_index(table, reference))
    t_ref = host_window_middle(table, int(graph.references[0]))
    rebase(fits, t_ref - t_prov)
    redescend = table.timestamp_source == "hw"
    result = network_solve(graph, fits, network=network, redescend=redescend)
    extra = {
        "method": method if network else f"{method}, pairwise only (BFS tree)",
        "fit_s": round(fitted_s, 4),
        "solve_s": round(time.perf_counter() - started, 4),
    }
    return assemble(table, t_ref, names, graph, fits, result, filter_quality, reference, extra)


def assemble(
    table: ProbeTable,
    t_ref: int,
    names: list[str],
    graph: ProbeGraph,
    fits: PairFits,
    result: NetworkResult,
    filter_quality: dict[str, Any],
    reference: str | None,
    extra: dict[str, Any],
) -> ClockSolution:
    comp = graph.component
    component_reference = [names[graph.references[c]] if c >= 0 else None for c in comp.tolist()]
    main_ref = names[graph.references[0]] if len(graph.references) else None
    resid = np.abs(result.residual_ns)
    quality: dict[str, Any] = {
        "timestamp_source": table.timestamp_source,
        **filter_quality,
        "pairs": len(fits.lo),
        "components": len(graph.references),
        "unsolved_hosts": int((comp < 0).sum()),
        "residual_rms_ns": round(float(np.sqrt(np.mean(result.residual_ns**2))), 3),
        "residual_max_ns": round(float(resid.max()), 3) if len(resid) else 0.0,
        # pairs whose flows' floors stand apart beyond their noise (the self-check)
        "bimodal_pairs": int(fits.bimodal.sum()),
        "chi2": round(result.chi2, 3),
        "cg_iterations": result.iterations,
        **extra,
    }
    if reference is not None and reference != main_ref:
        quality["reference_note"] = (
            f"requested reference {reference!r} has no usable probes; using {main_ref!r}"
        )
    solution = ClockSolution(
        hosts=names,
        offset_ns=result.offset_ns,
        drift_ppb=result.drift_ppb,
        uncertainty_ns=result.uncertainty_ns,
        reference=main_ref,
        t_ref_ns=t_ref,
        component_reference=component_reference,
        quality=quality,
        edge_table=edge_table(fits, result),
    )
    if len(fits.lo) <= EDGE_DICTS_MAX:
        solution.edges = solution.edge_records()
    else:
        quality["edges_note"] = (
            f"{len(fits.lo)} pairs: edges left empty, see edge_table / edge_records()"
        )
    return solution
