import numpy as np
import pytest

from recsys_ltr.warp import (
    NML_KINDS,
    expected_truncated_loss,
    nml_loss,
    ns_distribution,
    opt_est,
    truncate_estimator,
    warp_estimator,
)

N_IRR = 40


def loss_of(kind, n=N_IRR):
    return nml_loss(kind, n, k=5 if kind == "pak" else None)


def brute_expected(est, beta, n_irr, n_vs=None):
    """Eq. 3.11 as a double loop over n_v (all, or those in ``n_vs``) and the draw index i."""
    out = []
    for n_v in range(n_irr + 1) if n_vs is None else n_vs:
        p = n_v / n_irr
        out.append(sum(p * (1 - p) ** (i - 1) * est[i - 1] for i in range(1, beta + 1)))
    return np.array(out)


def test_warp_estimator_hand_and_brute():
    L = np.arange(11.0)  # L(r) = r
    np.testing.assert_array_equal(warp_estimator(L, 10), [10, 5, 3, 2, 2, 1, 1, 1, 1, 1])
    L = loss_of("reciprocal")
    est = warp_estimator(L, N_IRR)
    assert est.shape == (N_IRR,)
    np.testing.assert_array_equal(est, [L[N_IRR // n_s] for n_s in range(1, N_IRR + 1)])


def test_truncate():
    est = np.arange(5.0, 0, -1)
    np.testing.assert_array_equal(truncate_estimator(est, 2), [5, 4, 0, 0, 0])
    np.testing.assert_array_equal(truncate_estimator(est, 5), est)
    assert est[2] == 3  # input untouched


@pytest.mark.parametrize("n_v", [0, 1, 7, N_IRR])
@pytest.mark.parametrize("beta", [1, 6, N_IRR])
def test_ns_distribution(n_v, beta):
    pmf = ns_distribution(n_v, beta, N_IRR)
    assert pmf.shape == (beta + 1,)
    assert pmf.sum() == pytest.approx(1.0)
    p = n_v / N_IRR
    assert pmf[0] == pytest.approx(p)
    assert pmf[-1] == pytest.approx((1 - p) ** beta)
    if n_v == 0:
        assert pmf[-1] == 1.0


@pytest.mark.parametrize("kind", NML_KINDS)
@pytest.mark.parametrize("beta", [1, 3, 17, N_IRR])
def test_expected_truncated_loss_vs_brute(kind, beta):
    est = warp_estimator(loss_of(kind), N_IRR)
    got = expected_truncated_loss(est, beta, N_IRR)
    np.testing.assert_allclose(got, brute_expected(est, beta, N_IRR), rtol=1e-12, atol=1e-14)
    assert got[0] == 0.0
    # equals the expectation of the truncated estimator under G (Def. 3.6)
    trunc = np.append(truncate_estimator(est, beta)[:beta], 0.0)  # L̂^(β)(β+1) = 0
    for n_v in (1, 9, N_IRR):
        assert got[n_v] == pytest.approx(ns_distribution(n_v, beta, N_IRR) @ trunc)


def _kkt_residual(L, beta, n_irr, theta):
    """Optimality of OPT-EST in the δ variables (θ_j = Σ_{i>=j} δ_i, δ >= 0)."""
    p = np.arange(1, n_irr + 1)[:, None] / n_irr
    M = 1 - (1 - p) ** np.arange(1, beta + 1)[None, :]
    delta = -np.diff(np.append(theta, 0.0))
    grad = M.T @ (M @ delta - L[1:])
    active = delta > 1e-12
    return delta, grad, active


@pytest.mark.parametrize("kind", NML_KINDS)
@pytest.mark.parametrize("beta", [1, 4, 20, N_IRR])
def test_opt_est_is_optimal_and_feasible(kind, beta):
    L = loss_of(kind)
    theta = opt_est(L, beta, N_IRR)
    assert theta.shape == (beta,)
    assert np.all(theta >= 0) and np.all(np.diff(theta) <= 1e-12)  # β-nonincreasing
    delta, grad, active = _kkt_residual(L, beta, N_IRR, theta)
    assert np.all(delta >= -1e-12)
    scale = np.abs(grad).max() + 1
    assert np.all(np.abs(grad[active]) <= 1e-8 * scale)  # stationary on the free set
    assert np.all(grad[~active] >= -1e-8 * scale)  # no descent into the bound
    # and no worse than L̂_WARP, which is feasible (Theorem 3.4)
    sse_opt = np.sum((expected_truncated_loss(theta, beta, N_IRR) - L) ** 2)
    sse_warp = np.sum((expected_truncated_loss(warp_estimator(L, N_IRR), beta, N_IRR) - L) ** 2)
    assert sse_opt <= sse_warp + 1e-12


@pytest.mark.parametrize("beta", [1, 2, 5, 20, 50, 250])
def test_opt_est_recovers_uniform_estimator_exactly(beta):
    """sec. 3.3.5: for the uniform loss, OPT-EST is L̂_uniform = (1, 0, ..., 0) and L̃ = L_opt."""
    n_irr = 250
    L = nml_loss("uniform", n_irr)
    theta = opt_est(L, beta, n_irr)
    expected = np.zeros(beta)
    expected[0] = 1.0
    np.testing.assert_allclose(theta, expected, atol=1e-10)
    np.testing.assert_allclose(expected_truncated_loss(theta, beta, n_irr), L, atol=1e-10)


@pytest.mark.parametrize("kind, beta", [("uniform", 50), ("uniform", 250), ("reciprocal", 50), ("reciprocal", 250)])
def test_opt_est_strictly_beats_warp_where_warp_is_poor(kind, beta):
    n_irr = 250
    L = loss_of(kind, n_irr)
    sse_warp = np.sum((expected_truncated_loss(warp_estimator(L, n_irr), beta, n_irr) - L) ** 2)
    sse_opt = np.sum((expected_truncated_loss(opt_est(L, beta, n_irr), beta, n_irr) - L) ** 2)
    assert sse_warp > 0.1  # Fig. 3.1: WARP is visibly off L_opt here
    assert sse_opt < 0.1 * sse_warp  # OPT-EST minimises this error over a set holding WARP


def test_expected_truncated_loss_needs_no_dense_design():
    # gowalla-sized: the former (n_irr + 1) x beta design would take 13 GB
    n_irr = 40_981
    est = warp_estimator(nml_loss("reciprocal", n_irr), n_irr)
    got = expected_truncated_loss(est, n_irr, n_irr)
    sample = np.array([0, 1, 2, 17, 4096, n_irr - 1, n_irr])
    np.testing.assert_allclose(got[sample], brute_expected(est, n_irr, n_irr, sample), rtol=1e-9, atol=1e-12)


def test_opt_est_size_limit():
    with pytest.raises(ValueError, match=r"OPT_EST_MAX_ENTRIES.*use beta <= 409"):
        opt_est(nml_loss("uniform", 40_981), 410, 40_981)


@pytest.mark.parametrize(
    "call",
    [
        lambda: warp_estimator(np.ones(5), 5),  # too short: needs L(0..5)
        lambda: warp_estimator(np.array([0, 1, np.nan]), 2),
        lambda: warp_estimator(np.array([0, -1.0, 2]), 2),
        lambda: warp_estimator(np.ones((3, 3)), 2),
        lambda: truncate_estimator(np.ones(3), 0),
        lambda: truncate_estimator(np.ones(3), 4),
        lambda: expected_truncated_loss(np.ones(3), 4, 10),  # estimator shorter than beta
        lambda: expected_truncated_loss(np.ones(30), 0, 10),  # beta < 1
        lambda: expected_truncated_loss(np.ones(30), 11, 10),  # beta > n_irr
        lambda: ns_distribution(11, 3, 10),
        lambda: opt_est(np.ones(5), 2, 10),
        lambda: opt_est(nml_loss("uniform", 10), 0, 10),
    ],
)
def test_bad_input(call):
    with pytest.raises(ValueError):
        call()


def test_bad_types():
    with pytest.raises(TypeError):
        warp_estimator(np.array(["a", "b"]), 1)
    with pytest.raises(TypeError):
        opt_est(nml_loss("uniform", 10), 2.0, 10)
