"""ListMLE / ListNet (recsys_ltr.ltr.listwise) and the shared query-data interface (ltr._base)."""

import itertools
import math
import pickle

import numpy as np
import pytest
from _helpers import resave
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import (
    check_do_not_raise_errors_in_init_or_set_params,
    check_estimator_cloneable,
    check_estimator_repr,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from recsys_ltr._rng import seed_state
from recsys_ltr.ltr import LGMML, RPCMTL, ListMLE, ListNet, check_query_data
from recsys_ltr.ltr.listwise import (
    LISTMLE,
    LISTNET,
    _listmle_list,
    _listnet_list,
    _rank_members,
    listwise_objective,
    query_level_norm,
    top_lengths,
)
from recsys_ltr.query_metrics import ranking_report

ESTIMATORS = [ListMLE, ListNet, RPCMTL, LGMML]


def ltr_data(seed=0, n_queries=20, docs=8, d=5, noise=0.3):
    """Queries whose graded labels (0-2) follow a linear score ``x · w*`` plus noise."""
    rng = np.random.default_rng(seed)
    w = np.linspace(1.0, -0.5, d)
    X = rng.normal(size=(n_queries * docs, d))
    z = X @ w + noise * rng.normal(size=X.shape[0])
    y = np.digitize(z, np.quantile(z, [0.6, 0.85]))
    qid = np.repeat(np.arange(n_queries) * 7 + 3, docs)
    return X, y, qid


# ----------------------------------------------------------------------------- per-list losses
def _plackett_luce_nll(s, k):
    """-log of the probability that the first k items come first, in this order (PL model)."""
    return sum(math.log(sum(math.exp(v) for v in s[j:])) - s[j] for j in range(k))


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.kernels
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-30, 30), min_size=1, max_size=9), st.integers(0, 12))
def test_listmle_list_matches_plackett_luce_and_finite_differences(values, k):
    s = np.array(values)
    k = min(k, s.size)
    grad = np.empty(s.size)
    loss = _listmle_list(s, k, grad)
    assert loss == pytest.approx(_plackett_luce_nll(s, k), rel=1e-10, abs=1e-9)
    num = _numeric_grad(lambda v: _plackett_luce_nll(v, k), s)
    np.testing.assert_allclose(grad, num, atol=1e-5)


def test_listmle_list_hand_case_and_extremes():
    # two items: -log σ(s0 - s1); gradient (σ - 1, 1 - σ) with σ = σ(s0 - s1)
    grad = np.empty(2)
    loss = _listmle_list(np.array([2.0, 0.5]), 2, grad)
    sig = 1 / (1 + math.exp(-1.5))
    assert loss == pytest.approx(-math.log(sig))
    np.testing.assert_allclose(grad, [sig - 1, 1 - sig])
    grad = np.empty(3)
    assert np.isfinite(_listmle_list(np.array([800.0, -800.0, 0.0]), 3, grad))
    assert np.all(np.isfinite(grad)) and abs(grad.sum()) < 1e-12  # shift invariance: Σ ∂L/∂s = 0


def _listnet_ref(s, labels):
    p_y = np.exp(labels - labels.max()) / np.exp(labels - labels.max()).sum()
    log_p_s = s - (s.max() + np.log(np.exp(s - s.max()).sum()))
    return -(p_y * log_p_s).sum()


@pytest.mark.kernels
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-20, 20), st.integers(0, 4)), min_size=1, max_size=9))
def test_listnet_list_matches_cross_entropy_and_finite_differences(pairs):
    s = np.array([p[0] for p in pairs])
    labels = np.array([float(p[1]) for p in pairs])
    grad = np.empty(s.size)
    assert _listnet_list(s, labels, grad) == pytest.approx(_listnet_ref(s, labels), rel=1e-10, abs=1e-10)
    np.testing.assert_allclose(grad, _numeric_grad(lambda v: _listnet_ref(v, labels), s), atol=1e-5)


