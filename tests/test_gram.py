"""The sparse Gram matrix of EASE's sparse solve and fsSLIM: equal to scipy's product bit for bit,
its local blocks equal to the dense submatrix, and refused up front when it would not fit."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import _gram
from recsys_ltr.models import EASE
from recsys_ltr.neighbors.slim import slim_weights


def scipy_gram(X):
    """``X^T X`` with every diagonal entry stored, sorted, by scipy's product."""
    n = X.shape[1]
    Y = sp.vstack([X, sp.identity(n, format="csr")], format="csr")
    G = (Y.T @ Y).T.tocsr()
    G.sort_indices()
    return G


@pytest.mark.kernels
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_users=st.integers(1, 30),
    n_items=st.integers(1, 300),
    density=st.floats(0.0, 0.3),
)
def test_gram_equals_scipys_product_bit_for_bit(seed, n_users, n_items, density):
    """Short rows (sorted) and long ones (scanned): the stored pattern is that of ``X^T X`` plus the
    diagonal, every value the same sum in the same order as scipy's."""
    rng = np.random.default_rng(seed)
    X = sp.random(n_users, n_items, density=density, random_state=rng, format="csr")
    X.data = rng.integers(1, 5, X.nnz) * rng.random(X.nnz)  # weighted: sums not exactly representable
    G, expected = _gram.gram(X, "test"), scipy_gram(X)
    assert G.has_sorted_indices and G.shape == (n_items, n_items)
    np.testing.assert_array_equal(G.indptr, expected.indptr)
    np.testing.assert_array_equal(G.indices, expected.indices)
    np.testing.assert_array_equal(_gram.gram_entries(X), np.diff(expected.indptr))
    diagonal = G.indices == np.repeat(np.arange(n_items), np.diff(G.indptr))
    np.testing.assert_array_equal(G.data[~diagonal], expected.data[~diagonal])
    np.testing.assert_array_equal(G.data[diagonal], (X.T @ X).diagonal())


def test_gram_hand_computed():
    X = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    G = _gram.gram(X, "test")
    np.testing.assert_array_equal(G.toarray(), [[1.0, 2.0, 0.0], [2.0, 5.0, 0.0], [0.0, 0.0, 0.0]])
    assert G.nnz == 5  # the unused item's diagonal is stored


@pytest.mark.kernels
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_items=st.integers(1, 60), density=st.floats(0.0, 0.5))
def test_local_block_is_the_dense_submatrix(seed, n_items, density):
    rng = np.random.default_rng(seed)
    A = _gram.gram(sp.random(40, n_items, density=density, random_state=rng, format="csr"), "test")
    i = int(rng.integers(n_items))
    others = np.setdiff1d(np.arange(n_items), [i])
    pattern = np.append(np.sort(rng.choice(others, size=rng.integers(0, others.size + 1), replace=False)), i)
    local = _gram.local_block(A.indptr.astype(np.int64), A.indices, A.data, pattern.astype(np.int64))
    np.testing.assert_array_equal(local, A.toarray()[np.ix_(pattern, pattern)])


def _fits(X):
    neighbors = sp.csr_matrix(np.ones((X.shape[1], X.shape[1])))
    return {
        "EASE": lambda: EASE(solver="sparse").fit(X),
        "fsSLIM": lambda: slim_weights(X, neighbors=neighbors, max_gram_bytes=1),
    }


@pytest.mark.parametrize("name", ["EASE", "fsSLIM"])
def test_a_gram_matrix_larger_than_the_memory_is_refused_before_it_is_built(monkeypatch, name):
    X = sp.csr_matrix(np.random.default_rng(0).random((60, 40)) < 0.3, dtype=np.float64)
    need = _gram.GRAM_ENTRY_BYTES * int(_gram.gram_entries(X).sum())
    kernel, filled = _gram._gram_rows, []
    monkeypatch.setattr(_gram, "_gram_rows", lambda *a: filled.append(a[-2] is not None) or kernel(*a))
    monkeypatch.setattr(_gram._memory, "available_bytes", lambda: need - 1)
    with pytest.raises(MemoryError, match=rf"{name} needs the Gram matrix X\^T X of 40 items, [\d,]+ co-occurring"):
        _fits(X)[name]()
    assert filled == [False]  # counted, never filled
    monkeypatch.setattr(_gram._memory, "available_bytes", lambda: 2**40)
    _fits(X)[name]()
    assert filled[-1]
