"""The explanation's gains are log-likelihood differences, however they are computed.

``Model.gains`` scores flows no chosen element touches once per distinct key and the
rest row by row; either way, where the model is exact (an element certainly crossed by
single-row flows, or crossed on a mixture's alternatives) a gain must equal the change
of the total log-likelihood, computed here by brute force from the definition.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.telemetry import gains, states
from cwctl.telemetry.gains import Model, _summed
from cwctl.telemetry.likelihood import Explanation, Rows, gather, log_likelihood

# the module, not the package's function of the same name
index_module = importlib.import_module("cwctl.telemetry.crossings")
RATES = np.array([0.001, 0.01, 0.1, 0.5, 0.9])


def _some(rng: np.random.Generator, n_el: int) -> np.ndarray:
    """How often a row crosses each element: mostly never, else once or twice."""
    return rng.integers(0, 3, n_el) * (rng.random(n_el) < 0.3)


def _case(seed: int, *, alike: bool = False) -> tuple[Rows, np.ndarray, np.ndarray, int]:
    """Random flows; ``alike``: few counts and priors, so that many flows share a state
    (a scan's: a fixed number of trials a flow, equal priors over a few spines)."""
    rng = np.random.default_rng(seed)
    n_el = int(rng.integers(3, 9))
    n_flows = int(rng.integers(5, 60)) * (4 if alike else 1)
    flows, certain, alt, prior = [], [], [], []
    for f in range(n_flows):
        k_rows = 1 if rng.random() < 0.5 else int(rng.integers(2, 5))
        p = np.full(k_rows, 1.0 / k_rows) if alike else rng.dirichlet(np.ones(k_rows))
        for r in range(k_rows):
            flows.append(f)
            prior.append(np.log(p[r]))
            alt.append(_some(rng, n_el) if k_rows > 1 else np.zeros(n_el))
        certain.append(_some(rng, n_el) if k_rows == 1 else np.zeros(n_el))
    rows = Rows(
        sp.csr_matrix(np.array(certain, np.float64)),
        sp.csr_matrix(np.array(alt, np.float64)),
        np.array(flows, np.int64),
        np.array(prior),
    )
    trials = rng.integers(0, 6, n_flows).astype(np.float64) * rng.integers(1, 4)
    failures = np.minimum(trials, rng.integers(0, 3, n_flows)).astype(np.float64)
    if alike:
        trials[:] = 8.0
        failures = np.minimum(failures, 1.0)
    return rows, trials, failures, n_el


def _total(rows: Rows, n: np.ndarray, k: np.ndarray, log_success: np.ndarray, b: float) -> float:
    """The brute-force log-likelihood: per flow, the prior-weighted mixture of its rows."""
    s = (1.0 - b) * np.exp(log_success)
    row_ll = log_likelihood(n[rows.flow], k[rows.flow], s) + rows.log_prior
    total = 0.0
    for f in range(rows.n_flows):
        v = row_ll[rows.flow == f]
        total += float(np.log(np.exp(v - v.max()).sum()) + v.max())
    return total


def _fitted(
    seed: int, chosen: int, background: float, alike: bool
) -> tuple[Rows, np.ndarray, np.ndarray, Model, Explanation, np.ndarray, list[int]]:
    """A case with ``chosen`` elements picked at random rates: rows, counts, model, fit,
    every row's crossings and the elements picked."""
    rows, n, k, n_el = _case(seed, alike=alike)
    model = Model(rows, n, k)
    crossings = (rows.certain.toarray()[rows.flow] + rows.matrix.toarray()).astype(np.float64)
    rng = np.random.default_rng(seed + 1)
    fit = Explanation(background=background, log_success=np.zeros(len(rows.flow)))
    picked = [int(e) for e in rng.choice(n_el, size=chosen, replace=False)]
    for e in picked:
        fit.rates[e] = float(rng.choice(RATES))
        fit.log_success += crossings[:, e] * np.log1p(-fit.rates[e])
    return rows, n, k, model, fit, crossings, picked


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31),
    st.integers(0, 2),
    st.floats(1e-4, 0.2),
    st.booleans(),
    st.sampled_from([0.0, 1.0]),
    st.sampled_from([2, 1_000_000]),
)
def test_gains_are_likelihood_differences(
    seed: int, chosen: int, background: float, alike: bool, worth: float, block: int
) -> None:
    """Row by row (``WORTH`` 0: states never repay) or once per flow state (``WORTH``
    1: always), the elements in one block or a few crossings' worth at a time (and the
    index built so), the gains are the brute-force differences."""
    rows, n, k, model, fit, crossings, picked = _fitted(seed, chosen, background, alike)
    fit.background = background
    others = np.array([e for e in range(rows.certain.shape[1]) if e not in picked], np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(states, "WORTH", worth)
        mp.setattr(states, "MIN_FLOWS", 0)  # a handful of flows: states all the same
        mp.setattr(gains, "_BLOCK_ENTRIES", block)
        mp.setattr(index_module, "_PLACE", block)  # the index placed a few crossings at a time
        got = model.gains(fit, others, RATES)
    base = _total(rows, n, k, fit.log_success, background)
    for i, e in enumerate(others.tolist()):
        for j, r in enumerate(RATES):
            with_e = fit.log_success + crossings[:, e] * np.log1p(-r)
            expected = _total(rows, n, k, with_e, background) - base
            assert np.isclose(got[i, j], expected, rtol=1e-5, atol=1e-6), (e, r)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 2), st.floats(1e-4, 0.2))
