"""L-GMML (su2017 sec. 3, Algorithm 2): local weights, m = 1 reduction, one WARP step by hand."""

import json
import math

import numpy as np
import pytest
from _helpers import resave
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from recsys_ltr._io import write_estimator_file
from recsys_ltr.ltr.lgmml import LGMML
from recsys_ltr.metric_learning.gmml import GMML
from recsys_ltr.query_metrics import ndcg_at_k, ranking_report

pytestmark = pytest.mark.kernels


def _ltr_data(seed=0, n_queries=12, docs=10, d=4):
    """Queries whose relevant documents sit near a shared 'ideal' point in features 0-1."""
    rng = np.random.default_rng(seed)
    ideal = np.array([1.0, 1.0, 0.0, 0.0])[:d]
    X, y, qid = [], [], []
    for q in range(n_queries):
        lab = rng.integers(0, 3, docs)
        lab[0], lab[1] = 2, 0  # every query usable
        pts = rng.normal(size=(docs, d)) * 0.6
        pts[:, :2] += np.where(lab[:, None] > 0, ideal[:2], -ideal[:2]) * lab[:, None] / 2
        X.append(pts)
        y.append(lab)
        qid.append(np.full(docs, 10 * q + 3))
    return np.vstack(X), np.concatenate(y), np.concatenate(qid)


def test_local_weights_positive_smooth_and_one_at_anchors():
    X, y, qid = _ltr_data()
    est = LGMML(n_metrics=4, queries_per_metric=3, iterations=0, random_state=0).fit(X, y, qid)
    W = est.local_weights(X)
    assert W.shape == (X.shape[0], 4) and np.all(W > 0) and np.all(W <= 1)
    # w_r(p_r) = 1: the anchors are training rows (in scaled coordinates)
    anchor_rows = est.anchors_ * est.scale_
    assert np.allclose(np.diag(est.local_weights(anchor_rows)), 1.0)
    # smooth: Lipschitz with constant rho/2 in the metric's norm, |w(x) - w(x')| <= ||T_r (x - x')||
    rng = np.random.default_rng(1)
    A, B = X[rng.integers(0, len(X), 200)], X[rng.integers(0, len(X), 200)]
    gap = np.abs(est.local_weights(A) - est.local_weights(B))
    dist = np.linalg.norm(np.einsum("rab,nb->nra", est.transforms_, (A - B) / est.scale_), axis=2)
    assert np.all(gap <= dist + 1e-12)
    eps = 1e-7 * rng.normal(size=A.shape)
    assert np.abs(est.local_weights(A + eps) - est.local_weights(A)).max() < 1e-4


def _reference_global_scorer(X, y, qid, regularization):
    """m = 1 with every query pooled, written plainly: GMML on all within-query pairs, anchor
    by mean NDCG@10 (the anchor left out of its own query), score -exp(-d) d, d = ||M (x - p)||."""
    scale = np.linalg.norm(X, axis=0)
    Xs = X / scale
    a, b, similar = [], [], []
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        pos, neg = rows[y[rows] > 0], rows[y[rows] == 0]
        for i in pos:
            a += [i] * (pos.size - 1 + neg.size)
            b += [j for j in pos if j != i] + list(neg)
            similar += [True] * (pos.size - 1) + [False] * neg.size
    a, b, similar = np.array(a), np.array(b), np.array(similar)
    # each relevant-irrelevant pair appears once, each relevant-relevant pair in both orders
    diff = Xs[a] - Xs[b]
    lam = regularization * np.sum(diff**2) / (2 * X.shape[1])
    M = GMML(regularization=lam).fit_pairs(Xs[a], Xs[b], similar).get_mahalanobis_matrix()
    cands = np.flatnonzero(y > 0)
    means = []
    for c in cands:
        vals = []
        for q in np.unique(qid):
            rows = np.flatnonzero((qid == q) & (np.arange(len(y)) != c))
            nd = ndcg_at_k(y[rows], -np.sum(((Xs[rows] - Xs[c]) @ M) ** 2, axis=1), np.zeros(rows.size, int), 10)[0]
            if not np.isnan(nd):
                vals.append(nd)
        means.append(np.mean(vals))
    anchor = Xs[cands[np.flatnonzero(np.array(means) >= max(means) - 1e-9)[0]]]  # ties: first row
    d = np.linalg.norm((Xs - anchor) @ M, axis=1)
    return -np.exp(-d) * d


def test_single_metric_reduces_to_global_gmml_scorer():
    X, y, qid = _ltr_data(seed=3, n_queries=6, docs=7)
    est = LGMML(n_metrics=1, queries_per_metric=100, regularization=1e-2, iterations=3, random_state=0)
    est.fit(X, y, qid)
    ref = _reference_global_scorer(X, y, qid, 1e-2)
    phi = est.phi_[0, 0]
    assert phi > 0
    np.testing.assert_allclose(est.predict(X, qid), phi * ref, rtol=1e-6, atol=1e-12)


