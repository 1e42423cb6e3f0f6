"""RPC-MTL (wu2016, Algorithm 1): Eq. 2 pairs, Eq. 3 metric, pLocalsearch, f_odr, K = 1 = ListMLE."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_listwise import _numeric_grad, ltr_data

from recsys_ltr.ltr import RPCMTL, ListMLE
from recsys_ltr.ltr.rpcmtl import (
    _cluster_parts,
    _ordinal_nll,
    fit_ordinal_logit,
    initial_clusters,
    plocalsearch,
    rank_pairs,
    xing_metric,
)


# ----------------------------------------------------------------------------- Eq. 2 and Eq. 3
def test_rank_pairs_match_enumeration():
    offsets = np.array([0, 3, 10, 11, 19])
    S, D = rank_pairs(offsets, 2, 5)
    ref_S, ref_D = set(), set()
    for s, e in itertools.pairwise(offsets):
        for a, b in itertools.combinations(range(s, e), 2):
            if b - a <= 2:
                ref_S.add((a, b))
            elif b - a >= 5:
                ref_D.add((a, b))
    assert set(map(tuple, S.tolist())) == ref_S and len(S) == len(ref_S)
    assert set(map(tuple, D.tolist())) == ref_D and len(D) == len(ref_D)


def _xing_objective(M, A, Delta):
    return np.sqrt(np.einsum("na,ab,nb->n", Delta, M, Delta)).sum() / np.sqrt(np.sum(M * A))


def test_xing_metric_is_feasible_and_beats_a_grid_of_2x2_metrics():
    """Eq. 3 is scale-free: compare Σ_D d_M / sqrt(Σ_S d_M²) with the best PSD 2x2 matrix of a grid."""
    rng = np.random.default_rng(0)
    dS = rng.normal(size=(200, 2)) * [1.0, 0.2]  # similar pairs differ little along axis 1
    Delta = rng.normal(size=(300, 2)) * [1.0, 1.0]
    A = dS.T @ dS
    M = xing_metric(A, Delta, max_iter=500, tol=1e-10)
    assert np.all(np.linalg.eigvalsh(M) >= -1e-12) and np.sum(M * A) <= 1 + 1e-8
    best = 0.0
    for a, c in itertools.product(np.linspace(0.01, 1, 40), repeat=2):
        for b in np.linspace(-1, 1, 41) * np.sqrt(a * c):
            best = max(best, _xing_objective(np.array([[a, b], [b, c]]), A, Delta))
    got = _xing_objective(M, A, Delta)
    assert got >= best * 0.999
    assert got > _xing_objective(np.eye(2), A, Delta) * 1.5  # it stretches the informative axis
    assert M[1, 1] > M[0, 0]


# ----------------------------------------------------------------------------- pLocalsearch
def _brute_plocalsearch(Z, offsets, labels, K, max_iter):
    """Algorithm 1 step 2 written plainly: lists in turn, the cheapest negative Eq. 8 move of a
    candidate (Eq. 6) into its neighbour's cluster, means recomputed from scratch."""
    labels = labels.copy()
    costs = []

    def omega():
        return sum(((Z[labels == k] - Z[labels == k].mean(0)) ** 2).sum() for k in range(K) if np.any(labels == k))

    costs.append(omega())
    for _ in range(max_iter):
        moved = False
        for s, e in itertools.pairwise(offsets):
            best = (-1e-12 * np.mean(np.sum(Z * Z, axis=1)), None, None)
            for i in range(s, e):
                k1 = labels[i]
                n1 = np.sum(labels == k1)
                if n1 <= 1:
                    continue
                for nb in (i - 1, i + 1):
                    if not s <= nb < e or labels[nb] == k1:
                        continue
                    k2 = labels[nb]
                    n2 = np.sum(labels == k2)
                    mu1, mu2 = Z[labels == k1].mean(0), Z[labels == k2].mean(0)
                    cost = n2 / (n2 + 1) * np.sum((Z[i] - mu2) ** 2) - n1 / (n1 - 1) * np.sum((Z[i] - mu1) ** 2)
                    if cost < best[0]:
                        best = (cost, i, k2)
            if best[1] is not None:
                before = omega()
                labels[best[1]] = best[2]
                assert omega() - before == pytest.approx(best[0], rel=1e-8, abs=1e-9)  # Eq. 9
                moved = True
        costs.append(omega())
        if not moved:
            break
    return labels, np.array(costs)


