"""The ecosystem's conventions, one row of the review table per test (scikit-learn, implicit, metric-learn)."""

import inspect
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import random_feedback
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from recsys_ltr.metric_learning import FRML, GMML
from recsys_ltr.models import ALS, BPR, EASE, FEBR, KUNN, SLIM, ItemKNN, Popularity, RP3beta, UserKNN

MODELS = [
    Popularity(),
    ItemKNN(k=5),
    UserKNN(k=5),
    KUNN(k=5),
    SLIM(k=5),
    RP3beta(k=5),
    EASE(lam=10.0),
    ALS(factors=4, iterations=2),
    BPR(factors=4, iterations=5),
    FEBR(k=5, iterations=2000, eval_every=1000, random_state=0, num_threads=1),
]
IDS = [type(m).__name__ for m in MODELS]


@pytest.fixture(scope="module")
def X():
    return sp.csr_matrix(random_feedback(np.random.default_rng(0), 30, 25, 0.3))


@pytest.mark.parametrize(
    "est", [GMML(), FRML(max_iter=20, num_threads=1, random_state=0)], ids=lambda e: type(e).__name__
)
def test_metric_learners_pass_check_estimator(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failures = [r for r in check_estimator(est, on_fail=None) if r["status"] == "failed"]
    assert not failures, [(r["check_name"], str(r["exception"])[:300]) for r in failures]


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_fit_signature_unfitted_use_and_num_threads(model, X):
    assert list(inspect.signature(type(model).fit).parameters)[:3] == ["self", "X", "y"]
    assert "num_threads" in model.get_params()
    with pytest.raises(NotFittedError):
        clone(model).recommend(0)
    fitted = clone(model).fit(X, None)  # scikit-learn's fit(X, y=None)
    assert fitted.recommend(0, N=3)[0].size == 3


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_implicit_recommend_and_similar_signatures(model, X):
    assert list(inspect.signature(type(model).recommend).parameters)[1:] == [
        "userid",
        "user_items",
        "N",
        "filter_already_liked_items",
        "filter_items",
        "recalculate_user",
        "items",
    ]
    assert list(inspect.signature(type(model).similar_items).parameters)[1:] == [
        "itemid",
        "N",
        "recalculate_item",
        "item_users",
        "filter_items",
        "items",
    ]
    assert list(inspect.signature(type(model).similar_users).parameters)[1:] == ["userid", "N", "filter_users", "users"]
    m = clone(model).fit(X)
    scores = m.score([3])[0]
    subset = np.array([2, 7, 11, 20])
    ids, vals = m.recommend(3, N=2, items=subset, filter_already_liked_items=False)
    order = sorted(subset, key=lambda i: (-scores[i], -m.item_popularity_[i], i))[:2]
    assert ids.tolist() == order and np.allclose(vals, scores[order])
    dense_ids = m.recommend(3, user_items=X[3].toarray(), N=4)[0] if m.item_based else m.recommend(3, N=4)[0]
    assert dense_ids.size == 4
    with pytest.raises(ValueError, match="not both"):
        m.recommend(3, filter_items=[1], items=[2])
    ids, _ = m.similar_items(4, N=3, filter_items=[0, 1])
    assert 4 not in ids and not {0, 1} & set(ids.tolist())
    uids, _ = m.similar_users(5, N=3)
    assert 5 not in uids and uids.size == 3


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_set_params_after_fit_changes_nothing_and_files_round_trip(model, X, tmp_path):
    m = clone(model).fit(X)
    before = m.recommend(np.arange(10), N=5)
    first = next(iter(m.get_params()))
    changed = {"k": 2} if "k" in m.get_params() else {"num_threads": 1}
    m.set_params(**changed)
    after = m.recommend(np.arange(10), N=5)
    np.testing.assert_array_equal(before[0], after[0])
    m.save(tmp_path / "m")
    loaded = type(m).load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.recommend(np.arange(10), N=5)[0], before[0])
    np.testing.assert_allclose(loaded.recommend(np.arange(10), N=5)[1], before[1])
    assert first in loaded.get_params()


def test_set_params_then_refit_uses_the_new_value(X):
    m = ItemKNN(k=10).fit(X)
    assert m.set_params(k=3).fit(X).item_scorer_.T.getnnz(axis=1).max() <= 3


def test_metric_learn_interface(X):
    rng = np.random.default_rng(0)
    Z, y = rng.standard_normal((40, 4)), np.arange(40) % 2
    for est in (GMML().fit(Z, y), FRML(n_components=2, max_iter=30, random_state=0, num_threads=1).fit(Z, y)):
        L = est.components_
        pairs = np.stack([Z[:5], Z[5:10]], axis=1)
        d = est.pair_distance(pairs)
        np.testing.assert_allclose(d, np.linalg.norm((Z[:5] - Z[5:10]) @ L.T, axis=1))  # true distance
        np.testing.assert_allclose(est.pair_score(pairs), -d)
        np.testing.assert_allclose(est.get_metric()(Z[0], Z[5]), d[0])
        np.testing.assert_allclose(est.get_mahalanobis_matrix(), L.T @ L)
        np.testing.assert_allclose(est.transform(Z), Z @ L.T)
