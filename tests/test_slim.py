"""Tests of the SLIM / fsSLIM solver against scikit-learn's ElasticNet and the dissertation."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import brute_knn, brute_similarity, knn_matrix, ktrunc_literal, rows_of
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet

from recsys_ltr.neighbors.slim import slim_weights

pytestmark = pytest.mark.kernels

TIGHT = dict(tol=1e-14, max_iter=10_000)


def slim_feedback(seed, n_users=40, n_items=12, density=0.3, empty_item=None):
    rng = np.random.default_rng(seed)
    X = (rng.random((n_users, n_items)) < density).astype(float)
    X[np.arange(n_users), rng.integers(0, n_items, n_users)] = 1.0  # no empty user
    if empty_item is not None:
        X[:, empty_item] = 0.0
    return sp.csr_matrix(X)


def sklearn_slim(X, l1, l2, allowed=None, positive=True):
    """Reference: one scikit-learn ElasticNet per item, disallowed columns zeroed."""
    Xd = X.toarray()
    n_users, n_items = Xd.shape
    W = np.zeros((n_items, n_items))
    for i in range(n_items):
        mask = np.ones(n_items, bool) if allowed is None else allowed[i].copy()
        mask[i] = False
        model = ElasticNet(
            alpha=(l1 + l2) / n_users,
            l1_ratio=l1 / (l1 + l2),
            positive=positive,
            fit_intercept=False,
            tol=1e-14,
            max_iter=100_000,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(Xd * mask, Xd[:, i])
        W[:, i] = model.coef_
    return W


def objective(X, W, l1, l2):
    """Sum over items of 1/2 ||x_i - X w_i||^2 + l2/2 ||w_i||^2 + l1 ||w_i||_1."""
    Xd = X.toarray()
    return 0.5 * np.sum((Xd - Xd @ W) ** 2) + 0.5 * l2 * np.sum(W**2) + l1 * np.abs(W).sum()


def cosine_knn_matrix(X, k):
    """Items x items 0/1 CSR whose row i marks the brute-force cosine KNN(i)."""
    Xd = X.toarray()
    return knn_matrix(brute_knn(brute_similarity(Xd.T), k), Xd.shape[1])


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    l1=st.sampled_from([0.0, 0.1, 1.0, 5.0]),
    l2=st.sampled_from([0.5, 1.0, 10.0]),
    positive=st.booleans(),
)
def test_matches_sklearn_elasticnet_mapping(seed, l1, l2, positive):
    X = slim_feedback(seed, empty_item=seed % 12)
    W = slim_weights(X, l1=l1, l2=l2, positive=positive, **TIGHT)
    np.testing.assert_allclose(W.toarray(), sklearn_slim(X, l1, l2, positive=positive), atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_lasso_case_l2_zero_reaches_sklearn_objective(seed):
    X = slim_feedback(seed)
    W = slim_weights(X, l1=1.0, l2=0.0, **TIGHT).toarray()
    ref = sklearn_slim(X, 1.0, 0.0)
    assert np.all(np.diag(W) == 0)
    assert objective(X, W, 1.0, 0.0) <= objective(X, ref, 1.0, 0.0) + 1e-7


@pytest.mark.parametrize("max_gram_bytes", [2**30, 1])  # dense Gram path / sparse Gram path
def test_fsslim_matches_sklearn_on_neighbour_columns(max_gram_bytes):
    X = slim_feedback(3, n_users=50, n_items=15)
    knn = cosine_knn_matrix(X, 4)
    W = slim_weights(X, l1=0.5, l2=1.0, neighbors=knn, max_gram_bytes=max_gram_bytes, **TIGHT)
    ref = sklearn_slim(X, 0.5, 1.0, allowed=knn.toarray() != 0)
    np.testing.assert_allclose(W.toarray(), ref, atol=1e-6)


def test_fsslim_is_k_truncated_and_full_slim_is_not():
    """Dissertation appendix A: ktrunc(W^T) = W^T for fsSLIM (not for SLIM on the same data)."""
    X = slim_feedback(7, n_users=80, n_items=20, density=0.25)
    knn = cosine_knn_matrix(X, 5)
    A = slim_weights(X, neighbors=knn).T.toarray()
    np.testing.assert_array_equal(ktrunc_literal(A, rows_of(knn)), A)
    assert np.count_nonzero(A) > 0
    A_full = slim_weights(X).T.toarray()
    assert not np.array_equal(ktrunc_literal(A_full, rows_of(knn)), A_full)


def test_neighbour_self_loops_and_values_are_ignored():
    X = slim_feedback(11)
    knn = cosine_knn_matrix(X, 3)
    noisy = (knn * 7.0 + sp.eye(12)).tocsr()  # self in every row, other stored values
    np.testing.assert_array_equal(slim_weights(X, neighbors=noisy).toarray(), slim_weights(X, neighbors=knn).toarray())


def test_output_format_non_negative_zero_diagonal_and_empty_item():
    X = slim_feedback(5, n_users=60, n_items=20, density=0.4, empty_item=4)
    W = slim_weights(X, l1=0.1, l2=0.1)
    assert isinstance(W, sp.csr_matrix) and W.shape == (20, 20) and W.dtype == np.float64
    assert W.has_sorted_indices and W.indices.dtype == np.int32
    assert np.all(W.data > 0)
    assert np.all(W.diagonal() == 0)
    assert W[4].nnz == 0 and W[:, 4].nnz == 0  # an item nobody consumed neither predicts nor is predicted


def test_positive_false_allows_negative_weights():
    X = slim_feedback(2, n_users=60, n_items=15, density=0.4)
    W = slim_weights(X, l1=0.01, l2=0.1, positive=False)
    assert W.data.min() < 0
    assert np.all(W.diagonal() == 0)


def test_recovers_duplicated_items():
    """Item 10 + j is an exact copy of item j: each item's weight goes to its twin."""
    base = slim_feedback(4, n_users=200, n_items=10, density=0.2).toarray()
    X = sp.csr_matrix(np.hstack([base, base]))
    W = slim_weights(X, l1=1.0, l2=1.0).toarray()
    for i in range(20):
        twin = (i + 10) % 20
        assert np.argmax(W[:, i]) == twin
        assert W[twin, i] > 0.9 * W[:, i].sum()