def test_background_ll_once_per_state_is_the_total(
    seed: int, chosen: int, background: float
) -> None:
    """The background refit's likelihoods, touched flows scored once per state, are the
    brute-force totals at each candidate background."""
    rows, n, k, model, fit, _, _ = _fitted(seed, chosen, background, alike=True)
    candidates = np.array([1e-5, 1e-3, background, 0.3])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(states, "WORTH", 1.0)
        mp.setattr(states, "MIN_FLOWS", 0)
        got = model.background_ll(fit, candidates)
    expected = [_total(rows, n, k, fit.log_success, b) for b in candidates]
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-6)


def test_alike_flows_fall_in_few_states(monkeypatch: pytest.MonkeyPatch) -> None:
    """The states are what makes the scoring cheap: flows of one count and equal priors
    with one element chosen share a few states; ``WORTH`` turns them down where they
    would not repay, and ``MIN_FLOWS`` for a handful of flows."""
    rows, _, _, model, fit, _, _ = _fitted(7, 1, 0.01, alike=True)
    every = np.ones(rows.n_flows, bool)
    assert model._states(fit, every) is None  # fewer than MIN_FLOWS
    monkeypatch.setattr(states, "MIN_FLOWS", 0)
    found = model._states(fit, every)
    assert found is not None
    assert len(found.flow) < rows.n_flows / 4
    assert found.size.sum() == rows.n_flows
    assert np.array_equal(found.of_flow[found.flow], np.arange(len(found.flow)))
    monkeypatch.setattr(states, "WORTH", len(found.flow) / rows.n_flows / 2)
    assert model._states(fit, every) is found  # the answer kept, by digest
    assert Model(rows, model.nf, model.kf)._states(fit, every) is None


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.booleans())
def test_rows_by_flow_is_the_flow_matrix_product(seed: int, weighted: bool) -> None:
    """Merged in place (rows as built) it equals ``flow_matrix @ diag(w) @ (matrix > 0)``."""
    rows, _, _, _ = _case(seed)
    w = np.random.default_rng(seed).random(len(rows.flow)) if weighted else None
    diag = sp.diags(np.ones(len(rows.flow)) if w is None else w)
    expected = rows.flow_matrix() @ diag @ (rows.matrix > 0).astype(np.float64)
    assert np.allclose(rows.by_flow(w).toarray(), expected.toarray())


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 6),
    st.lists(st.integers(0, 4), min_size=1, max_size=60),
    st.integers(0, 2**32 - 1),
    st.integers(1, 40),
)
def test_summed_by_blocks_is_the_sparse_products_sum_to_the_bit(
    width: int, j: list[int], seed: int, cells: int
) -> None:
    """Entries summed into their rows a block at a time (blocks as small as one entry)
    give the very bits ``gather(j, n) @ values`` gives: the same additions in the same
    order, so a congested spine's gains do not move by an ulp."""
    values = np.random.default_rng(seed).normal(0.0, 1e3, (len(j), width))
    rows = np.array(j)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gains, "_SUM_CELLS", cells)
        got = _summed(rows, 5, width, lambda b: values[b])
    assert np.array_equal(got, gather(rows, 5) @ values)