# ----------------------------------------------------------------------------- Eq. 10 objective
@pytest.mark.kernels
@pytest.mark.parametrize("loss_kind", [LISTMLE, LISTNET])
def test_objective_gradient_matches_finite_differences(loss_kind):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)), rng.integers(0, 3, 30).astype(float)
    offsets = np.array([0, 5, 12, 13, 21, 30])
    ranked = np.concatenate([s + np.argsort(-y[s:e], kind="stable") for s, e in itertools.pairwise(offsets)])
    task = np.array([0, 2, 1, 0, 2])
    top = np.array([5, 3, 1, 8, 2])
    W = rng.normal(size=(3, 4))
    value, grad = listwise_objective(
        W, X, y, ranked, offsets, task, top, loss_kind, mtl_regularization=0.7, regularization=0.3
    )

    def objective(W):
        total, mean = 0.0, W.mean(axis=0)
        for l in range(5):
            rows = ranked[offsets[l] : offsets[l + 1]]
            s = X[rows] @ W[task[l]]
            total += _plackett_luce_nll(s, top[l]) if loss_kind == LISTMLE else _listnet_ref(s, y[rows])
        return total + 0.7 * np.sum((W - mean) ** 2) + 0.3 * np.sum(W**2)

    assert value == pytest.approx(objective(W), rel=1e-12)
    np.testing.assert_allclose(grad, _numeric_grad(objective, W), rtol=1e-6, atol=1e-6)


@pytest.mark.kernels
def test_rank_members_sorts_by_label_and_shuffles_ties_uniformly():
    y = np.array([1.0, 0.0, 2.0, 0.0, 1.0, 0.0])
    members = np.arange(6)
    state = seed_state(3, 1)
    seen = {}
    out = np.empty(6, dtype=np.int64)
    for _ in range(1200):
        _rank_members(members, y, state, out)
        assert y[out].tolist() == [2, 1, 1, 0, 0, 0]
        key = tuple(out)
        seen[key] = seen.get(key, 0) + 1
    assert len(seen) == 2 * 6  # 2! orders of the ones times 3! orders of the zeros
    assert min(seen.values()) > 1200 / 12 / 2


def test_top_lengths():
    y = np.array([2, 0, 0, 1, 1, 1, 3, 0, 3], dtype=float)
    rows, offsets = np.arange(9), np.array([0, 3, 6, 9])
    assert top_lengths(y, rows, offsets, None).tolist() == [3, 3, 3]
    assert top_lengths(y, rows, offsets, 2).tolist() == [2, 2, 2]
    assert top_lengths(y, rows, offsets, "labels").tolist() == [1, 0, 2]


@pytest.mark.kernels
# ----------------------------------------------------------------------------- estimators
@pytest.mark.parametrize("cls", [ListMLE, ListNet])
def test_learns_a_linear_ranking_and_reduces_the_objective(cls):
    X, y, qid = ltr_data(seed=1, n_queries=60)
    Xt, yt, qt = ltr_data(seed=2, n_queries=60)
    est = cls(learning_rate=0.01, iterations=40, random_state=0).fit(X, y, qid)
    assert est.loss_curve_[-1] < est.loss_curve_[0]
    good = ranking_report(yt, est.predict(Xt, qt), qt)["NDCG@10"]
    oracle = ranking_report(yt, Xt @ np.linspace(1.0, -0.5, 5), qt)["NDCG@10"]
    chance = ranking_report(yt, np.random.default_rng(0).normal(size=yt.size), qt)["NDCG@10"]
    assert good > chance + 0.2 and good > oracle - 0.05
    direction = est.coef_ / est.feature_scale_
    cos = direction @ np.linspace(1.0, -0.5, 5) / (np.linalg.norm(direction) * np.linalg.norm(np.linspace(1, -0.5, 5)))
    assert cos > 0.95


@pytest.mark.kernels
@pytest.mark.parametrize("cls", [ListMLE, ListNet, RPCMTL])
def test_reproducible_by_seed(cls):
    X, y, qid = ltr_data(seed=3)
    a = cls(iterations=3, random_state=5).fit(X, y, qid)
    b = cls(iterations=3, random_state=5).fit(X, y, qid)
    c = cls(iterations=3, random_state=6).fit(X, y, qid)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.predict(X, qid), b.predict(X, qid))
    assert not np.array_equal(a.coef_, c.coef_)
    gen = cls(iterations=3, random_state=np.random.default_rng(5)).fit(X, y, qid)
    again = cls(iterations=3, random_state=np.random.default_rng(5)).fit(X, y, qid)
    np.testing.assert_array_equal(gen.coef_, again.coef_)


