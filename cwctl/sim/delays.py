"""Delays of the simulated fabric: fixed per element, random per probe.

Fixed (drawn once per seed): each cable's propagation, each switch's forwarding
latency, a one-direction extra on a fraction of the links (cable, slow port), and each
queue's share of the load. Random (drawn per probe, vectorised): queueing at every
egress a probe crosses, heavy tailed, and the timestamping error of each of the four
stamps (``hw``: NIC-like; ``sw``: kernel-like).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import F64
from cwctl.sim.fabric import HIDDEN_LEAF, Fabric
from cwctl.sim.params import SimParams


@dataclass
class FixedDelays:
    """Per queue (link direction): propagation incl. asymmetry, load factor; per switch: latency."""

    queue_prop_ns: F64  # cable propagation of each link direction, asymmetry included
    queue_load_factor: F64  # this queue's utilisation is load * factor
    leaf_latency_ns: F64
    spine_latency_ns: F64


def draw_fixed(fabric: Fabric, params: SimParams, rng: np.random.Generator) -> FixedDelays:
    n_access = fabric.n_nics
    n_fabric = fabric.n_leaves * fabric.n_spines
    access = rng.uniform(*params.access_prop_ns, n_access)
    trunk = rng.uniform(*params.fabric_prop_ns, n_fabric)
    prop = np.empty(fabric.n_queues)
    prop[0 : 2 * n_access : 2] = access  # both directions share the cable
    prop[1 : 2 * n_access : 2] = access
    prop[2 * n_access :: 2] = trunk
    prop[2 * n_access + 1 :: 2] = trunk
    # a fraction of the links is slower one way: which direction is a coin flip
    n_links = n_access + n_fabric
    asym = rng.random(n_links) < params.asymmetric_fraction
    extra = rng.uniform(*params.asymmetry_ns, n_links) * asym
    way = rng.integers(0, 2, n_links)
    prop[2 * np.arange(n_links) + way] += extra
    factor = rng.uniform(1.0 - params.load_spread, 1.0 + params.load_spread, fabric.n_queues)
    leaf = rng.uniform(*params.leaf_latency_ns, fabric.n_leaves)
    if fabric.leaves and fabric.leaves[-1] == HIDDEN_LEAF:
        leaf[-1] = params.core_latency_ns / 2
    spine = rng.uniform(*params.spine_latency_ns, fabric.n_spines)
    return FixedDelays(prop, factor, leaf, spine)


def queue_rho(load: float, factor: F64, params: SimParams) -> F64:
    return np.clip(load * factor, 0.0, params.rho_max)


def sample_queueing(rho: F64, params: SimParams, rng: np.random.Generator) -> F64:
    """Waiting time at one egress per probe: 0 with probability 1 - rho, else heavy tailed."""
    n = len(rho)
    wait = np.zeros(n)
    busy = np.flatnonzero(rng.random(n, dtype=np.float32) < rho)
    if len(busy):
        r = rho[busy].astype(np.float64)
        mean = params.queue_base_ns * r / (1.0 - r)
        sigma = params.queue_sigma
        wait[busy] = mean * rng.lognormal(-0.5 * sigma * sigma, sigma, len(busy))
        burst = busy[rng.random(len(busy)) < params.burst_rate]
        if len(burst):
            pareto = (rng.pareto(params.burst_alpha, len(burst)) + 1.0) * params.burst_ns
            wait[burst] += np.minimum(pareto, params.burst_cap_ns)
    return wait


def stamp_error(
    n: int, tx: bool, kind: str, params: SimParams, rng: np.random.Generator
) -> npt.NDArray[np.floating]:
    """What a stamp reads minus the true wire time (ns, float32), per stamp.

    ``hw``: Gaussian ``hw_sigma_ns``; now and then a packet leaves the NIC an exponential
    ``hw_tx_delay_ns`` after its TX stamp was taken (the stamp is early: queued in the
    NIC). ``sw``: a receive stamp is late (interrupt, softirq), a send stamp early (the
    kernel stamps before the NIC has sent it), both lognormal with a Pareto tail.
    """
    if kind == "hw":
        err = rng.standard_normal(n, dtype=np.float32) * np.float32(params.hw_sigma_ns)
        if tx:
            late = np.flatnonzero(rng.random(n, dtype=np.float32) < params.hw_tx_delay_prob)
            err[late] -= rng.exponential(params.hw_tx_delay_ns, len(late))
        return err
    median = params.sw_tx_ns if tx else params.sw_rx_ns
    normal = rng.standard_normal(n, dtype=np.float32)
    lag = np.exp(normal * np.float32(params.sw_sigma)) * np.float32(median)  # lognormal
    tail = np.flatnonzero(rng.random(n, dtype=np.float32) < params.sw_tail_prob)
    lag[tail] += np.minimum((rng.pareto(1.5, len(tail)) + 1.0) * params.sw_tail_ns, 1e6)
    return -lag if tx else lag
