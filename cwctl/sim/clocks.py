"""The hosts' clocks: offset, drift and a slow random-walk wander, read vectorised.

Host h reads, at true time ``t`` (ns since the simulation's origin)::

    local_h(t) = t + offset_h + drift_h * t + wander_h(t)

``wander_h`` is a random walk sampled every ``wander_step_s`` and interpolated linearly;
it starts at 0 at the origin and grows on demand, so later windows continue the same
clocks (a rescan sees the drift accumulate). The grid before the current window is let
go (``forget_before``): a long session at 30 000 hosts would otherwise hold 60 MB more
for every 25.6 s simulated.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import F64
from cwctl.sim.params import SimParams

_WANDER_BLOCK = 256  # grid points generated at a time


class Clocks:
    def __init__(self, n_hosts: int, params: SimParams, seed_seq: np.random.SeedSequence) -> None:
        rng = np.random.default_rng(seed_seq.spawn(1)[0])
        self.offset_ns: F64 = rng.uniform(-params.offset_max_ns, params.offset_max_ns, n_hosts)
        self.drift_ppb: F64 = rng.normal(0.0, params.drift_sigma_ppb, n_hosts)
        self._step_ns = params.wander_step_s * 1e9
        self._sigma = params.wander_ns_per_sqrt_s * np.sqrt(params.wander_step_s)
        self._wander_seq = seed_seq.spawn(1)[0]
        self._blocks = 0
        self._grid: F64 = np.zeros((n_hosts, 1))
        self._first = 0  # the grid point ``_grid[:, 0]`` is (those before were let go)

    def _ensure(self, t_max_ns: float) -> None:
        need = int(t_max_ns // self._step_ns) + 2
        while self._first + self._grid.shape[1] < need:
            rng = np.random.default_rng(self._wander_seq.spawn(1)[0])
            steps = rng.normal(0.0, self._sigma, (self._grid.shape[0], _WANDER_BLOCK))
            block = self._grid[:, -1:] + np.cumsum(steps, axis=1)
            self._grid = np.concatenate([self._grid, block], axis=1)
            self._blocks += 1

    def forget_before(self, t_ns: float) -> None:
        """Let go of the wander grid before true time ``t_ns`` (keeping the point at or
        before it, and always the last point, which the next block continues from)."""
        drop = min(int(max(t_ns, 0.0) // self._step_ns) - self._first, self._grid.shape[1] - 1)
        if drop > 0:
            self._grid = self._grid[:, drop:].copy()
            self._first += drop

    def wander_ns(self, host: npt.NDArray[np.intp], t_ns: F64) -> F64:
        """The wander term of each host at each true time (both arrays alike in shape)."""
        if len(t_ns) == 0:
            return np.zeros(0)
        self._ensure(float(np.max(t_ns)))
        pos = np.maximum(t_ns, 0.0) / self._step_ns
        k = pos.astype(np.intp)
        frac = pos - k
        k -= self._first
        if self._first and int(k.min()) < 0:
            raise ValueError("the clocks' wander was let go before this time")
        grid = self._grid
        return grid[host, k] * (1.0 - frac) + grid[host, k + 1] * frac

    def read(self, host: npt.NDArray[np.intp], t_ns: F64, wander_ns: F64 | None = None) -> F64:
        """``local_h(t) - origin`` as float ns (add the epoch and round for a stamp).

        ``wander_ns`` may be given when already known: the wander moves well under 0.01 ns
        in the microseconds of one exchange, so the window evaluates it once per exchange.
        """
        if wander_ns is None:
            wander_ns = self.wander_ns(host, t_ns)
        return t_ns + self.offset_ns[host] + self.drift_ppb[host] * 1e-9 * t_ns + wander_ns

    def error_ns(self, t_ns: float) -> F64:
        """Every host's clock minus true time at one instant."""
        hosts = np.arange(len(self.offset_ns))
        t = np.full(len(hosts), float(t_ns))
        return self.read(hosts, t) - t
