"""Every number of the simulated fabric in one place (docs/simulator.md lists them).

``SimParams`` holds the probing schedule (as the agents run it) and the physics: clocks,
cables, switches, queues and timestamping. The defaults are the fabric ``make demo``
shows; tests shrink the fabric and switch single effects off.
"""

from __future__ import annotations

from dataclasses import dataclass

from cwctl import settings


@dataclass(frozen=True)
class SimParams:
    # probing, exactly as the agents do it (inventory [probe] section)
    rate: float = settings.PROBE_RATE  # coded pairs per second per peer
    peers: int = settings.PROBE_PEERS  # peers each host probes (K)
    ports: int = settings.PROBE_PORTS  # source ports each host probes from, round robin (P)
    base_port: int = 40000  # source ports are base_port + 0..P-1
    gap_ns: int = int(settings.PROBE_GAP_US * 1000)  # spacing of the two probes of a coded pair
    timestamps: str = settings.SIM_TIMESTAMPS  # hw (NIC stamps) | sw (kernel stamps)
    load: float = settings.SIM_LOAD  # mean utilisation of every queue, 0..1
    reply_loss_keeps_t2: bool = False  # the agent nulls t2, t3, t4 of any lost exchange
    answer_port: int = 50000  # the UDP port every agent answers probes on (fixed per scan)

    # routing: how switches hash flows over equal-cost next hops (cwctl/sim/ecmp.py)
    ecmp: str = "hidden"  # hidden (per-switch secret seeds, full 5-tuple) | documented

    # path discovery (cwctl/sim/discovery.py, docs/discovery.md): TTL-limited copies of
    # each flow's 5-tuple; switches answer under the Linux ICMP rate limits
    discovery: bool = True  # agents trace their flows and emit path records
    icmp_ratelimit_ms: float = 1000.0  # net.ipv4.icmp_ratelimit: per switch and destination
    icmp_burst: int = 6  # XRLIM_BURST_FACTOR: tokens a (switch, destination) bucket holds
    icmp_msgs_per_sec: float = 1000.0  # net.ipv4.icmp_msgs_per_sec: per switch, all answers
    icmp_msgs_burst: int = 50  # net.ipv4.icmp_msgs_burst
    trace_max_ttl: int = 8  # the highest TTL a trace sends when no hop answers

    # clocks: offset uniform in +-offset_max_ns, drift normal, random-walk wander
    offset_max_ns: float = 1_000_000.0
    drift_sigma_ppb: float = 20_000.0
    wander_ns_per_sqrt_s: float = 2.0
    wander_step_s: float = 0.1

    # cables and switches (per element, drawn once per seed)
    access_prop_ns: tuple[float, float] = (5.0, 25.0)  # host-leaf cables, 1-5 m
    fabric_prop_ns: tuple[float, float] = (50.0, 500.0)  # leaf-spine cables, 10-100 m
    leaf_latency_ns: tuple[float, float] = (350.0, 550.0)  # cut-through forwarding
    spine_latency_ns: tuple[float, float] = (450.0, 700.0)
    core_latency_ns: float = 2_000.0  # leaves with no common spine: a hidden core
    asymmetric_fraction: float = 0.1  # links with one slower direction
    asymmetry_ns: tuple[float, float] = (5.0, 60.0)

    # queues: busy with probability rho; wait ~ queue_base_ns * rho/(1-rho) * lognormal
    queue_base_ns: float = 800.0
    queue_sigma: float = 1.0  # lognormal shape of a busy queue's wait
    load_spread: float = 0.5  # per-queue utilisation factor uniform in 1 +- load_spread
    rho_max: float = 0.97
    burst_rate: float = 0.01  # P(burst) = burst_rate * rho per queue crossing
    burst_ns: float = 5_000.0  # Pareto scale of a burst
    burst_alpha: float = 1.5
    burst_cap_ns: float = 1_000_000.0

    # hosts: the time the agent takes to answer a probe
    turnaround_ns: float = 8_000.0
    turnaround_spread_ns: float = 4_000.0

    # timestamp noise
    hw_sigma_ns: float = 8.0
    hw_tx_delay_prob: float = 0.005
    hw_tx_delay_ns: float = 300.0  # mean of an exponential
    sw_rx_ns: float = 1_500.0  # kernel receive stamp: late by this median, lognormal
    sw_tx_ns: float = 2_000.0  # user-space send stamp: early by this median, lognormal
    sw_sigma: float = 0.5
    sw_tail_prob: float = 0.01
    sw_tail_ns: float = 20_000.0  # Pareto scale of the heavy tail

    # where the first window starts: ns since the epoch (2027-01-15), true time
    epoch_ns: int = 1_800_000_000_000_000_000
