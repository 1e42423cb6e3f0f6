"""MLR / R-MLR (McFee & Lanckriet 2010; dissertation ch. 2): the proximal maps, the PSD projection,
the dual QP and the W-update (2.7)-(2.9), the separation oracles against brute force over all
rankings, the cutting-plane certificate, a planted noisy task, the metric-learn interface and bad input."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import rewrite_header
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from recsys_ltr.metric_learning import MLR, RMLR
from recsys_ltr.metric_learning._admm import (
    Constraints,
    project_psd,
    prox_l21,
    prox_l21_symmetric,
    soft_threshold,
    solve_dual_qp,
    w_update,
)
from recsys_ltr.metric_learning._oracles import LOSSES, most_violated_ranking
from recsys_ltr.metric_learning.frml import label_relevance
from recsys_ltr.metric_learning.mlr import _int64_csr, _oracle

# ----------------------------------------------------------------------------- references


def score_of(loss, flags, k):
    """Score of a ranking given as relevance flags from first to last, from the definitions."""
    flags = list(flags)
    p, n = sum(flags), len(flags) - sum(flags)
    positions = [i + 1 for i, f in enumerate(flags) if f]
    if loss == "auc":
        misordered = sum(sum(1 for b in flags[:a] if not b) for a, f in enumerate(flags) if f)
        return 1 - misordered / (p * n)
    if loss == "map":
        return float(np.mean([(r + 1) / pos for r, pos in enumerate(positions)]))
    if loss == "mrr":
        return 1 / positions[0]
    if loss == "prec@k":
        return sum(pos <= k for pos in positions) / k
    discount = lambda i: 1.0 if i == 1 else (1 / np.log2(i) if i <= k else 0.0)  # noqa: E731
    return sum(discount(pos) for pos in positions) / sum(discount(i) for i in range(1, min(p, k) + 1))


def psi_difference(d, p, ranking):
    """``<W, ψ(q, y_q) - ψ(q, y)>`` from the pair sum of Joachims' feature map, ``d`` the distances
    of candidates ``0..p-1`` (relevant) and ``p..`` (irrelevant), ``ranking`` first to last."""
    n = d.size - p
    rank = {x: r for r, x in enumerate(ranking)}
    total = 0.0
    for i in range(p):
        for j in range(p, d.size):
            y_ij = 1 if rank[i] < rank[j] else -1
            total += (1 - y_ij) * (d[j] - d[i]) / (p * n)  # y_ij of the true ranking is +1
    return total


def violation(d, p, ranking, loss, k):
    flags = [x < p for x in ranking]
    return (
        score_of(loss, [True] * p + [False] * (d.size - p), k)
        - score_of(loss, flags, k)
        - psi_difference(d, p, ranking)
    )


def brute_force_max(d, p, loss, k):
    return max(violation(d, p, perm, loss, k) for perm in itertools.permutations(range(d.size)))


def planted(n, seed, d_inf=4, noise_dims=16, n_classes=3, spread=3.0):
    """Informative block (class means) + independent Gaussian noise block, z-scored."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = np.hstack(
        (
            spread * rng.standard_normal((n_classes, d_inf))[y] + rng.standard_normal((n, d_inf)),
            rng.standard_normal((n, noise_dims)),
        )
    )
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def exact_objective(X, y, W, C, loss="map", k=1, penalty=None, lam=0.0):
    """``tr W + Ω(W) + C ξ(W)`` with ``ξ`` the mean over queries of the brute-force most violated ranking."""
    Xc = X - X.mean(axis=0)
    xi = 0.0
    for q in range(len(X)):
        others = [x for x in range(len(X)) if x != q]
        rel = [x for x in others if y[x] == y[q]]
        irr = [x for x in others if y[x] != y[q]]
        diff = Xc[rel + irr] - Xc[q]
        d = np.einsum("ij,jk,ik->i", diff, W, diff)
        xi += brute_force_max(d, len(rel), loss, k)
    reg = np.trace(W) + lam * (
        np.linalg.norm(W, axis=1).sum() if penalty == "l21" else np.abs(W).sum() if penalty else 0
    )
    return reg + C * xi / len(X)


# ----------------------------------------------------------------------------- proximal maps


