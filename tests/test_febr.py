"""The dissertation's FEBR (AffinityFEBR): training on a planted problem, reproducibility, scoring paths, fold-in, save/load,
bad inputs."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from test_knn import random_feedback

from recsys_ltr.febr import AffinityFEBR
from recsys_ltr.febr.dissertation import _febr_score, _febr_update
from recsys_ltr.febr.features import AGGREGATORS, FeatureExtractor
from recsys_ltr.metrics import evaluate
from recsys_ltr.models.base import Recommender
from recsys_ltr.neighbors import cosine_affinity
from recsys_ltr.split import holdout, sample_users
from recsys_ltr.warp import WarpSampler

pytestmark = pytest.mark.kernels


def block_feedback(n_groups=4, users=60, items=25, p_in=0.3, p_out=0.02, seed=0):
    """Planted clusters: users of group g like the items of block g (prob p_in), others rarely."""
    rng = np.random.default_rng(seed)
    gu = np.repeat(np.arange(n_groups), users)
    gi = np.repeat(np.arange(n_groups), items)
    D = rng.random((len(gu), len(gi))) < np.where(gu[:, None] == gi[None, :], p_in, p_out)
    return sp.csr_matrix(D.astype(float))


@pytest.fixture(scope="module")
def planted():
    return holdout(block_feedback(), val=0.2, test=0.2, random_state=0)


#: the dissertation's FEBR (aggregate features, training on X itself, no carved validation)
PAPER = dict(affinity="cosine", holdout=0.0, validation_fraction=0.0)


def small(**kw):
    params = dict(
        k=10, max_iter=6000, eval_every=1500, learning_rate=0.01, regularization=1e-4, random_state=0, num_threads=1
    )
    return AffinityFEBR(**{**PAPER, **params, **kw})


def objective(model, train, theta, n=20_000):
    """SGD estimate of the training objective at a fixed theta: sampler run with learning rate 0."""
    state = (
        *model.extractor_.state,
        theta.copy(),
        model.feature_mean_,
        1 / model.feature_scale_,
        np.array([model.regularization, 0.0]),
        np.zeros(1),
    )
    sampler = WarpSampler(train, loss="adg", normalize=False, gamma=model.gamma, random_state=5)
    sampler.sgd(state, _febr_score, _febr_update, n, 0.0, rows={0: "query"})
    return state[-1][0] / n + model.regularization * theta @ theta


def test_planted_objective_falls_and_validation_adg_rises(planted):
    train, val, _ = planted
    model = small(init="zeros", early_stopping=None).fit(train, validation=val)
    h = model.history_
    assert h[0]["iteration"] == 0 and len(h) == 5 and [r["iteration"] for r in h[1:]] == [1500, 3000, 4500, 6000]
    start = objective(model, train, np.zeros(model.extractor_.n_features))
    assert start > 0.8  # theta = 0: every negative violates at the first draw, weight C(N_u) ~ 0.9
    assert objective(model, train, model.coef_) < start - 0.3
    assert h[-1]["loss"] < start - 0.3
    assert h[-1]["val_adg"] > h[0]["val_adg"] + 0.05  # theta = 0 ranks by popularity only
    assert max(r["val_adg"] for r in h) == pytest.approx(evaluate(model, train, val)["ADG"])


def test_early_stopping_keeps_best_theta(planted):
    train, val, _ = planted
    model = small(learning_rate=5.0, early_stopping=1).fit(train, validation=val)  # wild steps: no improvement
    assert len(model.history_) <= 3
    best = max(model.history_, key=lambda r: r["val_adg"])
    assert model.best_iteration_ == best["iteration"]
    assert evaluate(model, train, val)["ADG"] == pytest.approx(best["val_adg"])


def test_early_stopping_on_another_validation_metric(planted):
    train, val, _ = planted
    model = small(learning_rate=5.0, early_stopping=1, validation_metric="P@5").fit(train, validation=val)
    best = max(model.history_, key=lambda r: r.get("val_p@5", -1.0))
    assert model.best_iteration_ == best["iteration"] and not any("val_adg" in r for r in model.history_)
    assert evaluate(model, train, val, metrics=["P@5"])["P@5"] == pytest.approx(best["val_p@5"])


def test_label_holdout_trains_on_the_feature_part(planted):
    """holdout > 0: features, statistics and KNN from F, positives from L, items of F never violate."""
    from recsys_ltr.split import holdout_trusted

    train, val, _ = planted
    model = small(holdout=0.25, init="zeros", early_stopping=None).fit(train, validation=val)
    F, L, _ = holdout_trusted(train, 0.25, 0.0, np.random.default_rng(0), proportional=True)  # label_parts'
    extractor, mean, scale, positives, known = model._training_problem(train, np.random.default_rng(0))
    assert known == 1.0 and (positives != L).nnz == 0 and (extractor.X != F).nnz == 0
    np.testing.assert_allclose(mean, FeatureExtractor(F, 10, cosine_affinity(F, 10)).statistics()[0])
    theta = np.ones(model.extractor_.n_features)
    state = (*extractor.state, theta, mean, 1 / scale, np.array([0.0, known]), np.zeros(1))
    for u in range(0, train.shape[0], 17):
        for i in range(train.shape[1]):
            s = _febr_score(state, u, i)
            assert (s == -np.inf) == bool(F[u, i])
    # the final model scores features of all of X with X's own statistics
    np.testing.assert_allclose(model.feature_mean_, model.extractor_.statistics()[0])
    assert model.history_[-1]["val_adg"] > model.history_[0]["val_adg"] + 0.05  # learns from zeros
    again = small(holdout=0.25, init="zeros", early_stopping=None).fit(train, validation=val)
    np.testing.assert_array_equal(again.coef_, model.coef_)


def test_validation_users_sample(planted):
    train, val, _ = planted
    model = small(validation_users=30, max_iter=1500).fit(train, validation=val)
    users = sample_users(val, 30, np.random.default_rng(0))  # the sample fit draws first
    assert len(users) == 30 and np.all(np.diff(users) > 0) and np.all(np.diff(val.indptr)[users] > 0)
    best = max(r["val_adg"] for r in model.history_)  # the kept theta
    assert best == pytest.approx(evaluate(model, train, val, users=users)["ADG"])
    assert len(sample_users(val, 10_000, np.random.default_rng(0))) == np.count_nonzero(np.diff(val.indptr))


def test_gamma_beyond_catalogue_still_draws_once(planted):
    """Alg. 4.2 always draws at least once: beta_u = max(1, floor(N_u / gamma))."""
    train = planted[0]
    model = small(gamma=10_000, max_iter=500, eval_every=500, init="zeros", learning_rate=1e-12).fit(train)
    record = model.history_[-1]
    assert record["draws"] == 500 and record["violators"] == 500  # theta ~ 0: the first draw violates
    assert np.any(model.coef_ != 0)


def test_seed_and_one_thread_reproduce_bit_for_bit(planted):
    train, _val, _ = planted
    a = small(side="both").fit(train)
    b = small(side="both").fit(train)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.score(np.arange(20)), b.score(np.arange(20)))
    c = small(side="both", random_state=1).fit(train)
    assert not np.array_equal(a.coef_, c.coef_)


@pytest.mark.parametrize("side", ["item", "user", "both"])
def test_scores_agree_with_per_pair_scorer(planted, side):
    train = planted[0]
    model = small(side=side, max_iter=2000, affinity="kunn").fit(train)
    S = model.score(np.arange(15))
    state = (
        *model.extractor_.state,
        model.coef_,
        model.feature_mean_,
        1 / model.feature_scale_,
        np.zeros(2),
        np.zeros(1),
    )
    pairs = np.array([[_febr_score(state, u, i) for i in range(train.shape[1])] for u in range(15)])
    np.testing.assert_allclose(S, pairs, rtol=1e-9, atol=1e-9)
    feats = model.transform(np.arange(15))
    np.testing.assert_allclose(
        S, ((feats - model.feature_mean_) / model.feature_scale_) @ model.coef_, rtol=1e-9, atol=1e-9
    )


def test_init_sum_ranks_like_item_p(planted):
    from recsys_ltr.models import ItemKNN

    train = planted[0]
    model = small(max_iter=0).fit(train)
    assert model.coef_[AGGREGATORS.index("sum")] == 1 and np.count_nonzero(model.coef_) == 1
    knn = ItemKNN(k=10).fit(train)
    np.testing.assert_array_equal(model.recommend(np.arange(30), N=10)[0], knn.recommend(np.arange(30), N=10)[0])


def test_fold_in_and_users_without_history(planted):
    train = planted[0]
    model = small(max_iter=2000).fit(train)
    rows = train[[3, 7]]
    ids, scores = model.recommend(np.array([1000, 1001]), user_items=rows, N=5, recalculate_user=True)
    ref_ids, ref_scores = model.recommend(np.array([3, 7]), N=5)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(scores, ref_scores)
    empty_ids, _ = model.recommend(5000, user_items=sp.csr_matrix((1, train.shape[1])), N=8, recalculate_user=True)
    popularity = np.diff(train.tocsc().indptr)
    np.testing.assert_array_equal(empty_ids, np.lexsort((np.arange(train.shape[1]), -popularity))[:8])


def test_user_side_recalculation(planted):
    train = planted[0]
    model = small(side="user", max_iter=1000).fit(train)
    rows = train[[4, 9]]
    with pytest.raises(ValueError, match="out of range"):
        model.recommend(np.array([4000, 9]), user_items=rows)
    ids, _ = model.recommend(np.array([4, 9]), user_items=rows, recalculate_user=True, N=6)
    np.testing.assert_array_equal(ids, model.recommend(np.array([4, 9]), N=6)[0])


def test_save_load_round_trip(tmp_path, planted):
    train, val, _ = planted
    for model in (
        small(side="both", max_iter=2000).fit(train, validation=val),
        small(affinity=cosine_affinity(train, 12), max_iter=2000).fit(train),
    ):
        path = tmp_path / "febr.npz"
        model.save(path)
        loaded = Recommender.load(path)
        assert isinstance(loaded, AffinityFEBR) and loaded.get_params()["affinity"] in ("cosine",)
        np.testing.assert_array_equal(loaded.coef_, model.coef_)
        np.testing.assert_array_equal(loaded.feature_scale_, model.feature_scale_)
        np.testing.assert_array_equal(loaded.score(np.arange(train.shape[0])), model.score(np.arange(train.shape[0])))
    assert isinstance(model.affinity, type(cosine_affinity(train, 2)))  # parameter restored after save
    np.savez(path, header=np.array("{not json"))
    with pytest.raises(ValueError, match="malformed JSON"):
        AffinityFEBR.load(path)


def test_clone_and_get_params():
    model = AffinityFEBR(**PAPER, k=7, side="both", regularization=0.1)
    assert clone(model).get_params() == model.get_params()


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(side="items"), ValueError, "side must be"),
        (dict(affinity="slim", side="both"), ValueError, "items only"),
        (dict(affinity="jaccard"), ValueError, "affinity must be one of"),
        (dict(k=0), ValueError, "k must be >= 1"),
        (dict(k=12), ValueError, "larger than the catalogue"),
        (dict(regularization=-1.0), ValueError, "regularization must be"),
        (dict(learning_rate=0.0), ValueError, "learning_rate must be"),
        (dict(learning_rate=float("nan")), ValueError, "learning_rate must be"),
        (dict(max_iter=-1), ValueError, "max_iter must be"),
        (dict(gamma=0), ValueError, "gamma must be"),
        (dict(beta=1.5), TypeError, "beta must be an integer"),
        (dict(early_stopping=0), ValueError, "early_stopping must be"),
        (dict(init="random"), ValueError, "init must be"),
        (dict(holdout=1.0), ValueError, "holdout must be a finite number in \\[0.0, 1.0\\)"),
        (dict(holdout=-0.1), ValueError, "holdout must be"),
        (
            dict(holdout=0.2, affinity=cosine_affinity(sp.csr_matrix(np.eye(15, 12)), 3)),
            ValueError,
            "give affinity as a kind",
        ),
        (dict(validation_users=0), ValueError, "validation_users"),
        (dict(validation_users="all"), ValueError, "validation_users must be a positive int, 'auto' or None"),
        (dict(affinity_params=[1]), TypeError, "affinity_params"),
        (dict(num_threads=-1), ValueError, "num_threads"),
    ],
)
def test_bad_parameters(params, error, match):
    X = sp.csr_matrix(random_feedback(np.random.default_rng(0), 15, 12, 0.4))
    with pytest.raises(error, match=match):
        AffinityFEBR(**{**PAPER, "k": 3, "max_iter": 10, **params}).fit(X)


def test_bad_data():
    X = sp.csr_matrix(random_feedback(np.random.default_rng(0), 15, 12, 0.4))
    model = AffinityFEBR(**PAPER, k=3, max_iter=10)
    with pytest.raises(ValueError, match="shape mismatch"):
        model.fit(X, validation=sp.csr_matrix(np.eye(15, 11)))
    with pytest.raises(TypeError, match="validation matrix as a keyword"):
        model.fit(X, X)
    with pytest.raises(ValueError, match="validation and X share"):
        model.fit(X, validation=X)
    with pytest.raises(ValueError, match="no interactions"):
        model.fit(sp.csr_matrix((15, 12)))
    with pytest.raises(ValueError, match="NaN"):
        model.fit(np.full((3, 3), np.nan))
    with pytest.raises(NotFittedError):
        model.score([0])
    model.fit(X)
    assert model.score([]).shape == (0, 12)
    with pytest.raises(ValueError, match="out of range"):
        model.score([15])
    with pytest.raises(ValueError, match="user_items must have"):
        model.recommend(0, user_items=sp.csr_matrix((1, 5)))
    other = FeatureExtractor(X, 3, cosine_affinity(X, 3))
    assert other.n_features == model.extractor_.n_features