@pytest.mark.kernels
def test_one_sgd_step_by_hand():
    """One query, one epoch, no averaging: ``w = -η ∂L/∂w`` at ``w = 0`` (no ties: the order is
    the label order)."""
    X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    y, qid = np.array([2, 0, 1]), np.zeros(3, dtype=int)
    est = ListMLE(top_k=None, learning_rate=0.5, iterations=1, average=False, feature_scaling=None).fit(X, y, qid)
    # at s = 0 with order (0, 2, 1): ∂L/∂s_π(i) = Σ_{j <= i} 1 / (3 - j) - 1
    g = np.array([1 / 3 - 1, 1 / 3 + 1 / 2 + 1 - 1, 1 / 3 + 1 / 2 - 1])  # rows 0, 1, 2
    np.testing.assert_allclose(est.coef_, -0.5 * X.T @ g)
    net = ListNet(learning_rate=0.5, iterations=1, average=False, feature_scaling=None).fit(X, y, qid)
    p_y = np.exp([2.0, 0.0, 1.0]) / np.exp([2.0, 0.0, 1.0]).sum()
    np.testing.assert_allclose(net.coef_, -0.5 * X.T @ (np.full(3, 1 / 3) - p_y))


@pytest.mark.kernels
def test_average_is_the_mean_of_the_iterates():
    """With one training query an epoch is one step, so the iterates are the last-iterate fits
    after 1, 2, 3 epochs (same seed: the same tie shuffles)."""
    X, y, qid = ltr_data(seed=4, n_queries=1)
    kw = dict(learning_rate=0.05, random_state=1)
    iterates = [ListMLE(iterations=e, average=False, **kw).fit(X, y, qid).coef_ for e in (1, 2, 3)]
    avg = ListMLE(iterations=3, average=True, **kw).fit(X, y, qid).coef_
    np.testing.assert_allclose(avg, np.mean(iterates, axis=0), rtol=1e-12)
    assert not np.allclose(avg, iterates[-1])


def test_query_level_norm_matches_letor_definition_and_is_used_at_prediction():
    X, y, qid = ltr_data(seed=5, n_queries=4, docs=5)
    X[:5, 2] = 7.0  # a constant feature in the first query
    _, _, offsets = check_query_data(X, y, qid)
    Z = query_level_norm(X, offsets)
    for q in np.unique(qid):
        rows = qid == q
        lo, hi = X[rows].min(0), X[rows].max(0)
        ref = np.where(hi > lo, (X[rows] - lo) / np.where(hi > lo, hi - lo, 1), 0.0)
        np.testing.assert_allclose(Z[rows], ref)
    est = ListMLE(feature_scaling="query", iterations=2, random_state=0).fit(X, y, qid)
    # a per-query affine change of the features leaves the query-normalised scores unchanged
    X2 = X.copy()
    X2[qid == qid[0]] = 3.0 * X2[qid == qid[0]] + 11.0
    np.testing.assert_allclose(est.predict(X2, qid), est.predict(X, qid))