@pytest.mark.kernels
@settings(max_examples=60, deadline=None)
@given(d=st.integers(1, 12), tau=st.floats(0.0, 3.0), seed=st.integers(0, 2**31))
def test_prox_l21_matches_closed_form_and_is_optimal(d, tau, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d, d + 2)) * rng.choice([0.1, 1.0, 3.0], size=(d, 1))
    V = prox_l21(A, tau)
    norms = np.linalg.norm(A, axis=1, keepdims=True)
    np.testing.assert_allclose(V, A * np.maximum(1 - tau / np.maximum(norms, 1e-300), 0), atol=1e-12)  # Eq. 2.10
    for i in range(d):  # KKT of each row: V_i - A_i + τ V_i/||V_i|| = 0, or V_i = 0 and ||A_i|| <= τ
        v = np.linalg.norm(V[i])
        if v > 0:
            np.testing.assert_allclose(V[i] - A[i] + tau * V[i] / v, 0, atol=1e-10)
        else:
            assert np.linalg.norm(A[i]) <= tau + 1e-12


@pytest.mark.kernels
def test_prox_l21_hand_case():
    A = np.array([[3.0, 4.0], [0.3, 0.4]])  # row norms 5 and 0.5
    np.testing.assert_allclose(prox_l21(A, 1.0), [[2.4, 3.2], [0.0, 0.0]])
    np.testing.assert_allclose(soft_threshold(np.array([[2.0, -0.5], [-0.5, -3.0]]), 1.0), [[1.0, 0.0], [0.0, -2.0]])


def sym_l21_objective(V, A, tau):
    return tau * np.linalg.norm(V, axis=1).sum() + 0.5 * np.sum((V - A) ** 2)


