"""The ``truth`` object of a simulated window: what the solver and telemetry should find.

JSON-serialisable (docs/simulator.md, "The truth object")::

    {"reference": "gpu-001",            # the host the offsets are relative to
     "t_ref_ns": 1800000001000123456,   # the window's midpoint in the reference's clock
     "t_mid_ns": 1800000001000000000,   # the same instant in true time
     "offset_ns": {"gpu-002": -1234.5, ...},   # clock minus reference clock at t_ref_ns
     "drift_ppb": {"gpu-002": 15230.1, ...},   # drift minus the reference's drift
     "clock_error_ns": {...}, "clock_drift_ppb": {...},  # the same against true time
     "faults": ["spine2"],                     # elements with an active fault
                                               # (a silent switch is not one)
     "fault_specs": [{"kind", "element", "mode", "value", "at_s"}],
     "paths": [{"src", "dst", "sent", "received", "loss",
                "owd_min_ns", "owd_p50_ns", "owd_p99_ns"}],  # true network delays
     "state": {"ecmp_weight": {"leaf1-spine2": 0}, "excluded_nics": [], "drained_hosts": []}}

Re-reference to any host r: ``offset_ns[h] - offset_ns[r]``, ``drift_ppb[h] - drift_ppb[r]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import F64, I32
from cwctl.scan.truthpaths import TruthPaths
from cwctl.sim.world import SimWorld


def _round(values: F64, digits: int = 3) -> list[float]:
    return [round(float(v), digits) for v in values]


def _quantiles(sorted_ns: F64, received: npt.NDArray[np.int64]) -> tuple[F64, F64, F64]:
    """min, p50, p99 (lower nearest rank) of each row of ``sorted_ns`` (NaNs sorted last)."""
    rows = np.arange(len(sorted_ns))
    top = np.maximum(received - 1, 0)

    def q(frac: float) -> F64:
        return sorted_ns[rows, np.floor(frac * top).astype(np.int64)]

    return q(0.0), q(0.5), q(0.99)


def path_quantiles(
    hosts: list[str], src: I32, dst: I32, owd_ns: F64, sent: npt.NDArray[np.int64]
) -> TruthPaths:
    """Per directed host pair: sent, received, loss, min/p50/p99 of the delivered delays.

    ``owd_ns`` is (legs, probes): one row per leg (a direction of a probed edge), NaN for a
    probe lost or never sent; ``sent`` counts what each leg sent, ``src``/``dst`` name its
    ends. Two legs of the same directed pair (probed from both ends) are pooled.
    """
    ok = ~np.isnan(owd_ns)
    received = ok.sum(axis=1)
    sorted_ns = np.sort(owd_ns, axis=1)
    lo, p50, p99 = _quantiles(sorted_ns, received)
    key = src.astype(np.int64) * len(hosts) + dst
    keys, first, inverse, count = np.unique(
        key, return_index=True, return_inverse=True, return_counts=True
    )
    got, n_sent = received[first].astype(np.int64), sent[first].astype(np.int64)
    stats = np.stack([lo[first], p50[first], p99[first]], axis=1)
    pooled = np.flatnonzero(count[inverse] > 1)  # the legs of pairs probed from both ends
    pooled = pooled[np.argsort(inverse[pooled], kind="stable")]
    groups = np.split(pooled, np.cumsum(count[count > 1])[:-1]) if len(pooled) else []
    for j, legs in zip(np.flatnonzero(count > 1).tolist(), groups, strict=True):  # pool them
        pool = np.sort(owd_ns[legs].ravel())
        got[j], n_sent[j] = int((~np.isnan(pool)).sum()), int(sent[legs].sum())
        stats[j] = [float(x[0]) for x in _quantiles(pool[None, :], np.array([got[j]]))]
    loss = np.round(1.0 - got / np.maximum(n_sent, 1), 6)
    n = len(hosts)
    ends = np.column_stack([keys // n, keys % n]).astype(np.int64)
    return TruthPaths(hosts, ends, np.column_stack([n_sent, got]), loss, np.round(stats, 1))


def window_truth(
    model: SimWorld,
    *,
    start_s: float,
    duration_s: float,
    edge_src: I32,
    edge_dst: I32,
    owd_fwd_ns: F64,
    owd_rev_ns: F64,
    rev_sent: npt.NDArray[np.int64],
) -> dict[str, Any]:
    """The truth of one window; ``owd_*_ns`` are (edges, probes) true network delays, NaN lost.

    A reply never sent (its probe was lost) is not counted as sent on the reverse leg.
    """
    fabric, clocks, params = model.fabric, model.clocks, model.params
    hosts = fabric.hosts
    t_mid = (start_s + duration_s / 2) * 1e9
    error = clocks.error_ns(t_mid)
    drift = clocks.drift_ppb
    ref = 0
    t_ref = int(np.rint(t_mid + error[ref])) + params.epoch_ns
    end_ns = (start_s + duration_s) * 1e9
    active = [(f, eid) for f, eid in model.faults if f.at_s * 1e9 < end_ns]
    data_path = [(f, eid) for f, eid in active if f.mode != "silent"]
    paths = path_quantiles(
        hosts,
        np.concatenate([edge_src, edge_dst]),
        np.concatenate([edge_dst, edge_src]),
        np.concatenate([owd_fwd_ns, owd_rev_ns]),
        np.concatenate([np.full(len(edge_src), owd_fwd_ns.shape[1]), rev_sent]),
    )
    return {
        "reference": hosts[ref],
        "t_ref_ns": t_ref,
        "t_mid_ns": round(t_mid) + params.epoch_ns,
        "offset_ns": dict(zip(hosts, _round(error - error[ref]), strict=True)),
        "drift_ppb": dict(zip(hosts, _round(drift - drift[ref]), strict=True)),
        "clock_error_ns": dict(zip(hosts, _round(error), strict=True)),
        "clock_drift_ppb": dict(zip(hosts, _round(drift), strict=True)),
        "faults": sorted({fabric.names[eid] for _, eid in data_path}),
        "fault_specs": [
            {
                "kind": f.kind,
                "element": fabric.names[eid],
                "mode": f.mode,
                "value": f.value,
                "at_s": f.at_s,
            }
            for f, eid in active
        ],
        "paths": paths,
        "state": {
            "ecmp_weight": {
                f"{leaf}-{spine}": w for (leaf, spine), w in sorted(model.state.ecmp_weight.items())
            },
            "excluded_nics": sorted(model.state.excluded_nics),
            "drained_hosts": sorted(model.state.drained_hosts),
            "steered": [[a, b, s] for (a, b), s in sorted(model.state.steered.items())],
        },
    }


def truth_at(truth: dict[str, Any], reference: str, t_ref_ns: int) -> dict[str, Any]:
    """``truth`` restated at a report's instant: ``t_ref_ns`` read on ``reference``'s clock.

    A window's truth is taken at its midpoint on host 0's clock; a report states offsets at
    its own ``t_ref_ns`` on its own reference's clock (the solver's choice). Each clock is
    moved along its drift to that instant (the wander moves well under a nanosecond in the
    tens of milliseconds between the two), then re-referenced, so ``offset_ns`` and
    ``drift_ppb`` compare with the report's hosts directly. ``t_true_ns``: the instant in
    true time; ``clock_error_ns`` is restated there too; ``t_mid_ns`` stays the window's.
    A truth without the absolute clocks (an old record file) is returned as it was."""
    error, drift = truth.get("clock_error_ns"), truth.get("clock_drift_ppb")
    if not isinstance(error, dict) or not isinstance(drift, dict) or reference not in error:
        return truth
    hosts = list(error)
    e = np.array([float(error[h]) for h in hosts])
    d = np.array([float(drift.get(h, 0.0)) for h in hosts])
    r = hosts.index(reference)
    # when the reference's clock reads t_ref_ns: t_ref = t + e_r + d_r * (t - t_mid)
    dt_ns = (t_ref_ns - int(truth["t_mid_ns"]) - e[r]) / (1.0 + d[r] * 1e-9)
    at = e + d * 1e-9 * dt_ns
    return {
        **truth,
        "reference": reference,
        "t_ref_ns": int(t_ref_ns),
        "t_true_ns": int(truth["t_mid_ns"]) + round(dt_ns),
        "offset_ns": dict(zip(hosts, _round(at - at[r]), strict=True)),
        "drift_ppb": dict(zip(hosts, _round(d - d[r]), strict=True)),
        "clock_error_ns": dict(zip(hosts, _round(at), strict=True)),
    }
