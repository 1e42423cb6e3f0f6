"""Affinity matrices: cosine, KUNN Eq. (4.5)-(4.6), SLIM; Theorem 4.3; k_max prefixes."""

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import brute_knn, brute_similarity, cosine_literal, kunn_item_affinity_literal, random_feedback, rows_of
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr.neighbors.affinity import Affinity, cosine_affinity, kunn_affinity, slim_affinity
from recsys_ltr.neighbors.knn import cosine_knn, ktrunc

pytestmark = pytest.mark.kernels


def assert_valid_topk(aff, A, k):
    """Row i of ``aff`` is a k-nearest neighbourhood of i under ``A`` up to rounding ties:
    right values, sorted, as many as there are positive candidates, nothing better left out."""
    T = aff.truncate(k)
    for i, cols in enumerate(rows_of(T)):
        vals = T.data[T.indptr[i] : T.indptr[i + 1]]
        np.testing.assert_allclose(vals, A[i, cols], rtol=1e-12)
        assert np.all(np.diff(vals) <= 1e-15)
        others = [j for j in range(A.shape[0]) if j != i and A[i, j] > 0]
        assert len(cols) == min(k, len(others))
        left_out = [A[i, j] for j in others if j not in cols]
        if left_out and cols:
            assert max(left_out) <= vals[-1] + 1e-12


@settings(max_examples=20, deadline=None)
@given(st.integers(3, 12), st.integers(3, 12), st.floats(0.15, 0.6), st.integers(0, 10**6))
def test_kunn_affinities_match_eq_4_5_and_4_6(n_users, n_items, density, seed):
    D = random_feedback(np.random.default_rng(seed), n_users, n_items, density)
    X = sp.csr_matrix(D)
    for side, A in (("item", kunn_item_affinity_literal(D)), ("user", kunn_item_affinity_literal(D.T))):
        n = A.shape[0]
        aff = kunn_affinity(X, n - 1, side=side)
        assert aff.kind == "kunn" and aff.side == side and aff.k_max == n - 1
        for k in range(1, n):
            assert_valid_topk(aff, A, k)


@settings(max_examples=20, deadline=None)
@given(st.integers(3, 12), st.integers(3, 12), st.integers(1, 11), st.integers(0, 10**6))
def test_cosine_affinity_is_ktrunc_of_cosine(n_users, n_items, k, seed):
    D = random_feedback(np.random.default_rng(seed), n_users, n_items)
    for side, M in (("item", D.T), ("user", D)):
        kk = min(k, M.shape[0] - 1)
        aff = cosine_affinity(sp.csr_matrix(D), kk, side=side)
        cos = cosine_literal(M)
        np.testing.assert_allclose(aff.truncate(kk).toarray(), ktrunc(cos, kk).toarray(), rtol=1e-12)
        assert_valid_topk(aff, cos, kk)


def aggsum_literal(knn, A, D, u, i):
    """aggsum(phi_ui) = sum of A_ij over ActiveItems(u, i) = O+_u & KNN(i)."""
    active = set(np.flatnonzero(D[u])) & set(knn[i])
    return sum(A[i, j] for j in active)


@pytest.mark.parametrize("builder", [cosine_affinity, kunn_affinity])
@pytest.mark.parametrize("side", ["item", "user"])
def test_theorem_4_3_and_corollary_4_1(builder, side):
    """aggsum over active items (users), from the untruncated literal affinity and brute-force
    KNN, equals [ktrunc(A)]_i . u  ([ktrunc(A)]_u . i) with the library's truncated rows."""
    D = random_feedback(np.random.default_rng(7), 15, 12, 0.35)
    aff = builder(sp.csr_matrix(D), 6, side=side)
    M = D if side == "item" else D.T  # rows are the "users" of the theorem for this side
    rows = M.T  # the items (users) compared by the affinity; their features are M's rows
    weights = 1 / np.sqrt(np.maximum(M.sum(axis=1), 1)) if builder is kunn_affinity else None
    A = brute_similarity(rows, weights)  # Eq. (4.5)/(4.6) or cosine, no truncation
    literal = kunn_item_affinity_literal(M) if builder is kunn_affinity else cosine_literal(rows)
    np.testing.assert_allclose(A, literal, rtol=1e-12, atol=1e-15)
    for k in (1, 3, 6):
        knn = brute_knn(A, k)
        got = aff.truncate(k) @ M.T  # column u: [ktrunc(A)] . u
        for u in range(M.shape[0]):
            for i in range(M.shape[1]):
                assert np.isclose(aggsum_literal(knn, A, M, u, i), got[i, u], rtol=1e-12, atol=1e-15)