@pytest.mark.kernels
@settings(max_examples=30, deadline=None)
@given(d=st.integers(2, 9), tau=st.floats(0.05, 2.0), seed=st.integers(0, 2**31))
def test_symmetric_prox_satisfies_kkt(d, tau, seed):
    """Optimality certificate: with ``G = (A - V - U)/τ``, ``U`` antisymmetric and ``G`` a subgradient
    of ``||V||_2,1`` give ``V - A + τ sym(G) = 0``, i.e. ``V`` minimises over symmetric matrices."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((d, d)) * rng.choice([0.2, 1.0, 2.0], size=(d, 1))
    A = B + B.T
    Q, U = np.zeros((d, d)), np.zeros((d, d))
    V, _ = prox_l21_symmetric(A, tau, Q, U, 1e-12, 20000)
    np.testing.assert_array_equal(V, V.T)
    np.testing.assert_allclose(U, -U.T, atol=1e-7)
    G = (A - V - U) / tau
    for i in range(d):
        v = np.linalg.norm(V[i])
        if v > 1e-9:
            np.testing.assert_allclose(G[i], V[i] / v, atol=1e-6)
        else:
            assert np.linalg.norm(G[i]) <= 1 + 1e-6
    for _ in range(20):  # and no symmetric perturbation improves the objective
        E = rng.standard_normal((d, d))
        E = (E + E.T) * rng.choice([1e-3, 1e-1])
        assert sym_l21_objective(V, A, tau) <= sym_l21_objective(V + E, A, tau) + 1e-9


@pytest.mark.kernels
def test_symmetric_prox_hand_cases():
    A = np.diag([3.0, -0.5, 1.5])  # diagonal: a soft threshold of the diagonal
    V, _ = prox_l21_symmetric(A, 1.0, np.zeros((3, 3)), np.zeros((3, 3)), 1e-13, 10000)
    np.testing.assert_allclose(V, np.diag([2.0, 0.0, 0.5]), atol=1e-9)
    H = np.eye(4) - 2 * np.outer(np.ones(4), np.ones(4)) / 4  # symmetric, orthogonal: all rows of norm 1
    V, _ = prox_l21_symmetric(2 * H, 0.5, np.zeros((4, 4)), np.zeros((4, 4)), 1e-13, 10000)
    np.testing.assert_allclose(V, prox_l21(2 * H, 0.5), atol=1e-9)  # the free prox is symmetric here
    np.testing.assert_allclose(V, 1.5 * H, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 15), seed=st.integers(0, 2**31))
def test_psd_projection(d, seed):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((d, d))
    A = B + B.T
    Z, L = project_psd(A)
    np.testing.assert_allclose(Z, L @ L.T)
    assert np.linalg.eigvalsh(Z).min() >= -1e-10  # Z ⪰ 0
    assert np.linalg.eigvalsh(Z - A).min() >= -1e-10  # Z - A ⪰ 0
    assert abs(np.vdot(Z, Z - A)) <= 1e-9 * max(1.0, np.sum(A * A))  # complementarity (Moreau)
    for _ in range(5):  # nearer to A than other PSD matrices
        M = rng.standard_normal((d, d))
        assert np.linalg.norm(Z - A) <= np.linalg.norm(M @ M.T - A) + 1e-12


# ----------------------------------------------------------------------------- dual QP (2.7) and W-update (2.9)


def qp_kkt_violation(H, b, C, alpha):
    """Largest violation of the KKT conditions of min ½αᵀHα + bᵀα, α >= 0, Σα <= C."""
    g = H @ alpha + b
    at_cap = C - alpha.sum() <= 1e-9 * max(1.0, C)
    mu = max(0.0, -g.min()) if at_cap else 0.0  # multiplier of Σα <= C
    viol = [
        max(0.0, -(g + mu).min()),
        np.max(np.abs((g + mu) * alpha)),
        max(0.0, -alpha.min()),
        max(0.0, alpha.sum() - C),
    ]
    return max(viol)


@pytest.mark.kernels
@settings(max_examples=50, deadline=None)
@given(m=st.integers(1, 12), rank=st.integers(1, 12), C=st.floats(0.01, 100.0), seed=st.integers(0, 2**31))
def test_dual_qp_satisfies_kkt(m, rank, C, seed):
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((m, rank))
    H = P @ P.T  # possibly singular
    b = rng.standard_normal(m) * 3
    alpha = np.zeros(m)
    solve_dual_qp(H, b, C, alpha, 1e-13, 100000)
    scale = max(1.0, np.abs(b).max(), np.abs(H).max() * C)
    assert qp_kkt_violation(H, b, C, alpha) <= 1e-8 * scale
    ref = minimize(
        lambda a: 0.5 * a @ H @ a + b @ a, np.zeros(m), jac=lambda a: H @ a + b, method="SLSQP",
        bounds=[(0, None)] * m, constraints=[{"type": "ineq", "fun": lambda a: C - a.sum(), "jac": lambda a: -np.ones(m)}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )  # fmt: skip
    ours = 0.5 * alpha @ H @ alpha + b @ alpha
    assert ours <= ref.fun + 1e-7 * scale


def random_constraints(rng, d, m):
    A = Constraints(d)
    for _ in range(m):
        B = rng.standard_normal((d, d))
        A.add(rng.random(), (B + B.T) / 2)
    return A


def test_pruning_keeps_the_working_set_consistent():
    rng = np.random.default_rng(0)
    A = random_constraints(rng, 3, 9)  # grows past the initial capacity
    alpha = np.zeros(9)
    alpha[[1, 4]] = 1.0
    for _ in range(3):
        kept = A.prune(alpha.copy(), max_idle=2)
    assert A.m == 2 and kept.tolist() == [1.0, 1.0]
    np.testing.assert_allclose(A.H[:2, :2], A.P[:2] @ A.P[:2].T)
    A.add(0.5, np.eye(3))
    np.testing.assert_allclose(A.H[:3, :3], A.P[:3] @ A.P[:3].T)
    assert A.idle[:3].tolist() == [0, 0, 0] and A.delta[2] == 0.5 and A.trace[2] == 3.0


@pytest.mark.kernels
@pytest.mark.parametrize("seed", range(6))
def test_w_update_has_zero_duality_gap(seed):
    """The dual value of α is the Lagrangian at W(α) (2.9) and equals (2.7)-(2.8) up to the constant
    the printed max drops; the primal (2.6) at W(α) equals it (zero gap), so W(α) is optimal."""
    rng = np.random.default_rng(seed)
    d, m = 5, 1 + seed
    A = random_constraints(rng, d, m)
    B = rng.standard_normal((d, d))
    R, rho, C = (B + B.T) / 2, rng.choice([0.5, 1.0, 4.0]), rng.choice([0.1, 1.0, 10.0])
    alpha = np.zeros(m)
    W = w_update(A, R, rho, C, alpha)
    Psi, delta, H = A.P[:m].reshape(m, d, d), A.delta[:m], A.H[:m, :m]
    W_alpha = R + (np.tensordot(alpha, Psi, axes=1) - np.eye(d)) / rho  # Eq. 2.9
    np.testing.assert_allclose(W, W_alpha, atol=1e-12)
    lagrangian = np.trace(W_alpha) + alpha @ (delta - A.margins(W_alpha)) + rho / 2 * np.sum((W_alpha - R) ** 2)
    b = np.array([np.vdot(rho * R - np.eye(d), Psi[i]) - rho * delta[i] for i in range(m)])  # Eq. 2.8
    printed = (-0.5 * alpha @ H @ alpha - b @ alpha) / rho  # Eq. 2.7
    assert lagrangian == pytest.approx(printed + np.trace(R) - d / (2 * rho), rel=1e-10, abs=1e-10)
    primal = np.trace(W) + C * max(0.0, np.max(delta - A.margins(W))) + rho / 2 * np.sum((W - R) ** 2)
    assert primal == pytest.approx(lagrangian, rel=1e-9, abs=1e-9)
    for _ in range(20):  # and no perturbation does better
        E = rng.standard_normal((d, d)) * 1e-3
        Wp = W + E + E.T
        other = np.trace(Wp) + C * max(0.0, np.max(delta - A.margins(Wp))) + rho / 2 * np.sum((Wp - R) ** 2)
        assert primal <= other + 1e-12


# ----------------------------------------------------------------------------- separation oracles


@pytest.mark.kernels
@settings(max_examples=150, deadline=None)
@given(
    p=st.integers(1, 6),
    n_irr=st.integers(1, 6),
    loss=st.sampled_from(LOSSES),
    k=st.integers(1, 7),
    ties=st.booleans(),
    scale=st.sampled_from([0.1, 1.0, 5.0]),
    seed=st.integers(0, 2**31),
)
def test_oracle_equals_brute_force_max(p, n_irr, loss, k, ties, scale, seed):
    """Exhaustive over all (p + N)! rankings for p + N <= 7: the oracle's ranking attains the maximum."""
    if p + n_irr > 7:
        n_irr = 7 - p
    rng = np.random.default_rng(seed)
    d = rng.random(p + n_irr) * scale
    if ties:
        d = np.round(d * 2) / 2
    order, delta, viol = most_violated_ranking(d[:p], d[p:], loss, k)
    assert sorted(order.tolist()) == list(range(p + n_irr))
    assert viol == pytest.approx(violation(d, p, order, loss, k), abs=1e-12)
    flags = [x < p for x in order]
    assert delta == pytest.approx(score_of(loss, [True] * p + [False] * n_irr, k) - score_of(loss, flags, k), abs=1e-12)
    assert viol >= brute_force_max(d, p, loss, k) - 1e-12


