"""Updates without a refit: ``partial_fit_users`` / ``partial_fit_items`` (recsys_ltr.models.updates)
against implicit's, against a refit where the update is exact, and at the public boundary."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from implicit.cpu.als import AlternatingLeastSquares
from sklearn.exceptions import NotFittedError

from recsys_ltr import Interactions
from recsys_ltr.datasets import make_synthetic
from recsys_ltr.febr import FEBR
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import ALS, BPR, EASE, GFCF, KUNN, ItemKNN, Popularity, UserKNN
from recsys_ltr.models.updates import replace_columns, replace_rows
from tests._helpers import random_feedback, small_models

pytestmark = pytest.mark.kernels

ONE = dict(num_threads=1)


@pytest.fixture(scope="module")
def X():
    return make_synthetic(n_users=120, n_items=40, density=0.15, random_state=0).matrix


def _as_implicit(model):
    """implicit's ALS holding our fitted factors (float64), to compare its updates with ours."""
    peer = AlternatingLeastSquares(
        factors=model.factors, regularization=model.regularization, alpha=model.alpha, dtype=np.float64, **ONE
    )
    peer.user_factors, peer.item_factors = model.user_factors_.copy(), model.item_factors_.copy()
    return peer


def test_als_partial_fit_users_equals_implicits(X):
    model = ALS(factors=6, iterations=3, random_state=0, **ONE).fit(X[:100])
    peer = _as_implicit(model)
    ids = np.array([3, 100, 117, 55, *range(101, 117), 118, 119])  # known and new users, in any order
    model.partial_fit_users(ids, X[ids])
    peer.partial_fit_users(ids, X[ids])
    assert model.n_users_ == 120 and model.user_items_.shape == (120, 40)
    np.testing.assert_allclose(model.user_factors_, peer.user_factors, rtol=1e-9, atol=1e-12)
    assert (model.user_items_ != X).nnz == (X[3] != X[3]).nnz  # the rows given are stored


def test_als_partial_fit_items_equals_implicits(X):
    model = ALS(factors=6, iterations=3, random_state=0, **ONE).fit(X[:, :30])
    peer = _as_implicit(model)
    ids = np.array([35, 30, 31, 32, 33, 34, 36, 37, 38, 39, 2])
    cols = X.T.tocsr()[ids]
    model.partial_fit_items(ids, cols)
    peer.partial_fit_items(ids, cols)
    np.testing.assert_allclose(model.item_factors_, peer.item_factors, rtol=1e-9, atol=1e-12)
    assert (model.user_items_ != X[:, np.r_[0:30, 30:40]].tolil().tocsr()).nnz == 0
    np.testing.assert_array_equal(model.gram_, model.item_factors_.T @ model.item_factors_)


def test_item_based_users_are_their_rows(X):
    """An updated user of an item-based model is scored as recalculate_user scores its row."""
    for make in (lambda: EASE(regularization=2.0, **ONE), lambda: ItemKNN(k=5, **ONE)):
        before = make().fit(X[:100])
        expected = before.recommend(np.arange(100, 120), user_items=X[100:], N=5, recalculate_user=True)
        after = make().fit(X[:100]).partial_fit_users(np.arange(100, 120), X[100:])
        got = after.recommend(np.arange(100, 120), N=5)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_allclose(got[1], expected[1])


def test_gfcf_linear_filter_and_popularity_equal_a_refit(X):
    """What a model derives from its training matrix is derived from the grown one: GF-CF's linear
    filter and the popularity order are then those of a refit."""
    grown = replace_rows(X[:100], np.arange(100, 120), X[100:])
    for make in (lambda: GFCF(factors=3, alpha=0.0, **ONE), lambda: Popularity(**ONE)):
        updated = make().fit(X[:100]).partial_fit_users(np.arange(100, 120), X[100:])
        np.testing.assert_allclose(updated.score(np.arange(120)), make().fit(grown).score(np.arange(120)))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_new=st.integers(1, 4), k=st.integers(1, 5))
def test_neighbour_rows_equal_a_refits(seed, n_new, k):
    """The re-learnt rows of ItemKNN (items), UserKNN and KUNN (users) equal a refit's rows."""
    rng = np.random.default_rng(seed)
    D = sp.csr_matrix(random_feedback(rng, 14, 12, density=0.35))
    for model, side in ((ItemKNN(k=k, **ONE), "item"), (UserKNN(k=k, **ONE), "user"), (KUNN(k=k, **ONE), "user")):
        refit = type(model)(**model.get_params()).fit(D)
        if side == "item":
            model.fit(D[:, : 12 - n_new]).partial_fit_items(np.arange(12 - n_new, 12), D.T.tocsr()[12 - n_new :])
        else:
            model.fit(D[: 14 - n_new]).partial_fit_users(np.arange(14 - n_new, 14), D[14 - n_new :])
        name = f"{side}_affinity_"
        n = getattr(refit, name).n
        new = np.arange(n - n_new, n)
        got, want = getattr(model, name).matrix[new], getattr(refit, name).matrix[new]
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-12)
        assert getattr(model, name).matrix.shape == (n, n)


