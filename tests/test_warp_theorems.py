"""Dissertation ch. 3, Theorems 3.4-3.8, checked numerically (hypothesis draws the NML functions)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr.warp import (
    NML_KINDS,
    expected_truncated_loss,
    nml_loss,
    rank_gamma_estimator,
    truncate_estimator,
    warp_estimator,
)

SETTINGS = settings(max_examples=40, deadline=None)


def is_nml(L, tol=1e-12):
    alpha = np.diff(L)
    return L[0] == 0 and np.all(alpha >= -tol) and np.all(np.diff(alpha) <= tol)


@st.composite
def nml_functions(draw, max_n=60):
    """A random NML function L(0..n): cumulative sums of a sorted non-negative alpha."""
    n = draw(st.integers(1, max_n))
    alpha = draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
    alpha = np.sort(np.array(alpha))[::-1]
    if alpha[0] == 0:
        alpha[0] = 1.0
    return np.concatenate(([0.0], np.cumsum(alpha)))


@st.composite
def nonincreasing_estimators(draw, max_n=60):
    """(estimator, n_irr): est[j] = L̂(j+1), non-negative and non-increasing, L̂(1) > 0."""
    n = draw(st.integers(1, max_n))
    est = np.sort(np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))))[::-1]
    est[0] = max(est[0], 1e-3)
    return est, n


@SETTINGS
@given(nml_functions())
def test_theorem_3_4_warp_estimator_is_nonincreasing(L):
    n_irr = len(L) - 1
    est = warp_estimator(L, n_irr)
    assert np.all(est >= 0) and np.all(np.diff(est) <= 0) and est[0] > 0


@SETTINGS
@given(nonincreasing_estimators(), st.data())
def test_theorem_3_5_expected_truncated_loss_is_nml(est_n, data):
    est, n_irr = est_n
    beta = data.draw(st.integers(1, n_irr))
    # only the first beta entries matter: scramble the tail to check the truncation is honoured
    est = est.copy()
    est[beta:] = data.draw(st.floats(0, 5))
    assert is_nml(expected_truncated_loss(est, beta, n_irr))


@pytest.mark.parametrize("kind", NML_KINDS)
@pytest.mark.parametrize("n_irr", [1, 13, 250])
def test_theorems_3_4_3_5_for_named_losses(kind, n_irr):
    L = nml_loss(kind, n_irr, k=5 if kind == "pak" else None)
    for beta in sorted({1, max(1, n_irr // 3), n_irr}):
        assert is_nml(expected_truncated_loss(warp_estimator(L, n_irr), beta, n_irr))


@SETTINGS
@given(nonincreasing_estimators())
def test_theorem_3_6_beta_one_is_uniform(est_n):
    est, n_irr = est_n
    got = expected_truncated_loss(est, 1, n_irr)
    np.testing.assert_allclose(got, est[0] * np.arange(n_irr + 1) / n_irr, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("seed", range(3))
def test_theorem_3_6_objective_is_scaled_auc_surrogate(seed):
    """OBJ-β-WSS with β = 1, expanded over the scheme S (Eq. 3.13, Theorem 3.1), equals
    L̂(1) times the AUC hinge surrogate (Eq. 3.2) summed over queries."""
    rng = np.random.default_rng(seed)
    n_q, n_items = 6, 15
    L = nml_loss("reciprocal", n_items)
    lhs = rhs = 0.0
    for _ in range(n_q):
        rel = rng.choice(n_items, size=rng.integers(1, 5), replace=False)
        irr = np.setdiff1d(np.arange(n_items), rel)
        scores = rng.normal(size=n_items)
        est = warp_estimator(L, irr.size)
        L_tilde = expected_truncated_loss(est, 1, irr.size)
        for x in rel:
            hinge = np.maximum(0.0, 1 - scores[x] + scores[irr])  # zero exactly off the violators
            n_v = int(np.sum(1 - scores[x] + scores[irr] > 0))
            if n_v:
                lhs += L_tilde[n_v] / n_v * hinge.sum() / rel.size
            rhs += est[0] * hinge.sum() / (rel.size * irr.size)
    assert lhs == pytest.approx(rhs, rel=1e-12)


@SETTINGS
@given(nonincreasing_estimators())
def test_theorem_3_7_monotone_approach_to_warp(est_n):
    est, n_irr = est_n
    full = expected_truncated_loss(est, n_irr, n_irr)
    gaps = [np.sum((full - expected_truncated_loss(est, b, n_irr)) ** 2) for b in range(1, n_irr + 1)]
    assert np.all(np.diff(gaps) <= 1e-12)
    assert gaps[-1] == 0


@pytest.mark.parametrize("kind", NML_KINDS)
def test_theorem_3_7_for_warp_estimators(kind):
    n_irr = 250
    L = nml_loss(kind, n_irr, k=5 if kind == "pak" else None)
    est = warp_estimator(L, n_irr)
    full = expected_truncated_loss(est, n_irr, n_irr)
    gaps = [np.sum((full - expected_truncated_loss(est, b, n_irr)) ** 2) for b in range(1, n_irr + 1, 7)]
    assert np.all(np.diff(gaps) <= 1e-12)


@pytest.mark.parametrize("kind", NML_KINDS)
@pytest.mark.parametrize("n_irr", [1, 7, 100, 251])
def test_theorem_3_8_rank_gamma_equals_beta_truncation(kind, n_irr):
    L = nml_loss(kind, n_irr, k=5 if kind == "pak" else None)
    est = warp_estimator(L, n_irr)
    for gamma in range(1, n_irr + 1):
        np.testing.assert_array_equal(rank_gamma_estimator(L, gamma, n_irr), truncate_estimator(est, n_irr // gamma))
