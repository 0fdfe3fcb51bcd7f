"""The third signal: a raised floor, the mark of a ``slow`` element.

A switch, link, NIC or host that adds a fixed delay to everything crossing it moves no
probe above its route's own floor (so the delay signal cannot see it): it raises the
floors of all its routes. With clocks corrected, a route's floor (its minimum one-way
delay) is comparable across the fabric: routes of one kind (within a leaf, or across
leaves) differ only by cables and switch latencies. A directed flow is *raised* when its
floor exceeds the median floor of its kind by more than ``floor_sigmas`` robust standard
deviations of that kind's floors (1.4826 x the median absolute deviation, at least
``min_sigma_of_floor`` of the median floor: identical cables are no yardstick); each flow
with at least ``min_floor_samples`` delays is one trial. An element must raise at least
``floor_min_rate`` of the flows crossing it: a slow element's fixed delay is on every
probe, so it raises nearly all of them (99 % of a slow spine's or host's flows on the
simulator at the default 10 probes a flow), while a queue that stood through all ten
probes of some flows (a congested switch's, near a busy host) raises a part.

A slow element is material when it raises its flows' floors by ``min_shift_of_floor``
of their yardstick (their kind's typical floor or the median path's, whichever is
higher: ``raise_share``), as ``shifts.py`` weighs it; a flow raised by less than
``raised_of_material`` of that is no failure: two leaves whose switches are ~90 ns
slower than the rest (the simulator's switch latencies) raised every flow within them
by 4-8 % of the median path's floor, 5 sigmas of the lower part's spread, a quarter of
all same-leaf flows, which the fit took for background and so hid a slow spine. The
knobs are ``Thresholds``' (``thresholds.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import F64
from cwctl.sync.robust import MAD_TO_SIGMA, median_per_group
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.elements import Flows
from cwctl.telemetry.thresholds import Thresholds

# a kind's yardstick from its lower quantiles (a normal's q05 and q25 are 0.971 sigma
# apart, the q25 0.674 sigma under its median): right when nothing is raised, within a
# third of a sigma while up to half of the kind's flows are
LOW_QUANTILES = (0.05, 0.25)
LOW_QUANTILES_SIGMAS = 0.971
NORMAL_Q25 = 0.674


def floor_trials(
    counts: FlowCounts, leaf_of: Mapping[str, str], thresholds: Thresholds
) -> tuple[F64, F64, F64]:
    """Per directed flow: trials (0 or 1), failures (raised or not), and the raise over
    its kind's median floor in units of its limit (NaN where unknown). A failure is
    judged against the kind's lower part (``_low_yardstick``: two slow spines of four,
    their flows' paths unknown, raise half of the cross-leaf floors, which a median and
    its deviation take for normal); the raise returned, which says whether a raised flow
    no element explains is material, against the whole kind's median and deviation (a
    busy hypervisor's or queue's floors are the upper part's, and no finding)."""
    t = thresholds
    above, sigma, typical = _raises(counts, leaf_of, _low_yardstick, t)
    judged = np.isfinite(above)
    trials = judged.astype(np.float64)
    raised = np.nan_to_num(above / _limit(sigma, typical, t)) > 1.0
    share = np.nan_to_num(raise_share(above, typical, counts.floor_ns))
    raised &= share >= t.raised_of_material * t.min_shift_of_floor
    failures = (judged & raised).astype(np.float64)
    above, sigma, typical = _raises(counts, leaf_of, _mad_yardstick, t)
    return trials, failures, above / _limit(sigma, typical, t)


def raise_share(above: F64, typical: F64, floor_ns: float) -> F64:
    """A raise as a share of its yardstick: its kind's typical floor or the fabric's
    median path's, whichever is higher (a same-leaf floor of 400 ns makes 150 ns look
    large on a fabric whose median path takes 2 us)."""
    return above / np.maximum(np.nan_to_num(typical), floor_ns)


def _limit(sigma: F64, typical: F64, t: Thresholds) -> F64:
    """``floor_sigmas`` spreads, the spread at least ``min_sigma_of_floor`` of the floor."""
    return t.floor_sigmas * np.maximum(np.maximum(sigma, t.min_sigma_of_floor * typical), 1.0)