@pytest.mark.kernels
@pytest.mark.parametrize("loss", LOSSES)
def test_oracle_hand_cases(loss):
    # W = 0: every ranking has the same feature score; the oracle returns the worst ranking
    order, delta, viol = most_violated_ranking(np.zeros(2), np.zeros(3), loss, k=2)
    worst = 1 - score_of(loss, [False, False, False, True, True], 2) if loss != "prec@k" else 1.0
    assert delta == pytest.approx(worst) and viol == pytest.approx(worst)
    # a metric separating the sets by far more than the margin: the true ranking, no violation
    order, delta, viol = most_violated_ranking(np.array([0.0, 0.1]), np.array([100.0, 200.0]), loss, k=2)
    assert order.tolist() == [0, 1, 2, 3] and delta == 0 and viol == 0


def random_psd(rng, d, rank):
    B = rng.standard_normal((d, rank))
    return B @ B.T, B


@pytest.mark.kernels
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("explicit", [False, True])
def test_batch_oracle_builds_psi_from_definitions(loss, explicit):
    """Δ̂ and Ψ̂ of the batch oracle equal (1/n) Σ_q of Δ and ψ(q, y_q) - ψ(q, y'_q) built from outer
    products, y'_q the brute-force most violated ranking; the block size does not matter."""
    rng = np.random.default_rng(3)
    n, d, k = 7, 3, 2
    X = rng.standard_normal((n, d))
    X -= X.mean(axis=0)
    y = np.array([0, 0, 1, 1, 1, 2, 2])
    W, B = random_psd(rng, d, 2)
    R = label_relevance(y)
    Q = None
    if explicit:  # the last point of each query's other classes is not judged
        Q = sp.csr_matrix(
            np.array([[y[x] != y[q] and x != (q + 3) % n for x in range(n)] for q in range(n)], dtype=float)
        )
        R = sp.csr_matrix(R.toarray() * (1 - np.eye(n)[(np.arange(n) + 3) % n]))
        R.eliminate_zeros()
    sets = _int64_csr(R) + (_int64_csr(Q) if explicit else _int64_csr(R)) + (explicit,)
    delta_hat, Psi_hat = _oracle(X, B, sets, LOSSES.index(loss), k)
    Psi_ref, delta_ref = np.zeros((d, d)), 0.0
    for q in range(n):
        rel = list(R[q].indices)
        irr = list(Q[q].indices) if explicit else [x for x in range(n) if x != q and x not in rel]
        cand = rel + irr
        diff = X[cand] - X[q]
        dist = np.einsum("ij,jk,ik->i", diff, W, diff)
        best = max(itertools.permutations(range(len(cand))), key=lambda r: violation(dist, len(rel), r, loss, k))
        rank = {x: i for i, x in enumerate(best)}
        for i in range(len(rel)):
            for j in range(len(rel), len(cand)):
                y_ij = 1 if rank[i] < rank[j] else -1
                phi_i, phi_j = -np.outer(diff[i], diff[i]), -np.outer(diff[j], diff[j])
                Psi_ref += (1 - y_ij) * (phi_i - phi_j) / (len(rel) * len(irr)) / n
        flags = [x < len(rel) for x in best]
        delta_ref += (score_of(loss, sorted(flags, reverse=True), k) - score_of(loss, flags, k)) / n
    assert delta_hat == pytest.approx(delta_ref, abs=1e-12)
    np.testing.assert_allclose(Psi_hat, Psi_ref, atol=1e-12)


