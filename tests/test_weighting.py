"""Weights: the helpers of recsys_ltr.weighting against implicit's, weights kept by Interactions and
the splits, and the models that read them (ALS, EASE, ItemKNN, UserKNN) against peers and brute force."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import Interactions, split
from recsys_ltr.models import ALS, BPR, EASE, GFCF, KUNN, SLIM, ItemKNN, Popularity, RP3beta, UserKNN
from recsys_ltr.weighting import bm25_weight, log_weight, tfidf_weight

pytestmark = pytest.mark.kernels

WEIGHTED = (ALS, EASE, ItemKNN, UserKNN)


def counts(seed, n_users=25, n_items=12, density=0.35):
    """A users x items matrix of play counts (1..20), every user and item with a positive."""
    rng = np.random.default_rng(seed)
    D = (rng.random((n_users, n_items)) < density) * rng.integers(1, 21, (n_users, n_items))
    D[np.arange(n_users), rng.integers(n_items, size=n_users)] = rng.integers(1, 21, n_users)
    D[rng.integers(n_users, size=n_items), np.arange(n_items)] = rng.integers(1, 21, n_items)
    return sp.csr_matrix(D.astype(np.float64))


def binary(X):
    B = X.copy()
    B.data[:] = 1.0
    return B


# ------------------------------------------------------------------ the helpers against implicit
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    shape=st.tuples(st.integers(1, 30), st.integers(1, 30)),
    K1=st.floats(0, 200),
    B=st.floats(0, 1),
)
def test_bm25_and_tfidf_equal_implicits(seed, shape, K1, B):
    from implicit.nearest_neighbours import bm25_weight as implicit_bm25
    from implicit.nearest_neighbours import tfidf_weight as implicit_tfidf

    rng = np.random.default_rng(seed)
    X = sp.random(*shape, density=0.3, random_state=rng, data_rvs=lambda n: rng.integers(1, 50, n)).tocsr()
    with np.errstate(invalid="ignore"):  # implicit divides by a zero mean length on an empty X
        theirs = implicit_bm25(X, K1, B).toarray()
    np.testing.assert_allclose(bm25_weight(X, K1, B).toarray(), theirs, rtol=1e-12)
    np.testing.assert_allclose(tfidf_weight(X).toarray(), implicit_tfidf(X).toarray(), rtol=1e-12)


def test_bm25_by_hand_and_log_weight():
    # 3 documents, term 0 in two of them: idf_0 = log 3 - log 3 = 0; term 1 in one: log 3 - log 2
    X = np.array([[2.0, 0.0], [1.0, 3.0], [0.0, 0.0]])
    W = bm25_weight(X, K1=1.0, B=1.0).toarray()  # lengths 2, 4, 0: mean 2
    # idf 0 up to an ulp: log1p(2) and log 3 may round apart
    np.testing.assert_allclose(W[:2, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(W[1, 1], 3 * 2 / (1 * 4 / 2 + 3) * np.log(3 / 2))
    np.testing.assert_allclose(log_weight(np.array([[3.0, 0.0]]), alpha=2.0, epsilon=0.5).data, 1 + 2 * np.log(7))
    assert bm25_weight(sp.csr_matrix((2, 3))).nnz == 0  # no weight to scale, no warning


_HUGE = np.array([[1e308, 1.0, 0.0], [0.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
_PLAIN = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 3.0], [4.0, 0.0, 0.0]])


@pytest.mark.parametrize(  # the campaign's n1201/weighting cases: NaN / inf weights before
    "call, message",
    [
        (lambda: bm25_weight(_HUGE), r"K1=100 with the largest count of X \(1e\+308\) overflows"),
        (lambda: bm25_weight(_HUGE, K1=1.2), r"K1=1.2 with the largest count of X \(1e\+308\) overflows"),
        (lambda: bm25_weight(_PLAIN, K1=1e308), r"K1=1e\+308 with the largest count of X \(4\) overflows"),
        (lambda: bm25_weight(np.array([[1e308, 1e308]]), B=1.0), "row sums of its counts overflow"),
        (lambda: log_weight(10 * _PLAIN, alpha=1e308), r"alpha=1e\+308 times log\(1 \+ count / epsilon\)"),
        (lambda: log_weight(_HUGE, alpha=1e306), "overflows float64; use a smaller alpha"),
    ],
)
def test_weights_that_would_overflow_are_refused_before_they_are_computed(call, message):
    with np.errstate(all="raise"):  # decided before the computation: no overflow on the way
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("epsilon", [5e-324, 1e-300, 1.0])
@pytest.mark.parametrize("X", [_HUGE, _PLAIN], ids=["count 1e308", "plain"])
def test_log_weight_is_finite_and_exact_where_count_over_epsilon_overflows(X, epsilon):
    W = log_weight(X, alpha=1.0, epsilon=epsilon).data
    assert np.all(np.isfinite(W))
    x = sp.csr_matrix(X).data
    # log(1 + x / e) = log x - log e + log1p(e / x): the last term is below an ulp where x / e overflows
    expected = 1.0 + np.log(x) - np.log(epsilon) + np.log1p(epsilon / x)
    np.testing.assert_allclose(W, expected, rtol=1e-14)
    assert np.all(np.isfinite(bm25_weight(_PLAIN, K1=1e300).data))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: bm25_weight(np.array([[1.0, -1.0]])), "negative"),
        (lambda: tfidf_weight(np.array([[1.0, np.nan]])), "NaN"),
        (lambda: bm25_weight(np.eye(2), B=1.5), "B must be"),
        (lambda: log_weight(np.eye(2), epsilon=0), "epsilon must be"),
    ],
)
def test_helpers_refuse_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ------------------------------------------------------------------ kept by Interactions and the splits
def test_interactions_keep_the_summed_weight_of_each_positive_through_the_k_core():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {"user": rng.integers(0, 30, 400), "item": rng.integers(0, 15, 400), "plays": rng.integers(1, 9, 400)}
    )
    data = Interactions.from_dataframe(df, weight_col="plays", min_user_count=5, min_item_count=8)
    summed = df.groupby(["user", "item"])["plays"].sum()
    got = data.to_dataframe(weight_col="plays").set_index(["user", "item"])["plays"]
    pd.testing.assert_series_equal(got, summed.loc[got.index], check_dtype=False)
    assert data.weighted_matrix.sum() == got.sum() and data.matrix.data.max() == 1.0
    # without a weight column a positive weighs its number of events
    events = Interactions.from_dataframe(df)
    np.testing.assert_array_equal(events.weights, df.groupby(["user", "item"]).size().to_numpy())
    # a matrix's values are its weights; explicit weights replace them
    assert Interactions(counts(1)).weighted_matrix.toarray().tolist() == counts(1).toarray().tolist()
    with pytest.raises(ValueError, match="one per stored entry"):
        Interactions(counts(1), weights=[1.0, 2.0])


@pytest.mark.parametrize(
    "parts",
    [
        lambda X: split.holdout(X, val=0.2, test=0.3, random_state=1),
        lambda X: split.last_n(X, n=2, val_n=1, timestamps=np.arange(X.nnz)),
        lambda X: (*next(split.kfold(X, n_folds=3)), sp.csr_matrix(X.shape)),  # (train, test), no val
    ],
)
def test_splits_keep_each_positives_weight(parts):
    X = counts(2)
    train, val, test = parts(X)
    assert (train + val + test != X).nnz == 0
    assert min(p.data.min(initial=1.0) for p in (train, val, test)) >= 1.0 and train.data.max() > 1.0


# ------------------------------------------------------------------ the models that read weights
def test_which_models_read_weights_and_the_others_binarise():
    X = counts(3)
    assert {cls for cls in (*WEIGHTED, BPR, KUNN, SLIM, RP3beta, GFCF, Popularity) if cls.uses_weights} == set(WEIGHTED)
    for model in (KUNN(k=5), SLIM(), RP3beta(k=5), GFCF(factors=4), Popularity(), BPR(factors=4, num_threads=1)):
        users = np.arange(X.shape[0])
        a, b = (type(model)(**model.get_params()).fit(Y) for Y in (X, binary(X)))
        np.testing.assert_array_equal(a.score(users), b.score(users))
    for model in (ItemKNN(k=5), EASE(), ALS(factors=4, iterations=2)):
        a, b = (type(model)(**model.get_params()).fit(Y) for Y in (X, binary(X)))
        assert not np.allclose(a.score([0, 1]), b.score([0, 1]))


def test_content_item_knn_reads_weights_as_item_knn_does():
    """ContentItemKNN is item-p over a content affinity: a user's weights scale their items' votes."""
    from recsys_ltr.models import ContentItemKNN
    from recsys_ltr.neighbors import ContentAffinity

    X = counts(4)
    A = ContentAffinity(k=5).fit(np.random.default_rng(0).random((X.shape[1], 4)))
    assert ContentItemKNN.uses_weights
    users = np.arange(X.shape[0])
    once, twice, flat = (ContentItemKNN(affinity=A, k=5).fit(Y).score(users) for Y in (X, 2 * X, binary(X)))
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-12)
    assert not np.allclose(once, flat)


def test_als_trains_on_weights_like_implicit_and_folds_them_in_like_recalculate_user():
    from implicit.cpu.als import AlternatingLeastSquares

    X = bm25_weight(counts(4).T).T.tocsr()
    X.eliminate_zeros()  # a user in (nearly) every item's row has idf <= 0
    model = ALS(factors=5, regularization=0.5, alpha=4.0, iterations=3, random_state=3, num_threads=1).fit(X)
    ref = AlternatingLeastSquares(factors=5, regularization=0.5, alpha=4.0, iterations=3, random_state=3, num_threads=1)
    ref.fit(X.astype(np.float32), show_progress=False)
    np.testing.assert_array_equal(model.user_factors_, ref.user_factors)
    rows = X[[0, 5, 7]]
    expected = ref.recalculate_user([0, 5, 7], rows.astype(np.float32))
    np.testing.assert_allclose(model._fold_in(rows), expected, rtol=1e-4, atol=1e-5)


def test_ease_closed_form_on_weights():
    X = counts(5)
    D = X.toarray()
    P = np.linalg.inv(D.T @ D + 50.0 * np.eye(D.shape[1]))
    B = -P / np.diag(P)
    np.fill_diagonal(B, 0.0)
    model = EASE(regularization=50.0).fit(X)
    np.testing.assert_allclose(model.B_, B, atol=1e-10)
    np.testing.assert_allclose(model.score([3, 4]), D[[3, 4]] @ B, atol=1e-9)


def weighted_cosine(D):
    norms = np.linalg.norm(D, axis=1)
    S = (D @ D.T) / np.outer(norms, norms)
    np.fill_diagonal(S, 0.0)
    return S


@pytest.mark.filterwarnings("ignore:Method expects CSR input")  # implicit's own conversion inside fit
def test_item_knn_on_weights_is_implicits_cosine_recommender():
    from implicit.nearest_neighbours import CosineRecommender

    X = counts(6)
    n_items = X.shape[1]
    model = ItemKNN(k=n_items - 1).fit(X)
    S = weighted_cosine(X.toarray().T)
    np.testing.assert_allclose(model.item_affinity_.matrix.toarray(), S, rtol=1e-12)
    ref = CosineRecommender(K=n_items)
    ref.fit(X, show_progress=False)
    unliked = X.toarray() == 0
    theirs = (X @ ref.similarity).toarray()
    users = np.arange(X.shape[0])
    np.testing.assert_allclose(model.score(users)[unliked], theirs[unliked], rtol=1e-6)
    # a user's updated weighted row is scored without refitting, like their training row
    ids, scores = model.recommend(users[:4], N=5)
    again = model.recommend(users[:4], user_items=X[:4], N=5, recalculate_user=True)
    np.testing.assert_array_equal(ids, again[0])
    np.testing.assert_allclose(scores, again[1])


def test_user_knn_on_weights_by_brute_force_and_fold_in():
    X = counts(7)
    D = X.toarray()
    model = UserKNN(k=X.shape[0] - 1).fit(X)
    S = weighted_cosine(D)
    np.testing.assert_allclose(model.score(np.arange(D.shape[0])), S @ D, rtol=1e-10, atol=1e-12)
    # recalculated neighbours from the weighted rows are the fitted ones
    users = np.array([2, 9, 11])
    fitted = model.recommend(users, N=4)
    folded = model.recommend(users, user_items=X[users], N=4, recalculate_user=True)
    np.testing.assert_array_equal(fitted[0], folded[0])
    np.testing.assert_allclose(fitted[1], folded[1], rtol=1e-12)
    # similar_items of a user-based model: the cosine of the weighted item columns
    cos_items = weighted_cosine(D.T)
    _ids, scores = model.similar_items(0, N=3)
    np.testing.assert_allclose(scores, np.sort(cos_items[0])[::-1][:3], rtol=1e-12)


@pytest.mark.parametrize("cls", WEIGHTED)
def test_weighted_models_round_trip_their_weights(cls, tmp_path):
    X = counts(8)
    params = {"factors": 4, "iterations": 2} if cls is ALS else {"k": 5} if cls in (ItemKNN, UserKNN) else {}
    model = cls(**params).fit(X)
    path = model.save(tmp_path / "model")
    loaded = cls.load(path)
    np.testing.assert_array_equal(loaded.user_items_.toarray(), X.toarray())
    np.testing.assert_array_equal(loaded.score([0, 1, 2]), model.score([0, 1, 2]))


@pytest.mark.parametrize("cls", WEIGHTED)
@pytest.mark.parametrize(
    "values, message",
    [(0.0, "explicit zero"), (-1.0, "negative"), (1e120, "weights must lie in"), (1e-120, "weights must lie in")],
)
def test_bad_weights_are_refused_with_the_reason(cls, values, message):
    X = counts(9)
    X.data[3] = values
    with pytest.raises(ValueError, match=message):
        cls().fit(X)


def test_interactions_recommend_scores_weighted_item_models_from_the_rows_given():
    rng = np.random.default_rng(1)
    log = pd.DataFrame(
        {"user": rng.integers(0, 40, 500), "item": rng.integers(0, 25, 500), "plays": rng.integers(1, 9, 500)}
    )
    data = Interactions.from_dataframe(log, weight_col="plays")
    model = ItemKNN(k=5).fit(data.weighted_matrix)
    users = data.user_ids[:3]
    got = data.recommend(model, users, N=3, user_items=data.weighted_matrix)
    ids, scores = model.recommend(np.arange(3), N=3)
    np.testing.assert_array_equal(got["item"].to_numpy(), data.item_ids[ids.ravel()])
    np.testing.assert_allclose(got["score"].to_numpy(), scores.ravel())
    with pytest.warns(UserWarning, match="fitted on weights but scores these users from the binary"):
        data.recommend(model, users, N=3)
    with pytest.raises(ValueError, match="user_items must have this data's shape"):
        data.recommend(model, users, N=3, user_items=data.weighted_matrix[:5])


def test_a_knn_index_reads_its_values_only_when_weighted():
    from recsys_ltr.neighbors import KnnIndex, knn_index

    binary_index = knn_index(counts(10))  # binarised by the public function
    assert not binary_index.weighted and set(binary_index.data) == {1.0}
    weighted = KnnIndex(np.array([0, 2, 3]), np.array([0, 1, 1]), np.ones(2), np.ones(2), 2, 2, data=[2.0, 3.0, 1.0])
    assert weighted.weighted and weighted.data.tolist() == [2.0, 3.0, 1.0]
    with pytest.raises(ValueError, match="negative"):
        KnnIndex(np.array([0, 1]), np.array([0]), np.ones(1), np.ones(1), 1, 1, data=[-1.0])