def test_every_item_relearnt_is_a_refit(X):
    """ItemKNN with all its items re-learnt from the grown columns is the refit model."""
    grown = replace_rows(X[:100], np.arange(100, 120), X[100:])
    model = ItemKNN(k=5, **ONE).fit(X[:100]).partial_fit_users(np.arange(100, 120), X[100:])
    model.partial_fit_items(np.arange(40), grown.T.tocsr())
    refit = ItemKNN(k=5, **ONE).fit(grown)
    assert (model.item_affinity_.matrix != refit.item_affinity_.matrix).nnz == 0
    np.testing.assert_array_equal(model.recommend(np.arange(120), N=5)[0], refit.recommend(np.arange(120), N=5)[0])


def test_new_users_rank_close_to_a_refit():
    """ALS's fold-in of 20% new users ranks their held-out items near a refit on all users, which also
    re-learns the items from them (measured NDCG@10 .362 against .425, popularity .155)."""
    data = make_synthetic(n_users=1000, n_items=200, density=0.05, factor_scale=3.0, random_state=3)
    X = data.matrix
    rng = np.random.default_rng(0)
    held = sp.csr_matrix(X.multiply(rng.random(X.shape) < 0.2))
    held.eliminate_zeros()
    train = (X - held).tocsr()
    train.eliminate_zeros()
    new = np.arange(800, 1000)
    model = ALS(factors=16, iterations=10, random_state=0, **ONE).fit(train[:800]).partial_fit_users(new, train[800:])
    refit = ALS(factors=16, iterations=10, random_state=0, **ONE).fit(train)
    kw = dict(metrics=["NDCG@10"], users=new)
    ours, theirs = (evaluate(m, train, held, **kw)["NDCG@10"] for m in (model, refit))
    popular = evaluate(Popularity(**ONE).fit(train), train, held, **kw)["NDCG@10"]
    assert ours > 0.8 * theirs and ours > 2 * popular


def test_febr_updates_users_through_its_bases(X):
    def make(bases):
        return FEBR(bases=bases, candidates=10, max_iter=200, eval_every=100, fallback_p=None, random_state=0, **ONE)

    model = make([ItemKNN(k=5, **ONE), ALS(factors=4, iterations=2, random_state=0, **ONE)]).fit(X[:100])
    model.partial_fit_users(np.arange(100, 120), X[100:])
    assert model.n_users_ == 120 and all(b.n_users_ == 120 for b in model.bases_)
    assert model.bases_[0].user_items_ is model.user_items_  # one grown matrix for the stack
    assert model.recommend(np.arange(100, 120), N=3)[0].shape == (20, 3)
    stuck = make([ItemKNN(k=5, **ONE), BPR(factors=4, iterations=2, random_state=0, **ONE)]).fit(X[:100])
    with pytest.raises(NotImplementedError, match="BPR learns its users only by fit"):
        stuck.partial_fit_users(np.arange(100, 120), X[100:])
    assert stuck.n_users_ == 100 and all(b.n_users_ == 100 for b in stuck.bases_)  # nothing changed
    with pytest.raises(NotImplementedError, match="FEBR cannot add or re-learn items"):
        model.partial_fit_items([40], sp.csr_matrix((1, 120)))


def test_every_model_updates_or_says_it_cannot(X):
    """Each exported model grows with new users and items, or raises NotImplementedError naming a refit
    and keeps its fitted state; an updated model saves and loads with the same answers."""
    for name, make in small_models(40).items():
        model = make().fit(X[:100, :35]) if name != "ContentItemKNN" else make().fit(X[:100])
        for kind, ids in (("items", np.arange(35, 40)), ("users", np.arange(100, 120))):
            if name == "ContentItemKNN" and kind == "items":
                continue
            shape = model.user_items_.shape
            M = X[:100, 35:].T.tocsr() if kind == "items" else X[100:, : model.n_items_]
            try:
                getattr(model, f"partial_fit_{kind}")(ids, M)
            except NotImplementedError as exc:
                assert "refit" in str(exc), name
                assert model.user_items_.shape == shape, name
                break
            assert model.user_items_.shape[kind == "items"] == shape[kind == "items"] + len(ids), name
        if model.n_users_ == 120:
            ranked = model.recommend(np.arange(100, 120), N=3)
            assert ranked[0].shape == (20, 3), name


