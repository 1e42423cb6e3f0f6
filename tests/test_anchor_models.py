"""EASE, ALS, BPR and LightFM-WARP: wrappers against the libraries' own factors, quality on a
planted problem, reproducibility, errors, persistence (EASE's solvers: test_ease.py)."""

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import assert_recommend_like_brute_force
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recsys_ltr.datasets import make_synthetic
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, BPR, EASE, LightFMWARP, Popularity, Recommender
from recsys_ltr.split import holdout

pytestmark = pytest.mark.kernels

try:
    import lightfm  # noqa: F401

    HAS_LIGHTFM = True
except ImportError:
    HAS_LIGHTFM = False

needs_lightfm = pytest.mark.skipif(
    not HAS_LIGHTFM, reason="optional lightfm module not installed (pip install rectools-lightfm)"
)
lightfm_param = pytest.param(LightFMWARP, marks=needs_lightfm)
FACTOR_MODELS = [ALS, BPR, lightfm_param]
SMALL = {
    ALS: dict(factors=6, iterations=5),
    BPR: dict(factors=6, iterations=10),
    LightFMWARP: dict(factors=6, iterations=5),
}


def random_matrix(seed, n_users=30, n_items=20, density=0.2):
    rng = np.random.default_rng(seed)
    D = (rng.random((n_users, n_items)) < density).astype(float)
    D[np.arange(n_users), rng.integers(n_items, size=n_users)] = 1  # every user has an item
    return D


def small(cls, **kw):
    return cls(**SMALL[cls], random_state=0, num_threads=1, **kw)


# ---------------------------------------------------------------- factor models
def test_als_scores_are_implicits_factors_and_fold_in_matches_recalculate_user():
    from implicit.cpu.als import AlternatingLeastSquares

    D = random_matrix(5)
    X = sp.csr_matrix(D)
    model = ALS(factors=5, regularization=0.1, alpha=3.0, iterations=4, random_state=7, num_threads=1).fit(X)
    ref = AlternatingLeastSquares(factors=5, regularization=0.1, alpha=3.0, iterations=4, random_state=7, num_threads=1)
    ref.fit(X.astype(np.float32), show_progress=False)
    np.testing.assert_array_equal(model.user_factors_, ref.user_factors)
    np.testing.assert_array_equal(model.item_factors_, ref.item_factors)
    users = np.arange(D.shape[0])
    np.testing.assert_allclose(model.score(users), model.user_factors_ @ model.item_factors_.T)
    # fold-in: the closed-form least squares of implicit's recalculate_user (float32 there)
    rows = X[[0, 3, 9]]
    folded = model._fold_in(rows)
    expected = ref.recalculate_user([0, 3, 9], rows.astype(np.float32))
    np.testing.assert_allclose(folded, expected, rtol=1e-4, atol=1e-5)
    _ids, scores = model.recommend(np.array([100, 101]), user_items=rows[:2], N=4, recalculate_user=True)
    best = np.sort(folded[0] @ model.item_factors_.T * (1 - D[0]))[::-1][:4]
    np.testing.assert_allclose(scores[0], best)


def brute_fold_in(V, row, reg, alpha):
    """argmin_x sum_i c_i (p_i - x.v_i)^2 + reg |x|^2, c_i = alpha on the row's items, else 1."""
    c = np.where(row > 0, alpha, 1.0)
    A = V.T @ (c[:, None] * V) + reg * np.eye(V.shape[1])
    return np.linalg.solve(A, V.T @ (c * (row > 0)))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), alpha=st.floats(0.05, 20.0), reg=st.floats(0.0, 2.0))
