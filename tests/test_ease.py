"""EASE: the dense solve against a brute-force inverse, the blocked inverse against LAPACK, the
sparse approximate inverse (FSAI) against the dense solve, the solver choice under a memory
limit, progress bars, errors and persistence."""

import io
import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import get_lapack_funcs

from recsys_ltr import _memory
from recsys_ltr._fsai import elimination_order, fsai_pattern_sizes
from recsys_ltr._gram import gram
from recsys_ltr._progress import progress_enabled
from recsys_ltr._spd_inverse import inverse_flops, spd_inverse_inplace
from recsys_ltr._topk import rows_times_dense
from recsys_ltr.models import EASE


def random_matrix(seed, n_users=30, n_items=20, density=0.2):
    rng = np.random.default_rng(seed)
    D = (rng.random((n_users, n_items)) < density).astype(float)
    D[np.arange(n_users), rng.integers(n_items, size=n_users)] = 1  # every user has an item
    return D


def brute_ease(D, lam):
    P = np.linalg.inv(D.T @ D + lam * np.eye(D.shape[1]))
    B = np.eye(D.shape[1]) - P / np.diag(P)[None, :]
    np.fill_diagonal(B, 0.0)
    return B


def sparse_weights(model):
    """The dense ``B = I - Z^T Z diag(Z^T Z)^{-1}`` of a sparse-solver model."""
    P = (model.factor_.T @ model.factor_).toarray()
    B = np.eye(P.shape[0]) - P / np.diag(P)[None, :]
    np.fill_diagonal(B, 0.0)
    return B


def cliques(seed, sizes, n_users=80):
    """Users who each interact within one block of items: the Gram matrix is block diagonal."""
    rng = np.random.default_rng(seed)
    D = np.zeros((n_users, sum(sizes)))
    starts = np.cumsum([0, *sizes])
    for u in range(n_users):
        b = rng.integers(len(sizes))
        block = np.arange(starts[b], starts[b + 1])
        D[u, rng.choice(block, size=rng.integers(1, block.size + 1), replace=False)] = 1
    for b, (lo, hi) in enumerate(itertools.pairwise(starts)):
        D[b] = 0
        D[b, lo:hi] = 1  # every pair of a block co-occurs: the blocks are dense
    return D


# ---------------------------------------------------------------- dense solver
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_items=st.integers(2, 40), lam=st.floats(0.1, 1000.0))
def test_dense_matches_brute_force_inverse(seed, n_items, lam):
    D = random_matrix(seed, n_users=25, n_items=n_items)
    model = EASE(regularization=lam, solver="dense").fit(D)
    B = brute_ease(D, lam)
    assert model.solver_ == "dense" and model.B_.flags.c_contiguous
    np.testing.assert_allclose(model.B_, B, rtol=1e-8, atol=1e-10)
    assert np.all(np.diag(model.B_) == 0)
    users = np.arange(D.shape[0])
    np.testing.assert_allclose(model.score(users), D @ B, rtol=1e-8, atol=1e-10)


def test_dense_large_catalogue_exercises_blocks():
    D = random_matrix(1, n_users=60, n_items=1100, density=0.02)  # 5 panels, 2 symmetrisation blocks
    model = EASE(regularization=5.0, solver="dense", num_threads=2).fit(D)
    np.testing.assert_allclose(model.B_, brute_ease(D, 5.0), rtol=1e-7, atol=1e-10)


def test_hand_computed():
    # X^T X = [[2, 1], [1, 1]], lam = 1: P = inv([[3, 1], [1, 2]]) = [[2, -1], [-1, 3]] / 5
    # B_01 = -P_01 / P_11 = 1/3, B_10 = -P_10 / P_00 = 1/2
    D = np.array([[1.0, 1.0], [1.0, 0.0]])
    for solver in ("dense", "sparse"):  # two items: the sparse pattern is complete
        model = EASE(regularization=1.0, solver=solver).fit(D)
        np.testing.assert_allclose(model.score([0, 1]), [[1 / 2, 1 / 3], [0.0, 1 / 3]], atol=1e-12)
        ids, scores = model.recommend(1, N=5)
        assert ids.tolist() == [1] and scores.tolist() == pytest.approx([1 / 3])
        ids, scores = model.similar_items(0, N=3)  # row B_0.
        assert ids.tolist() == [1] and scores.tolist() == pytest.approx([1 / 3])
    # item 1 (less popular) is eliminated first: Z_1. = e_1 / sqrt(2); row 0 solves
    # [[2, 1], [1, 3]] y = e_last over (1, 0): y = (-1, 2) / 5, Z_0. = y / sqrt(y_last) = (2, -1) / sqrt(10)
    np.testing.assert_allclose(model.factor_.toarray(), [[2 / 10**0.5, -1 / 10**0.5], [0.0, 0.5**0.5]], atol=1e-15)


