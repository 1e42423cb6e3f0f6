"""ContentAffinity (content KNN under a metric) and ContentItemKNN (content item-p), issue 7 sec. 4."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import _memory
from recsys_ltr.metric_learning.frml import FRML
from recsys_ltr.models.content import ContentItemKNN
from recsys_ltr.neighbors.affinity import Affinity
from recsys_ltr.neighbors.content import ContentAffinity

pytestmark = pytest.mark.kernels


# ----------------------------------------------------------------------------- references
def brute_neighbours(Z, k, has_content):
    """Per item: list of (j, d^2) of its k nearest other items with content, ties by id."""
    out = []
    for i in range(Z.shape[0]):
        if not has_content[i]:
            out.append([])
            continue
        cand = [(float(((Z[i] - Z[j]) ** 2).sum()), j) for j in range(Z.shape[0]) if j != i and has_content[j]]
        out.append([(j, d) for d, j in sorted(cand)[:k]])
    return out


def brute_affinity(Z, k, has_content, bandwidth=None):
    nb = brute_neighbours(Z, k, has_content)
    d2 = [d for row in nb for _, d in row]
    if bandwidth is None:
        bandwidth = float(np.median(d2)) if d2 and np.median(d2) > 0 else 1.0
    return [[(j, np.exp(-d / bandwidth)) for j, d in row] for row in nb], bandwidth


def assert_matches(affinity, reference):
    A = affinity.matrix
    for i, row in enumerate(reference):
        ids, vals = affinity.neighbors(i) if A.indptr[i + 1] > A.indptr[i] else (np.array([], int), np.array([]))
        assert ids.tolist() == [j for j, _ in row], f"row {i}"
        np.testing.assert_allclose(vals, [v for _, v in row], rtol=1e-12, atol=1e-14)


def small_content(seed, n, d, zero_rows=1):
    """Small integer content: many exact distance ties, and some items without content."""
    rng = np.random.default_rng(seed)
    F = rng.integers(0, 3, (n, d)).astype(float)
    F[rng.choice(n, zero_rows, replace=False)] = 0.0
    if not F.any():
        F[0, 0] = 1.0  # at least one item with content
    return F


def brute_item_p(X, A, k):
    """score(u, i) = sum_{j in O+_u & KNN_k(i)} A_ij, written out."""
    X = X.toarray()
    S = np.zeros(X.shape)
    for i in range(A.n):
        ids, vals = A.neighbors(i, min(k, A.k_max)) if A.matrix.indptr[i + 1] > A.matrix.indptr[i] else ([], [])
        for j, a in zip(ids, vals):
            S[:, i] += a * (X[:, j] > 0)
    return S


def feedback(seed, n_users, n_items, density=0.3, cold=()):
    rng = np.random.default_rng(seed)
    X = (rng.random((n_users, n_items)) < density).astype(float)
    X[:, list(cold)] = 0.0
    X[np.arange(n_users), rng.integers(0, n_items, n_users)] = 1.0  # nobody empty
    X[:, list(cold)] = 0.0
    return sp.csr_matrix(X)


# ----------------------------------------------------------------------------- affinity
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(3, 25),
    d=st.integers(1, 5),
    k=st.integers(1, 30),
    sparse=st.booleans(),
    zero_rows=st.integers(0, 2),
)
def test_affinity_equals_brute_force_with_ties(seed, n, d, k, sparse, zero_rows):
    k = min(k, n - 1)
    F = small_content(seed, n, d, min(zero_rows, n - 2))
    ca = ContentAffinity(k=k).fit(sp.csr_matrix(F) if sparse else F)
    reference, bandwidth = brute_affinity(F, k, F.any(axis=1))
    assert ca.bandwidth_ == pytest.approx(bandwidth)
    assert ca.affinity_.k_max == k and ca.affinity_.kind == "custom" and ca.affinity_.side == "item"
    assert_matches(ca.affinity_, reference)


def test_blocks_do_not_change_the_result(monkeypatch):
    F = small_content(1, 40, 3, zero_rows=3)
    whole = ContentAffinity(k=7).fit(F).affinity_.matrix
    monkeypatch.setattr(_memory, "BLOCK_BYTES", 8 * 40 * 3)  # blocks of 3 rows
    blocked = ContentAffinity(k=7).fit(F).affinity_.matrix
    assert (whole != blocked).nnz == 0 and np.array_equal(whole.indices, blocked.indices)


def test_rows_sorted_prefix_property_and_no_self():
    F = np.random.default_rng(3).random((50, 6))
    big = ContentAffinity(k=12, bandwidth=0.5).fit(F).affinity_
    A = big.matrix
    for i in range(A.shape[0]):
        vals = A.data[A.indptr[i] : A.indptr[i + 1]]
        assert np.all(np.diff(vals) <= 0) and vals.size == 12
        assert i not in A.indices[A.indptr[i] : A.indptr[i + 1]]
    small = ContentAffinity(k=4, bandwidth=0.5).fit(F).affinity_
    trunc = big.truncate(4)
    assert np.array_equal(trunc.indices, small.matrix.indices) and np.array_equal(trunc.indptr, small.matrix.indptr)
    np.testing.assert_allclose(trunc.data, small.matrix.data, rtol=1e-12)


def test_hand_computed_case():
    # points on a line at 0, 1, 3 (and an item without content): d^2 = 1, 9, 4
    F = np.array([[0.0, 1.0], [1.0, 1.0], [3.0, 1.0], [0.0, 0.0]])
    ca = ContentAffinity(k=1).fit(F)  # stored d^2: 0->1: 1, 1->0: 1 (tie with none), 2->1: 4
    assert ca.bandwidth_ == 1.0
    A = ca.affinity_.matrix.toarray()
    expected = np.zeros((4, 4))
    expected[0, 1] = expected[1, 0] = np.exp(-1.0)
    expected[2, 1] = np.exp(-4.0)
    np.testing.assert_allclose(A, expected)


def test_metric_transform_is_the_embedding():
    rng = np.random.default_rng(5)
    F = rng.random((30, 5))

    class Linear:
        L = rng.standard_normal((2, 5))

        def transform(self, X):
            return X @ self.L.T

    ca = ContentAffinity(k=6, metric=Linear()).fit(F)
    reference, _ = brute_affinity(F @ Linear.L.T, 6, np.ones(30, bool))
    assert_matches(ca.affinity_, reference)


def test_fitted_frml_neighbours_are_its_kneighbors():
    rng = np.random.default_rng(0)
    F = rng.random((40, 8))
    y = rng.integers(0, 3, 40)
    frml = FRML(n_components=3, max_iter=30, random_state=0).fit(F, y)
    ca = ContentAffinity(k=5, metric=frml).fit(F)
    ind = frml.kneighbors(None, 5, return_distance=False)
    for i in range(40):
        assert ca.affinity_.neighbors(i)[0].tolist() == ind[i].tolist()


# ----------------------------------------------------------------------------- predictor
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.integers(1, 6))
def test_item_p_equals_brute_force_aggsum(seed, k):
    F = small_content(seed, 15, 3, zero_rows=1)
    ca = ContentAffinity(k=6).fit(F)
    X = feedback(seed, 12, 15, cold=(2, 9))
    model = ContentItemKNN(ca, k=k, num_threads=1).fit(X)
    np.testing.assert_allclose(model.score(np.arange(12)), brute_item_p(X, ca.affinity_, k), atol=1e-12)


def test_cold_items_are_scored_and_recommended():
    rng = np.random.default_rng(2)
    centres = rng.random((4, 6)) * 5
    groups = np.repeat(np.arange(4), 10)
    F = centres[groups] + 0.1 * rng.random((40, 6))
    cold = [0, 10, 20, 30]  # one per group, no interactions
    X = np.zeros((8, 40))
    for u in range(8):
        X[u, np.flatnonzero(groups == u % 4)[1:]] = 1.0  # user u likes the warm items of group u % 4
    X = sp.csr_matrix(X)
    model = ContentItemKNN(ContentAffinity(k=5).fit(F), k=5).fit(X)
    assert model.item_popularity_[cold].sum() == 0
    S = model.score(np.arange(8))
    assert np.all(S[:, cold] >= 0) and np.count_nonzero(S[:, cold]) >= 4
    ids, scores = model.recommend(np.arange(8), N=1)  # liked items filtered: the cold one of the group
    assert ids[:, 0].tolist() == [cold[u % 4] for u in range(8)] and np.all(scores > 0)


def test_save_load_and_with_k(tmp_path):
    F = small_content(4, 20, 4, zero_rows=0)
    X = feedback(4, 10, 20, cold=(1, 5))
    model = ContentItemKNN(ContentAffinity(k=6).fit(F), k=6).fit(X)
    model.save(tmp_path / "m")
    loaded = ContentItemKNN.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.score(np.arange(10)), model.score(np.arange(10)))
    assert model.affinity is not None  # restored after save
    smaller = model.with_k(2)
    np.testing.assert_allclose(smaller.score(np.arange(10)), brute_item_p(X, model.item_affinity_, 2), atol=1e-12)


def test_usable_as_febr_affinity():
    from recsys_ltr.febr import AffinityFEBR

    F = small_content(6, 20, 4, zero_rows=0)
    X = feedback(6, 15, 20, cold=(3,))
    A = ContentAffinity(k=5).fit(F).affinity_
    febr = AffinityFEBR(
        affinity=A, holdout=0.0, validation_fraction=0.0, k=5, max_iter=0, random_state=0, num_threads=1
    ).fit(X)
    # init="sum", no training: the item sum feature ranks like item-p (Theorem 4.3)
    item_p = ContentItemKNN(A, k=5).fit(X).score(np.arange(15))
    S = febr.score(np.arange(15))
    for u in range(15):
        assert np.corrcoef(S[u], item_p[u])[0, 1] > 0.999 or np.ptp(item_p[u]) == 0


def test_a_clone_keeps_the_fitted_content_affinity_so_febr_can_stack_it():
    """FEBR clones its bases: the clone dropped the ContentAffinity's fit ("has no affinity_")."""
    from sklearn.base import clone

    from recsys_ltr.febr import FEBR
    from recsys_ltr.models import ItemKNN

    F = small_content(6, 20, 4, zero_rows=0)
    X = sp.csr_matrix(feedback(6, 40, 20, cold=()))
    content = ContentAffinity(k=5).fit(F)
    base = ContentItemKNN(affinity=content, k=5)
    twin = clone(base)
    assert twin.affinity is content and twin is not base and not hasattr(twin, "item_affinity_")
    np.testing.assert_array_equal(twin.fit(X).score(np.arange(5)), base.fit(X).score(np.arange(5)))
    febr = FEBR(bases=[base, ItemKNN(k=5)], candidates=10, max_iter=200, eval_every=100, random_state=0).fit(X)
    assert febr.recommend(0, N=3)[0].size == 3


