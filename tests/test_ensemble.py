"""RankBlend and the LambdaMART wrapper (recsys_ltr.ltr.ensemble)."""

import itertools

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import (
    check_estimator_cloneable,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)
from test_listwise import ltr_data

from recsys_ltr.ltr import LambdaMART, ListMLE, ListNet, RankBlend, check_query_data
from recsys_ltr.ltr.ensemble import _simplex_grid, standardize_per_query
from recsys_ltr.query_metrics import ranking_report


class _Fixed:
    """A 'ranker' scoring with one given column (noise for column -1)."""

    def __init__(self, column=0):
        self.column = column

    def get_params(self, deep=True):
        return {"column": self.column}

    def set_params(self, **params):
        self.column = params.get("column", self.column)
        return self

    def fit(self, X, y, qid):
        return self

    def predict(self, X, qid):
        if self.column < 0:
            return np.random.default_rng(X.shape[0]).normal(size=X.shape[0])
        return X[:, self.column]


def test_standardize_per_query_matches_definition():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=12) * 5 + 3
    scores[4:7] = 2.5  # a constant query
    offsets = np.array([0, 4, 7, 12])
    out = standardize_per_query(scores, offsets)
    for a, b in itertools.pairwise(offsets):
        seg = scores[a:b]
        ref = np.zeros(b - a) if np.ptp(seg) == 0 else (seg - seg.mean()) / seg.std()
        np.testing.assert_allclose(out[a:b], ref, atol=1e-12)


def test_simplex_grid():
    grid = np.array(list(_simplex_grid(3, 4)))
    assert len(grid) == 15 and np.allclose(grid.sum(1), 1) and np.all(grid >= 0)
    assert len({tuple(w) for w in grid}) == 15
    assert np.array(list(_simplex_grid(1, 5))).tolist() == [[1.0]]


def test_blend_weights_and_prediction():
    X, y, qid = ltr_data(seed=20)
    _, _, offsets = check_query_data(X, y, qid)
    blend = RankBlend([_Fixed(0), _Fixed(1)], weights=[3.0, 1.0]).fit(X, y, qid)
    np.testing.assert_allclose(blend.weights_, [0.75, 0.25])
    expected = 0.75 * standardize_per_query(X[:, 0], offsets) + 0.25 * standardize_per_query(X[:, 1], offsets)
    np.testing.assert_allclose(blend.predict(X, qid), expected)
    assert blend.eval_score_ is None
    equal = RankBlend([_Fixed(0), _Fixed(1)]).fit(X, y, qid)
    np.testing.assert_allclose(equal.weights_, [0.5, 0.5])


def test_blend_chooses_weights_on_eval_set():
    X, y, qid = ltr_data(seed=21)
    Xv, yv, qv = ltr_data(seed=22)
    blend = RankBlend([_Fixed(-1), _Fixed(0), _Fixed(4)], grid_steps=5).fit(X, y, qid, eval_set=(Xv, yv, qv))
    # brute force over the same grid, first maximum in grid order
    _, _, offsets = check_query_data(Xv, yv, qv)
    Z = np.column_stack([standardize_per_query(m.predict(Xv, qv), offsets) for m in blend.estimators_])
    values = [ranking_report(yv, Z @ w, qv, ks=(10,))["NDCG@10"] for w in _simplex_grid(3, 5)]
    best = list(_simplex_grid(3, 5))[int(np.argmax(values))]
    np.testing.assert_array_equal(blend.weights_, best)
    assert blend.eval_score_ == pytest.approx(max(values))
    assert blend.weights_[1] > blend.weights_[0]  # feature 0 carries the most weight in ltr_data