# ----------------------------------------------------------------------------- cutting plane (Alg. 2.1)

TIGHT = dict(admm_tol=1e-7, admm_max_iter=3000, num_threads=1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: MLR(C=5.0, **TIGHT),
        lambda: MLR(loss="auc", C=5.0, **TIGHT),
        lambda: RMLR(C=5.0, regularization=0.3, **TIGHT),
        lambda: RMLR(C=5.0, regularization=0.3, penalty="l1", **TIGHT),
    ],
)
def test_cutting_plane_certificate(make):
    """The working-set objective (a lower bound) never decreases, the exact objective ends within
    Cε of it and far below its start, and the recorded objective is the brute-force one."""
    X, y = planted(7, seed=1, d_inf=2, noise_dims=2)  # 6 candidates per query: 720 rankings each
    model = make().fit(X, y)
    assert model.converged_
    lower, upper = model.lower_bound_, model.objective_
    assert np.all(np.diff(lower) >= -1e-6 * max(1.0, lower.max()))
    assert upper[-1] - lower[-1] <= model.C * model.epsilon + 1e-6
    assert upper[-1] < 0.5 * upper[0]
    W = model.get_mahalanobis_matrix()
    penalty, lam = getattr(model, "penalty", None), getattr(model, "regularization", 0.0)
    assert upper[-1] == pytest.approx(exact_objective(X, y, W, model.C, model.loss, 1, penalty, lam), rel=1e-8)


def test_objective_tracks_an_independent_minimiser():
    """The cutting-plane solution is within Cε of the best point of a long projected subgradient run
    on the exact objective (slack by the oracle, itself checked against brute force above)."""
    X, y = planted(24, seed=2, d_inf=2, noise_dims=1)
    C = 2.0
    model = MLR(C=C, epsilon=1e-3, **TIGHT).fit(X, y)
    Xc, R = X - X.mean(axis=0), label_relevance(y)
    sets = _int64_csr(R) + _int64_csr(R) + (False,)

    def objective_and_subgradient(W):  # tr W + C ξ(W); a subgradient is I - C Ψ̂(W)
        Z, L = project_psd(W)
        delta, Psi = _oracle(Xc, L, sets, LOSSES.index("map"), 1)
        return np.trace(Z) + C * max(0.0, delta - np.vdot(Z, Psi)), np.eye(3) - C * Psi

    ours = objective_and_subgradient(model.get_mahalanobis_matrix())[0]
    assert ours == pytest.approx(model.objective_[-1], rel=1e-9)
    W, best = np.zeros((3, 3)), np.inf
    for t in range(1, 3000):
        value, g = objective_and_subgradient(W)
        best = min(best, value)
        W = project_psd(W - 0.2 / np.sqrt(t) * g)[0]
    assert ours <= best + C * 1e-3 + 1e-6
    assert best <= ours * 1.02  # the long run gets close: the comparison is not vacuous