@example(seed=0, alpha=1.0, reg=0.5)  # alpha = 1: the kernel skips the rank-one updates
def test_als_fold_in_against_brute_force(seed, alpha, reg):
    D = random_matrix(seed, n_users=12, n_items=15)
    model = ALS(factors=4, iterations=2, alpha=alpha, regularization=reg, num_threads=1).fit(D)
    rows = sp.csr_matrix(np.vstack([D[:3], np.zeros((1, 15))]))
    folded = model._fold_in(rows)
    for r in range(3):
        np.testing.assert_allclose(
            folded[r], brute_fold_in(model.item_factors_, D[r], reg, alpha), rtol=1e-6, atol=1e-8
        )
    assert np.all(folded[3] == 0)  # no items: zero factors, popularity order in recommend


def test_bpr_scores_are_implicits_factors():
    from implicit.cpu.bpr import BayesianPersonalizedRanking

    X = sp.csr_matrix(random_matrix(6))
    model = BPR(factors=5, learning_rate=0.05, iterations=8, random_state=3, num_threads=1).fit(X)
    ref = BayesianPersonalizedRanking(factors=5, learning_rate=0.05, iterations=8, random_state=3, num_threads=1)
    ref.fit(X.astype(np.float32), show_progress=False)
    np.testing.assert_array_equal(model.item_factors_, ref.item_factors)
    np.testing.assert_array_equal(model.user_factors_, ref.user_factors)
    assert model.item_factors_.shape == (20, 6) and np.all(model.user_factors_[:, -1] == 1)  # bias column
    users = np.arange(X.shape[0])
    np.testing.assert_allclose(model.score(users), model.user_factors_ @ model.item_factors_.T)
    ids, _ = ref.recommend(2, X[2], N=5)
    assert model.recommend(2, N=5)[0].tolist() == ids.tolist()


@needs_lightfm
def test_lightfm_scores_are_lightfm_predict():
    from lightfm import LightFM

    D = random_matrix(8)
    model = LightFMWARP(factors=5, iterations=4, random_state=0, num_threads=1).fit(D)
    # the same LightFM fit, seeded as the wrapper seeds it
    seed = int(np.random.default_rng(0).integers(2**31 - 1))
    ref = LightFM(no_components=5, loss="warp", random_state=np.random.RandomState(seed))
    ref.fit(sp.coo_matrix(D), epochs=4, num_threads=1)
    users, items = np.meshgrid(np.arange(D.shape[0]), np.arange(D.shape[1]), indexing="ij")
    predicted = ref.predict(users.ravel().astype(np.int32), items.ravel().astype(np.int32)).reshape(D.shape)
    np.testing.assert_allclose(model.score(np.arange(D.shape[0])), predicted, rtol=1e-5, atol=1e-5)
    assert model.user_factors_.shape == (30, 7)