def test_uninformative_queries_are_skipped():
    X, y, qid = ltr_data(seed=6, n_queries=6)
    extra_X = np.random.default_rng(0).normal(size=(5, X.shape[1]))
    X2 = np.vstack([X, extra_X, extra_X[:1]])
    y2 = np.concatenate([y, np.zeros(5, dtype=int), [2]])  # all-zero query, one-document query
    qid2 = np.concatenate([qid, np.full(5, 1000), [1001]])
    a = ListMLE(iterations=2, feature_scaling=None, random_state=0).fit(X, y, qid)
    b = ListMLE(iterations=2, feature_scaling=None, random_state=0).fit(X2, y2, qid2)
    np.testing.assert_array_equal(a.coef_, b.coef_)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_bad_input_gets_a_clear_error(cls):
    X, y, qid = ltr_data(seed=7, n_queries=4)
    est = cls()
    with pytest.raises(ValueError, match="no query has two documents with different labels|both a relevant"):
        est.fit(X[:4], y[:4], np.arange(4))  # one document per query
    with pytest.raises(ValueError, match="no query has two documents with different labels|both a relevant"):
        est.fit(X, np.ones_like(y), qid)  # all labels equal
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad, y, qid)
    with pytest.raises(ValueError, match="not grouped"):
        est.fit(X, y, np.tile([1, 2], X.shape[0] // 2))
    with pytest.raises(ValueError, match="qid must have shape"):
        est.fit(X, y, qid[:-1])
    with pytest.raises(ValueError, match="y must have shape"):
        est.fit(X, y[:-1], qid)
    with pytest.raises(ValueError, match="non-negative"):
        est.fit(X, -y - 1, qid)
    with pytest.raises(TypeError, match="integers"):
        est.fit(X, y, qid + 0.5)
    with pytest.raises(ValueError, match="2-D"):
        est.fit(X[:, 0], y, qid)
    with pytest.raises(TypeError, match="complex"):
        est.fit(X + 1j, y, qid)
    with pytest.raises(TypeError, match="y must be real numbers"):
        est.fit(X, y + 0j, qid)


@pytest.mark.parametrize("cls", [ListMLE, ListNet, RPCMTL])
def test_unfitted_and_feature_mismatch(cls):
    X, y, qid = ltr_data(seed=8, n_queries=4)
    with pytest.raises(NotFittedError):
        cls().predict(X, qid)
    est = cls(iterations=1, random_state=0).fit(X, y, qid)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2], qid)
    with pytest.raises(ValueError, match="not grouped"):
        est.predict(X, np.tile([1, 2], X.shape[0] // 2))


@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"learning_rate": 0.0}, ValueError, "learning_rate"),
        ({"learning_rate": "fast"}, TypeError, "learning_rate"),
        ({"iterations": -1}, ValueError, "iterations"),
        ({"regularization": -1.0}, ValueError, "regularization"),
        ({"average": 1}, TypeError, "average"),
        ({"feature_scaling": "minmax"}, ValueError, "feature_scaling"),
        ({"num_threads": -1}, ValueError, "num_threads"),
        ({"show_progress": "yes"}, TypeError, "show_progress"),
        ({"random_state": "seed"}, TypeError, "seed"),
    ],
)
@pytest.mark.parametrize("cls", [ListMLE, ListNet, RPCMTL])
def test_bad_params(cls, params, error, match):
    X, y, qid = ltr_data(n_queries=3)
    with pytest.raises(error, match=match):
        cls(**params).fit(X, y, qid)


@pytest.mark.parametrize("top_k, error", [(0, ValueError), ("all", TypeError), (1.5, TypeError)])
def test_bad_top_k(top_k, error):
    X, y, qid = ltr_data(n_queries=3)
    with pytest.raises(error, match="top_k"):
        ListMLE(top_k=top_k).fit(X, y, qid)


# ----------------------------------------------------------------------------- conventions
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_sklearn_conventions(cls):
    name = cls.__name__
    check_parameters_default_constructible(name, cls())
    for check in (
        check_no_attributes_set_in_init,
        check_get_params_invariance,
        check_set_params,
        check_estimator_cloneable,
        check_estimator_repr,
        check_do_not_raise_errors_in_init_or_set_params,
    ):
        check(name, cls())


@pytest.mark.parametrize("cls", [ListMLE, ListNet, RPCMTL])
def test_fit_conventions(cls):
    """fit returns self, leaves the parameters alone, is idempotent; the fitted model pickles;
    predicting one query alone gives that query's order (and, for linear scores, values)."""
    X, y, qid = ltr_data(seed=9)
    est = cls(iterations=2, random_state=0)
    params = est.get_params()
    assert est.fit(X, y, qid) is est
    assert est.get_params() == params
    first = est.predict(X, qid)
    np.testing.assert_array_equal(clone(est).fit(X, y, qid).predict(X, qid), first)
    np.testing.assert_array_equal(est.fit(X, y, qid).predict(X, qid), first)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict(X, qid), first)
    assert est.n_features_in_ == X.shape[1]
    mask = qid == qid[0]
    alone = est.predict(X[mask], qid[mask])
    np.testing.assert_array_equal(np.argsort(-alone, kind="stable"), np.argsort(-first[mask], kind="stable"))
    assert 0.0 <= est.score(X, y, qid) <= 1.0