def floor_raises(
    counts: FlowCounts, leaf_of: Mapping[str, str], thresholds: Thresholds
) -> tuple[F64, F64, F64]:
    """Per directed flow: its floor's raise over its kind's typical floor (ns, clock
    errors taken out; NaN where unknown), its kind's spread of single floors and its
    kind's typical floor (ns), all from the kind's lower part (``_low_yardstick``): what
    ``shifts.py`` weighs."""
    return _raises(counts, leaf_of, _low_yardstick, thresholds)


def _raises(
    counts: FlowCounts,
    leaf_of: Mapping[str, str],
    yardstick: Callable[[F64], tuple[float, float]],
    t: Thresholds,
) -> tuple[F64, F64, F64]:
    """Per directed flow of a judged kind (within a leaf, across leaves): its floor over
    its kind's typical floor (clock errors taken out), the kind's spread and typical
    floor (NaN for flows not judged)."""
    f = counts.flows
    floor = counts.flow_floor_ns
    same = same_leaf(f, leaf_of)
    ok = (counts.samples >= t.min_floor_samples) & np.isfinite(floor)
    above = np.full(len(f), np.nan)
    sigma = np.full(len(f), np.nan)
    typical = np.full(len(f), np.nan)
    for kind in (same, ~same):
        sel = kind & ok
        if int(sel.sum()) < t.min_flows_per_kind:
            continue
        typical[sel], sigma[sel] = yardstick(floor[sel])
        above[sel] = floor[sel] - typical[sel]
    judged = np.isfinite(above)
    above[judged] = _without_clock_errors(above[judged], f.src[judged], f.dst[judged])
    return above, sigma, typical


def same_leaf(f: Flows, leaf_of: Mapping[str, str]) -> npt.NDArray[np.bool_]:
    """Per flow: both ends under one (known) leaf; the other kind crosses the spines."""
    leaf = np.array([leaf_of.get(h, "") for h in f.hosts] + [""], dtype=object)
    return (leaf[f.src] == leaf[f.dst]) & (leaf[f.src] != "")  # type: ignore[no-any-return]


def _mad_yardstick(floors: F64) -> tuple[float, float]:
    """A kind's median floor and robust spread (1.4826 x the median absolute deviation)."""
    median = float(np.median(floors))
    return median, MAD_TO_SIGMA * float(np.median(np.abs(floors - median)))


def _low_yardstick(floors: F64) -> tuple[float, float]:
    """A kind's typical floor and the spread of its floors, from its lower part: a slow
    element only raises floors, and two slow spines of four raise half of a kind's, whose
    median and deviation would then be the slow ones' (``LOW_QUANTILES``)."""
    lo, mid = np.quantile(floors, LOW_QUANTILES)
    sigma = (mid - lo) / LOW_QUANTILES_SIGMAS
    return float(mid + NORMAL_Q25 * sigma), float(sigma)


def _without_clock_errors(
    above: F64, src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]
) -> F64:
    """``above`` less each host pair's clock error: an offset error e between two hosts
    raises every floor one way by e and lowers the other way's by e, so the part of the
    two directions' median raises that is equal and opposite is e. A slow element on
    the pair's routes raises, it never lowers: it leaves that part alone. With few
    probes a pair's clocks are known to a few hundred ns at worst, a real raise's size."""
    if not len(above):
        return above
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    _, pair = np.unique(lo.astype(np.int64) * (int(hi.max()) + 1) + hi, return_inverse=True)
    up = src == lo
    group = pair * 2 + up
    n_pairs = int(pair.max()) + 1
    med = median_per_group(above, group, 2 * n_pairs).reshape(n_pairs, 2)
    med = np.nan_to_num(med)  # a direction unseen: no correction
    opposite = np.sign(med[:, 1]) * np.sign(med[:, 0]) < 0
    e = np.where(opposite, np.sign(med[:, 1]) * np.minimum(*np.abs(med.T)), 0.0)
    return above - np.where(up, e[pair], -e[pair])
