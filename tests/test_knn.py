"""Cosine KNN, weighted KNN, ktrunc (Algorithm 4.1) and row truncation against brute force."""

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import brute_knn, brute_similarity, random_feedback, rows_of
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr._topk import sort_ascending, sort_best_first
from recsys_ltr.neighbors.knn import cosine_knn, ktrunc, truncate_rows, weighted_cosine_knn

pytestmark = pytest.mark.kernels


def assert_neighborhood(S_csr, S_dense, k):
    assert rows_of(S_csr) == brute_knn(S_dense, k)
    for i, cols in enumerate(rows_of(S_csr)):
        np.testing.assert_array_equal(S_csr.data[S_csr.indptr[i] : S_csr.indptr[i + 1]], S_dense[i, cols])


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 14), st.integers(3, 14), st.floats(0.1, 0.6), st.integers(1, 12), st.integers(0, 10**6))
def test_cosine_knn_matches_brute_force(n_users, n_items, density, k, seed):
    D = random_feedback(np.random.default_rng(seed), n_users, n_items, density)
    for side, M in (("item", D.T), ("user", D)):
        kk = min(k, M.shape[0] - 1)
        S = cosine_knn(sp.csr_matrix(D), kk, side=side)
        ref = brute_similarity(M)
        assert_neighborhood(S, ref, kk)
        # the usual formula C / (n_a n_b) agrees up to rounding
        C = M @ M.T
        norm = np.sqrt(np.diag(C))
        for i, cols in enumerate(rows_of(S)):
            np.testing.assert_allclose(S[i, cols].toarray().ravel(), C[i, cols] / (norm[i] * norm[cols]), rtol=1e-12)


def test_hand_computed_cosine_and_ties():
    # items 0 and 1 are identical, item 2 shares one user with each, item 3 is empty
    D = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 0]], float)
    S = cosine_knn(sp.csr_matrix(D), 3)
    assert rows_of(S) == [[1, 2], [0, 2], [0, 1], []]  # ties between 0 and 1 go to the smaller id
    np.testing.assert_allclose(S[0, 1], 1.0)
    np.testing.assert_allclose(S[2, 0], 1 / np.sqrt(2 * 2))
    assert S.shape == (4, 4) and S.nnz == 6  # O(n k_max) storage, self excluded


@settings(max_examples=15, deadline=None)
@given(st.integers(4, 12), st.integers(4, 12), st.integers(1, 3), st.integers(0, 10**6))
def test_weighted_knn_and_queries(n_users, n_items, k, seed):
    rng = np.random.default_rng(seed)
    D = random_feedback(rng, n_users, n_items)
    w = rng.uniform(0.1, 2.0, n_items)
    S = weighted_cosine_knn(sp.csr_matrix(D), k, w)
    assert_neighborhood(S, brute_similarity(D, w), k)
    # queries standing for existing rows reproduce those rows; num_threads does not matter
    rows = rng.choice(n_users, size=3)
    Q = weighted_cosine_knn(sp.csr_matrix(D), k, w, queries=sp.csr_matrix(D[rows]), query_ids=rows, num_threads=1)
    assert (Q != S[rows]).nnz == 0
    assert rows_of(Q) == rows_of(S[rows])


def test_new_query_rows_have_no_self():
    D = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1]], float)
    Q = weighted_cosine_knn(sp.csr_matrix(D), 2, queries=sp.csr_matrix(D[:1]))
    assert rows_of(Q) == [[0, 1]]  # row 0 is its own best match when it is not excluded


def test_prefix_truncation_is_smaller_k():
    D = random_feedback(np.random.default_rng(3), 30, 25, 0.3)
    full = cosine_knn(sp.csr_matrix(D), 20, num_threads=2)
    blocked = cosine_knn(sp.csr_matrix(D), 20, num_threads=1, show_progress=True)  # 32 row blocks
    assert rows_of(blocked) == rows_of(full) and np.array_equal(blocked.data, full.data)
    for k in (1, 5, 19):
        small = cosine_knn(sp.csr_matrix(D), k)
        T = truncate_rows(full, k)
        assert rows_of(T) == rows_of(small)
        np.testing.assert_array_equal(T.data, small.data)


def ktrunc_literal(A, sim, k):
    """Algorithm 4.1 as written: keep A_ij when j is in KNN(i) under sim."""
    knn = brute_knn(sim, k)
    out = np.zeros_like(A)
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if j in knn[i]:
                out[i, j] = A[i, j]
    return out


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 10), st.integers(1, 9), st.integers(0, 10**6))
def test_ktrunc_matches_algorithm_4_1(n, k, seed):
    rng = np.random.default_rng(seed)
    k = min(k, n - 1)
    sim = np.round(rng.random((n, n)), 1) * (rng.random((n, n)) < 0.7)  # rounding makes ties
    A = rng.random((n, n))
    T = ktrunc(A, k, sim)
    np.testing.assert_array_equal(T.toarray(), ktrunc_literal(A, sim, k))
    assert rows_of(T) == brute_knn(sim, k)  # rows stored in neighbourhood order
    np.testing.assert_array_equal(ktrunc(sp.csr_matrix(sim), k).toarray(), ktrunc_literal(sim, sim, k))