def test_blend_of_learners_is_reproducible_and_clones_members():
    X, y, qid = ltr_data(seed=23)
    Xv, yv, qv = ltr_data(seed=24)
    members = [ListMLE(iterations=3, random_state=0), ListNet(iterations=3, random_state=0)]
    a = RankBlend(members).fit(X, y, qid, eval_set=(Xv, yv, qv))
    b = clone(a).fit(X, y, qid, eval_set=(Xv, yv, qv))
    np.testing.assert_array_equal(a.predict(Xv, qv), b.predict(Xv, qv))
    assert not hasattr(members[0], "coef_")  # the given members stay unfitted
    assert a.estimators_[0] is not members[0]


def test_blend_bad_input():
    X, y, qid = ltr_data(seed=25, n_queries=4)
    with pytest.raises(ValueError, match="non-empty list"):
        RankBlend([]).fit(X, y, qid)
    with pytest.raises(ValueError, match="weights must be 2"):
        RankBlend([_Fixed(0), _Fixed(1)], weights=[1.0]).fit(X, y, qid)
    with pytest.raises(ValueError, match="weights must be"):
        RankBlend([_Fixed(0), _Fixed(1)], weights=[-1.0, 2.0]).fit(X, y, qid)
    with pytest.raises(ValueError, match="grid_steps"):
        RankBlend([_Fixed(0)], grid_steps=0).fit(X, y, qid)
    with pytest.raises(ValueError, match="eval_set has no query with a relevant"):
        RankBlend([_Fixed(0)]).fit(X, y, qid, eval_set=(X, np.zeros_like(y), qid))
    with pytest.raises(NotFittedError):
        RankBlend([_Fixed(0)]).predict(X, qid)
    with pytest.raises(ValueError, match="not grouped"):
        RankBlend([_Fixed(0)]).fit(X, y, qid, eval_set=(X, y, np.tile([0, 1], len(y) // 2)))


def test_lambdamart_wrapper():
    X, y, qid = ltr_data(seed=26, n_queries=40)
    Xt, yt, qt = ltr_data(seed=27, n_queries=40)
    lightgbm = pytest.importorskip("lightgbm")
    est = LambdaMART(n_estimators=30, num_leaves=7, min_child_samples=5, random_state=0).fit(X, y, qid)
    s = est.predict(Xt, qt)
    # the trees as arrays score as LightGBM's own ranker with the same settings and seed
    seed = int(np.random.default_rng(0).integers(2**31 - 1))
    reference = lightgbm.LGBMRanker(
        objective="lambdarank",
        n_estimators=30,
        learning_rate=0.05,
        num_leaves=7,
        min_child_samples=5,
        random_state=seed,
        n_jobs=1,
        deterministic=True,
        force_row_wise=True,
        verbose=-1,
    ).fit(X, y.astype(int), group=np.unique(qid, return_counts=True)[1])
    np.testing.assert_allclose(s, reference.predict(Xt), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        est.predict(Xt, qt, num_iteration=10), reference.predict(Xt, num_iteration=10), atol=1e-12
    )
    assert not np.allclose(est.predict(Xt, qt, num_iteration=10), s)
    np.testing.assert_array_equal(s, clone(est).fit(X, y, qid).predict(Xt, qt))
    chance = ranking_report(yt, np.random.default_rng(0).normal(size=yt.size), qt)["NDCG@10"]
    assert ranking_report(yt, s, qt)["NDCG@10"] > chance + 0.15
    with pytest.raises(ValueError, match="integer relevance"):
        LambdaMART().fit(X, y + 0.5, qid)
    with pytest.raises(ValueError, match="num_leaves"):
        LambdaMART(num_leaves=1).fit(X, y, qid)
    with pytest.raises(NotFittedError):
        LambdaMART().predict(X, qid)


def test_sklearn_conventions():
    blend = RankBlend([ListMLE(), ListNet()], weights=[1.0, 2.0])
    for est in (LambdaMART(), blend):
        name = type(est).__name__
        for check in (
            check_no_attributes_set_in_init,
            check_get_params_invariance,
            check_set_params,
            check_estimator_cloneable,
        ):
            check(name, est)
    check_parameters_default_constructible("LambdaMART", LambdaMART())
    assert blend.get_params()["estimators"][1].__class__ is ListNet