def _eq16(k):
    return sum(1 / math.log2(i + 1) for i in range(1, k + 1))


def test_one_warp_step_matches_eq21_by_hand():
    """One query, one relevant document (the anchor, d = 0) and N_q = 4 irrelevant ones: two
    "near" violators (sum_r Φ G < margin) and two "mid" non-violators.  One SGD sample draws
    negatives until a near one: n_s draws, weight L(floor(4 / n_s)) (Eq. 16), then Eq. 21."""

    def data(c):
        b = c * np.array([1.0, 0.5])
        return np.array([[0.0, 0.0], 0.1 * b, 0.1 * b, b, b]), np.array([1, 0, 0, 0, 0]), np.zeros(5, int)

    kw = dict(
        n_metrics=2,
        queries_per_metric=1,
        margin=0.5,
        learning_rate=0.3,
        phi_init=1.0,
        feature_scaling=None,
        iterations=1,
    )
    probe = LGMML(**kw, random_state=0).fit(*data(1.0))
    c = 1.0 / np.linalg.norm(probe.metrics_[0] @ np.array([1.0, 0.5]))  # GMML is scale-free: d(mid) = 1
    X, y, qid = data(c)
    seen = {}
    for seed in range(60):
        est = LGMML(**kw, random_state=seed).fit(X, y, qid)
        d = np.array([[np.linalg.norm(est.metrics_[r] @ (x - est.anchors_[r])) for r in range(2)] for x in X])
        G = np.exp(-d) * d  # -∂f/∂Φ[r], Eq. 13
        assert np.array_equal(est.anchors_[0], X[0]) and np.allclose(d[3], 1.0)
        assert G[1].sum() < 0.5 < G[3].sum()  # phi_init = 1: near violate the margin, mid do not
        stats = est.warp_stats_
        assert stats.samples == 1
        n_s = stats.draws
        if stats.violators == 0:  # four mid draws (beta = N_q = 4): no update
            np.testing.assert_array_equal(est.phi_[0], [1.0, 1.0])
            continue
        # Eq. 21 with the projection: Φ - μ L (∂f(p-)/∂Φ - ∂f(p+)/∂Φ), ∂f/∂Φ = -G, neg = a near row
        expected = np.maximum(0.0, 1.0 - 0.3 * _eq16(4 // n_s) * (-G[1] + G[0]))
        np.testing.assert_allclose(est.phi_[0], expected, rtol=1e-13)
        seen[n_s] = est.phi_[0].copy()
    assert {1, 2} <= set(seen)  # the n_s > 1 path was exercised, and its weight differs
    assert not np.allclose(seen[1], seen[2])


def test_per_query_phi_and_reproducibility():
    X, y, qid = _ltr_data(seed=4)
    est = LGMML(n_metrics=3, queries_per_metric=4, phi_mode="per_query", iterations=2, random_state=7)
    est.fit(X, y, qid)
    assert est.phi_.shape == (12, 3) and np.all(est.phi_ >= 0)
    again = clone(est).fit(X, y, qid)
    assert np.array_equal(again.phi_, est.phi_)
    dist = est._distances(X / est.scale_)
    expected = -(np.exp(-dist) * dist) @ est.phi_.mean(0)
    np.testing.assert_allclose(est.predict(X, qid), expected)


def test_candidate_anchors_permutation_invariant_and_query_local():
    X, y, qid = _ltr_data(seed=5)
    est = LGMML(n_metrics=3, queries_per_metric=4, test_anchors="candidates", iterations=2, random_state=0)
    est.fit(X, y, qid)
    s = est.predict(X, qid)
    rng = np.random.default_rng(0)  # shuffle the queries and the rows inside each query
    perm = np.concatenate([rng.permutation(np.flatnonzero(qid == q)) for q in rng.permutation(np.unique(qid))])
    np.testing.assert_allclose(est.predict(X[perm], qid[perm]), s[perm])
    # one query's score does not depend on the other queries in the batch
    mask = qid == qid[0]
    np.testing.assert_allclose(est.predict(X[mask], qid[mask]), s[mask])


def test_learns_better_than_chance():
    X, y, qid = _ltr_data(seed=6, n_queries=30)
    Xt, yt, qt = _ltr_data(seed=7, n_queries=30)
    est = LGMML(n_metrics=5, queries_per_metric=10, iterations=5, random_state=0).fit(X, y, qid)
    good = ranking_report(yt, est.predict(Xt, qt), qt)["NDCG@10"]
    chance = ranking_report(yt, np.random.default_rng(0).normal(size=yt.size), qt)["NDCG@10"]
    assert good > chance + 0.1


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_metrics": 0}, "n_metrics"),
        ({"distance": "cosine"}, "distance"),
        ({"phi_mode": "each"}, "phi_mode"),
        ({"test_anchors": "nearest"}, "test_anchors"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"margin": np.inf}, "margin"),
        ({"t": 2.0}, "t must"),
        ({"max_sampled": 0}, "max_sampled"),
        ({"feature_scaling": "minmax"}, "feature_scaling"),
    ],
)
def test_bad_params(params, match):
    X, y, qid = _ltr_data(n_queries=3)
    with pytest.raises(ValueError, match=match):
        LGMML(**params).fit(X, y, qid)