# ----------------------------------------------------------------------------- bad inputs
def test_bad_content_and_parameters():
    F = small_content(0, 10, 3)
    with pytest.raises(ValueError, match="at most 9 neighbours"):
        ContentAffinity(k=10).fit(F)
    with pytest.raises(ValueError, match="k must be"):
        ContentAffinity(k=0).fit(F)
    bad = F.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ContentAffinity(k=3).fit(bad)
    with pytest.raises(ValueError, match="NaN"):
        ContentAffinity(k=3).fit(sp.csr_matrix(np.where(np.isnan(bad), np.inf, bad)))
    with pytest.raises(ValueError, match="2-D"):
        ContentAffinity(k=3).fit(F[:, 0])
    with pytest.raises(ValueError, match="at least 2 items"):
        ContentAffinity(k=1).fit(F[:1])
    with pytest.raises(ValueError, match="all zeros"):
        ContentAffinity(k=3).fit(np.zeros((5, 2)))
    with pytest.raises(TypeError, match="numeric"):
        ContentAffinity(k=3).fit(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValueError, match="bandwidth"):
        ContentAffinity(k=3, bandwidth=0.0).fit(F)


def test_bad_metrics():
    F = np.random.default_rng(0).random((10, 4))
    with pytest.raises(ValueError, match="not fitted"):
        ContentAffinity(k=3, metric=FRML()).fit(F)
    with pytest.raises(ValueError, match="features"):  # FRML fitted on other dimensions
        ContentAffinity(
            k=3, metric=FRML(n_components=2, max_iter=5, random_state=0).fit(F[:, :3], np.arange(10) % 2)
        ).fit(F)
    with pytest.raises(TypeError, match="transform"):
        ContentAffinity(k=3, metric="euclidean").fit(F)

    class Wrong:
        def transform(self, X):
            return X[:-1]

    class Nan:
        def transform(self, X):
            return np.full(X.shape, np.nan)

    with pytest.raises(ValueError, match="shape"):
        ContentAffinity(k=3, metric=Wrong()).fit(F)
    with pytest.raises(ValueError, match="NaN"):
        ContentAffinity(k=3, metric=Nan()).fit(F)


