"""Fault localisation: which switch, link, NIC or host explains the bad flows.

Three signals, localised separately (their counts: ``counts.py``, ``floors.py``):

loss   per exchange flow (prober, peer, source port, NIC): agents cannot tell a lost
       probe from a lost reply, so a trial is a round trip and crosses the elements of
       both directions (an element crossed both ways counts twice).
delay  per directed flow (one 5-tuple, one way: one route): a probe is delayed when its
       one-way delay exceeds its route's floor by more than ``DELAY_FACTOR`` times the
       median route's p90 excess.
floor  per directed flow, one trial: its floor raised above its kind's (a ``slow``
       element adds a fixed delay no probe-over-floor test can see).

What each flow crossed comes from its discovered path where a path record names its
spine, else from what is certain plus one alternative per equal-cost spine
(``elements.py``, ``routes.py``): nothing here knows any switch's hash. Then, as in 007,
every significantly bad flow gives 1/h votes to each of its h elements (a delay flow
too thin to be, that failed, to its switches and links), and, as in NetBouncer, a sparse
likelihood explanation (``explain.py``, a mixture over the alternatives of flows whose
paths are unknown) picks among the voted elements the fewest whose rates explain them.
Elements the data cannot tell apart become one suspect with ``candidates``, scored and
worded in ``evidence.py``; bad flows nothing explains are ``unexplained`` (the
snapshot's ``unlocalised``, ``verdicts.py``).

Thresholds are the fabric's own: the background failure rate is the median flow's, a
flow is bad when its failures are improbable under it, an element must fail a material
share of what crosses it (``MIN_LOSS_RATE``, ``MIN_DELAY_RATE``, ``FLOOR_MIN_RATE``, and
for delay a shift of its flows' median of ``DELAY_SHIFT_OF_FLOOR`` of the typical
floor and, for a link or spine, a median far above the typical link's: ``material.py``).
A healthy fabric yields no suspect because nothing passes both the likelihood test and
those sizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from cwctl.records.path import PathRecord
from cwctl.snapshot import Suspect
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.elements import Incidence, incidences
from cwctl.telemetry.evidence import (
    SignalResult,
    alike_ids,
    is_fabric,
    score_and_words,
    suspect_of,
    twin_ids,
)
from cwctl.telemetry.explain import explain, posterior
from cwctl.telemetry.floors import FLOOR_MIN_RATE, floor_trials, same_leaf
from cwctl.telemetry.hierarchy import SPREAD_MIN_RATE, spine_rate_instead, spread_spines
from cwctl.telemetry.material import DELAY_SHIFT_OF_FLOOR, drop_immaterial_delays
from cwctl.telemetry.routes import PathAges, known_spines, route_index
from cwctl.telemetry.shifts import Shift, drop_immaterial_floors, shifted_elements
from cwctl.telemetry.verdicts import (
    FLOOR_UNLOCALISED_RATIO,
    MIN_DELAY_SAMPLES,
    MIN_RAISED_FLOWS,
    pair_sided,
    queue_held,
)
from cwctl.telemetry.voting import (
    BAD_FLOW_P,
    CHANCE_VOTERS,
    VOTE_P,
    background,
    bad_flows,
    cast_votes,
    thin_flows,
)
from cwctl.topology import Topology
from cwctl.units import fmt_ns

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

MIN_GAIN_NATS = 15.0  # log-likelihood an element must add to the explanation
MIN_SCORE = 0.02  # a suspect whose bad flows all cross stronger suspects adds nothing
MIN_LOSS_RATE = 0.004  # an element must drop at least this share of what crosses it
MIN_DELAY_RATE = 0.10  # ...or delay at least this share beyond the threshold
MATERIAL_DELAY_SHARE = 0.12  # an unexplained flow's share delayed beyond the threshold
# A coded pair's two probes leave 20 us apart and meet the same queues: as evidence of
# delay they are one trial, not two (counted as two, chance queueing on a flow of a few
# pairs looks significant, and a healthy fabric grows spurious delay suspects).
PROBES_PER_DELAY_TRIAL = 2.0
ONE_TRIAL_BACKGROUND = 0.02  # the most a one-trial signal's background may be (floors)
UNCLOCKED_FACTOR = 4.0  # a clock this many times less certain than the median: no timing


def _incidences(
    counts: FlowCounts,
    topology: Topology | None,
    host_nics: Mapping[str, Sequence[str]],
    path_records: Iterable[PathRecord] = (),
    now_ns: int | None = None,
    ages: PathAges | None = None,
) -> tuple[Incidence, Incidence]:
    """The loss rows (exchanges: both directions) and the delay rows, over one set of
    element names, each direction on its discovered spine where a path record names one."""
    x, f = counts.exchanges, counts.flows
    known = None
    if topology is not None:
        spines = topology.spines
        index = route_index(
            path_records, topology.switch_of_address, spines, now_ns=now_ns, ages=ages
        )
        if index:
            nx = len(x)
            known = (
                known_spines(x.hosts, x.nics, x.src, x.dst, x.sport, x.nic, np.zeros(nx, bool),
                             index, spines),
                known_spines(x.hosts, x.nics, x.dst, x.src, x.sport, x.nic, np.ones(nx, bool),
                             index, spines),
                known_spines(f.hosts, f.nics, f.src, f.dst, f.sport, f.nic, f.reverse, index,
                             spines),
            )  # fmt: skip
    return incidences(x, f, topology, host_nics, known)


def _localise_signal(
    inc: Incidence,
    trials: F64,
    failures: F64,
    signal: str,
    min_rate: float,
    *,
    one_trial: bool = False,
    own_floor: bool = False,
    least: F64 | None = None,
) -> SignalResult:
    """One signal's explanation. With ``one_trial`` each flow is a single trial whose
    failure is already a significant finding (a raised floor): every failed flow votes.
    With ``own_floor`` (delay) thin flows (``thin_flows``) vote for switches and links.
    ``least``: per element, the rate it must add, where not ``min_rate``."""
    usable = trials > 0
    # a background as high as a fault's own rate would hide every fault: it is no background
    b0 = min(background(trials[usable], failures[usable]), min_rate)
    if one_trial:
        # a single trial is never significant alone, so the background cannot be told from
        # the fault's own flows (a slow spine raises a quarter of the floors, and that
        # quarter as background hid it): a raised floor is rare by chance
        b0 = min(b0, ONE_TRIAL_BACKGROUND)
    # 1 % of a 10 000-host scan's 800 000 delay flows is 8 000 voters by chance alone,
    # each element they touch a candidate the explanation must weigh, and some chosen
    vote_p = min(VOTE_P, CHANCE_VOTERS / max(1, int(usable.sum())))
    voting = failures > 0 if one_trial else bad_flows(trials, failures, b0, vote_p)
    votes = cast_votes(inc, voting & usable)
    if own_floor:
        # thin flows vote for switches and links, not hosts or NICs: a host's clock, fitted
        # loosest in a thin window, delays both ways of all its flows over their floors
        # alike; a switch carries many hosts' flows, whose clocks' errors do not add up
        lone = thin_flows(trials, b0, vote_p) & (failures > 0) & usable
        fabric = np.array([is_fabric(inc, e) for e in range(len(inc.names))], bool)
        votes += np.where(fabric, cast_votes(inc, lone), 0.0)
    fit = explain(
        inc.rows,
        np.where(usable, trials, 0.0),
        np.where(usable, failures, 0.0),
        candidates=votes > 0,
        min_gain=MIN_GAIN_NATS,
        min_rate=min_rate if least is None else least,
        background=b0 if one_trial else None,
    )
    bad = (failures > 0 if one_trial else bad_flows(trials, failures, fit.background)) & usable
    thin: npt.NDArray[np.bool_] | None = None
    if own_floor:
        thin = thin_flows(trials, fit.background, BAD_FLOW_P) & (failures > 0) & usable & ~bad
    n, k = np.where(usable, trials, 0.0), np.where(usable, failures, 0.0)
    crossed = posterior(fit, inc.rows, n, k)
    votes = cast_votes(inc, bad)
    return SignalResult(signal, inc, fit, bad, votes, trials, failures, crossed, thin=thin)


def _spines_over_links(res: SignalResult) -> None:
    """A chosen link whose spine's other links carry its excess too is its spine
    (``hierarchy.py``): the spine takes its place in the fit."""
    fit = res.fit
    chosen = list(fit.rates)
    if not chosen:
        return
    likely = res.crossed.tocsc()[:, chosen].toarray() > 0.5
    for i, e in enumerate(chosen):
        elsewhere = np.delete(likely, i, axis=1).any(axis=1)
        spine = spine_rate_instead(
            res.incidence, e, res.trials, res.failures, fit.background, elsewhere
        )
        if spine is not None and spine not in fit.rates:
            fit.rates[spine] = fit.rates.pop(e)
            fit.gains[spine] = fit.gains.pop(e, 0.0)
            fit.ties[spine] = [t for t in fit.ties.pop(e, []) if t != spine]


def unclocked_hosts(hosts: Sequence[str], uncertainty_ns: F64) -> list[str]:
    """Hosts whose clock the solver knows ``UNCLOCKED_FACTOR`` times worse than the
    median host's: a few probes through a congested switch can leave one host's drift
    hundreds of ppb off (microseconds over the window), and its every flow would read
    as delayed, or its floors raised, by the clock alone."""
    u = np.asarray(uncertainty_ns, np.float64)
    finite = np.isfinite(u) & (u > 0)
    if not finite.any():
        return []
    limit = UNCLOCKED_FACTOR * float(np.median(u[finite]))
    return [h for h, x in zip(hosts, u, strict=True) if np.isfinite(x) and x > limit]


def _queued(delay: SignalResult) -> npt.NDArray[np.bool_]:
    """Flows whose minimum delay says nothing of a ``slow`` element: significantly
    delayed ones, and those crossing a delay suspect. A flow of a few probes that all
    queued (a congested switch's) has its floor raised by the queue; with hundreds of
    probes one of them finds the queue empty, with ten none may."""
    queued = delay.bad.copy()
    if delay.fit.rates:
        chosen = list(delay.fit.rates)
        queued |= np.asarray(delay.crossed[:, chosen].max(axis=1).toarray()).ravel() > 0.5
    return queued


def localise(
    counts: FlowCounts,
    topology: Topology | None,
    host_nics: Mapping[str, Sequence[str]] | None = None,
    path_records: Iterable[PathRecord] = (),
    unclocked: Iterable[str] = (),
    *,
    now_ns: int | None = None,
    ages: PathAges | None = None,
) -> tuple[list[Suspect], Incidence, list[SignalResult]]:
    """Suspects from both signals, strongest first (one entry per element). The flows
    of ``unclocked`` hosts (``unclocked_hosts``) are no evidence of delay or floors; path
    records older than ``PATH_MAX_AGE_S`` before ``now_ns`` none of paths (``ages``
    counts them, ``routes.py``)."""
    loss_inc, delay_inc = _incidences(counts, topology, host_nics or {}, path_records, now_ns, ages)
    inc = loss_inc
    results = [_localise_signal(loss_inc, counts.sent, counts.lost, "loss", MIN_LOSS_RATE)]
    _spines_over_links(results[0])
    shifted: list[Shift] = []
    f = counts.flows
    doubt = np.flatnonzero(np.isin(np.asarray(f.hosts, dtype=object), list(unclocked)))
    timed = ~(np.isin(f.src, doubt) | np.isin(f.dst, doubt))
    if counts.samples[timed].sum() > 0 and np.isfinite(counts.threshold_ns):
        per = PROBES_PER_DELAY_TRIAL
        samples = np.where(timed, counts.samples, 0.0)
        # a spine delaying through all of its links, not a few, is congested at a lower
        # rate: load alone makes a few links busy (hierarchy.py)
        least = np.full(len(delay_inc.names), MIN_DELAY_RATE)
        least[spread_spines(delay_inc, samples, counts.delayed)] = SPREAD_MIN_RATE
        delay = _localise_signal(
            delay_inc, samples / per, counts.delayed / per, "delay", MIN_DELAY_RATE,
            own_floor=True, least=least,
        )  # fmt: skip
        drop_immaterial_delays(delay, counts)
        _spines_over_links(delay)
        results.append(delay)
        leaf_of = dict(topology.leaf_of) if topology is not None else {}
        trials, raised, ratio = floor_trials(counts, leaf_of)
        trials[_queued(delay) | ~timed] = 0.0  # a queue's floor, or a clock's error
        if trials.sum() > 0:
            floor = _localise_signal(
                delay_inc, trials, raised, "floor", FLOOR_MIN_RATE, one_trial=True
            )
            drop_immaterial_floors(floor, counts, leaf_of)
            # unlocalised only when clearly raised (real floors wander with CPU load), and
            # not held up by a queue its flow met all the time (verdicts.py)
            material = np.nan_to_num(ratio) >= FLOOR_UNLOCALISED_RATIO
            material &= ~queue_held(counts.excess_p50_ns, same_leaf(counts.flows, leaf_of))
            results.append(dataclasses.replace(floor, material=material))
        shifted = shifted_elements(counts, leaf_of, delay_inc, timed & ~_queued(delay))
    found: dict[int, tuple[float, float, str]] = {}  # element -> (score, gain, evidence)
    ties: dict[int, set[int]] = {}
    scored = {
        (i, e): score_and_words(res, e, list(res.fit.rates), counts)
        for i, res in enumerate(results)
        for e in res.fit.rates
    }
    # named by a signal on its own; one whose flows all cross a stronger one is not (it
    # scores nothing) and may be in that one's set: two lossy links of a leaf, paths unknown
    named = {e for (_, e), (score, _) in scored.items() if score >= MIN_SCORE}
    for i, res in enumerate(results):
        chosen = list(res.fit.rates)
        for e in chosen:
            score, words = scored[(i, e)]
            gain = res.fit.gains.get(e, 0.0)
            # structural twins: switches and links crossed by exactly the same flows (a
            # 2-leaf fabric's spine and its two links) are candidates alike; a one-NIC
            # host and its NIC are said in the words, the host named
            twins = set(twin_ids(res.incidence, e, res.trials > 0))
            fabric = {
                t for t in twins if is_fabric(res.incidence, t) and is_fabric(res.incidence, e)
            }
            # ...and those the fit could not tell it from, or whose flows' paths are all
            # unknown alike; not those any signal chose: two spines down are both needed
            alike = set(alike_ids(res.incidence, e, res.trials > 0))
            either = (set(res.fit.ties.get(e, ())) - twins) | alike
            ties.setdefault(e, set()).update((either - named) | fabric)
            if e in found:
                s0, g0, w0 = found[e]
                found[e] = (max(s0, score), max(g0, gain), f"{w0}; {words}")
            else:
                found[e] = (score, gain, words)
    for sh in shifted:  # slow elements whose flows' floors stand shifted together
        e, words = sh.element, sh.words(inc, counts.floor_ns)
        s0, g0, w0 = found.get(sh.element, (0.0, 0.0, ""))
        found[e] = (max(s0, sh.score()), max(g0, sh.z), f"{w0}; {words}" if w0 else words)
        ties.setdefault(e, set())
    order = sorted(
        (e for e in found if found[e][0] >= MIN_SCORE),
        key=lambda e: (-found[e][0], -found[e][1], inc.names[e]),
    )
    suspects: list[Suspect] = []
    for e in order:  # one entry per set: two slow spines, paths unknown, are one set twice
        s = suspect_of(inc, e, found[e], sorted(ties.get(e, ())))
        if all(s.element != t.element for t in suspects):
            suspects.append(s)
    return suspects, inc, results


def unexplained(
    counts: FlowCounts, results: list[SignalResult], suspects: list[Suspect]
) -> list[tuple[str, str, str, str]]:
    """Flows bad and material in a signal that no suspect (or candidate) explains, as
    (signal, sender, receiver, how bad in words); see ``verdicts.py``."""
    out: list[tuple[str, str, str, str]] = []
    if not results:
        return out
    inc = results[0].incidence
    index = {name: i for i, name in enumerate(inc.names)}
    named = sorted(
        {index[m] for s in suspects for m in (s.candidates or [s.element]) if m in index}
    )
    # a flow is explained if, under any signal's fit over the same flows (delay and
    # floor share theirs), it likely crossed a named suspect: where its path is unknown,
    # the slow queue's delays say which way it went better than its raised floor does
    likely: dict[int, npt.NDArray[np.float64]] = {}
    for res in results:
        space = id(res.incidence)
        p = np.asarray(res.crossed[:, named].sum(axis=1)).ravel() if named else 0.0
        likely[space] = np.maximum(likely.get(space, 0.0), p)
    for res in results:
        n, k = res.trials, res.failures
        share = k / np.maximum(n, 1)
        covered = np.broadcast_to(likely[id(res.incidence)] >= 0.5, n.shape)
        if res.signal == "loss":
            flows = counts.exchanges
            material = share >= MIN_LOSS_RATE
        elif res.signal == "delay":
            flows = counts.flows
            # its median probe beyond the threshold (a healthy flow's is far below)
            shift = np.maximum(DELAY_SHIFT_OF_FLOOR * counts.floor_ns, counts.flow_threshold_ns)
            material = (share >= MATERIAL_DELAY_SHARE) & (counts.excess_p50_ns >= shift)
            # ...seen often enough that chance queueing cannot do it
            material &= (counts.samples >= MIN_DELAY_SAMPLES) & bad_flows(
                n, k, res.fit.background, 1e-6
            )
            # ...and on both probes of its pairs (a path's queue holds both alike)
            material &= ~pair_sided(
                counts.samples, counts.delayed, counts.second_samples, counts.second_delayed
            )
        else:
            flows = counts.flows
            material = res.material if res.material is not None else np.ones(len(n), bool)
        sel = np.flatnonzero(res.bad & material & ~covered)
        if res.signal == "floor" and len(sel) < MIN_RAISED_FLOWS:
            continue
        for f in sel.tolist():
            if res.signal == "loss":
                words = f"lost {int(k[f])} of {int(n[f])} exchanges"
            elif res.signal == "delay":
                words = f"{int(counts.delayed[f])} of {int(counts.samples[f])} probes delayed"
            else:
                words = f"floor {fmt_ns(float(counts.flow_floor_ns[f]))}"
            a, b = flows.hosts[int(flows.src[f])], flows.hosts[int(flows.dst[f])]
            out.append((res.signal, a, b, words))
    return out


def gpu_suspects(verdicts: Mapping[str, tuple[str | None, str | None]]) -> list[Suspect]:
    """A host whose GPU verdict is ``fail`` is a suspect of kind host, its reason the evidence."""
    return [
        Suspect(element=host, kind="host", score=1.0, evidence=f"GPU: {reason or 'failed'}")
        for host, (verdict, reason) in sorted(verdicts.items())
        if verdict == "fail"
    ]