def test_early_stopped_admm_reaches_the_same_optimum():
    """With T = 10 ADMM iterations per round the loop still ends near the optimum: it does not stop
    before ADMM has converged (here W = 0 is optimal: P@k/NDCG constraints move few pairs)."""
    X, y = planted(60, seed=4, noise_dims=6)
    for loss, k, C in (("map", None, 5.0), ("ndcg", 3, 1.0)):
        fast = RMLR(loss=loss, k=k, C=C, regularization=0.5, admm_max_iter=10, num_threads=1).fit(X, y)
        tight = RMLR(loss=loss, k=k, C=C, regularization=0.5, **TIGHT).fit(X, y)
        assert fast.converged_ and tight.converged_
        assert abs(fast.objective_[-1] - tight.objective_[-1]) <= C * fast.epsilon + 1e-3 * tight.objective_[-1]
    assert np.trace(fast.get_mahalanobis_matrix()) < 1e-6  # the NDCG optimum W = 0, found with T = 10


def test_planted_noise_rows_are_suppressed():
    X, y = planted(150, seed=0)
    share = {}
    for name, model in (("MLR", MLR(C=1.0, num_threads=1)), ("R-MLR", RMLR(C=1.0, regularization=2.0, num_threads=1))):
        W = model.fit(X, y).get_mahalanobis_matrix()
        rows = np.linalg.norm(W, axis=1)
        share[name] = rows[4:].sum() / rows.sum()  # noise rows' share of ||W||_2,1
    assert share["R-MLR"] < 0.05 < 0.15 < share["MLR"]


# ----------------------------------------------------------------------------- estimator


@pytest.fixture(scope="module")
def data():
    return planted(45, seed=3, noise_dims=4)


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    return RMLR(C=2.0, regularization=0.5, num_threads=1).fit(X, y)


def test_metric_learn_interface(data, fitted):
    X, y = data
    L = fitted.components_
    W = fitted.get_mahalanobis_matrix()
    np.testing.assert_allclose(W, L.T @ L)
    assert np.linalg.eigvalsh(W).min() >= -1e-10
    np.testing.assert_allclose(fitted.transform(X), X @ L.T)
    pairs = np.stack((X[:10], X[10:20]), axis=1)
    diff = X[:10] - X[10:20]
    expected = np.sqrt(np.einsum("ij,jk,ik->i", diff, W, diff))
    np.testing.assert_allclose(fitted.pair_distance(pairs), expected)
    np.testing.assert_allclose(fitted.pair_score(pairs), -expected)
    metric = fitted.get_metric()
    assert metric(X[0], X[10]) == pytest.approx(expected[0])
    np.testing.assert_allclose(fitted.fit_transform(X, y), fitted.transform(X))
    assert fitted.n_features_in_ == X.shape[1] and fitted.n_iter_ == fitted.objective_.size


@pytest.mark.parametrize(
    "loss, k, C",
    [("map", None, 10.0), ("auc", None, 10.0), ("mrr", None, 10.0), ("prec@k", 3, 100.0), ("ndcg", 5, 100.0)],
)
def test_every_loss_learns_a_useful_metric(loss, k, C):
    """Nearest-neighbour accuracy on held-out points beats the Euclidean one on the noisy task.
    (P@k and NDCG@k constraints move few pairs: below C ~ 10, W = 0 is optimal for them.)"""
    X, y = planted(120, seed=5, noise_dims=24, spread=1.2)
    Xtr, ytr, Xte, yte = X[:60], y[:60], X[60:], y[60:]

    def nn_accuracy(Ztr, Zte):
        D = ((Zte[:, None] - Ztr[None]) ** 2).sum(axis=2)
        return np.mean(ytr[D.argmin(axis=1)] == yte)

    model = RMLR(loss=loss, k=k, C=C, regularization=1.0, max_iter=300, num_threads=1).fit(Xtr, ytr)
    assert model.converged_
    assert nn_accuracy(model.transform(Xtr), model.transform(Xte)) > nn_accuracy(Xtr, Xte) + 0.1