def test_affinity_truncate_and_neighbors():
    D = random_feedback(np.random.default_rng(1), 20, 10)
    aff = cosine_affinity(sp.csr_matrix(D), 6)
    small = cosine_affinity(sp.csr_matrix(D), 2)
    assert rows_of(aff.truncate(2)) == rows_of(small.matrix)
    assert rows_of(aff.truncate()) == rows_of(aff.matrix)
    whole = aff.truncate(6)  # nothing to cut: still a writable copy, not the read-only matrix
    assert rows_of(whole) == rows_of(aff.matrix) and np.array_equal(whole.data, aff.matrix.data)
    assert whole.data.flags.writeable and not np.shares_memory(whole.data, aff.matrix.data)
    ids, vals = aff.neighbors(3, 2)
    assert ids.tolist() == rows_of(small.matrix)[3]
    np.testing.assert_array_equal(vals, small.matrix[3, ids].toarray().ravel())
    with pytest.raises(ValueError, match="exceeds k_max"):
        aff.truncate(7)
    with pytest.raises(ValueError, match="exceeds k_max"):
        aff.neighbors(3, 7)
    with pytest.raises(ValueError, match="<= 9"):
        aff.neighbors(10)
    assert "k_max=6" in repr(aff)


def test_affinity_rejects_bad_matrices():
    with pytest.raises(TypeError, match="sparse"):
        Affinity(np.eye(2), 1)
    with pytest.raises(ValueError, match="square"):
        Affinity(sp.csr_matrix((2, 3)), 1)
    with pytest.raises(ValueError, match="k_max"):
        Affinity(sp.csr_matrix(np.ones((3, 3))), 2)
    with pytest.raises(ValueError, match="finite"):
        Affinity(sp.csr_matrix(np.array([[0, np.inf], [0, 0]])), 1)
    with pytest.raises(ValueError, match="kind"):
        Affinity(sp.csr_matrix((2, 2)), 1, kind="pearson")
    with pytest.raises(ValueError, match="side"):
        Affinity(sp.csr_matrix((2, 2)), 1, side="items")
    with pytest.raises(ValueError, match="larger than the catalogue"):
        kunn_affinity(sp.csr_matrix(np.eye(3)), 3)


def test_fsslim_affinity_is_k_truncated():
    """fsSLIM's W^T only uses cosine neighbours, so ktrunc(W^T, cos, k) = W^T (appendix A)."""
    D = random_feedback(np.random.default_rng(5), 60, 15, 0.3)
    X = sp.csr_matrix(D)
    k = 4
    aff = slim_affinity(X, k, l1=0.1, l2=0.5)
    knn = cosine_knn(X, k)
    assert rows_of(aff.matrix) == rows_of(knn)  # laid out in cosine-neighbour order
    A = aff.matrix.toarray()
    assert A.min() >= 0 and np.all(np.diag(A) == 0) and A.sum() > 0
    np.testing.assert_array_equal(ktrunc(A, k, knn.toarray()).toarray(), A)
    full = slim_affinity(X, None, l1=0.1, l2=0.5)
    assert full.k_max == 14
    vals = [full.matrix.data[full.matrix.indptr[i] : full.matrix.indptr[i + 1]] for i in range(15)]
    assert all(np.all(np.diff(v) <= 0) and np.all(v > 0) for v in vals)  # ordered by weight