def test_bad_inputs():
    X = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 1]], float))
    with pytest.raises(ValueError, match="larger than the catalogue"):
        cosine_knn(X, 3)
    with pytest.raises(ValueError, match="larger than the catalogue"):
        cosine_knn(X, 2, side="user")
    with pytest.raises(ValueError, match=">= 1"):
        cosine_knn(X, 0)
    with pytest.raises(TypeError, match="integer"):
        cosine_knn(X, 1.5)
    with pytest.raises(ValueError, match="side"):
        cosine_knn(X, 1, side="items")
    with pytest.raises(ValueError, match="no interactions"):
        cosine_knn(sp.csr_matrix((3, 3)), 1)
    with pytest.raises(ValueError, match="NaN"):
        cosine_knn(sp.csr_matrix(np.array([[np.nan, 1.0], [1.0, 0.0]])), 1)
    with pytest.raises(ValueError, match="weights"):
        weighted_cosine_knn(X, 1, np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="columns"):
        weighted_cosine_knn(X, 1, queries=sp.csr_matrix((1, 2)))
    with pytest.raises(ValueError, match="square"):
        ktrunc(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="shape mismatch"):
        ktrunc(np.ones((3, 3)), 1, np.ones((2, 2)))
    with pytest.raises(ValueError, match="larger than the catalogue"):
        ktrunc([[1.0]], 1)
    with pytest.raises(TypeError, match="numeric"):
        ktrunc([["a"]], 1)


# ----------------------------------------------------------------------------- the kernels' sorts
@pytest.mark.kernels
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=0, max_size=40), st.lists(st.integers(-3, 3), min_size=40, max_size=40))
def test_heap_sorts_equal_numpy_sorts_with_ties(levels, seconds):
    n = len(levels)
    primary = np.array(levels, dtype=np.float64) / 2.0
    secondary = np.array(seconds[:n], dtype=np.int64)
    ids = np.random.default_rng(n).permutation(n).astype(np.int64)
    sort_best_first(ids, primary, secondary)
    ref = np.lexsort((np.arange(n), -secondary, -primary))  # score desc, secondary desc, id asc
    np.testing.assert_array_equal(ids, ref)
    values = np.array(seconds[:n], dtype=np.int64)
    sort_ascending(values)
    np.testing.assert_array_equal(values, np.sort(np.array(seconds[:n])))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 400), st.integers(1, 60), st.sampled_from([2, 4, 1000]))
def test_select_best_positive_splits_ties_by_smaller_id(seed, m, k, n_values):
    """The linear-time selection against a sort, with values from a few levels so that the k-th
    best falls among many ties (the tie split and the histogram edge bucket)."""
    from recsys_ltr._topk import N_BUCKETS, select_best_positive

    rng = np.random.default_rng(seed)
    n = m + int(rng.integers(0, 50))
    primary = np.zeros(n)
    cand = rng.permutation(n)[:m].astype(np.int64)
    primary[cand] = rng.choice(2.0 ** -np.arange(n_values) * (1 + rng.random(n_values)), m)
    vals = primary[cand].copy()
    out = np.full(n, -1, np.int64)
    hist = np.zeros(N_BUCKETS, np.int64)
    size = select_best_positive(
        cand.copy(), vals, vals.view(np.int64), np.empty(m, np.int32), hist, np.empty(n), m, k, primary, out
    )  # fmt: skip
    want = sorted(cand.tolist(), key=lambda i: (-primary[i], i))[: min(k, m)]
    assert size == len(want) and out[:size].tolist() == want
    assert np.all(out[size:] == -1) and not hist.any()


def test_threads_and_serial_kernels_do_not_change_neighbours_recommendations_or_evaluation(monkeypatch):
    from recsys_ltr import _parallel, split
    from recsys_ltr.metrics import evaluate
    from recsys_ltr.models import ItemKNN

    D = sp.csr_matrix(random_feedback(np.random.default_rng(3), 60, 40, 0.3))
    train, _, test = split.holdout(D, val=0.0, test=0.3, random_state=0)
    runs = []
    for threads, serial_seconds in ((1, 0.0), (2, 0.0), (2, np.inf)):  # parallel kernels, then serial
        monkeypatch.setattr(_parallel, "SERIAL_SECONDS", serial_seconds)
        model = ItemKNN(k=10, num_threads=threads).fit(train)
        ids, scores = model.recommend(np.arange(60), train, N=8)
        table = evaluate(model, train, test, k=5, num_threads=threads)
        runs.append((model.item_scorer_.toarray(), ids, scores, np.stack(list(table.per_user.values()))))
    for one, *others in zip(*runs, strict=True):
        for other in others:
            np.testing.assert_array_equal(one, other)
