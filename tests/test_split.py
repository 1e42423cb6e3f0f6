"""Tests for recsys_ltr.split: invariants (hypothesis), documented rounding, novelty protocol,
uniformity and reproducibility."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import Interactions, split


def _random_X(seed, n_users=40, n_items=30, density=0.2):
    rng = np.random.default_rng(seed)
    X = sp.random(n_users, n_items, density=density, random_state=rng, format="csr")
    X.data[:] = 1.0
    return X


def _top_items(X, n):
    pop = np.asarray((X > 0).sum(axis=0)).ravel()
    return np.argsort(-pop, kind="stable")[:n]


def _expected_counts(n, m, val, test):
    """The module docstring's rule, written out per user."""
    r = lambda x: math.floor(x + 0.5)  # noqa: E731
    n_test = min(r(test * m), max(n - 1, 0))
    n_val = max(min(r(val * m), m - n_test, n - 1 - n_test), 0)
    return n_test, n_val


def _check_partition(X, parts):
    X = (X > 0).astype(np.float64).tocsr()
    for P in parts:
        assert isinstance(P, sp.csr_matrix) and P.shape == X.shape
        assert P.dtype == np.float64 and np.all(P.data == 1) and P.has_sorted_indices
    total = parts[0] + parts[1] + parts[2]
    assert total.max() <= 1  # disjoint
    assert (total != X).nnz == 0  # sum to X


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    density=st.floats(0.02, 0.6),
    val=st.sampled_from([0.0, 0.1, 0.25]),
    test=st.sampled_from([0.0, 0.2, 0.5]),
    exclude_top=st.one_of(st.none(), st.integers(0, 12)),
)
def test_holdout_invariants(seed, density, val, test, exclude_top):
    X = _random_X(seed, density=density)
    if X.nnz == 0:
        return
    train, v, t = split.holdout(X, val=val, test=test, random_state=seed, exclude_top=exclude_top)
    _check_partition(X, (train, v, t))
    top = set() if exclude_top is None else set(_top_items(X, exclude_top).tolist())
    for u in range(X.shape[0]):
        items = X.indices[X.indptr[u] : X.indptr[u + 1]]
        n, m = items.size, sum(i not in top for i in items)
        n_test, n_val = _expected_counts(n, m, val, test)
        assert t[u].nnz == n_test and v[u].nnz == n_val
        if n:
            assert train[u].nnz >= 1
    held = (v + t).tocoo()
    assert not top & set(held.col.tolist())  # novelty: nothing held out among the top items


def test_rounding_hand_cases():
    # n = 1, 2 stay in train; n = 3 -> 1 test; n = 5 -> 1 test + 1 val (0.5 rounds up); n = 10 -> 2 + 1
    sizes = [1, 2, 3, 5, 10]
    X = sp.csr_matrix(np.array([[1] * s + [0] * (10 - s) for s in sizes], dtype=float))
    train, v, t = split.holdout(X, val=0.1, test=0.2, random_state=0)
    np.testing.assert_array_equal(np.diff(t.indptr), [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(np.diff(v.indptr), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(np.diff(train.indptr), [1, 2, 2, 3, 7])
    n_test, n_val = split.split_counts(sizes, sizes, 0.1, 0.2)
    np.testing.assert_array_equal(n_test, [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(n_val, [0, 0, 0, 1, 1])


def test_keeps_one_training_positive_at_large_fractions():
    X = sp.csr_matrix(np.ones((1, 2)))
    train, v, t = split.holdout(X, val=0.45, test=0.5, random_state=0)
    assert (t.nnz, v.nnz, train.nnz) == (1, 0, 1)


def test_novelty_hand_case():
    # items 0 and 1 are the two most popular; user 0 owns them plus items 2..5
    dense = np.zeros((4, 8))
    dense[:, 0] = 1
    dense[:3, 1] = 1
    dense[0, 2:6] = 1
    X = sp.csr_matrix(dense)
    for seed in range(20):
        _train, v, t = split.novelty_holdout(X, val=0.25, test=0.25, random_state=seed, exclude_top=2)
        # m = 4 eligible positives -> 1 test, 1 validation, none among items 0, 1
        assert t[0].nnz == 1 and v[0].nnz == 1
        assert t[:, :2].nnz == 0 and v[:, :2].nnz == 0
        assert t.nnz == 1 and v.nnz == 1  # users 1..3 have no eligible positive
    with pytest.raises(ValueError, match="exclude_top"):
        split.novelty_holdout(X, exclude_top=None)
    with pytest.raises(ValueError, match="leaves no item"):
        split.holdout(X, exclude_top=8)


def test_holdout_is_uniform_over_a_users_positives():
    X = sp.csr_matrix(np.ones((1, 5)))
    counts = np.zeros(5)
    n_rep = 2000
    rng = np.random.default_rng(0)
    for _ in range(n_rep):
        _, _, t = split.holdout(X, val=0.0, test=0.2, random_state=rng)
        counts[t.indices] += 1
    # each item is the test item with probability 1/5; 5-sigma band
    sd = math.sqrt(n_rep * 0.2 * 0.8)
    assert np.all(np.abs(counts - n_rep / 5) < 5 * sd)


def test_reproducible_and_seed_dependent():
    X = _random_X(1, n_users=100, n_items=60)
    a = split.holdout(X, random_state=7)
    b = split.holdout(X, random_state=7)
    c = split.holdout(X, random_state=8)
    assert all((p != q).nnz == 0 for p, q in zip(a, b))
    assert (a[2] != c[2]).nnz > 0


def test_accepts_interactions_and_dense():
    X = _random_X(2)
    inter = Interactions.from_sparse(X)
    a = split.holdout(inter, random_state=3)
    b = split.holdout(X.toarray(), random_state=3)
    assert all((p != q).nnz == 0 for p, q in zip(a, b))


def test_folds_are_seeded_holdouts():
    X = _random_X(4, n_users=60)
    fs = list(split.folds(X, n_folds=3, random_state=10, exclude_top=5))
    assert len(fs) == 3
    for f, parts in enumerate(fs):
        ref = split.holdout(X, random_state=10 + f, exclude_top=5)
        assert all((p != q).nnz == 0 for p, q in zip(parts, ref))
        _check_partition(X, parts)
    assert (fs[0][2] != fs[1][2]).nnz > 0
    with pytest.raises(TypeError, match="^random_state must be None"):
        split.folds(X, random_state="a")
    with pytest.raises(ValueError, match="n_folds"):
        split.folds(X, n_folds=0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), k=st.integers(1, 3), val_k=st.integers(0, 2), top=st.sampled_from([None, 3]))
def test_leave_k_out(seed, k, val_k, top):
    X = _random_X(seed, density=0.15)
    if X.nnz == 0:
        return
    train, v, t = split.leave_k_out(X, k=k, random_state=seed, val_k=val_k, exclude_top=top)
    _check_partition(X, (train, v, t))
    banned = set() if top is None else set(_top_items(X, top).tolist())
    for u in range(X.shape[0]):
        items = X.indices[X.indptr[u] : X.indptr[u + 1]]
        m = sum(i not in banned for i in items)
        ok = m >= k + val_k and items.size >= k + val_k + 1
        assert t[u].nnz == (k if ok else 0) and v[u].nnz == (val_k if ok else 0)
    assert not banned & set((v + t).tocoo().col.tolist())


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"val": 0.5, "test": 0.5}, ValueError, "val \\+ test"),
        ({"test": -0.1}, ValueError, r"test must be a finite number in \[0.0, 1.0\)"),
        ({"val": 1.0}, ValueError, r"val must be a finite number in \[0.0, 1.0\)"),
        ({"val": float("nan")}, ValueError, "val must be a finite number"),
        ({"test": "0.2"}, TypeError, "test must be a real number"),
        ({"exclude_top": -1}, ValueError, "exclude_top"),
        ({"exclude_top": 2.5}, TypeError, "exclude_top"),
        ({"random_state": "x"}, TypeError, "^random_state must be None"),
    ],
)
def test_holdout_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        split.holdout(_random_X(0), **kwargs)