# ---------------------------------------------------------------- blocked inverse
@pytest.mark.parametrize("n, block", [(1, 4), (7, 2), (64, 16), (65, 16), (300, 64), (513, 256)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocked_inverse_equals_lapack(n, block, dtype):
    rng = np.random.default_rng(n)
    X = rng.random((n + 5, n))
    G = (X.T @ X + np.eye(n)).astype(dtype)
    potrf, potri = get_lapack_funcs(("potrf", "potri"), (G,))
    c, info = potrf(G.copy(order="F"), lower=False, clean=False)
    reference, info2 = potri(c, lower=False)
    assert info == info2 == 0
    A = np.asfortranarray(G)
    A[np.tril_indices(n, -1)] = 7.0  # never read nor written
    steps = []
    spd_inverse_inplace(A, block, steps.append)
    assert np.all(A[np.tril_indices(n, -1)] == 7.0)
    tol = 1e-10 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(np.triu(A), np.triu(reference), rtol=tol, atol=tol * np.abs(reference).max())
    assert steps == inverse_flops(n, block) and len(steps) == 3 * -(-n // block)
    assert sum(steps) == pytest.approx(n**3, rel=3 * block / n + 1e-9)


def test_blocked_inverse_errors():
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        spd_inverse_inplace(np.asfortranarray(np.diag([1.0, -1.0, 2.0])), 2)
    with pytest.raises(ValueError, match="Fortran-ordered"):
        spd_inverse_inplace(np.ascontiguousarray(np.eye(3) + np.ones((3, 3))), 2)
    with pytest.raises(ValueError, match="square float64 or float32"):
        spd_inverse_inplace(np.eye(3, dtype=np.int64), 2)


# ---------------------------------------------------------------- sparse solver
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n_items=st.integers(2, 30), lam=st.floats(0.1, 100.0))
def test_sparse_is_exact_with_a_complete_pattern(seed, n_items, lam):
    D = random_matrix(seed, n_items=n_items)
    D[0] = 1  # every pair of items co-occurs: row i's pattern is every earlier item
    model = EASE(regularization=lam, solver="sparse", k=n_items).fit(D)
    assert model.solver_ == "sparse"
    B = brute_ease(D, lam)
    np.testing.assert_allclose(sparse_weights(model), B, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.score(np.arange(D.shape[0])), D @ B, rtol=1e-8, atol=1e-10)


def test_sparse_is_exact_on_dense_blocks_within_k():
    D = cliques(0, [4, 6, 3, 5])
    model = EASE(regularization=3.0, solver="sparse", k=5).fit(D)  # rows hold at most 5 earlier items
    np.testing.assert_allclose(sparse_weights(model), brute_ease(D, 3.0), rtol=1e-8, atol=1e-12)
    assert model.factor_.nnz == sum(s * (s + 1) // 2 for s in (4, 6, 3, 5))  # no weight across blocks


def exactness_condition(G, rank, k):
    """The documented condition, by brute force: for every item i, the items before i that reach i
    through items before i all co-occur with i, and there are at most k of them."""
    n = G.shape[0]
    for i in range(n):
        allowed = [j for j in range(n) if rank[j] <= rank[i]]
        reach, todo = {i}, [i]
        while todo:
            a = todo.pop()
            for b in allowed:
                if b not in reach and G[a, b] != 0:
                    reach.add(b)
                    todo.append(b)
        earlier = reach - {i}
        if len(earlier) > k or any(G[i, j] == 0 for j in earlier):
            return False
    return True


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_items=st.integers(2, 14), k=st.integers(1, 6), density=st.floats(0.05, 0.4))
def test_sparse_is_exact_exactly_under_the_documented_condition(seed, n_items, k, density):
    rng = np.random.default_rng(seed)
    D = (rng.random((12, n_items)) < density).astype(float)
    D[0, 0] = 1  # not empty
    G = D.T @ D
    model = EASE(regularization=1.5, solver="sparse", k=k).fit(D)
    error = np.abs(sparse_weights(model) - brute_ease(D, 1.5)).max()
    assert (error < 1e-9) == exactness_condition(G, elimination_order(np.diag(G) + 1.5), k), error


def test_few_co_occurrences_per_item_do_not_make_it_exact():
    """A chain 0-1, 1-2, ..., 38-39: every item co-occurs with at most 2 others (< k = 5), yet the
    exact inverse is dense (the old docs read as exact here)."""
    D = np.zeros((39, 40))
    D[np.arange(39), np.arange(39)] = D[np.arange(39), np.arange(1, 40)] = 1
    model = EASE(regularization=1.0, solver="sparse", k=5).fit(D)
    B = brute_ease(D, 1.0)
    assert np.abs(sparse_weights(model) - B).max() > 0.01 * np.ptp(B)
    assert not exactness_condition(D.T @ D, elimination_order(np.diag(D.T @ D) + 1.0), 5)


def test_sparse_pattern_and_convergence_to_the_dense_solve():
    D = random_matrix(4, n_users=80, n_items=40, density=0.15)
    G = D.T @ D
    rank = elimination_order(np.diag(G))
    dense = brute_ease(D, 10.0)
    errors, diagonals = [], []
    for k in (1, 3, 10, 39):
        model = EASE(regularization=10.0, solver="sparse", k=k).fit(D)
        for i in range(40):  # row i: i and its k earlier items of largest co-occurrence (ties by id)
            earlier = [j for j in np.flatnonzero(G[i]) if rank[j] < rank[i]]
            best = sorted(earlier, key=lambda j: (-G[i, j], j))[:k]
            assert sorted(model.factor_[i].indices) == sorted([*best, i])
        errors.append(np.linalg.norm(sparse_weights(model) - dense) / np.linalg.norm(dense))
        diagonals.append(model.factor_.diagonal())
    # Z_ii = 1 / sqrt(Schur complement of A_ii on the pattern): grows as the patterns grow (nested)
    assert all(np.all(a <= b * (1 + 1e-12)) for a, b in itertools.pairwise(diagonals))
    # closer as k grows (relative errors 0.91, 0.80, 0.54, 0.25), but not exact at k = n - 1:
    # items that never co-occur stay out of the patterns
    assert errors[0] > errors[1] > errors[2] > errors[3] > 0.01


def test_sparse_recommend_and_similar_items_match_the_weights():
    D = random_matrix(6, n_users=40, n_items=25)
    model = EASE(regularization=2.0, solver="sparse", k=4).fit(D)
    B = sparse_weights(model)
    users = np.arange(10)
    np.testing.assert_allclose(model.score(users), D[users] @ B, rtol=1e-10, atol=1e-12)
    ids, scores = model.similar_items(np.arange(25), N=24)
    for i in range(25):
        valid = ids[i] >= 0
        np.testing.assert_allclose(scores[i][valid], B[i, ids[i][valid]], rtol=1e-10)
        assert i not in ids[i] and np.count_nonzero(B[i]) == valid.sum()


def regularised_gram(X, lam):
    """``X^T X + lam I`` as EASE's fit forms it from :func:`recsys_ltr._gram.gram`."""
    A = gram(X, "EASE")
    A.setdiag(A.diagonal() + lam)
    return A


@pytest.mark.kernels
@pytest.mark.parametrize("seed", range(3))
def test_fsai_pattern_sizes_count_earlier_neighbours(seed):
    A = regularised_gram(sp.csr_matrix(random_matrix(seed, n_items=30)), 1.0)
    rank = np.random.default_rng(seed).permutation(30)
    for k in (1, 3, 29):
        indptr = fsai_pattern_sizes(A, rank, k)
        dense = A.toarray()
        earlier = [sum(1 for j in range(30) if dense[i, j] != 0 and rank[j] < rank[i]) for i in range(30)]
        np.testing.assert_array_equal(np.diff(indptr), np.minimum(earlier, k) + 1)
        assert indptr[0] == 0 and indptr.dtype == np.int64


# ---------------------------------------------------------------- solver choice
def test_auto_takes_the_dense_solve_up_to_dense_max_items():
    D = random_matrix(0, n_items=30)
    assert EASE(regularization=5.0).fit(D).solver_ == "dense"
    assert EASE(regularization=5.0, dense_max_items=29).fit(D).solver_ == "sparse"


def test_solver_choice_under_a_tiny_memory_limit():
    D = random_matrix(0, n_items=100, n_users=200, density=0.05)  # dense 80 kB, sparse k=3 16 kB
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a parameter decides: no warning
        assert EASE(regularization=5.0, k=3, memory_limit=40_000).fit(D).solver_ == "sparse"
        assert EASE(regularization=5.0, k=3, solver="sparse", memory_limit=40_000).fit(D).solver_ == "sparse"
        assert EASE(regularization=5.0, k=3, memory_limit=80_000).fit(D).solver_ == "dense"
    with pytest.raises(MemoryError, match=r"dense solve of 100 items needs about 80 kB but memory_limit is 40 kB: "):
        EASE(regularization=5.0, solver="dense", memory_limit=40_000).fit(D)
    with pytest.raises(MemoryError, match=r"sparse solve of 100 items with k=3 needs about 16 kB but .*lower k"):
        EASE(regularization=5.0, k=3, memory_limit=10_000).fit(D)


def test_solver_choice_does_not_depend_on_the_free_memory(monkeypatch):
    """The data and the parameters choose the solver; too little memory is an error naming the bytes
    needed and available and the solver that would fit, never a silent switch."""
    D = random_matrix(0, n_items=100, n_users=200, density=0.05)
    for room in (None, 10**12, 10**6):
        monkeypatch.setattr(_memory, "available_bytes", lambda room=room: room)
        assert EASE(regularization=5.0, k=3).fit(D).solver_ == "dense"
        assert EASE(regularization=5.0, k=3, dense_max_items=50).fit(D).solver_ == "sparse"
    monkeypatch.setattr(_memory, "available_bytes", lambda: 70_000)  # the Gram matrix, 61 kB, fits
    with pytest.raises(
        MemoryError,
        match=r"dense solve of 100 items needs about 80 kB but the memory available is 70 kB: "
        r"solver='sparse' needs about 16 kB",
    ):
        EASE(regularization=5.0, k=3).fit(D)


def test_available_memory_is_positive_on_linux():
    room = _memory.available_bytes()
    with open("/proc/meminfo") as f:
        total = int(next(line for line in f if line.startswith("MemTotal:")).split()[1]) * 1024
    assert room is not None and 0 < room <= total


# ---------------------------------------------------------------- progress, errors, persistence
@pytest.mark.parametrize("solver, unit", [("dense", "GFlop"), ("sparse", "item")])
def test_progress_bar_over_the_solve(capsys, solver, unit):
    D = random_matrix(0)
    EASE(regularization=5.0, solver=solver, show_progress=True).fit(D)
    err = capsys.readouterr().err
    assert f"EASE {solver} inverse" in err and "100%" in err and unit in err
    EASE(regularization=5.0, solver=solver, show_progress=False).fit(D)
    assert capsys.readouterr().err == ""


def test_show_progress_none_follows_the_terminal(monkeypatch):
    class Stream(io.StringIO):
        def __init__(self, tty):
            super().__init__()
            self.tty = tty

        def isatty(self):
            return self.tty

    for tty in (True, False):
        monkeypatch.setattr("sys.stderr", Stream(tty))
        assert progress_enabled(None) is tty
    assert progress_enabled(True) and not progress_enabled(np.bool_(False))
    with pytest.raises(TypeError, match="show_progress must be True, False or None"):
        progress_enabled("yes")


BAD_PARAMS = [
    ("regularization", 0.0, ValueError),
    ("regularization", -1.0, ValueError),
    ("regularization", np.inf, ValueError),
    ("regularization", "big", TypeError),
    ("solver", "lapack", ValueError),
    ("k", 0, ValueError),
    ("k", 2.5, TypeError),
    ("dense_max_items", 0, ValueError),
    ("memory_limit", 0, ValueError),
    ("memory_limit", 1e9, TypeError),
    ("num_threads", -1, ValueError),
    ("show_progress", "yes", TypeError),
]


@pytest.mark.parametrize("name, value, error", BAD_PARAMS)
def test_bad_params_raise_naming_the_parameter(name, value, error):
    with pytest.raises(error, match=name):
        EASE(**{name: value}).fit(random_matrix(0))


def test_new_user_scored_without_refit():
    D = random_matrix(3)
    for solver in ("dense", "sparse"):
        model = EASE(regularization=10.0, solver=solver, k=3).fit(D)
        ids_new, scores_new = model.recommend(1000, user_items=sp.csr_matrix(D[[4]]), N=5, recalculate_user=True)
        ids_old, scores_old = model.recommend(4, N=5)
        assert ids_new.tolist() == ids_old.tolist()
        np.testing.assert_allclose(scores_new, scores_old)


@pytest.mark.parametrize("solver", ["dense", "sparse"])
def test_save_load_round_trip(tmp_path, solver):
    D = random_matrix(9)
    model = EASE(regularization=20.0, solver="auto" if solver == "dense" else solver, k=4, num_threads=1).fit(D)
    model.save(tmp_path / "m")
    loaded = EASE.load(tmp_path / "m.npz")
    assert loaded.solver_ == solver and loaded.get_params() == model.get_params()
    users = np.arange(D.shape[0])
    np.testing.assert_array_equal(loaded.score(users), model.score(users))
    np.testing.assert_array_equal(
        loaded.similar_items(np.arange(20), N=5)[0], model.similar_items(np.arange(20), N=5)[0]
    )


def test_load_makes_a_fortran_ordered_B_row_major(tmp_path):
    D = random_matrix(9)
    model = EASE(regularization=20.0).fit(D)
    expected = model.score(np.arange(30))
    model.B_ = np.asfortranarray(model.B_)  # as written by earlier versions
    model.save(tmp_path / "f")
    loaded = EASE.load(tmp_path / "f")
    assert loaded.B_.flags.c_contiguous
    np.testing.assert_allclose(loaded.score(np.arange(30)), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda Z: sp.csr_matrix(Z[:5]), r"factor_ must be 20 x 20, got 5 x 20"),
        (lambda Z: sp.csr_matrix(Z.multiply(-1.0)), "positive diagonal"),
        (lambda Z: sp.csr_matrix((np.full(Z.nnz, np.nan), Z.indices, Z.indptr), shape=Z.shape), "finite"),
    ],
)
def test_load_rejects_a_malformed_factor(tmp_path, corrupt, message):
    model = EASE(regularization=5.0, solver="sparse", k=3).fit(random_matrix(0))
    model.factor_ = corrupt(model.factor_)
    model.save(tmp_path / "bad")
    with pytest.raises(ValueError, match=message):
        EASE.load(tmp_path / "bad")


@pytest.mark.parametrize("both", [True, False])
def test_load_rejects_both_or_neither_weights(tmp_path, both):
    model = EASE(regularization=5.0, solver="sparse", k=3).fit(random_matrix(0))
    model.B_ = np.zeros((20, 20)) if both else None
    model.factor_ = model.factor_ if both else None
    model.save(tmp_path / "bad")
    with pytest.raises(ValueError, match="exactly one of B_ .* and factor_"):
        EASE.load(tmp_path / "bad")


@pytest.mark.kernels
def test_rows_times_dense_kernel_matches_scipy():
    rng = np.random.default_rng(0)
    R = sp.random(17, 40, density=0.2, random_state=1, format="csr")
    B = rng.standard_normal((40, 33))
    out = np.zeros((17, 33))
    rows_times_dense(R.indptr, R.indices, R.data, B, out)
    np.testing.assert_allclose(out, R @ B, rtol=1e-12, atol=1e-12)
