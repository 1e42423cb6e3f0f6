import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr._threads import check_num_threads
from recsys_ltr._validation import (
    check_feedback,
    check_ids,
    check_positive_int,
    check_random_state,
    check_real,
    check_same_shape,
    check_scores,
    stores_a_repeat,
)


def test_check_feedback_canonical_form():
    X = sp.coo_matrix(([2.0, 1.0, 3.0], ([1, 0, 1], [2, 1, 0])), shape=(2, 3))
    out = check_feedback(X)
    assert isinstance(out, sp.csr_matrix)
    assert out.has_sorted_indices and out.indices.dtype == np.int32
    np.testing.assert_array_equal(out.toarray(), [[0, 1, 0], [1, 0, 1]])
    np.testing.assert_array_equal(out.data, 1.0)


def test_check_feedback_sums_duplicates_and_accepts_dense():
    X = sp.coo_matrix(([1.0, 1.0], ([0, 0], [1, 1])), shape=(1, 2))
    assert check_feedback(X).nnz == 1
    np.testing.assert_array_equal(check_feedback(np.array([[0, 2], [1, 0]])).toarray(), [[0, 1], [1, 0]])


def test_check_feedback_does_not_modify_input():
    X = sp.csr_matrix(np.array([[0, 5.0]]))
    check_feedback(X)
    assert X.data[0] == 5.0


@pytest.mark.parametrize(
    "X, match",
    [
        (sp.csr_matrix(np.array([[np.nan, 1.0]])), "NaN"),
        (sp.csr_matrix(np.array([[np.inf, 1.0]])), "infinite"),
        (sp.csr_matrix(np.array([[-1.0, 1.0]])), "negative"),
        (np.array([[np.nan, 1.0]]), "NaN"),
        (sp.csr_matrix((2, 3)), "no interactions"),
        (np.zeros(3), "2-D"),
    ],
)
def test_check_feedback_rejects_bad_values(X, match):
    with pytest.raises(ValueError, match=match):
        check_feedback(X)


def test_check_feedback_explicit_zero_and_types():
    X = sp.csr_matrix((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    with pytest.raises(ValueError, match="explicit zero"):
        check_feedback(X)
    with pytest.raises(TypeError, match="scipy.sparse"):
        check_feedback("not a matrix")
    with pytest.raises(TypeError, match="numeric"):
        check_feedback(np.array([["a", "b"]]))
    assert check_feedback(sp.csr_matrix((2, 3)), allow_empty=True).shape == (2, 3)


def test_check_ids():
    np.testing.assert_array_equal(check_ids(3, 5), [3])
    with pytest.raises(TypeError, match="integers"):  # an integral float is not an id either
        check_ids([0.0, 4.0], 5)
    with pytest.raises(ValueError, match=r"out of range \[0, 5\): \[5\]"):
        check_ids([1, 5], 5)
    with pytest.raises(ValueError, match="out of range"):
        check_ids(-1, 5)
    with pytest.raises(TypeError, match="integers"):
        check_ids([0.5], 5)
    with pytest.raises(ValueError, match="1-D"):
        check_ids([[1]], 5)


def test_small_checks():
    assert check_positive_int(3, "k") == 3
    with pytest.raises(TypeError):
        check_positive_int(2.5, "k")
    with pytest.raises(TypeError):
        check_positive_int(True, "k")
    with pytest.raises(ValueError, match="k must be <= 4"):
        check_positive_int(5, "k", maximum=4)
    with pytest.raises(ValueError, match="shape mismatch"):
        check_same_shape(sp.csr_matrix((2, 2)), sp.csr_matrix((2, 3)), "train", "test")
    assert check_num_threads(1) == 1
    assert check_num_threads(0) >= 1
    g = check_random_state(3)
    assert g.integers(1000) == np.random.default_rng(3).integers(1000)
    assert check_random_state(g) is g
    with pytest.raises(TypeError, match="^random_state must"):
        check_random_state("seed")
    with pytest.raises(TypeError, match="^seed must"):
        check_random_state(1.5, "seed")


def test_check_scores_keeps_float32_and_casts_the_rest():
    f32 = np.zeros((2, 3), dtype=np.float32)
    assert check_scores(f32, (2, 3)) is f32
    out = check_scores(np.ones((2, 3), dtype=np.int8), (2, 3))
    assert out.dtype == np.float64 and out.flags.c_contiguous
    assert check_scores(np.zeros((3, 2)).T, (2, 3)).flags.c_contiguous
    with pytest.raises(ValueError, match=r"scores must have shape \(2, 3\)"):
        check_scores(np.zeros((2, 2)), (2, 3))
    for bad in (np.zeros((2, 3), dtype=complex), np.full((2, 3), "a")):
        with pytest.raises(TypeError, match="real numbers"):
            check_scores(bad, (2, 3))


def test_check_real():
    assert check_real(3, "x", low=0) == 3.0 and isinstance(check_real(3, "x"), float)
    assert check_real(0.0, "x", low=0.0) == 0.0
    for value, kwargs, match in [
        (0.0, dict(low=0.0, low_open=True), r"x must be a finite number in \(0.0, inf\), got 0.0"),
        (1.0, dict(low=0.0, high=1.0, high_open=True), r"in \[0.0, 1.0\)"),
        (1.5, dict(high=1.0), r"in \[-inf, 1.0\]"),
        (np.nan, {}, "finite"),
        (np.inf, {}, "finite"),
    ]:
        with pytest.raises(ValueError, match=match):
            check_real(value, "x", **kwargs)
    for value in (True, "1", None, 1j):
        with pytest.raises(TypeError, match="x must be a real number"):
            check_real(value, "x")


def test_check_feedback_rejects_more_than_int32(monkeypatch):
    import recsys_ltr._validation as validation

    monkeypatch.setattr(validation, "_INT32_MAX", 3)
    assert check_feedback(np.eye(3)).nnz == 3
    with pytest.raises(ValueError, match="at most 3 rows and columns"):
        check_feedback(np.eye(4))
    with pytest.raises(ValueError, match="at most 3 are supported"):
        check_feedback(np.ones((3, 3)))


@pytest.mark.parametrize(
    "indices, indptr",
    [([0, 99], [0, 1, 2]), ([0, -3], [0, 1, 2]), ([0, 1], [0, 3, 2])],
)
def test_check_feedback_rejects_malformed_csr(indices, indptr):
    X = sp.csr_matrix((2, 4))
    X.data, X.indices, X.indptr = np.ones(2), np.array(indices, dtype=np.int32), np.array(indptr, dtype=np.int32)
    with pytest.raises(ValueError, match="malformed"):
        check_feedback(X)


@pytest.mark.kernels
@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_stores_a_repeat_equals_brute_force(data, n_rows, n_cols, diagonal):
    rows = [data.draw(st.lists(st.integers(0, n_cols - 1), max_size=4)) for _ in range(n_rows)]
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int32)
    indices = np.array([j for r in rows for j in r], np.int32)
    M = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n_rows, n_cols))
    expected = any(len(set(r)) < len(r) or (diagonal and i in r) for i, r in enumerate(rows))
    assert stores_a_repeat(M, diagonal) == expected
