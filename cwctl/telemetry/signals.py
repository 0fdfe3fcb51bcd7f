"""One signal localised: its rows over the fabric, its votes, its sparse explanation.

``incidences`` maps the loss flows (exchanges, both directions) and the delay flows
onto the fabric's elements, each direction on its discovered spine where a path record
names one (``routes.py``), else on what is certain plus one alternative per equal-cost
spine (``elements.py``). ``localise_signal`` then runs, for one signal, 007's voting
(``voting.py``) and the likelihood explanation (``explain.py``) over the voted
elements; ``spines_over_links`` gives a chosen link's place to its spine when the
spine's other links carry its excess too (``hierarchy.py``). ``localize.py`` strings
them into stages; docs/localisation.md explains the whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from cwctl.fabric.topology import Topology
from cwctl.records.path import PathRecord
from cwctl.runtime.arrays import F64
from cwctl.telemetry.counts import FlowCounts
from cwctl.telemetry.elements import Incidence, incidences
from cwctl.telemetry.evidence import SignalResult, is_fabric
from cwctl.telemetry.explain import explain, posterior
from cwctl.telemetry.hierarchy import spine_rate_instead
from cwctl.telemetry.routes import PathAges, known_spines, route_index
from cwctl.telemetry.thresholds import Thresholds
from cwctl.telemetry.voting import background, bad_flows, cast_votes, thin_flows


def signal_rows(
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


def localise_signal(
    inc: Incidence,
    trials: F64,
    failures: F64,
    signal: str,
    min_rate: float,
    thresholds: Thresholds,
    *,
    one_trial: bool = False,
    own_floor: bool = False,
    least: F64 | None = None,
) -> SignalResult:
    """One signal's explanation. With ``one_trial`` each flow is a single trial whose
    failure is already a significant finding (a raised floor): every failed flow votes.
    With ``own_floor`` (delay) thin flows (``thin_flows``) vote for switches and links.
    ``least``: per element, the rate it must add, where not ``min_rate``."""
    t = thresholds
    usable = trials > 0
    # a background as high as a fault's own rate would hide every fault: it is no background
    b0 = min(background(trials[usable], failures[usable], t.bad_flow_p), min_rate)
    if one_trial:
        # a single trial is never significant alone, so the background cannot be told from
        # the fault's own flows (a slow spine raises a quarter of the floors, and that
        # quarter as background hid it): a raised floor is rare by chance
        b0 = min(b0, t.one_trial_background)
    # chance alone must not make thousands of voters on a large scan (``chance_voters``)
    vote_p = min(t.vote_p, t.chance_voters / max(1, int(usable.sum())))
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
        inc.rows, np.where(usable, trials, 0.0), np.where(usable, failures, 0.0),
        candidates=votes > 0,
        min_rate=min_rate if least is None else least,
        background=b0 if one_trial else None,
        thresholds=t,
    )  # fmt: skip
    failed = (
        failures > 0 if one_trial else bad_flows(trials, failures, fit.background, t.bad_flow_p)
    )
    bad = failed & usable
    thin: npt.NDArray[np.bool_] | None = None
    if own_floor:
        thin = thin_flows(trials, fit.background, t.bad_flow_p) & (failures > 0) & usable & ~bad
    n, k = np.where(usable, trials, 0.0), np.where(usable, failures, 0.0)
    crossed = posterior(fit, inc.rows, n, k)
    votes = cast_votes(inc, bad)
    return SignalResult(signal, inc, fit, bad, votes, trials, failures, crossed, thin=thin)


def spines_over_links(res: SignalResult, thresholds: Thresholds) -> None:
    """A chosen link whose spine's other links carry its excess too is its spine
    (``hierarchy.py``): the spine takes its place in the fit."""
    fit = res.fit
    chosen = list(fit.rates)
    if not chosen:
        return
    likely: npt.NDArray[np.bool_] = res.crossed.columns(chosen) > 0.5
    for i, e in enumerate(chosen):
        elsewhere = np.asarray(np.delete(likely, i, axis=1).any(axis=1), bool)
        spine = spine_rate_instead(
            res.incidence, e, res.trials, res.failures, fit.background, elsewhere, thresholds
        )
        if spine is not None and spine not in fit.rates:
            fit.rates[spine] = fit.rates.pop(e)
            fit.gains[spine] = fit.gains.pop(e, 0.0)
            fit.ties[spine] = [t for t in fit.ties.pop(e, []) if t != spine]
