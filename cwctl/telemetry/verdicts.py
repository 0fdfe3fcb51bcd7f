"""Two verdicts beside the ranked suspects: dead hosts, and loss nothing explains.

A host that answered nothing (no exchange it took part in came back, as prober or as
answerer) is one suspect, a dead host, rather than a set of lossy paths crossing it;
its exchanges are left out of localisation so they blame nothing else. When every host
of a leaf is silent that is the leaf's doing, and localisation names it.

A scan never says "healthy" while probes are lost or delayed beyond the thresholds:
flows that are bad in a signal and that no suspect (or candidate) explains are counted
as *unlocalised*, with the evidence, and the scan exits 3. Material means, for loss, a
flow losing at least ``min_loss_rate`` of its exchanges; for delay, a flow delayed
beyond the threshold in at least ``material_delay_share`` of its probes with its median
probe beyond the threshold too (and by ``delay_shift_of_floor`` of the fabric's floor),
over at least ``min_delay_samples`` delays and improbable (``material_delay_p``) at the
background, and on both probes of the flow's coded pairs alike (``pair_sided``); for a
raised floor, at least ``min_raised_flows`` flows raised ``floor_unlocalised_ratio``
times beyond the threshold (real floors wander with the hosts' load), each with a
median wait over its floor no more than ``floor_queued_factor`` times the median flow's
of its kind (within a
leaf, across leaves: ``queue_held``): a flow whose probes all met a busy queue has its
minimum held up by the queue (on the simulator at load 0.6 a healthy scan had three
such, their medians 7-8 us over their floors against the fabric's 3 us), while a fixed
delay raises a flow's floor and median alike. The knobs are ``Thresholds``'
(``thresholds.py``); ``unexplained.py`` applies them.

A coded pair's probes leave 20 us apart: a queue on the path holds both alike, but a
delay of one side only (with kernel stamps, the reply to a pair's first probe waiting
on the host while its second arrives) is the probing's own doing (``pair_sided``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.records import ProbeTable
from cwctl.runtime.arrays import F64, B
from cwctl.scan.snapshot import Suspect
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds


def dead_hosts(
    table: ProbeTable,
    usable_rows: B,
    leaf_of: Mapping[str, str],
    thresholds: Thresholds = THRESHOLDS,
) -> tuple[list[Suspect], B]:
    """Dead hosts as suspects, and a mask over hosts (table order, plus a trailing False)."""
    n = len(table.hosts)
    src, dst = table.src[usable_rows], table.dst[usable_rows]
    back = table.t4[usable_rows] != 0
    # per host, exchanges tried and answered: one integer count over (host, came back)
    ends = np.bincount(src * 2 + back, minlength=2 * n) + np.bincount(
        dst * 2 + back, minlength=2 * n
    )
    tried, answered = ends[0::2] + ends[1::2], ends[1::2]
    dead = (tried >= thresholds.min_dead_exchanges) & (answered == 0)
    leaves: dict[str, list[int]] = {}
    for i, host in enumerate(table.hosts):
        if host in leaf_of:
            leaves.setdefault(leaf_of[host], []).append(i)
    for members in leaves.values():
        if len(members) >= 2 and dead[members].all():
            dead[members] = False  # the whole leaf is silent: the leaf's doing
    peers = _peer_counts(src, dst, dead, n)
    suspects = [
        Suspect(
            element=table.hosts[i],
            kind="host",
            score=1.0,
            evidence=(
                f"dead host: none of its {int(tried[i])} exchanges with {peers[i]} peers "
                "came back, its own probes or theirs (the host, or every NIC of it, is cut "
                "off from the fabric)"
            ),
        )
        for i in np.flatnonzero(dead).tolist()
    ]
    return suspects, np.append(dead, False)


def _peer_counts(
    src: npt.NDArray[np.int32], dst: npt.NDArray[np.int32], dead: B, n: int
) -> list[int]:
    """Per host, how many distinct peers it exchanged with, counted for ``dead`` hosts
    only (0 elsewhere): one pass over the rows, whatever the number of dead hosts."""
    out = np.zeros(n, np.int64)
    if dead.any():
        mine = dead[src] | dead[dst]
        a, b = src[mine].astype(np.int64), dst[mine].astype(np.int64)
        host = np.concatenate([a, b])
        peer = np.concatenate([b, a])
        pairs = np.unique(host[dead[host]] * n + peer[dead[host]])
        out = np.bincount(pairs // n, minlength=n)
    return out.tolist()  # type: ignore[no-any-return]


def pair_sided(
    samples: F64, delayed: F64, second_samples: F64, second_delayed: F64, thresholds: Thresholds
) -> B:
    """Per flow, whether its delays fall on one probe of its coded pairs and not the
    other (the first's share at least ``1 / pair_side_ratio`` times the second's, or the
    other way, and ``pair_side_z`` standard errors apart, each side over
    ``min_side_samples``): not a queue on the path, so not material evidence of a fault.
    Counts as ``counts.FlowCounts`` keeps them."""
    t = thresholds
    n2, k2 = second_samples, second_delayed
    n1, k1 = samples - n2, delayed - k2
    known = (n1 >= t.min_side_samples) & (n2 >= t.min_side_samples)
    with np.errstate(invalid="ignore", divide="ignore"):
        s1, s2 = k1 / np.maximum(n1, 1), k2 / np.maximum(n2, 1)
        pooled = (k1 + k2) / np.maximum(n1 + n2, 1)
        se = np.sqrt(pooled * (1 - pooled) * (1 / np.maximum(n1, 1) + 1 / np.maximum(n2, 1)))
        z = np.abs(s1 - s2) / np.where(se > 0, se, np.inf)
    uneven = np.minimum(s1, s2) < t.pair_side_ratio * np.maximum(s1, s2)
    return known & uneven & (z > t.pair_side_z)


def unlocalised(
    flows: Sequence[tuple[str, str, str, str]], *, discovered: bool = False
) -> dict[str, Any] | None:
    """The ``unlocalised`` object of a snapshot from its unexplained bad flows, each
    (signal, src host, dst host, how bad in words); None when there are none. Each path
    is shown once (its flows, one per source port, joined); ``discovered``: path records
    were there, so "paths unknown" is not the reason."""
    if not flows:
        return None
    by_path: dict[tuple[str, str], list[str]] = {}
    by_signal: dict[str, int] = {}
    for signal, a, b, words in flows:
        by_signal[signal] = by_signal.get(signal, 0) + 1
        by_path.setdefault((a, b), []).append(words)
    shown = "; ".join(
        f"{a}→{b} {words[0]}" + (f" (+{len(words) - 1} flows)" if len(words) > 1 else "")
        for (a, b), words in list(by_path.items())[:5]
    )
    more = f" and {len(by_path) - 5} more" if len(by_path) > 5 else ""
    what = " and ".join(sorted(by_signal))
    why = "too few to tell" if discovered else "paths unknown, or too few to tell"
    return {
        "paths": len(by_path),
        "flows": len(flows),
        "signals": by_signal,
        "evidence": (
            f"unlocalised {what} on {len(by_path)} paths: no element explains them "
            f"({why}): {shown}{more}"
        ),
    }


def queue_held(
    wait_ns: npt.NDArray[np.float64],
    same: npt.NDArray[np.bool_],
    thresholds: Thresholds = THRESHOLDS,
) -> npt.NDArray[np.bool_]:
    """Per flow: its median wait over its own floor is beyond ``floor_queued_factor``
    times its kind's median flow's (``same``: within one leaf). A same-leaf flow meets
    half the queues a cross-leaf one does: held against every flow's median (7 in 8 of
    them cross-leaf, 3.6 us against 1.4 us at load 0.6), same-leaf flows that no probe of
    100 found a busy access queue empty on waited 1.4-2.7 times it, and read as raised."""
    held = np.zeros(len(wait_ns), bool)
    for kind in (same, ~same):
        wait = wait_ns[kind]
        if np.isfinite(wait).any():
            held[kind] = wait > thresholds.floor_queued_factor * float(np.nanmedian(wait))
    return held