def test_bad_predictor_inputs():
    F = small_content(0, 12, 3, zero_rows=0)
    X = feedback(0, 6, 12)
    ca = ContentAffinity(k=4).fit(F)
    with pytest.raises(ValueError, match="not fitted"):
        ContentItemKNN(ContentAffinity(k=4), k=2).fit(X)
    with pytest.raises(TypeError, match="Affinity"):
        ContentItemKNN(None, k=2).fit(X)
    with pytest.raises(ValueError, match="k_max"):
        ContentItemKNN(ca, k=5).fit(X)
    with pytest.raises(ValueError, match="12 items"):
        ContentItemKNN(ContentAffinity(k=4).fit(small_content(0, 13, 3, 0)), k=2).fit(feedback(0, 6, 12))
    user_side = Affinity(sp.eye(12, format="csr"), 1, "custom", "user")
    with pytest.raises(ValueError, match="item affinity"):
        ContentItemKNN(user_side, k=1).fit(X)
    with pytest.raises(ValueError, match="at most 11 neighbours"):
        ContentItemKNN(ca, k=12).fit(X)


def test_top_fraction_hand_computed():
    from recsys_ltr.neighbors.content import top_fraction

    S = np.array([[1.0, 0.5, 0.5, 0.2], [0.1, 1.0, 0.3, 0.3], [0.0, 0.0, 1.0, 0.0], [0.4, 0.9, 0.2, 1.0]])
    R = top_fraction(S.copy(), 0.4, exclude_self=True)  # ceil(0.4 * 3) = 2 per row, self left out, ties by id
    assert [sorted(R[i].indices.tolist()) for i in range(4)] == [[1, 2], [2, 3], [0, 1], [0, 1]]
    R = top_fraction(S.copy(), 0.25, exclude_self=False)  # 1 per row, self allowed
    assert [R[i].indices.tolist() for i in range(4)] == [[0], [1], [2], [3]]
