"""Fault localisation: which switch, link, NIC or host explains the bad flows.

``localise`` runs ``STAGES`` in order over one ``Localisation``; each stage's
docstring says, in its first line, what it adds or removes and why. docs/localisation.md
explains the three signals, the stages and every knob (``Thresholds``,
``thresholds.py``), with the bench figures that set them.

loss   per exchange flow (prober, peer, source port, NIC): agents cannot tell a lost
       probe from a lost reply, so a trial is a round trip and crosses the elements of
       both directions (an element crossed both ways counts twice).
delay  per directed flow (one 5-tuple, one way: one route): a probe is delayed when its
       one-way delay exceeds its route's floor by more than ``delay_factor`` times the
       median route's p90 excess.
floor  per directed flow, one trial: its floor raised above its kind's (a ``slow``
       element adds a fixed delay no probe-over-floor test can see).

Each signal is localised by 007's voting and a sparse likelihood explanation
(``signals.py``); then fix-up stages drop what is not material, put spines in their
links' place and add slow elements found by their flows' shifted floors; then the
chosen elements are scored and worded (``evidence.py``) and ranked. Bad flows nothing
explains are ``unexplained`` (``unexplained.py``; the snapshot's ``unlocalised``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from cwctl.fabric.topology import Topology
from cwctl.records.path import PathRecord
from cwctl.runtime.arrays import F64, B
from cwctl.runtime.blockpool import map_blocks
from cwctl.scan.snapshot import Suspect
from cwctl.telemetry import material, shifts
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.elements import Incidence
from cwctl.telemetry.evidence import (
    SignalResult,
    alike_ids,
    is_fabric,
    score_and_words,
    suspect_of,
    twin_ids,
)
from cwctl.telemetry.floors import floor_trials, same_leaf
from cwctl.telemetry.hierarchy import spread_spines
from cwctl.telemetry.routes import PathAges
from cwctl.telemetry.signals import localise_signal, signal_rows, spines_over_links
from cwctl.telemetry.thresholds import THRESHOLDS, Thresholds
from cwctl.telemetry.verdicts import queue_held

# A coded pair's two probes leave 20 us apart and meet the same queues: as evidence of
# delay they are one trial, not two (counted as two, chance queueing on a flow of a few
# pairs looks significant, and a healthy fabric grows spurious delay suspects). Not a
# threshold: what a trial is.
PROBES_PER_DELAY_TRIAL = 2.0


@dataclass
class Localisation:
    """What the stages share: the counts and rows in, each signal's result, the suspects
    out. ``timed``: the delay flows no unclocked host sends or receives."""

    counts: FlowCounts
    loss_rows: Incidence
    delay_rows: Incidence
    leaf_of: dict[str, str]
    timed: B
    thresholds: Thresholds
    loss: SignalResult | None = None
    delay: SignalResult | None = None
    floor: SignalResult | None = None
    kept_floor: SignalResult | None = None  # the floor result as it counts (``keep_floors``)
    floor_ratio: F64 | None = None  # per flow, its floor's raise over its limit
    shifted: list[shifts.Shift] = field(default_factory=list)
    found: dict[int, tuple[float, float, str]] = field(default_factory=dict)  # score, gain, words
    ties: dict[int, set[int]] = field(default_factory=dict)
    suspects: list[Suspect] = field(default_factory=list)

    @property
    def results(self) -> list[SignalResult]:
        """Each signal's result, loss first: loss, delay, the floors as they count."""
        return [r for r in (self.loss, self.delay, self.kept_floor) if r is not None]


def localise_loss(s: Localisation) -> None:
    """Adds the loss fit: the fewest elements whose loss explains the lossy exchanges.

    Exchanges that lost improbably many probes vote (007); the explanation chooses among
    the voted elements (``signals.py``)."""
    c = s.counts
    t = s.thresholds
    s.loss = localise_signal(s.loss_rows, c.sent, c.lost, "loss", t.min_loss_rate, t)


def loss_spines_over_links(s: Localisation) -> None:
    """Swaps a lossy link for its spine when the spine's other links lose as much too.

    A dead or lossy spine shows first on one link (``hierarchy.py``)."""
    if s.loss is not None:
        spines_over_links(s.loss, s.thresholds)


def localise_delay(s: Localisation) -> None:
    """Adds the delay fit over the timed flows: a clock in doubt would read as a queue.

    A coded pair is one trial; a spine delaying through all of its links need add less,
    as load alone busies a few links (``spread_spines``)."""
    c, t = s.counts, s.thresholds
    if not (c.samples[s.timed].sum() > 0 and np.isfinite(c.threshold_ns)):
        return
    per = PROBES_PER_DELAY_TRIAL
    samples = np.where(s.timed, c.samples, 0.0)
    least = np.full(len(s.delay_rows.names), t.min_delay_rate)
    least[spread_spines(s.delay_rows, samples, c.delayed, t)] = t.spread_min_rate
    s.delay = localise_signal(
        s.delay_rows, samples / per, c.delayed / per, "delay", t.min_delay_rate, t,
        own_floor=True, least=least,
    )  # fmt: skip