def test_supervision_forms_agree(data):
    X, y = data
    a = MLR(C=2.0, num_threads=1).fit(X, y)
    b = MLR(C=2.0, num_threads=1).fit(X, relevance=label_relevance(y))
    c = MLR(C=2.0, num_threads=1).fit(
        X, relevance=label_relevance(y).toarray(), irrelevant=(y[:, None] != y).astype(float)
    )
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_allclose(a.components_, c.components_, atol=1e-12)


def test_reproducible_and_thread_independent(data):
    X, y = data
    a = RMLR(C=2.0, regularization=0.5, num_threads=1).fit(X, y)
    b = RMLR(C=2.0, regularization=0.5, num_threads=2).fit(X, y)
    np.testing.assert_allclose(a.get_mahalanobis_matrix(), b.get_mahalanobis_matrix(), atol=1e-10)
    np.testing.assert_array_equal(a.objective_, RMLR(C=2.0, regularization=0.5, num_threads=1).fit(X, y).objective_)


def test_warm_start_reuses_cutting_planes_only_for_the_same_problem(data):
    X, y = data
    model = RMLR(C=1.0, regularization=0.5, warm_start=True, num_threads=1).fit(X, y)
    first = model.n_constraints_
    model.set_params(C=4.0, regularization=0.2).fit(X, y)
    assert model.n_constraints_ >= first  # the working set carried over
    cold = RMLR(C=4.0, regularization=0.2, num_threads=1).fit(X, y)
    assert model.objective_[-1] <= cold.objective_[-1] + model.C * model.epsilon + 1e-9
    assert model.n_iter_ < cold.n_iter_
    Xs = X.copy()
    Xs[:, 0] *= 2  # another problem: starts afresh and matches a cold fit
    model.fit(Xs, y)
    np.testing.assert_array_equal(
        model.components_, RMLR(C=4.0, regularization=0.2, num_threads=1).fit(Xs, y).components_
    )


def test_convergence_warning_and_progress(data, capsys):
    X, y = data
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        model = MLR(C=10.0, max_iter=2, num_threads=1).fit(X, y)
    assert not model.converged_ and model.n_iter_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        MLR(C=10.0, max_iter=3, show_progress=True, num_threads=1).fit(X, y)
    assert "MLR" in capsys.readouterr().err


def test_clone_and_params():
    m = RMLR(C=3.0, regularization=0.2, penalty="l1")
    g = clone(m).set_params(C=5.0)
    assert g.get_params()["penalty"] == "l1" and g.C == 5.0 and m.C == 3.0
    assert not hasattr(g, "components_")