def test_lightfm_missing_module_raises_install_hint(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "lightfm" or name.startswith("lightfm."):
            raise ImportError("No module named 'lightfm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r'pip install "recsys-ltr\[lightfm\]"'):
        LightFMWARP(factors=2, iterations=1).fit(random_matrix(0))


@pytest.fixture(scope="module")
def planted():
    X = make_synthetic(500, 150, density=0.08, factor_scale=3.0, random_state=0)
    train, val, test = holdout(X, random_state=0)

    def adg(model):
        return evaluate(model.fit(train), train, test, exclude=val, metrics=["ADG"])["ADG"]

    return adg, adg(Popularity())


@pytest.mark.parametrize(
    "model",
    [
        EASE(regularization=50.0),
        ALS(factors=16, num_threads=1),
        BPR(factors=16, learning_rate=0.05, iterations=50, num_threads=1),
        pytest.param(LightFMWARP(factors=16, iterations=20, num_threads=1), marks=needs_lightfm),
    ],
    ids=lambda m: type(m).__name__,
)
def test_beats_popularity_on_planted_factors(planted, model):
    adg, popularity = planted
    assert adg(model) > popularity + 0.03


@pytest.mark.parametrize("cls", FACTOR_MODELS)
def test_same_seed_one_thread_identical_factors(cls):
    D = random_matrix(11)
    a, b = small(cls).fit(D), small(cls).fit(D)
    np.testing.assert_array_equal(a.user_factors_, b.user_factors_)
    np.testing.assert_array_equal(a.item_factors_, b.item_factors_)
    c = cls(**SMALL[cls], random_state=1, num_threads=1).fit(D)
    assert not np.array_equal(a.item_factors_, c.item_factors_)


BAD_PARAMS = [
    (ALS, "factors", 0, ValueError),
    (ALS, "factors", 2.5, TypeError),
    (ALS, "regularization", -1.0, ValueError),
    (ALS, "alpha", 0.0, ValueError),
    (ALS, "iterations", 0, ValueError),
    (ALS, "random_state", "x", TypeError),
    (ALS, "num_threads", -1, ValueError),
    (BPR, "learning_rate", 0.0, ValueError),
    (BPR, "regularization", np.nan, ValueError),
    (BPR, "factors", True, TypeError),
    (BPR, "show_progress", "yes", TypeError),
    (LightFMWARP, "factors", 0, ValueError),
    (LightFMWARP, "max_sampled", 0, ValueError),
    (LightFMWARP, "iterations", 0, ValueError),
    (LightFMWARP, "regularization", -1e-3, ValueError),
    (LightFMWARP, "regularization", np.inf, ValueError),
    (LightFMWARP, "learning_rate", -0.1, ValueError),
]


@pytest.mark.parametrize("cls, name, value, error", BAD_PARAMS)
def test_bad_params_raise_naming_the_parameter(cls, name, value, error):
    with pytest.raises(error, match=name):
        cls(**{name: value}).fit(random_matrix(0))


@pytest.mark.parametrize("cls", [BPR, lightfm_param])
def test_fold_in_unsupported_raises(cls):
    D = random_matrix(2)
    model = small(cls).fit(D)
    with pytest.raises(ValueError, match="cannot score users from user_items"):
        model.recommend(np.array([500]), user_items=sp.csr_matrix(D[:1]), recalculate_user=True)
    with pytest.raises(ValueError, match="out of range"):  # unknown user without fold-in
        model.recommend(np.array([500]), user_items=sp.csr_matrix(D[:1]))


@pytest.mark.parametrize("cls", FACTOR_MODELS)
def test_recommend_and_similar_items(cls):
    D = random_matrix(4)
    model = small(cls).fit(D)
    ids, scores = model.recommend(np.arange(5), N=6)
    full = model.score(np.arange(5))
    for u in range(5):
        assert not set(ids[u]) & set(np.flatnonzero(D[u]))
        assert np.all(np.diff(scores[u]) <= 0)
        np.testing.assert_allclose(scores[u], full[u, ids[u]])
    E = model.item_factors_[:, : model.item_factors_.shape[1] - cls._bias_columns]
    E = E / np.linalg.norm(E, axis=1, keepdims=True)
    cos = E @ E.T
    sim_ids, sim_scores = model.similar_items(3, N=4)
    order = [j for j in np.argsort(-cos[3], kind="stable") if j != 3][:4]
    assert sim_ids.tolist() == order
    np.testing.assert_allclose(sim_scores, cos[3, order])


@pytest.mark.kernels
@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**16),
    st.sampled_from([1, 9, 40, 10**6]),  # TILE_FLOATS: one row per tile, several, a partial last tile, one tile
    st.integers(1, 25),
    st.booleans(),
    st.sampled_from([None, "filter", "items"]),
    st.sampled_from([1, 2]),
)
def test_recommend_of_factor_models_ranks_tiles_like_brute_force(seed, tile_floats, N, liked, restrict, threads):
    """The tiled top-N path of the factor models (no dense score block) against a brute-force
    ranking of ``score()``: the same ids in the same order and bitwise-equal scores, with ties
    (integer factors) broken by popularity, then id."""
    from recsys_ltr import _topk

    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(random_matrix(seed % 100, n_users=13, n_items=11))
    model = ALS(factors=3, iterations=1, num_threads=threads).fit(X)
    model.user_factors_ = rng.integers(-2, 3, model.user_factors_.shape).astype(np.float64)
    model.item_factors_ = rng.integers(-2, 3, model.item_factors_.shape).astype(np.float64)
    users = rng.permutation(13)[: rng.integers(1, 14)]
    extra = rng.choice(11, 4, replace=False)
    kwargs = {"filter_items": extra} if restrict == "filter" else {"items": extra} if restrict == "items" else {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_topk, "TILE_FLOATS", tile_floats)
        ids, scores = model.recommend(users, X[users], N=N, filter_already_liked_items=liked, **kwargs)
    liked_rows = X[users] if liked else None
    assert_recommend_like_brute_force(
        ids, scores, model.score(users), liked_rows, model.item_popularity_, N, extra, restrict
    )  # fmt: skip