@pytest.mark.kernels
@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10**6),
    st.lists(st.integers(1, 9), min_size=1, max_size=6),
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_plocalsearch_matches_reference_never_increases_cost_and_preserves_order(seed, sizes, K, d):
    rng = np.random.default_rng(seed)
    sizes[0] = max(sizes[0], K)  # every cluster starts non-empty
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    Z = rng.normal(size=(offsets[-1], d)) + np.repeat(rng.normal(size=(len(sizes), d)) * 2, sizes, axis=0)
    start = initial_clusters(offsets, K)
    labels, n_iter, cost = plocalsearch(Z, offsets, start, K, max_iter=50)
    ref_labels, ref_cost = _brute_plocalsearch(Z, offsets, start, K, 50)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_allclose(cost, ref_cost, rtol=1e-9, atol=1e-9)
    assert n_iter == len(cost) - 1
    assert np.all(np.diff(cost) <= 1e-9 * max(cost[0], 1.0))  # Eq. 9: never increases
    for s, e in itertools.pairwise(offsets):
        assert np.all(np.diff(labels[s:e]) >= 0)  # Eq. 5: the within-list order is preserved
    assert np.array_equal(np.unique(labels), np.arange(K))  # no cluster emptied
    np.testing.assert_array_equal(start, initial_clusters(offsets, K))  # input not modified


@pytest.mark.kernels
def test_plocalsearch_moves_a_boundary_object_to_the_nearer_cluster():
    """One list (1, 1, 2, 2) of 1-D points 0, 0.1, 0.2, 10: the third point belongs with the
    first two (Eq. 8 cost < 0), the rest cannot improve."""
    Z = np.array([[0.0], [0.1], [0.2], [10.0], [10.1]])
    offsets = np.array([0, 5])
    labels, n_iter, cost = plocalsearch(Z, offsets, np.array([0, 0, 1, 1, 1]), 2)
    assert labels.tolist() == [0, 0, 0, 1, 1] and n_iter == 2
    n1, n2 = 3, 2
    mu1, mu2 = np.mean([0.2, 10.0, 10.1]), np.mean([0.0, 0.1])
    eq8 = n2 / (n2 + 1) * (0.2 - mu2) ** 2 - n1 / (n1 - 1) * (0.2 - mu1) ** 2
    assert cost[1] - cost[0] == pytest.approx(eq8)


def test_initial_clusters_by_position():
    assert initial_clusters(np.array([0, 7, 9]), 3).tolist() == [0, 0, 0, 1, 1, 2, 2, 0, 1]


# ----------------------------------------------------------------------------- f_odr
def test_ordinal_logit_gradient_and_recovery():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    v_true, theta_true = np.array([2.0, -1.0, 0.0]), np.array([-1.0, 0.5, 2.0])
    u = X @ v_true + rng.logistic(size=3000)
    t = np.searchsorted(theta_true, u)  # P(t <= j) = σ(θ_j - v·x)
    params = rng.normal(size=6)
    _value, grad = _ordinal_nll(params, X[:50], t[:50], 4, 0.3)
    np.testing.assert_allclose(
        grad, _numeric_grad(lambda p: _ordinal_nll(p, X[:50], t[:50], 4, 0.3)[0], params), rtol=1e-5, atol=1e-6
    )
    v, theta = fit_ordinal_logit(X, t, 4, alpha=0.0)
    np.testing.assert_allclose(v, v_true, atol=0.15)
    np.testing.assert_allclose(theta, theta_true, atol=0.15)
    assert np.all(np.diff(theta) > 0)


@pytest.mark.kernels
# ----------------------------------------------------------------------------- the estimator
@pytest.mark.parametrize(
    "kw", [{}, {"top_k": None, "regularization": 0.01, "average": False}, {"feature_scaling": "query"}]
)
def test_one_cluster_is_listmle_exactly(kw):
    X, y, qid = ltr_data(seed=11, n_queries=30)
    X2, _, qid2 = ltr_data(seed=12, n_queries=10)
    common = dict(learning_rate=0.01, iterations=5, random_state=3, **kw)
    rpc = RPCMTL(n_clusters=1, mtl_regularization=0.5, **common).fit(X, y, qid)
    mle = ListMLE(**common).fit(X, y, qid)
    np.testing.assert_array_equal(rpc.coef_[0], mle.coef_)
    np.testing.assert_array_equal(rpc.predict(X2, qid2), mle.predict(X2, qid2))
    np.testing.assert_array_equal(rpc.loss_curve_, mle.loss_curve_)


def test_cluster_parts_split_lists_by_cluster():
    ranked = np.array([4, 2, 0, 1, 3, 5, 6, 7])
    offsets = np.array([0, 5, 8])
    clusters = np.array([0, 0, 1, 1, 2, 0, 0, 1])
    y = np.zeros(8)
    y[[4, 2, 0, 1, 5]] = [2, 1, 1, 0, 1]  # list 0: parts (4, 2) (0, 1) (3); list 1: (5, 6) (7)
    rows, part_offsets, task = _cluster_parts(ranked, offsets, clusters, y)
    parts = [rows[a:b].tolist() for a, b in itertools.pairwise(part_offsets)]
    assert parts == [[4, 2], [0, 1], [5, 6]] and task.tolist() == [0, 1, 0]