@pytest.mark.parametrize(
    "cls, params, match",
    [
        (MLR, {"C": 0.0}, "C must be"),
        (MLR, {"C": -1.0}, "C must be"),
        (MLR, {"C": np.inf}, "C must be"),
        (RMLR, {"regularization": 0.0}, "regularization must be"),
        (RMLR, {"regularization": -0.1}, "regularization must be"),
        (RMLR, {"penalty": "l2"}, "penalty must be one of"),
        (MLR, {"loss": "hinge"}, "loss must be one of"),
        (MLR, {"k": 3}, "k is only used"),
        (MLR, {"loss": "prec@k", "k": 0}, "k must be >= 1"),
        (MLR, {"epsilon": 0.0}, "epsilon must be"),
        (MLR, {"max_iter": 0}, "max_iter must be >= 1"),
        (MLR, {"admm_max_iter": 0}, "admm_max_iter must be >= 1"),
        (MLR, {"num_threads": -1}, "num_threads must be >= 0"),
    ],
)
def test_bad_parameters(data, cls, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        cls(**params).fit(X, y)


def test_bad_parameter_types(data):
    X, y = data
    with pytest.raises(TypeError, match="C must be a real number"):
        MLR(C="1").fit(X, y)
    with pytest.raises(TypeError, match="show_progress must be True, False or None"):
        MLR(show_progress=1).fit(X, y)
    with pytest.raises(TypeError, match="warm_start must be a bool"):
        MLR(warm_start="yes").fit(X, y)


def test_bad_data(data, fitted):
    X, y = data
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MLR().fit(bad, y)
    const = X.copy()
    const[:, 2] = 1.0
    with pytest.raises(ValueError, match=r"constant feature\(s\) \[2\]"):
        MLR().fit(const, y)
    with pytest.raises(ValueError, match="no relevant point"):
        MLR().fit(X, np.r_[y[:-1], 99])  # a class with one point
    with pytest.raises(ValueError, match="no irrelevant point"):
        MLR().fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="requires y to be passed"):
        MLR().fit(X)
    with pytest.raises(ValueError, match="not both"):
        MLR().fit(X, y, relevance=label_relevance(y))
    with pytest.raises(ValueError, match="labels but X has"):
        MLR().fit(X, y[:-1])
    with pytest.raises(ValueError, match=r"must be \(45, 45\)"):
        MLR().fit(X, relevance=sp.eye(3))
    with pytest.raises(ValueError, match="share pairs"):
        MLR().fit(X, relevance=label_relevance(y), irrelevant=np.ones((45, 45)))
    with pytest.raises(ValueError, match="irrelevant goes with relevance"):
        MLR().fit(X, y, irrelevant=np.ones((45, 45)))
    with pytest.raises(ValueError, match="2D array"):
        MLR().fit(X[0], y)
    with pytest.raises(NotFittedError):
        MLR().transform(X)
    with pytest.raises(ValueError, match="is expecting 8 features"):
        fitted.transform(X[:, :3])
    with pytest.raises(ValueError, match="pairs must have shape"):
        fitted.pair_distance(np.zeros((3, 8)))


def test_save_load_round_trip(tmp_path, fitted, data):
    X, _ = data
    fitted.save(tmp_path / "rmlr")
    back = RMLR.load(tmp_path / "rmlr.npz")
    assert back.get_params() == fitted.get_params()
    np.testing.assert_array_equal(back.transform(X), fitted.transform(X))
    np.testing.assert_array_equal(back.objective_, fitted.objective_)
    assert type(MLR.load(tmp_path / "rmlr.npz")) is RMLR  # an R-MLR is an MLR with a penalty
    MLR(num_threads=1).fit(X, data[1]).save(tmp_path / "mlr")
    with pytest.raises(ValueError, match="holds a 'MLR', not a RMLR"):
        RMLR.load(tmp_path / "mlr.npz")
    bad = rewrite_header(tmp_path / "rmlr.npz", tmp_path / "bad.npz", '"regularization": 0.5', '"regularization": -1.0')
    with pytest.raises(ValueError, match="invalid parameters"):
        RMLR.load(bad)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable recsys_ltr model file"):
        RMLR.load(tmp_path / "junk.npz")


def test_default_rmlr_switches_the_noise_off():
    """Dissertation sec. 2.4.1: wine padded with 64 correlated noise dimensions (Eq. 2.11).  At the
    old default (λ = 0.1) 43-51% of ||W||_2,1 sat on the noise rows; the default now leaves < 15%
    there and beats the Euclidean 3-NN by far."""
    from scipy.stats import wishart
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split
    from sklearn.neighbors import KNeighborsClassifier

    X, y = load_wine(return_X_y=True)
    sigma = wishart(df=64, scale=np.eye(64)).rvs(random_state=1064)
    X = np.hstack((X, np.random.default_rng(1064).multivariate_normal(np.zeros(64), sigma, size=len(y))))
    tr, te = train_test_split(np.arange(len(y)), train_size=0.4, stratify=y, random_state=0)
    X = (X - X[tr].mean(axis=0)) / X[tr].std(axis=0)
    L = RMLR(num_threads=1).fit(X[tr], y[tr]).components_
    rows = np.linalg.norm(L.T @ L, axis=1)
    assert rows[13:].sum() < 0.15 * rows.sum()

    def accuracy(Z):
        return np.mean(KNeighborsClassifier(n_neighbors=3).fit(Z[tr], y[tr]).predict(Z[te]) == y[te])

    assert accuracy(X @ L.T) > accuracy(X) + 0.1