@pytest.mark.parametrize(
    "model",
    [
        EASE(regularization=20.0),
        ALS(factors=4, iterations=3),
        BPR(factors=4, iterations=5),
        pytest.param(LightFMWARP(factors=4, iterations=2), marks=needs_lightfm),
    ],
    ids=lambda m: type(m).__name__,
)
def test_save_load_round_trip(tmp_path, model):
    D = random_matrix(9)
    model.set_params(num_threads=1).fit(D)
    model.save(tmp_path / "m")
    loaded = Recommender.load(tmp_path / "m.npz")
    assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
    users = np.arange(D.shape[0])
    np.testing.assert_array_equal(loaded.score(users), model.score(users))
    for a, b in zip(loaded.recommend(users, N=5), model.recommend(users, N=5)):
        np.testing.assert_array_equal(a, b)


def test_load_rejects_wrong_factor_shapes(tmp_path):
    model = ALS(factors=4, iterations=2).fit(random_matrix(0))
    model.item_factors_ = model.item_factors_[:, :3]
    model.save(tmp_path / "bad")
    with pytest.raises(ValueError, match=r"item_factors_ must be a dense float array of shape \(20, 4\)"):
        ALS.load(tmp_path / "bad")
    ease = EASE(regularization=1.0).fit(random_matrix(0))
    ease.B_ = ease.B_[:5]
    ease.save(tmp_path / "bad_ease")
    with pytest.raises(ValueError, match="B_ must be a dense float array"):
        EASE.load(tmp_path / "bad_ease")


@pytest.mark.parametrize(
    "model", [EASE(regularization=5.0), ALS(factors=4, iterations=2)], ids=lambda m: type(m).__name__
)
def test_similar_items_same_in_small_chunks(monkeypatch, model):
    from recsys_ltr import _memory

    model.fit(random_matrix(12))
    items = np.arange(20)
    whole = model.similar_items(items, N=5)
    monkeypatch.setattr(_memory, "BLOCK_BYTES", 8 * 45)  # 2 items per chunk
    chunked = model.similar_items(items, N=5)
    for a, b in zip(whole, chunked):
        np.testing.assert_array_equal(a, b)
    assert np.all(whole[0] != items[:, None])  # never the item itself


def test_als_warns_when_its_input_looks_like_raw_counts():
    """The decision is about the median stored value (RAW_COUNT_MEDIAN): binary input and counts whose
    median is small stay quiet, a few huge counts included; counts with a larger median warn, naming
    the remedy, at the caller's line."""
    import warnings

    from recsys_ltr.models.factorization import RAW_COUNT_MEDIAN

    rng = np.random.default_rng(0)
    X = sp.random(60, 40, density=0.2, random_state=0, format="csr")
    X.data[:] = 1.0
    quiet = X.copy()
    quiet.data = np.where(rng.random(X.nnz) < 0.45, 10_000.0, RAW_COUNT_MEDIAN)  # median at the threshold
    loud = X.copy()
    loud.data = np.full(X.nnz, RAW_COUNT_MEDIAN + 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for data in (X, quiet):
            ALS(factors=2, iterations=1, num_threads=1).fit(data)
    with pytest.warns(UserWarning, match=r"median is 11: raw counts .*log_weight") as caught:
        ALS(factors=2, iterations=1, num_threads=1).fit(loud)
    assert caught[0].filename == __file__
