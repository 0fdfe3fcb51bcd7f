"""A pair whose delay floor stands above its ends' others is biased by that much: weigh it so.

A pair's fit (``pairfit``) is the midline between its two envelopes, the fastest legs
each way: ``theta + d_fwd`` above, ``theta - d_rev`` below. Its offset is off by half
their difference, ``(d_fwd - d_rev) / 2``, and its delay floor (half the gap between the
envelopes) is ``(d_fwd + d_rev) / 2``. When every leg one way met a standing queue (a
congested link that all of the pair's flows that way happen to hash onto), the floor
rises by half that queue and so does the offset's error: the coded filter cannot see a
standing queue (both probes of a pair wait alike), and the fit's own scatter is as small
as on a clean pair, so without this the graph solve trusts a pair milliseconds off.

What a pair's floor should be is read from its ends' other pairs: each host's typical
floor is the median over its pairs, and a pair should be no slower than the slower of
its two ends' typical floors (a host's pairs cross the same cables and, mostly, the same
number of switches; a host slow in everything, its own NIC or stack, is slow in its
typical floor too, and none of its pairs stands out: its slowness is the same both ways
of every pair and biases nothing). The excess over that, beyond what the pairs' own spread of floors
allows (``SPREAD_K`` robust deviations, at least ``EXCESS_FLOOR_NS``), bounds the pair's
bias, and is added to its offset's sigma (in quadrature): the network effect then takes
the pair's ends from the loops around it. A pair no slower than its ends' others is
left as it was.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from cwctl.sync.pairfit import PairFits
from cwctl.sync.robust import F64, MAD_TO_SIGMA, median_per_group

SPREAD_K: Final = 4.0
EXCESS_FLOOR_NS: Final = 50.0


def floor_excess_ns(fits: PairFits, n_hosts: int) -> F64:
    """Per pair: how far its delay floor stands above what its ends' other pairs show,
    beyond the pairs' own spread (0 for a pair no slower than expected)."""
    floors = fits.delay_floor_ns
    if len(floors) == 0:
        return np.zeros(0)
    ends = np.concatenate([fits.lo, fits.hi])
    typical = median_per_group(np.concatenate([floors, floors]), ends, n_hosts)
    expected = np.fmax(typical[fits.lo], typical[fits.hi])
    over = floors - expected
    spread = MAD_TO_SIGMA * float(np.median(np.abs(over - np.median(over))))
    allowed = max(SPREAD_K * spread, EXCESS_FLOOR_NS)
    return np.maximum(np.nan_to_num(over) - allowed, 0.0)


def weigh_floors(fits: PairFits, n_hosts: int) -> F64:
    """Add each pair's floor excess to its offset's sigma (in place); the excess."""
    excess = floor_excess_ns(fits, n_hosts)
    fits.sigma_offset_ns = np.sqrt(fits.sigma_offset_ns**2 + excess**2)
    return excess
