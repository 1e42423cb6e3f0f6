"""The ecosystem's conventions, one row of the review table per test (scikit-learn, implicit, metric-learn)."""

import inspect
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import random_feedback, resave, small_models
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from recsys_ltr.febr import FEBR
from recsys_ltr.metric_learning import FRML, GMML, MLR, RMLR
from recsys_ltr.models import ItemKNN

#: every exported recommender (a model added to the package is found by itself: _helpers.small_models)
MODELS = [make() for make in small_models(25).values()]
IDS = [type(m).__name__ for m in MODELS]


@pytest.fixture(scope="module")
def X():
    return sp.csr_matrix(random_feedback(np.random.default_rng(0), 30, 25, 0.3))


@pytest.mark.parametrize(
    "est",
    [
        GMML(),
        FRML(max_iter=20, num_threads=1, random_state=0),
        MLR(max_iter=20, num_threads=1),
        RMLR(max_iter=20, num_threads=1),
    ],
    ids=lambda e: type(e).__name__,
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
    first = next(iter(m.get_params(deep=False)))  # a nested estimator (a content affinity) is state once saved
    # a parameter the model reads when it answers (FEBR's head size; a neighbourhood's k)
    changed = {"candidates": 2} if isinstance(m, FEBR) else {"k": 2} if "k" in m.get_params() else {"num_threads": 1}
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


# ----------------------------------------------------------------------------- query-document learners
def _ltr_estimators():
    from recsys_ltr.ltr import LGMML, RPCMTL, LambdaMART, ListMLE, ListNet, RankBlend

    trees = dict(n_estimators=8, num_leaves=4, min_child_samples=3, random_state=0)
    return [
        LGMML(n_metrics=2, queries_per_metric=3, iterations=1, random_state=0),
        ListMLE(iterations=2, random_state=0),
        ListNet(iterations=2, random_state=0),
        RPCMTL(n_clusters=2, iterations=2, random_state=0),
        LambdaMART(**trees),
        RankBlend([ListMLE(iterations=2, random_state=0), LambdaMART(**trees)], weights=[1.0, 3.0]),
    ]


LTR = _ltr_estimators()
LTR_IDS = [type(e).__name__ for e in LTR]


@pytest.fixture(scope="module")
def ltr_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(96, 4))
    z = X @ np.array([1.0, -0.5, 0.3, 0.0]) + 0.3 * rng.normal(size=96)
    return X, np.digitize(z, np.quantile(z, [0.6, 0.85])), np.repeat(np.arange(12) * 3 + 1, 8)


def _fit_ltr(est, data):
    if "LambdaMART" in repr(est):
        pytest.importorskip("lightgbm")
    return clone(est).fit(*data)


@pytest.mark.parametrize("est", LTR, ids=LTR_IDS)
def test_ltr_interface_and_unfitted_use(est, ltr_data, tmp_path):
    from sklearn.utils.estimator_checks import (
        check_estimator_cloneable,
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_set_params,
    )

    assert list(inspect.signature(type(est).fit).parameters)[:4] == ["self", "X", "y", "qid"]
    assert list(inspect.signature(type(est).predict).parameters)[:3] == ["self", "X", "qid"]
    if type(est).__name__ != "RankBlend":  # a blend's members carry their own threads and seeds
        assert {"num_threads", "random_state"} <= set(est.get_params())
    if type(est).__name__ not in ("RankBlend", "LambdaMART"):  # LightGBM's fit has no bar
        assert est.get_params()["show_progress"] is None
    for check in (check_no_attributes_set_in_init, check_get_params_invariance, check_set_params):
        check(type(est).__name__, est)
    check_estimator_cloneable(type(est).__name__, est)
    X, _, qid = ltr_data
    for use in (lambda m: m.predict(X, qid), lambda m: m.save(tmp_path / "unfitted")):
        with pytest.raises(NotFittedError):
            use(clone(est))
    fitted = clone(est)
    if "LambdaMART" in repr(est):
        pytest.importorskip("lightgbm")
    assert fitted.fit(*ltr_data) is fitted and fitted.n_features_in_ == X.shape[1]
    assert fitted.predict(X, qid).shape == (X.shape[0],)


@pytest.mark.parametrize("est", LTR, ids=LTR_IDS)
def test_ltr_set_params_after_fit_changes_nothing_and_files_round_trip(est, ltr_data, tmp_path):
    X, _, qid = ltr_data
    m = _fit_ltr(est, ltr_data)
    before = m.predict(X, qid)
    m.set_params(**({"k": 3} if "k" in m.get_params() else {"num_threads": 2}))
    np.testing.assert_array_equal(m.predict(X, qid), before)
    path = m.save(tmp_path / "m")
    loaded = type(m).load(path)
    np.testing.assert_array_equal(loaded.predict(X, qid), before)
    assert repr(loaded) == repr(clone(est))  # the fitted parameters, not the ones set afterwards
    assert loaded.n_features_in_ == X.shape[1]