def test_recovers_planted_item_clusters():
    """Users consume one cluster of items (plus noise): weights stay inside the cluster."""
    rng = np.random.default_rng(0)
    n_users, n_clusters, size = 300, 3, 8
    cluster_of_item = np.repeat(np.arange(n_clusters), size)
    user_cluster = rng.integers(0, n_clusters, n_users)
    prob = np.where(user_cluster[:, None] == cluster_of_item[None, :], 0.5, 0.02)
    X = sp.csr_matrix((rng.random(prob.shape) < prob).astype(float))
    W = slim_weights(X).toarray()
    same = cluster_of_item[:, None] == cluster_of_item[None, :]
    assert W[same].sum() > 0.95 * W.sum()
    assert np.all((W * same).sum(axis=0) > 0)  # every item is predicted by its own cluster


def test_number_of_threads_does_not_change_result():
    X = slim_feedback(9, n_users=70, n_items=25)
    W1 = slim_weights(X, num_threads=1)
    W2 = slim_weights(X, num_threads=2)
    assert (W1 != W2).nnz == 0


def test_progress_bar_and_interactions_like_input(capsys):
    X = slim_feedback(1)

    class Holder:
        matrix = X

    W = slim_weights(Holder(), show_progress=True)
    assert "SLIM" in capsys.readouterr().err
    assert (W != slim_weights(X)).nnz == 0


def test_convergence_warning_when_max_iter_too_small():
    X = slim_feedback(12, n_users=100, n_items=30, density=0.5)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        slim_weights(X, l1=0.0, l2=0.01, max_iter=1, tol=1e-12)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(l1=-1.0), ValueError, "l1"),
        (dict(l2=np.nan), ValueError, "l2"),
        (dict(l1=np.inf), ValueError, "l1"),
        (dict(l1="1"), TypeError, "l1"),
        (dict(l2=True), TypeError, "l2"),
        (dict(l1=0.0, l2=0.0), ValueError, "both 0"),
        (dict(tol=-1e-3), ValueError, "tol"),
        (dict(max_iter=0), ValueError, "max_iter"),
        (dict(positive=1), TypeError, "positive"),
        (dict(num_threads=-1), ValueError, "num_threads"),
        (dict(neighbors=np.ones((12, 12))), TypeError, "neighbors"),
        (dict(neighbors=sp.eye(11, format="csr")), ValueError, "shape"),
        (dict(max_gram_bytes=100), MemoryError, "Gram"),
    ],
)
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        slim_weights(slim_feedback(0), **kwargs)


def test_bad_feedback_and_malformed_neighbors():
    with pytest.raises(ValueError, match="no interactions"):
        slim_weights(sp.csr_matrix((5, 4)))
    with pytest.raises(ValueError, match="NaN"):
        slim_weights(np.array([[1.0, np.nan], [0.0, 1.0]]))
    bad = sp.csr_matrix((np.ones(1), np.array([12]), np.array([0, 1] + [1] * 11)), shape=(12, 12))
    with pytest.raises(ValueError, match="malformed"):
        slim_weights(slim_feedback(0), neighbors=bad)