def drop_immaterial_delays(s: Localisation) -> None:
    """Removes delay suspects no busier than healthy queues under load: no fault.

    A suspect must move its flows' median, and a link or spine wait far longer than the
    typical link (``material.py``)."""
    if s.delay is not None:
        material.drop_immaterial_delays(s.delay, s.counts, s.thresholds)


def delay_spines_over_links(s: Localisation) -> None:
    """Swaps a delaying link for its spine: a congested spine queues at every egress.

    Each of its links is a little busier than the next; when the spine's other links
    delay as much, the spine is named (``hierarchy.py``)."""
    if s.delay is not None:
        spines_over_links(s.delay, s.thresholds)


def _queued(delay: SignalResult) -> B:
    """Flows whose minimum delay says nothing of a ``slow`` element: significantly
    delayed ones, and those crossing a delay suspect. A flow of a few probes that all
    queued (a congested switch's) has its floor raised by the queue; with hundreds of
    probes one of them finds the queue empty, with ten none may."""
    queued = delay.bad.copy()
    if delay.fit.rates:
        chosen = list(delay.fit.rates)
        queued |= delay.crossed.columns(chosen).max(axis=1) > 0.5
    return queued


def localise_floors(s: Localisation) -> None:
    """Adds the floor fit: a slow element raises floors, which no probe-over-floor sees.

    Over timed flows that did not queue: a queue that held all of a flow's few probes
    raises its floor too."""
    if s.delay is None:
        return
    t = s.thresholds
    trials, raised, s.floor_ratio = floor_trials(s.counts, s.leaf_of, t)
    trials[_queued(s.delay) | ~s.timed] = 0.0  # a queue's floor, or a clock's error
    if trials.sum() > 0:
        s.floor = localise_signal(
            s.delay_rows, trials, raised, "floor", t.floor_min_rate, t, one_trial=True
        )


def drop_immaterial_floors(s: Localisation) -> None:
    """Removes floor suspects raised too little: a busier part, longer cables, not slow.

    Their flows' floors must stand ``min_shift_of_floor`` up (``shifts.py``)."""
    if s.floor is not None:
        shifts.drop_immaterial_floors(s.floor, s.counts, s.leaf_of, s.thresholds)


def keep_floors(s: Localisation) -> None:
    """Adds the floor result; only clear, unqueued raises count as unlocalised.

    Real floors wander with CPU load, and a queue a flow met all the time holds its
    minimum up (``verdicts.py``)."""
    if s.floor is None or s.floor_ratio is None:
        return
    t = s.thresholds
    c = s.counts
    clear = np.nan_to_num(s.floor_ratio) >= t.floor_unlocalised_ratio
    clear &= ~queue_held(c.excess_p50_ns, same_leaf(c.flows, s.leaf_of), t)
    s.kept_floor = dataclasses.replace(s.floor, material=clear)


def find_shifted(s: Localisation) -> None:
    """Adds slow elements whose flows' floors stand shifted together, each by a little.

    Slower by less than single floors spread, but on every flow through them
    (``shifts.py``)."""
    if s.delay is None:
        return
    usable = s.timed & ~_queued(s.delay)
    s.shifted = shifts.shifted_elements(s.counts, s.leaf_of, s.delay_rows, usable, s.thresholds)


def name_chosen(s: Localisation) -> None:
    """Adds the chosen elements, scored and worded, with those the data cannot tell apart.

    Twins, ties and elements alike make one candidate set (``evidence.py``)."""
    scored = {
        (i, e): score_and_words(res, e, list(res.fit.rates), s.counts)
        for i, res in enumerate(s.results)
        for e in res.fit.rates
    }
    # named by a signal on its own; one whose flows all cross a stronger one is not (it
    # scores nothing) and may be in that one's set: two lossy links of a leaf, paths unknown
    named = {e for (_, e), (score, _) in scored.items() if score >= s.thresholds.min_score}
    for i, res in enumerate(s.results):
        for e in res.fit.rates:
            score, words = scored[(i, e)]
            gain = res.fit.gains.get(e, 0.0)
            s.ties.setdefault(e, set()).update(_alike(res, e, named))
            if e in s.found:
                s0, g0, w0 = s.found[e]
                s.found[e] = (max(s0, score), max(g0, gain), f"{w0}; {words}")
            else:
                s.found[e] = (score, gain, words)


def _alike(res: SignalResult, e: int, named: set[int]) -> set[int]:
    """The elements one suspect's set holds beside ``e``: structural twins that are
    switches or links (crossed by exactly the same flows: a 2-leaf fabric's spine and
    its two links; a one-NIC host and its NIC are said in the words, the host named),
    and those the fit could not tell it from, or whose flows' paths are all unknown
    alike; not those any signal chose on their own: two spines down are both needed."""
    inc, usable = res.incidence, res.trials > 0
    twins = set(twin_ids(inc, e, usable))
    fabric = {j for j in twins if is_fabric(inc, j) and is_fabric(inc, e)}
    either = (set(res.fit.ties.get(e, ())) - twins) | set(alike_ids(inc, e, usable))
    return (either - named) | fabric