def _edit(path, out, header=None, **arrays):
    """Copy the model file ``path`` to ``out`` with header fields and members replaced."""
    import json

    with np.load(path) as f:
        data = {name: f[name] for name in f.files}
    head = json.loads(str(data["header"]))
    head.update(header or {})
    data.update(header=np.array(json.dumps(head)), **arrays)
    resave(out, **data)
    return out


@pytest.mark.parametrize("est", LTR, ids=LTR_IDS)
def test_ltr_hostile_files_are_value_errors(est, ltr_data, tmp_path):
    """Every array of the file given the wrong shape, a NaN, an undeclared or missing member,
    another class, bad parameters, a truncated file: a ValueError, never a crash or a model."""
    import json

    m = _fit_ltr(est, ltr_data)
    good = m.save(tmp_path / "good")
    X, _, qid = ltr_data
    np.testing.assert_array_equal(type(m).load(_edit(good, tmp_path / "same.npz")).predict(X, qid), m.predict(X, qid))
    with np.load(good) as f:
        arrays = {name: f[name] for name in f.files if name != "header"}
        params = json.loads(str(f["header"]))["params"]
    hostile = {}
    for name, a in arrays.items():
        hostile[f"shape {name}"] = _edit(good, tmp_path / f"shape_{name}.npz", **{name: np.zeros(a.shape + (2,))})
        if a.dtype.kind == "f" and a.size:
            hostile[f"nan {name}"] = _edit(good, tmp_path / f"nan_{name}.npz", **{name: np.full(a.shape, np.nan)})
    hostile["undeclared"] = _edit(good, tmp_path / "extra.npz", extra_=np.zeros(3))
    name = next(iter(arrays))
    with np.load(good) as f:
        np.savez(tmp_path / "missing.npz", **{k: f[k] for k in f.files if k != name})
    hostile["missing"] = tmp_path / "missing.npz"
    hostile["class"] = _edit(good, tmp_path / "class.npz", header={"class": "GMML"})
    first = next(k for k in params if k not in ("estimators", "weights", "random_state", "show_progress"))
    hostile["params"] = _edit(good, tmp_path / "params.npz", header={"params": {**params, first: "bogus"}})
    hostile["unknown param"] = _edit(good, tmp_path / "unknown.npz", header={"params": {**params, "bogus": 1}})
    raw = open(good, "rb").read()
    (tmp_path / "truncated.npz").write_bytes(raw[: len(raw) // 2])
    hostile["truncated"] = tmp_path / "truncated.npz"
    for what, path in hostile.items():
        with pytest.raises(ValueError):
            type(m).load(path)
            pytest.fail(f"{what} was loaded")


def test_one_random_state_default_across_the_estimators():
    """Every seeded estimator starts from ``random_state=0`` (ALS()'s, implicit-compatible factors):
    two calls of ``Model().fit(X)`` give the same model."""
    import recsys_ltr.ltr
    import recsys_ltr.metric_learning

    classes = {type(m) for m in MODELS}
    for module in (recsys_ltr.ltr, recsys_ltr.metric_learning):
        classes |= {getattr(module, n) for n in module.__all__ if isinstance(getattr(module, n), type)}
    defaults = {
        cls.__name__: inspect.signature(cls.__init__).parameters["random_state"].default
        for cls in classes
        if "random_state" in inspect.signature(cls.__init__).parameters
    }
    assert len(defaults) >= 12 and set(defaults.values()) == {0}, defaults


def test_the_stacking_models_say_where_they_live():
    with pytest.raises(ImportError, match=r"from recsys_ltr\.febr import FEBR"):
        from recsys_ltr.models import FEBR  # noqa: F401
    with pytest.raises(ImportError, match=r"from recsys_ltr\.febr import AffinityFEBR"):
        from recsys_ltr.models import AffinityFEBR  # noqa: F401


@pytest.mark.parametrize(
    "model", [m for m in MODELS if type(m).__name__ in ("ItemKNN", "EASE", "ALS", "FEBR")], ids=repr
)
def test_implicits_evaluator_runs_on_our_models_and_agrees(model, X):
    """implicit's ``ranking_metrics_at_k`` calls ``recommend`` and reads its ids as ``int32``: on our
    models it runs, and its NDCG@10 and MAP@10 are ours (same definitions, docs/measures.rst)."""
    from implicit.evaluation import ranking_metrics_at_k

    from recsys_ltr.metrics import evaluate
    from recsys_ltr.split import holdout

    train, _, test = holdout(X, 0.0, 0.3, random_state=0)
    fitted = clone(model).fit(train)
    assert fitted.recommend(np.arange(3), N=2)[0].dtype == np.int32 == fitted.similar_items(0, N=2)[0].dtype
    theirs = ranking_metrics_at_k(fitted, train, test, K=10, show_progress=False)
    ours = evaluate(fitted, train, test, metrics=["NDCG@10", "MAP@10"])
    np.testing.assert_allclose([theirs["ndcg"], theirs["map"]], [ours["NDCG@10"], ours["MAP@10"]], rtol=1e-12)