@pytest.mark.kernels
@pytest.mark.parametrize("metric", ["xing", "identity"])
def test_fit_predict_follows_fig3(metric):
    X, y, qid = ltr_data(seed=13, n_queries=40, docs=12)
    est = RPCMTL(n_clusters=3, metric=metric, iterations=5, learning_rate=0.01, random_state=0).fit(X, y, qid)
    assert est.coef_.shape == (3, X.shape[1]) and est.odr_thresholds_.shape == (2,)
    assert np.all(np.diff(est.odr_thresholds_) > 0)
    assert np.all(np.diff(est.cost_curve_) <= 1e-9 * est.cost_curve_[0])
    assert np.all(np.linalg.eigvalsh(est.metric_) >= -1e-10)
    for q in np.unique(qid):  # each training list's clusters are non-decreasing along its ordering
        rows = np.flatnonzero(qid == q)
        c = est.clusters_[rows[np.argsort(-y[rows], kind="stable")]]
        assert np.all(np.diff(c[c >= 0]) >= 0)
    Xt, _, qt = ltr_data(seed=14, n_queries=10, docs=12)
    score, cluster = est.predict(Xt, qt), est.predict_cluster(Xt, qt)
    Xs = (Xt - est.feature_mean_) / est.feature_scale_
    local = np.einsum("nd,nd->n", Xs, est.coef_[cluster])
    for q in np.unique(qt):  # Fig. 3: by degree (best cluster first), then by the cluster's ranker
        rows = np.flatnonzero(qt == q)
        expected = rows[np.lexsort((-local[rows], cluster[rows]))]
        assert np.array_equal(rows[np.argsort(-score[rows], kind="stable")], expected)


def test_multi_task_regulariser_pulls_rankers_together():
    X, y, qid = ltr_data(seed=15, n_queries=40, docs=12)
    spread = []
    for lam in (0.0, 1e3):
        est = RPCMTL(
            n_clusters=3, mtl_regularization=lam, metric="identity", iterations=10, learning_rate=0.01, random_state=0
        )
        W = est.fit(X, y, qid).coef_
        spread.append(np.linalg.norm(W - W.mean(0)))
    assert spread[1] < 0.2 * spread[0]


@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"n_clusters": 0}, ValueError, "n_clusters"),
        ({"n_clusters": 50}, ValueError, "exceeds the longest training list"),
        ({"mtl_regularization": -1.0}, ValueError, "mtl_regularization"),
        ({"kappa1": 3, "kappa2": 3}, ValueError, "kappa2"),
        ({"kappa2": 40}, ValueError, "dissimilar pairs"),
        ({"metric": "cosine"}, ValueError, "metric"),
        ({"max_pairs": 0}, ValueError, "max_pairs"),
        ({"max_iter": -1}, ValueError, "max_iter"),
        ({"odr_regularization": np.nan}, ValueError, "odr_regularization"),
        ({"top_k": "some"}, TypeError, "top_k"),
    ],
)
def test_bad_params(params, error, match):
    X, y, qid = ltr_data(n_queries=5)
    with pytest.raises(error, match=match):
        RPCMTL(**params).fit(X, y, qid)


def test_max_pairs_samples_reproducibly():
    X, y, qid = ltr_data(seed=16, n_queries=20, docs=12)
    a = RPCMTL(max_pairs=50, iterations=1, random_state=0).fit(X, y, qid)
    b = RPCMTL(max_pairs=50, iterations=1, random_state=0).fit(X, y, qid)
    c = RPCMTL(max_pairs=50, iterations=1, random_state=1).fit(X, y, qid)
    np.testing.assert_array_equal(a.metric_, b.metric_)
    assert not np.allclose(a.metric_, c.metric_)


def test_xing_metric_stays_bounded_when_similar_pairs_never_differ_along_an_axis():
    rng = np.random.default_rng(1)
    dS = np.column_stack([rng.normal(size=100), np.zeros(100)])  # axis 1 never varies in S
    Delta = rng.normal(size=(100, 2))
    M = xing_metric(dS.T @ dS, Delta)
    assert np.all(np.isfinite(M)) and M[1, 1] > M[0, 0]
    A = dS.T @ dS + 1e-6 * np.trace(dS.T @ dS) / 2 * np.eye(2)
    assert np.sum(M * A) == pytest.approx(1.0)


def test_plocalsearch_rejects_inconsistent_inputs():
    Z = np.zeros((4, 2))
    with pytest.raises(ValueError, match="same rows"):
        plocalsearch(Z, np.array([0, 3]), np.zeros(4, dtype=int), 2)
    with pytest.raises(ValueError, match="labels in"):
        plocalsearch(Z, np.array([0, 4]), np.array([0, 1, 2, 0]), 2)
