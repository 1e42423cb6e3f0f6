"""FEBR features: scatter and per-pair kernels against a literal computation, z-scoring statistics,
Theorems 4.3 and 4.4, bad inputs."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from test_knn import random_feedback

from recsys_ltr.febr.features import AGGREGATORS, FeatureExtractor, build_affinities, feature_names
from recsys_ltr.models import KUNN, ItemKNN
from recsys_ltr.neighbors import Affinity, cosine_affinity, kunn_affinity

pytestmark = pytest.mark.kernels


def random_affinity(rng, n, k_max, side):
    """A custom affinity: up to k_max random neighbours per row, values in [0, 1) with exact zeros
    and ties."""
    rows = []
    for i in range(n):
        others = np.delete(np.arange(n), i)
        nb = rng.permutation(others)[: rng.integers(0, min(k_max, n - 1) + 1)]
        vals = rng.choice([0.0, 0.25, 0.5, rng.random()], size=len(nb))
        rows.append((nb, vals))
    indptr = np.cumsum([0] + [len(r[0]) for r in rows])
    indices = np.concatenate([r[0] for r in rows]).astype(np.int32)
    data = np.concatenate([r[1] for r in rows])
    return Affinity(sp.csr_matrix((data, indices, indptr), shape=(n, n)), k_max, "custom", side)


def literal_side(values, k):
    """The 7 features of one affinity vector, as written in sec. 4.5.2-4.5.4."""
    if len(values) == 0:
        return [0, 0, 0, 0, 0, 0, 1]
    v = np.asarray(values)
    return [v.mean(), v.std(), v.min(), v.max(), len(v) / k, v.sum(), 0]


def literal_features(D, k, item_aff, user_aff):
    """features[u, i] by the definitions: ActiveItems(u, i) = O+_u & KNN_k(i),
    ActiveUsers(u, i) = O+_i & KNN_k(u)."""
    m, n = D.shape
    out = []
    for u in range(m):
        row = []
        for i in range(n):
            f = []
            if item_aff is not None:
                ids, vals = item_aff.neighbors(i, k)
                f += literal_side([a for j, a in zip(ids, vals) if D[u, j]], k)
            if user_aff is not None:
                ids, vals = user_aff.neighbors(u, k)
                f += literal_side([a for v, a in zip(ids, vals) if D[v, i]], k)
            row.append(f)
        out.append(row)
    return np.array(out, dtype=float)


def extractor_for(D, k, side, kind, rng):
    X = sp.csr_matrix(D)
    m, n = D.shape
    item = user = None
    if side in ("item", "both"):
        item = random_affinity(rng, n, k + 1, "item") if kind == "custom" else cosine_affinity(X, k, side="item")
    if side in ("user", "both"):
        user = random_affinity(rng, m, k + 1, "user") if kind == "custom" else kunn_affinity(X, k, side="user")
    return FeatureExtractor(X, k, item, user, num_threads=2), item, user


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(4, 12),
    n=st.integers(4, 12),
    side=st.sampled_from(["item", "user", "both"]),
    kind=st.sampled_from(["custom", "builtin"]),
    k=st.integers(1, 3),
    bitset=st.booleans(),
)
def test_features_match_literal(seed, m, n, side, kind, k, bitset):
    rng = np.random.default_rng(seed)
    D = random_feedback(rng, m, n, 0.35)
    with pytest.MonkeyPatch.context() as patch:
        if not bitset:  # force the binary-search path
            patch.setattr("recsys_ltr._memory.MATRIX_BYTES", -1)
        fe, item, user = extractor_for(D, k, side, kind, rng)
    assert (fe.state[9].size > 0) == bitset
    expected = literal_features(D, k, item, user)
    F = fe.transform(np.arange(m))
    np.testing.assert_allclose(F, expected, rtol=1e-12, atol=1e-12)
    users, items = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    P = fe.pair_features(users.ravel(), items.ravel()).reshape(F.shape)
    np.testing.assert_allclose(P, expected, rtol=1e-12, atol=1e-12)
    # z-scoring statistics: mean / std over all m x n pairs
    mean, scale = fe.statistics()
    flat = expected.reshape(-1, fe.n_features)
    np.testing.assert_allclose(mean, flat.mean(axis=0), atol=1e-12)
    std = flat.std(axis=0)
    np.testing.assert_allclose(scale, np.where(std > 1e-12, std, 1.0), rtol=1e-9, atol=1e-12)
    some = np.arange(0, m, 2)  # over the pairs of a subset of users
    sub = expected[some].reshape(-1, fe.n_features)
    np.testing.assert_allclose(fe.statistics(some)[0], sub.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(
        fe.statistics(some)[1], np.where(sub.std(0) > 1e-12, sub.std(0), 1.0), rtol=1e-9, atol=1e-12
    )
    # linear scores from the scatter kernel without materialising features
    theta = rng.standard_normal(fe.n_features)
    S = fe.scores(theta, mean, scale, user_ids=np.arange(m))
    np.testing.assert_allclose(S, ((expected - mean) / scale) @ theta, rtol=1e-10, atol=1e-10)


def test_hand_computed_case():
    # 2 users, 3 items; item 0's neighbours (k=2): item 1 (0.5) then item 2 (0.25)
    X = sp.csr_matrix(np.array([[0, 1, 1], [0, 0, 1]], dtype=float))
    A = sp.csr_matrix((np.array([0.5, 0.25, 0.5, 0.25]), np.array([1, 2, 0, 0]), np.array([0, 2, 3, 4])), shape=(3, 3))
    fe = FeatureExtractor(X, 2, Affinity(A, 2, "custom", "item"))
    F = fe.transform([0, 1])
    np.testing.assert_allclose(F[0, 0], [0.375, 0.125, 0.25, 0.5, 1.0, 0.75, 0])
    np.testing.assert_allclose(F[1, 0], [0.25, 0, 0.25, 0.25, 0.5, 0.25, 0])
    np.testing.assert_allclose(F[1, 1], [0, 0, 0, 0, 0, 0, 1])  # item 1's neighbour 0 not consumed
    assert fe.feature_names == feature_names("item") == [f"item_{a}" for a in AGGREGATORS]


def test_fold_in_rows_match_training_rows():
    rng = np.random.default_rng(3)
    D = random_feedback(rng, 10, 8, 0.4)
    fe, _, _ = extractor_for(D, 3, "item", "builtin", rng)
    rows = sp.csr_matrix(D[[4, 6]])
    np.testing.assert_array_equal(fe.transform([0, 0], user_items=rows), fe.transform([4, 6]))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_theorem_4_3_item_sum_is_item_p(k):
    X = sp.csr_matrix(random_feedback(np.random.default_rng(k), 30, 15, 0.3))
    model = ItemKNN(k=k, num_threads=1).fit(X)
    fe = FeatureExtractor(X, k, model.item_affinity_)
    F = fe.transform(np.arange(30))
    np.testing.assert_array_equal(F[:, :, AGGREGATORS.index("sum")], model.score(np.arange(30)))


@pytest.mark.parametrize("k", [2, 4])
def test_theorem_4_4_kunn_is_linear_in_sums(k):
    """Eq. (4.4): (1/sqrt(c(u))) aggsum(phi_item) + (1/sqrt(c(i))) aggsum(phi_user) with the KUNN
    affinities and unscaled features equals the KUNN score (per-pair coefficients)."""
    D = random_feedback(np.random.default_rng(10 + k), 25, 14, 0.3)
    X = sp.csr_matrix(D)
    model = KUNN(k=k, num_threads=1).fit(X)
    fe = FeatureExtractor(X, k, kunn_affinity(X, k, side="item"), kunn_affinity(X, k, side="user"))
    F = fe.transform(np.arange(25))
    s = AGGREGATORS.index("sum")
    cu, ci = D.sum(axis=1), D.sum(axis=0)
    inv_u = np.divide(1, np.sqrt(cu), out=np.zeros_like(cu), where=cu > 0)
    inv_i = np.divide(1, np.sqrt(ci), out=np.zeros_like(ci), where=ci > 0)
    linear = inv_u[:, None] * F[:, :, s] + inv_i[None, :] * F[:, :, len(AGGREGATORS) + s]
    np.testing.assert_allclose(linear, model.score(np.arange(25)), rtol=1e-13, atol=1e-15)


def test_build_affinities_and_bad_inputs():
    X = sp.csr_matrix(random_feedback(np.random.default_rng(0), 12, 9, 0.4))
    item, user = build_affinities(X, "cosine", "both", 3)
    assert item.side == "item" and user.side == "user" and item.k_max == 3
    assert build_affinities(X, item, "item", 3) == (item, None)
    with pytest.raises(ValueError, match="items only"):
        build_affinities(X, "slim", "user", 3)
    with pytest.raises(ValueError, match="affinity must be one of"):
        build_affinities(X, "jaccard", "item", 3)
    with pytest.raises(ValueError, match="needs a user affinity"):
        build_affinities(X, item, "both", 3)
    with pytest.raises(TypeError, match="Affinity"):
        build_affinities(X, np.eye(9), "item", 3)
    with pytest.raises(ValueError, match="side must be"):
        build_affinities(X, "cosine", "items", 3)
    with pytest.raises(ValueError, match="give an item affinity"):
        FeatureExtractor(X, 3)
    with pytest.raises(ValueError, match="exceeds k_max"):
        FeatureExtractor(X, 4, item)
    with pytest.raises(ValueError, match="larger than the catalogue"):
        FeatureExtractor(X, 9, item)
    with pytest.raises(ValueError, match="built for users"):
        FeatureExtractor(X, 3, user)
    with pytest.raises(ValueError, match="have 9 items"):
        FeatureExtractor(X, 3, cosine_affinity(X.T.tocsr(), 3))
    fe = FeatureExtractor(X, 3, item, user)
    with pytest.raises(ValueError, match="out of range"):
        fe.transform([12])
    with pytest.raises(ValueError, match="same length"):
        fe.pair_features([0, 1], [0])
    with pytest.raises(ValueError, match="item columns"):
        fe.transform([0], user_items=sp.csr_matrix((1, 5)))
    with pytest.raises(ValueError, match="scale must be > 0"):
        fe.scores(np.ones(14), np.zeros(14), np.zeros(14), user_ids=[0])
    with pytest.raises(ValueError, match="NaN"):
        fe.transform([0], user_items=sp.csr_matrix(np.full((1, 9), np.nan)))