def test_update_round_trips_a_file(X, tmp_path):
    model = (
        ALS(factors=4, iterations=2, random_state=0, **ONE).fit(X[:100]).partial_fit_users(np.arange(100, 120), X[100:])
    )
    model.save(tmp_path / "als.npz")
    loaded = ALS.load(tmp_path / "als.npz")
    np.testing.assert_array_equal(loaded.recommend(np.arange(120), N=5)[0], model.recommend(np.arange(120), N=5)[0])


@pytest.mark.parametrize(
    "ids, rows, error, match",
    [
        ([1, 1], 2, ValueError, "repeats ids"),
        ([100, 102], 2, ValueError, "continue the numbering without gaps"),
        ([-1], 1, ValueError, ">= 0"),
        ([1.0], 1, TypeError, "integers"),
        ([1, 2], 3, ValueError, r"one row per id .* \(2, 40\), got \(3, 40\)"),
    ],
)
def test_bad_updates_are_refused(X, ids, rows, error, match):
    model = ItemKNN(k=5, **ONE).fit(X[:100])
    with pytest.raises(error, match=match):
        model.partial_fit_users(ids, X[:rows])
    assert model.n_users_ == 100


def test_update_boundary(X):
    with pytest.raises(NotFittedError):
        ItemKNN().partial_fit_users([0], X[:1])
    model = ItemKNN(k=5, **ONE).fit(X[:100])
    with pytest.raises(ValueError, match="new items first: partial_fit_items"):
        model.partial_fit_users([0], sp.csr_matrix((1, 41)))
    with pytest.raises(ValueError, match="explicit zero"):
        model.partial_fit_users([0], sp.csr_matrix((np.zeros(1), ([0], [0])), shape=(1, 40)))
    with pytest.raises(NotImplementedError, match="EASE cannot re-learn items"):
        EASE(**ONE).fit(X).partial_fit_items([40], sp.csr_matrix((1, 120)))
    assert model.partial_fit_users([], sp.csr_matrix((0, 40))).n_users_ == 100  # nothing to do


def test_replace_rows_and_columns_keep_the_canonical_form():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(random_feedback(rng, 6, 5))
    rows = sp.csr_matrix(random_feedback(rng, 3, 5, duplicate=False))
    got = replace_rows(X, np.array([7, 1, 6]), rows)
    want = sp.vstack([X, sp.csr_matrix((2, 5))]).tolil()
    want[[7, 1, 6]] = rows.toarray()
    np.testing.assert_array_equal(got.toarray(), want.toarray())
    assert got.indices.dtype == np.int32 and got.has_sorted_indices
    cols = replace_columns(X, np.array([5, 0]), sp.csr_matrix(random_feedback(rng, 2, 6, duplicate=False)))
    assert cols.shape == (6, 6) and cols.indices.dtype == np.int32 and cols.has_sorted_indices


def test_interactions_append_and_partial_fit():
    log = pd.DataFrame(
        {"user": ["ann", "ann", "bob", "bob", "cy"], "item": ["a", "b", "a", "c", "b"], "w": [1, 2, 3, 4, 5]}
    )
    data = Interactions.from_dataframe(log, weight_col="w")
    more = Interactions.from_dataframe(
        pd.DataFrame({"user": ["dora", "dora", "ann"], "item": ["c", "d", "a"], "w": [1, 1, 10]}), weight_col="w"
    )
    grown = data.append(more)
    assert grown.user_ids.tolist() == ["ann", "bob", "cy", "dora"] and grown.item_ids.tolist() == ["a", "b", "c", "d"]
    assert grown.weights.tolist() == [11, 2, 3, 4, 5, 1, 1]  # ann's a: 1 + 10
    model = ALS(factors=2, iterations=2, random_state=0, **ONE).fit(data.matrix)
    grown = data.partial_fit(model, more)
    assert model.user_items_.shape == (4, 4)
    assert grown.recommend(model, ["dora"], N=2)["item"].tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="different types that read the same"):
        data.append(
            Interactions.from_dataframe(pd.DataFrame({"user": [2], "item": ["a"]})).append(
                Interactions.from_dataframe(pd.DataFrame({"user": ["2"], "item": ["a"]}))
            )
        )
    with pytest.raises(NotImplementedError, match="EASE cannot re-learn items"):
        data.partial_fit(EASE(**ONE).fit(data.matrix), more)
