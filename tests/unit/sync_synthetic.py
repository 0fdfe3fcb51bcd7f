"""Synthetic probe exchanges from known clocks: for the solver's tests and scale bench.

Not a fabric model (that is ``cwctl.sim``): every probed edge gets a fixed minimum
delay per direction, optional exponential queueing, optional Gaussian timestamp noise
and an optional static asymmetry, and every exchange is a coded pair. Host ``i``'s clock
reads ``t + offset_ns[i] + drift_ppb[i] * 1e-9 * (t - t_mid)`` at true time ``t``.
Vectorised: one numpy pass for all exchanges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cwctl.records import TS_CODE, ProbeTable

T0_NS = 1_700_000_000_000_000_000


@dataclass(frozen=True)
class SyntheticClocks:
    """The truth a synthetic table was made from (offsets relative to true time)."""

    offset_ns: npt.NDArray[np.float64]
    drift_ppb: npt.NDArray[np.float64]
    t_mid_ns: int

    def relative_to(self, ref: int, t_ref_ns: int) -> tuple[npt.NDArray[np.float64], ...]:
        """Every clock minus ``ref``'s when ``ref`` reads ``t_ref_ns``; drifts in ppb."""
        o, d = self.offset_ns, self.drift_ppb * 1e-9
        # true time u (from t_mid) at which ref reads t_ref: t_ref - t_mid = u + o_r + d_r u
        u = (float(t_ref_ns - self.t_mid_ns) - o[ref]) / (1 + d[ref])
        offset = (o - o[ref]) + (d - d[ref]) * u
        drift = (d - d[ref]) / (1 + d[ref]) * 1e9
        return offset, drift


def _clock(
    t_ns: npt.NDArray[np.float64], host: npt.NDArray[np.intp], clocks: SyntheticClocks
) -> npt.NDArray[np.int64]:
    # t_ns is relative to T0_NS, so float64 stays exact to well under a nanosecond
    rel = t_ns - (clocks.t_mid_ns - T0_NS)
    local = t_ns + clocks.offset_ns[host] + clocks.drift_ppb[host] * 1e-9 * rel
    return T0_NS + np.rint(local).astype(np.int64)


def synthetic_table(
    hosts: Sequence[str],
    edges: npt.ArrayLike,
    clocks: SyntheticClocks,
    *,
    pairs_per_edge: int = 40,
    duration_s: float = 2.0,
    gap_ns: int = 20_000,
    delay_ns: float | npt.ArrayLike = 2_000.0,
    asymmetry_ns: float | npt.ArrayLike = 0.0,
    queue_mean_ns: float = 0.0,
    queue_prob: float = 1.0,
    noise_ns: float = 0.0,
    turnaround_ns: float = 5_000.0,
    ts: str = "hw",
    seed: int = 0,
    sports: int = 1,
) -> ProbeTable:
    """Coded probe pairs on every directed ``edges`` row ``(src, dst)`` (host indices).

    ``delay_ns`` (scalar or one per edge) is the minimum one-way delay; the forward
    direction gets ``+asymmetry_ns/2`` and the reverse ``-asymmetry_ns/2``. Each leg
    is queued with probability ``queue_prob`` by an exponential of mean ``queue_mean_ns``
    (independently per probe, so the coded filter has something to catch); every
    timestamp gets Gaussian noise of ``noise_ns``.
    """
    rng = np.random.default_rng(seed)
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    n_edges = len(e)
    per = pairs_per_edge
    delay = np.broadcast_to(np.asarray(delay_ns, np.float64), (n_edges,))
    asym = np.broadcast_to(np.asarray(asymmetry_ns, np.float64), (n_edges,))
    # send instants: spread evenly over the window with a random phase per edge
    period = duration_s * 1e9 / per
    phase = rng.uniform(0, period, n_edges)
    t_send0 = (phase[:, None] + period * np.arange(per)[None, :]).ravel()  # (E*per,)
    edge_of = np.repeat(np.arange(n_edges), per)
    pair_id = np.tile(np.arange(per), n_edges)
    # two probes per coded pair
    t_send = np.stack([t_send0, t_send0 + gap_ns], axis=1).ravel()
    edge_of = np.repeat(edge_of, 2)
    pair_id = np.repeat(pair_id, 2)
    idx = np.tile(np.array([0, 1], np.int8), n_edges * per)
    m = len(t_send)

    def queue() -> npt.NDArray[np.float64]:
        if queue_mean_ns <= 0:
            return np.zeros(m)
        q = rng.exponential(queue_mean_ns, m)
        return np.where(rng.random(m) < queue_prob, q, 0.0)

    def noise() -> npt.NDArray[np.float64]:
        return rng.normal(0.0, noise_ns, m) if noise_ns > 0 else np.zeros(m)

    d_fwd = delay[edge_of] + asym[edge_of] / 2 + queue()
    d_rev = delay[edge_of] - asym[edge_of] / 2 + queue()
    src = e[edge_of, 0]
    dst = e[edge_of, 1]
    t_recv = t_send + d_fwd
    t_reply = t_recv + turnaround_ns
    t_back = t_reply + d_rev
    t1 = _clock(t_send + noise(), src, clocks)
    t2 = _clock(t_recv + noise(), dst, clocks)
    t3 = _clock(t_reply + noise(), dst, clocks)
    t4 = _clock(t_back + noise(), src, clocks)
    return ProbeTable(
        hosts=list(hosts),
        src=src.astype(np.int32),
        dst=dst.astype(np.int32),
        sport=(40000 + pair_id % max(1, sports)).astype(np.int32),
        pair=pair_id.astype(np.int64),
        idx=idx,
        gap_ns=np.full(m, gap_ns, np.int64),
        ts=np.full(m, TS_CODE[ts], np.int8),
        t1=t1,
        t2=t2,
        t3=t3,
        t4=t4,
    )


def random_clocks(
    n: int, *, seed: int = 0, offset_spread_ns: float = 1e6, drift_spread_ppb: float = 20_000.0
) -> SyntheticClocks:
    """Random offsets (uniform ±spread) and drifts for ``n`` hosts, centred at T0 + 1 s."""
    rng = np.random.default_rng(seed)
    return SyntheticClocks(
        offset_ns=rng.uniform(-offset_spread_ns, offset_spread_ns, n),
        drift_ppb=rng.uniform(-drift_spread_ppb, drift_spread_ppb, n),
        t_mid_ns=T0_NS + 1_000_000_000,
    )


def ring_chord_edges(n: int, k: int, *, seed: int = 0) -> npt.NDArray[np.int64]:
    """Directed probe edges like ``topology.assign_peers`` (ring plus random chords), fast.

    Each host probes ``k//2`` ring successors and ``k - k//2`` random others; for the
    scale bench, where building ``assign_peers`` over 100 000 names would dominate.
    """
    k = max(0, min(k, n - 1))
    ring = max(1, k // 2) if k else 0
    rng = np.random.default_rng(seed)
    src = np.repeat(np.arange(n), k)
    offs = np.empty((n, k), np.int64)
    offs[:, :ring] = np.arange(1, ring + 1)
    if k > ring:
        offs[:, ring:] = (
            rng.integers(ring + 1, n - ring, size=(n, k - ring)) if n > 2 * ring + 1 else 1
        )
    dst = (src + offs.ravel()) % n
    keep = dst != src
    return np.unique(np.stack([src[keep], dst[keep]], axis=1), axis=0)