def test_bad_inputs():
    X, y, qid = _ltr_data(n_queries=3)
    with pytest.raises(ValueError, match="qid must have shape"):
        LGMML().fit(X, y, qid[:-1])
    with pytest.raises(ValueError, match="y must have shape"):
        LGMML().fit(X, y[:-1], qid)
    with pytest.raises(ValueError, match="non-negative"):
        LGMML().fit(X, -y, qid)
    with pytest.raises(ValueError, match="NaN"):
        LGMML().fit(np.where(X > 1, np.nan, X), y, qid)
    with pytest.raises(ValueError, match="both a relevant"):
        LGMML().fit(X, np.zeros_like(y), qid)
    with pytest.raises(NotFittedError):
        LGMML().predict(X, qid)
    est = LGMML(n_metrics=2, queries_per_metric=2, iterations=1, random_state=0).fit(X, y, qid)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2], qid)
    with pytest.raises(TypeError, match="integers"):
        est.predict(X, qid.astype(float) + 0.5)


def test_save_load_roundtrip(tmp_path):
    X, y, qid = _ltr_data(seed=8)
    est = LGMML(n_metrics=3, queries_per_metric=4, iterations=2, random_state=0).fit(X, y, qid)
    est.save(tmp_path / "m.npz")
    back = LGMML.load(tmp_path / "m.npz")
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.predict(X, qid), est.predict(X, qid))
    state = {name: getattr(est, name) for name in ("metrics_", "transforms_", "anchors_", "scale_")}
    write_estimator_file(tmp_path / "bad", "LGMML", est.get_params(), {**state, "phi_": -est.phi_ - 1})
    with pytest.raises(ValueError, match="phi_ must be >= 0"):
        LGMML.load(tmp_path / "bad.npz")


def _rewrite(tmp_path, est, params=None, **arrays):
    est.save(tmp_path / "good.npz")
    data = dict(np.load(tmp_path / "good.npz"))
    header = json.loads(str(data["header"]))
    header["params"].update(params or {})
    data.update(header=np.array(json.dumps(header)), **arrays)
    resave(tmp_path / "edited.npz", **data)
    return tmp_path / "edited.npz"


@pytest.mark.parametrize("distance", ["eq12", "mahalanobis"])
def test_load_revalidates_parameters_and_transforms(tmp_path, distance):
    X, y, qid = _ltr_data(seed=9)
    est = LGMML(n_metrics=2, queries_per_metric=3, iterations=1, distance=distance, random_state=0).fit(X, y, qid)
    np.testing.assert_array_equal(LGMML.load(_rewrite(tmp_path, est)).predict(X, qid), est.predict(X, qid))
    for params, match in (
        ({"test_anchors": "bogus"}, "test_anchors"),
        ({"distance": 5}, "distance"),
        ({"t": 7}, "t must"),
        ({"regularization": True}, "regularization"),
        ({"n_metrics": 3}, "inconsistent shapes"),
        ({"phi_mode": "per_query"}, None),
    ):
        path = _rewrite(tmp_path, est, params)
        if match is None:  # one shared row is a valid per-query model too (mean of one row)
            LGMML.load(path)
            continue
        with pytest.raises(ValueError, match=match):
            LGMML.load(path)
    other = "mahalanobis" if distance == "eq12" else "eq12"
    for path in (
        _rewrite(tmp_path, est, transforms_=est.transforms_ * 3),
        _rewrite(tmp_path, est, {"distance": other}),
    ):
        with pytest.raises(ValueError, match="transforms_ must"):
            LGMML.load(path)


def test_local_weights_rho_and_zero_scatter_errors():
    X, y, qid = _ltr_data(seed=10)
    est = LGMML(n_metrics=2, queries_per_metric=3, iterations=0, random_state=0).fit(X, y, qid)
    np.testing.assert_allclose(est.local_weights(X, rho=1.0) ** 2, est.local_weights(X))
    with pytest.raises(ValueError, match="rho"):
        est.local_weights(X, rho=-1.0)
    with pytest.raises(TypeError, match="rho"):
        est.local_weights(X, rho=True)
    with pytest.raises(ValueError, match="zero scatter"):
        LGMML(n_metrics=1).fit(np.ones((4, 2)), [1, 0, 1, 0], [0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"GMML solve overflows with regularization=1e\+300 .* lower regularization"):
        LGMML(n_metrics=1, regularization=1e300, iterations=0).fit(X, y, qid)  # was LinAlgError from eigh