def test_score_is_mean_ndcg():
    X, y, qid = ltr_data(seed=10)
    est = ListNet(iterations=2, random_state=0).fit(X, y, qid)
    assert est.score(X, y, qid, k=5) == pytest.approx(ranking_report(y, est.predict(X, qid), qid, ks=(5,))["NDCG@5"])


def test_check_query_data_offsets_follow_appearance_order():
    X = np.zeros((6, 2))
    _, y, offsets = check_query_data(X, [0, 1, 0, 2, 2, 1], [9, 9, 4, 4, 4, 7])
    assert offsets.tolist() == [0, 2, 5, 6] and y.dtype == np.float64
    for qid in itertools.permutations([1, 1, 2]):
        contiguous = list(qid) != [1, 2, 1]
        if contiguous:
            check_query_data(X[:3], None, np.array(qid))
        else:
            with pytest.raises(ValueError, match="query 1 are split into 2 separate runs"):
                check_query_data(X[:3], None, np.array(qid))


@pytest.mark.parametrize("cls", [ListMLE, ListNet, RPCMTL])
def test_save_load_roundtrip_and_malformed_files(cls, tmp_path):
    X, y, qid = ltr_data(seed=30)
    est = cls(iterations=2, random_state=0).fit(X, y, qid)
    est.save(tmp_path / "m")
    back = cls.load(tmp_path / "m.npz")
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.predict(X, qid), est.predict(X, qid))
    data = dict(np.load(tmp_path / "m.npz"))
    bad = dict(data, coef_=np.zeros(data["coef_"].shape[:-1] + (3,)))
    resave(tmp_path / "bad.npz", **bad)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        cls.load(tmp_path / "bad.npz")
    resave(tmp_path / "neg.npz", **dict(data, feature_scale_=-data["feature_scale_"]))
    with pytest.raises(ValueError, match="feature_scale_ must be > 0"):
        cls.load(tmp_path / "neg.npz")
    with pytest.raises(NotFittedError):
        cls().save(tmp_path / "unfitted")


def test_rpcmtl_load_checks_its_arrays(tmp_path):
    X, y, qid = ltr_data(seed=31)
    est = RPCMTL(n_clusters=3, iterations=1, random_state=0).fit(X, y, qid)
    est.save(tmp_path / "m.npz")
    data = dict(np.load(tmp_path / "m.npz"))
    resave(tmp_path / "t.npz", **dict(data, odr_thresholds_=data["odr_thresholds_"][::-1].copy()))
    with pytest.raises(ValueError, match="increasing"):
        RPCMTL.load(tmp_path / "t.npz")
    resave(tmp_path / "m2.npz", **dict(data, metric_=np.eye(2)))
    with pytest.raises(ValueError, match="do not fit"):
        RPCMTL.load(tmp_path / "m2.npz")


@pytest.mark.parametrize(
    "est, named",
    [
        (ListMLE(regularization=1e300, iterations=3, random_state=0), "regularization=1e\\+300"),
        (ListNet(regularization=1e300, iterations=3, random_state=0), "regularization=1e\\+300"),
        (RPCMTL(mtl_regularization=1e300, iterations=3, random_state=0), "mtl_regularization=1e\\+300"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else "",
)
def test_divergence_is_an_error_not_nan_weights(est, named):
    """ListMLE(alpha=1e300) returned NaN coef_ and all-NaN predictions without a word."""
    rng = np.random.default_rng(0)
    X, y, qid = rng.normal(size=(60, 4)), rng.integers(0, 3, 60), np.repeat(np.arange(6), 10)
    with pytest.raises(FloatingPointError, match=f"diverged in epoch 1 .*{named}"):
        est.fit(X, y, qid)