def test_bad_matrices():
    with pytest.raises(ValueError, match="no interactions"):
        split.holdout(sp.csr_matrix((3, 3)))
    with pytest.raises(ValueError, match="negative"):
        split.holdout(sp.csr_matrix(np.array([[1.0, -1.0]])))
    with pytest.raises(TypeError):
        split.holdout("not a matrix")
    with pytest.raises(ValueError, match="k must be"):
        split.leave_k_out(_random_X(0), k=0)


def test_top_items_and_sample_users_check_their_input():
    D = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    for X in (sp.coo_matrix(D), D, sp.csc_matrix(D)):  # any format, as the other splits take
        assert split.top_items(X, 2).tolist() == [1, 0]
        assert split.sample_users(X, None).tolist() == [0, 1, 2]  # users with interactions
    assert split.top_items(D, 10).tolist() == [1, 0, 2]  # the whole catalogue, by popularity
    with pytest.raises(ValueError, match=r"exclude.*out of range"):
        split.sample_users(D, 2, exclude=[7])
    with pytest.raises(ValueError, match="size"):
        split.sample_users(D, 0)
    with pytest.raises(ValueError, match="n must be"):
        split.top_items(D, -1)
    bad = sp.coo_matrix(D)
    bad.col[0] = 5  # a malformed matrix is refused before scipy converts it
    with pytest.raises(ValueError, match="out of range"):
        split.top_items(bad, 1)


def test_proportional_counts_hold_out_every_user_in_expectation():
    """FEBR's own splits round each count at random: users with 3 positives hold out one validation
    positive with probability 0.3 (half-up rounding never holds one out), none loses its last
    training positive, and the seed fixes the draw."""
    from recsys_ltr.split import holdout_trusted

    rng = np.random.default_rng(0)
    rows = np.repeat(np.arange(20_000), 3)
    cols = np.concatenate([rng.choice(50, 3, replace=False) for _ in range(20_000)])
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(20_000, 50))
    _, half_up, _ = holdout_trusted(X, 0.1, 0.0, np.random.default_rng(1))
    train, val, _ = holdout_trusted(X, 0.1, 0.0, np.random.default_rng(1), proportional=True)
    assert half_up.nnz == 0
    assert abs(val.nnz - 6_000) < 300 and np.diff(val.indptr).max() == 1  # binomial(20,000, .3): sd 65
    assert np.diff(train.indptr).min() >= 2 and (train + val != X).nnz == 0
    again = holdout_trusted(X, 0.1, 0.0, np.random.default_rng(1), proportional=True)[1]
    assert (again != val).nnz == 0
