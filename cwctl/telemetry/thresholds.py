"""Every threshold of the localiser and of the verdicts beside it, in one place.

One frozen ``Thresholds`` holds them; ``THRESHOLDS`` is the default every function takes
(``build_snapshot(..., thresholds=THRESHOLDS)`` passes it down). To try a knob, replace
one field: ``dataclasses.replace(THRESHOLDS, hot_link_ratio=6.0)``; ``CWCTL_BENCH_SENSITIVITY=1
python -m bench precision`` prints precision and recall of each main knob at x0.8, x1 and
x1.25. Each field says its unit, what it separates and, where the bench shows it, the
measured separation ("Measured": ``python -m bench precision`` over scans #0-#599, three
runs of 200 from ``CWCTL_BENCH_PRECISION_FIRST=0``, ``200`` and ``400``, unless it says
otherwise); docs/localisation.md has the table, the bench cases behind each figure and
what is known not to work.

Not here, because they are not thresholds: the normal distribution's constants
(``floors.LOW_QUANTILES_SIGMAS``, ``shifts.MEDIAN_SE``), a coded pair being one delay
trial (``localize.PROBES_PER_DELAY_TRIAL``), numerical tolerances (``evidence.EVEN_ODDS``),
the rate grids of the fit (``explain.py``), compute budgets (``elements.MAX_ROWS``, block
sizes) and the measured healthy clock uncertainty per budget
(``window.HEALTHY_UNCERTAINTY_NS``, which ``degraded_clocks`` multiplies).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """The localiser's knobs (module doc); units in the names where they have one."""

    # -- the delay signal: when a probe is delayed (counts.py, noise.py)
    delay_factor: float = 2.0
    """x the median route's p90 excess over its floor: a probe beyond is *delayed*."""
    noisy_floor_q: float = 0.1
    """Quantile: with kernel stamps a flow's floor is this quantile of its delays, not the
    minimum (a stamp taken the short way is a minority of a flow's probes)."""
    min_route_samples: int = 10
    """Delays: a route's p90 and spread count from this many."""
    max_extra_of_typical: float = 4.0
    """x the typical spread: the most of a host's own stamp tail held against it."""

    # -- voting: which flows are bad and pick the candidates (voting.py)
    bad_flow_p: float = 1e-3
    """Binomial tail at the background: a flow's failures under this make it *bad*."""
    vote_p: float = 1e-2
    """Binomial tail: a flow under this votes (picks candidates for the fit)..."""
    chance_voters: float = 100.0
    """Flows: ...or rarer, so that chance alone makes about this many voters (a 10 000-host
    scan's 800 000 delay flows would make 8 000 at ``vote_p``)."""

    # -- the explanation (explain.py, localize.py)
    min_gain_nats: float = 15.0
    """Nats of log-likelihood an element must add to be chosen (and to stay chosen)."""
    rate_over_background: float = 2.0
    """x the background: the least failure rate an element may be fitted at."""
    max_elements: int = 8
    """Elements one signal's explanation names at most."""
    tie_nats: float = 1.0
    """Nats: candidates within this of the chosen one's gain are its ties (alike)..."""
    tie_share: float = 1e-3
    """Share of the chosen one's gain: ...or within this share of it (large gains)."""
    second_look_ties: int = 2
    """Ties: an element chosen with this many ties or more (at 2: one of three alike) gets
    a second look, the explanation without any of them. Measured: without paths, two
    congested links on two leaves were "one of the four spines", the links alone 480-530
    nats likelier."""
    min_loss_rate: float = 0.004
    """Share of the exchanges crossing it: the least loss an element must add. Measured:
    a link losing 0.5 % is named top-1 (``python -m bench localize``)."""
    min_delay_rate: float = 0.10
    """Share of the delay trials crossing it: the least delay an element must add.
    Measured: a congested link, sw stamps, load 0.5, delays 10-12 %; the busiest healthy
    links at load 0.6 13-15 %, which the hot-link test (``hot_link_ratio``) separates."""
    one_trial_background: float = 0.02
    """Share: the most a one-trial signal's (raised floors') background may be."""
    unclocked_factor: float = 4.0
    """x the median host's clock uncertainty: beyond, a host's flows time nothing."""
    min_score: float = 0.02
    """Score (purity x coverage): a suspect under it adds nothing beside stronger ones."""

    # -- a spine over its links (hierarchy.py)
    spine_share: float = 0.5
    """Share of a link's excess its spine's other links must carry for the spine to be
    named instead..."""
    spine_p: float = 1e-6
    """Binomial tail: ...improbably at the background."""
    spread_factor: float = 3.0
    """x the quiet links' delayed share: a spine whose median link is delayed this often
    is congested at every egress... Measured: healthy spines any fit rated stood at most
    2.3 x; two congested spines of four at load 0.6 delayed 7-8 % each, under
    ``min_delay_rate``."""
    spread_quiet_quantile: float = 0.25
    """Quantile of the leaf-spine links' delayed shares: the quiet links."""
    spread_min_rate: float = 0.05
    """Share: ...and need only add this rate (not ``min_delay_rate``)."""
    min_link_trials: float = 20.0
    """Delay trials of known path: a link's share counts from this many."""

    # -- is a delay suspect material (material.py)
    delay_shift_of_floor: float = 0.2
    """Share of the median path's floor: the least a delay suspect (and an unexplained
    delayed flow) moves its flows' median excess."""
    hot_link_ratio: float = 5.5
    """x the typical link's median excess (both over the quiet links'): a congested link's
    flows wait this much longer. Measured: congested 6.2-58, healthy up to 6.1, the
    healthy links once named 2.1-4.9 (docs/localisation.md)."""
    hot_spine_ratio: float = 4.5
    """x the typical link's: the same for a spine (the median over its links). Measured:
    congested 5.8-69, the healthy spines once named 2.8-3.0."""
    hot_quiet_quantile: float = 0.1
    """Quantile of the links' median excess: what every path waits."""
    min_link_flows: int = 5
    """Flows of known path: a link's median excess counts from this many..."""
    min_links: int = 8
    """Links: ...and the typical link's from this many."""

    # -- raised floors and shifted floors: slow elements (floors.py, shifts.py)
    floor_sigmas: float = 5.0
    """Robust standard deviations of its kind's floors: a flow's floor beyond is raised."""
    floor_min_rate: float = 0.8
    """Share of the flows crossing it: the least a slow element must raise. Measured: a
    slow spine or host raises 99 % of its flows at 10 probes a flow."""
    min_floor_samples: int = 5
    """Delays: a flow's floor is judged from this many."""
    min_sigma_of_floor: float = 0.02
    """Share of the median floor: the least spread a kind's yardstick may have."""
    min_flows_per_kind: int = 20
    """Flows: fewer of a kind (within a leaf, across leaves) give no yardstick."""
    min_shift_of_floor: float = 0.35
    """Share of the yardstick floor: the least a slow element raises its flows' floors.
    Measured: a spine carrying a rerouted one's flows stood 0.3 up, slow spines' flows
    2.0-2.6 up (without paths)."""
    raised_of_material: float = 0.5
    """Share of ``min_shift_of_floor``: a flow raised by less is no failure. Measured: two
    leaves' switches ~90 ns slower raised their flows 4-8 % of the floor, and hid a slow
    spine before this rule."""
    min_shift_flows: int = 10
    """Flows certainly crossing it: an element's shift is judged from this many."""
    shift_sigmas: float = 8.0
    """Standard errors: the least significance of a shift. Measured: a host 3 us slow,
    sw stamps, load 0.6, stood about 100 standard errors up."""
    max_shifted: int = 4
    """Elements the shift test names at most."""

    # -- unexplained flows: unlocalised loss, delay and floors (localize.py, verdicts.py)
    material_delay_share: float = 0.12
    """Share of its probes: an unexplained flow delayed this often is material..."""
    material_delay_p: float = 1e-6
    """Binomial tail at the background: ...and this improbably..."""
    min_delay_samples: int = 50
    """Delays: ...over this many."""
    min_raised_flows: int = 3
    """Flows: unexplained raised floors count from this many..."""
    floor_unlocalised_ratio: float = 2.0
    """x its limit: ...each raised this far beyond it (real floors wander with load)..."""
    floor_queued_factor: float = 2.0
    """x its kind's median flow's wait: ...and not held up by a queue waiting longer.
    Measured: same-leaf flows behind a busy access queue waited 3-6 x their kind's."""
    pair_side_ratio: float = 0.5
    """Ratio of delayed shares: one probe of a coded pair delayed this much less often
    than the other..."""
    pair_side_z: float = 4.0
    """Standard errors: ...and improbably so, is the probing's doing, no queue's."""
    min_side_samples: int = 20
    """Delays on each side: the pair-side test applies from this many."""
    min_dead_exchanges: int = 20
    """Exchanges: a host tried this often that answered none is dead."""

    # -- the window's own verdict (window.py)
    few_pairs_per_peer: int = 8
    """Coded pairs per peer in a window: fewer, and the verdict is inconclusive."""
    sensitivity_loss: float = 0.02
    """Share: the documented sensitivity, an element losing this much..."""
    min_expected_losses: float = 6.0
    """Exchanges: ...would lose at least this many of those crossing it."""
    absolute_queue_ns: float = 1_000_000.0
    """ns over the fabric's median floor: a path's median delay beyond is a finding..."""
    absolute_queue_of_floor: float = 100.0
    """x the median floor: ...when also this many floors."""
    degraded_clocks: float = 4.0
    """x the budget's healthy clock uncertainty (p99): beyond, the window is inconclusive.
    Measured: beside a dead spine a watch window's clocks stood at 30-76 us (issue 36)."""

    @property
    def min_element_exchanges(self) -> int:
        """Exchanges an element must be crossed by for the window to vouch for it."""
        return int(self.min_expected_losses / self.sensitivity_loss)


THRESHOLDS = Thresholds()