def name_shifted(s: Localisation) -> None:
    """Adds the shifted-floor elements to those named, their words beside any signal's."""
    inc = s.loss_rows
    for sh in s.shifted:
        e, words = sh.element, sh.words(inc, s.counts.floor_ns)
        s0, g0, w0 = s.found.get(e, (0.0, 0.0, ""))
        s.found[e] = (max(s0, sh.score()), max(g0, sh.z), f"{w0}; {words}" if w0 else words)
        s.ties.setdefault(e, set())


def rank(s: Localisation) -> None:
    """Keeps suspects scoring ``min_score``, strongest first: weaker ones add nothing.

    A suspect whose bad flows all cross stronger ones scores nothing; one entry per set."""
    inc, found = s.loss_rows, s.found
    order = sorted(
        (e for e in found if found[e][0] >= s.thresholds.min_score),
        key=lambda e: (-found[e][0], -found[e][1], inc.names[e]),
    )
    for e in order:  # one entry per set: two slow spines, paths unknown, are one set twice
        suspect = suspect_of(inc, e, found[e], sorted(s.ties.get(e, ())))
        if all(suspect.element != other.element for other in s.suspects):
            s.suspects.append(suspect)


Stage = Callable[[Localisation], None]


class SideBySide:
    """One stage of ``chains`` (each stages in order) worked side by side on two cores
    (``runtime.blockpool.map_blocks``; one after another on one): each chain reads what
    the stages before this one wrote, and none reads what another chain writes."""

    def __init__(self, *chains: tuple[Stage, ...]) -> None:
        self.chains = chains
        self.__name__ = " | ".join("+".join(st.__name__ for st in c) for c in chains)

    def __call__(self, s: Localisation) -> None:
        def run(chain: tuple[Stage, ...]) -> None:
            for stage in chain:
                stage(s)

        map_blocks(run, self.chains)


STAGES: tuple[Stage, ...] = (
    # the loss fit and the delay fit read the counts and their rows, neither the other
    SideBySide(
        (localise_loss, loss_spines_over_links),
        (localise_delay, drop_immaterial_delays, delay_spines_over_links),
    ),
    # the floors' fit and the shifted floors both read the delay fit, neither the other
    SideBySide((localise_floors, drop_immaterial_floors, keep_floors), (find_shifted,)),
    name_chosen,
    name_shifted,
    rank,
)


def localise(
    counts: FlowCounts,
    topology: Topology | None,
    host_nics: Mapping[str, Sequence[str]] | None = None,
    path_records: Iterable[PathRecord] = (),
    unclocked: Iterable[str] = (),
    *,
    now_ns: int | None = None,
    ages: PathAges | None = None,
    thresholds: Thresholds = THRESHOLDS,
    rows: tuple[Incidence, Incidence] | None = None,
) -> tuple[list[Suspect], Incidence, list[SignalResult]]:
    """Suspects from every signal, strongest first (one entry per element), the loss rows
    and each signal's result, by ``STAGES`` in turn. The flows of ``unclocked`` hosts
    (``unclocked_hosts``) are no evidence of delay or floors; path records older than
    ``PATH_MAX_AGE_S`` before ``now_ns`` none of paths (``ages`` counts them,
    ``routes.py``). ``rows``: the loss and delay rows, made already (``signal_rows``
    over the same arguments), the path records then unread."""
    loss_rows, delay_rows = rows or signal_rows(
        counts, topology, host_nics or {}, path_records, now_ns, ages
    )
    f = counts.flows
    doubt = np.flatnonzero(np.isin(np.asarray(f.hosts, dtype=object), list(unclocked)))
    timed = ~(np.isin(f.src, doubt) | np.isin(f.dst, doubt))
    leaf_of = dict(topology.leaf_of) if topology is not None else {}
    s = Localisation(counts, loss_rows, delay_rows, leaf_of, timed, thresholds)
    for stage in STAGES:
        stage(s)
    return s.suspects, loss_rows, s.results


def unclocked_hosts(
    hosts: Sequence[str], uncertainty_ns: F64, thresholds: Thresholds = THRESHOLDS
) -> list[str]:
    """Hosts whose clock the solver knows ``unclocked_factor`` times worse than the
    median host's: a few probes through a congested switch can leave one host's drift
    hundreds of ppb off (microseconds over the window), and its every flow would read
    as delayed, or its floors raised, by the clock alone."""
    u = np.asarray(uncertainty_ns, np.float64)
    finite = np.isfinite(u) & (u > 0)
    if not finite.any():
        return []
    limit = thresholds.unclocked_factor * float(np.median(u[finite]))
    return [h for h, x in zip(hosts, u, strict=True) if np.isfinite(x) and x > limit]


def gpu_suspects(verdicts: Mapping[str, tuple[str | None, str | None]]) -> list[Suspect]:
    """A host whose GPU verdict is ``fail`` is a suspect of kind host, its reason the evidence."""
    return [
        Suspect(element=host, kind="host", score=1.0, evidence=f"GPU: {reason or 'failed'}")
        for host, (verdict, reason) in sorted(verdicts.items())
        if verdict == "fail"
    ]
