"""RP3β: similarity, weights, affinity and model against brute-force dense computations."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import brute_knn, brute_similarity, brute_top_n, random_feedback, resave, rows_of
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from recsys_ltr.models import Recommender, RP3beta
from recsys_ltr.neighbors import rp3beta_affinity, rp3beta_similarity, rp3beta_weights

pytestmark = pytest.mark.kernels


def similarity_in_kernel_order(D, alpha, beta):
    """S_ij = deg(i)^-a deg(j)^-b sum_u X_ui X_uj deg(u)^-a, summed over u in increasing order
    (like the kernel, so that exact ties break alike); diagonal kept."""
    du, di = np.maximum(D.sum(axis=1), 1), np.maximum(D.sum(axis=0), 1)
    return brute_similarity(D.T, du**-alpha, (di**-alpha, di**-beta))


def similarity_literal(D, alpha, beta):
    """Dacrema et al.'s steps: P_ui = X row-normalised, P_iu = X^T row-normalised, both to the
    power alpha (stored entries only, as scipy's ``power``: no edge stays no edge when alpha = 0),
    S = P_iu^a P_ui^a with column j divided by pop_j^beta, diagonal zeroed."""
    n = D.shape[1]
    du, di = D.sum(axis=1), D.sum(axis=0)
    P_ui = np.divide(D, du[:, None], out=np.zeros_like(D), where=D > 0) ** alpha * (D > 0)
    P_iu = np.divide(D.T, di[:, None], out=np.zeros_like(D.T), where=D.T > 0) ** alpha * (D.T > 0)
    S = (P_iu @ P_ui) * np.divide(1.0, di**beta, out=np.zeros(n), where=di > 0)[None, :]
    np.fill_diagonal(S, 0.0)
    return S


def weights_brute(D, k, alpha, beta):
    """Dense W: top k of every row (ties by smaller id), then rows divided by their sums (added
    largest first, like the CSR rows)."""
    S = similarity_in_kernel_order(D, alpha, beta)
    W = np.zeros_like(S)
    for i, cols in enumerate(brute_knn(S, k)):
        total = 0.0
        for j in cols:
            total += S[i, j]
        W[i, cols] = S[i, cols] / total
    return W


def scores_brute(D, W):
    """score(u, i) = sum_j X_uj W_ji, summed over j in increasing order."""
    out = np.zeros((D.shape[0], W.shape[1]))
    for u in range(D.shape[0]):
        for j in np.flatnonzero(D[u]):
            out[u] += W[j]
    return out


exponents = st.sampled_from([0.0, 0.3, 0.5, 1.0, 1.7, 2.0])


@settings(max_examples=25, deadline=None)
@given(
    st.integers(3, 14), st.integers(3, 14), st.floats(0.1, 0.6), st.integers(1, 12), exponents, exponents, st.integers()
)
def test_similarity_and_weights_match_brute_force(m, n, density, k, alpha, beta, seed):
    D = random_feedback(np.random.default_rng(seed % 10**6), m, n, density)
    k = min(k, n - 1)
    S = rp3beta_similarity(sp.csr_matrix(D), k, alpha, beta)
    ref = similarity_in_kernel_order(D, alpha, beta)
    np.testing.assert_allclose(ref * (1 - np.eye(n)), similarity_literal(D, alpha, beta), rtol=1e-12, atol=1e-300)
    # rows: the k largest positive S_ij, j != i, ties by smaller id, largest first, exact values
    assert rows_of(S) == brute_knn(ref, k)
    for i, cols in enumerate(rows_of(S)):
        np.testing.assert_array_equal(S.data[S.indptr[i] : S.indptr[i + 1]], ref[i, cols])
    W = rp3beta_weights(S)
    np.testing.assert_array_equal(W.toarray(), weights_brute(D, k, alpha, beta))
    sums = np.asarray(W.sum(axis=1)).ravel()
    np.testing.assert_allclose(sums[np.diff(W.indptr) > 0], 1.0, rtol=1e-14)
    model = RP3beta(k=k, alpha=alpha, beta=beta).fit(D)
    np.testing.assert_array_equal(model.score(np.arange(m)), scores_brute(D, weights_brute(D, k, alpha, beta)))


def test_hand_computed_case_with_ties():
    # users: {0, 1, 2}, {0, 1}, {2}; item 3 is empty.  deg(u) = 3, 2, 1; deg(i) = 2, 2, 2, 0
    D = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 0]], float)
    S = rp3beta_similarity(sp.csr_matrix(D), 3, alpha=1.0, beta=1.0)
    c = 1 / 2 * 1 / 2  # deg(i)^-1 deg(j)^-1
    expected = {0: {1: c * (1 / 3 + 1 / 2), 2: c / 3}, 1: {0: c * (1 / 3 + 1 / 2), 2: c / 3}, 2: {0: c / 3, 1: c / 3}}
    assert rows_of(S) == [[1, 2], [0, 2], [0, 1], []]  # item 2: a tie, smaller id first
    for i, row in expected.items():
        np.testing.assert_allclose(S[i, list(row)].toarray().ravel(), list(row.values()), rtol=1e-15)
    W = rp3beta_weights(S).toarray()
    np.testing.assert_allclose(W[0], [0, 5 / 7, 2 / 7, 0], rtol=1e-15)
    np.testing.assert_allclose(W[2], [1 / 2, 1 / 2, 0, 0], rtol=1e-15)
    assert not W[3].any() and not W[:, 3].any()  # the empty item neither gives nor gets weight
    assert rows_of(rp3beta_weights(S, 1)) == [[1], [0], [0], []]  # k=1: the tie goes to item 0
    np.testing.assert_allclose(rp3beta_weights(S, 1).data, 1.0)
    # beta = 0 and alpha = 1: P3, the plain three-step walk probabilities (rows of S sum to 1 - P(return))
    P3 = rp3beta_similarity(sp.csr_matrix(D), 3, alpha=1.0, beta=0.0).toarray()
    np.testing.assert_allclose(P3[0], [0, (1 / 3 + 1 / 2) / 2, 1 / 6, 0], rtol=1e-15)
    model = RP3beta(k=2, alpha=1.0, beta=1.0).fit(D)
    np.testing.assert_allclose(model.score([2]), [[1 / 2, 1 / 2, 0, 0]], rtol=1e-15)
    ids, vals = model.similar_items(0, N=3)
    assert ids.tolist() == [1, 2]
    np.testing.assert_allclose(vals, [5 / 7, 2 / 7], rtol=1e-15)


def test_recommend_equals_dense_brute_force_top_n():
    rng = np.random.default_rng(5)
    D = random_feedback(rng, 30, 16, 0.3)
    model = RP3beta(k=5, alpha=0.6, beta=0.3).fit(D)
    ref = scores_brute(D, weights_brute(D, 5, 0.6, 0.3))
    pop = D.sum(axis=0)
    ids, vals = model.recommend(np.arange(30), N=6)
    for u in range(30):
        top = brute_top_n(ref[u], pop, 6, set(np.flatnonzero(D[u])))
        assert ids[u][ids[u] >= 0].tolist() == top
        np.testing.assert_array_equal(vals[u][: len(top)], ref[u][top])
    # a new user given by its row is scored like the training user with that row
    new_ids, new_vals = model.recommend(30, sp.csr_matrix(D[7]), N=6, recalculate_user=True)
    assert new_ids.tolist() == ids[7][ids[7] >= 0].tolist()
    np.testing.assert_array_equal(new_vals, vals[7][ids[7] >= 0])


def test_prefix_storage_threads_and_progress():
    D = random_feedback(np.random.default_rng(2), 40, 30, 0.3)
    X = sp.csr_matrix(D)
    full = rp3beta_similarity(X, 20, 0.8, 0.4, num_threads=2)
    blocked = rp3beta_similarity(X, 20, 0.8, 0.4, num_threads=1, show_progress=True)  # 32 row blocks
    assert rows_of(blocked) == rows_of(full) and np.array_equal(blocked.data, full.data)
    big = RP3beta(k=20, alpha=0.8, beta=0.4).fit(D)
    for k in (1, 7):
        small = rp3beta_similarity(X, k, 0.8, 0.4)
        assert rows_of(small) == [r[:k] for r in rows_of(full)]
        np.testing.assert_array_equal(big.with_k(k).W_.toarray(), rp3beta_weights(small).toarray())
        refit = RP3beta(k=1, alpha=0.8, beta=0.4).fit(D).score(np.arange(40))
        np.testing.assert_array_equal(big.with_k(k).with_k(1).score(np.arange(40)), refit)
    # a smaller model shares the stored rows: any k up to the fitted one stays reachable
    np.testing.assert_array_equal(big.with_k(7).with_k(8).W_.toarray(), big.with_k(8).W_.toarray())
    with pytest.raises(ValueError, match="refit"):
        big.with_k(7).with_k(21)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_affinity_is_w_transposed_and_febr_item_sum_is_rp3beta(k):
    """Theorem 4.3 analogue: with A = W^T, FEBR's item ``sum`` feature is RP3β's score once FEBR's
    k covers the longest reverse neighbourhood; a smaller FEBR k keeps each item's strongest."""
    # imported here: importing recsys_ltr.febr before recsys_ltr.models hits an import cycle
    from recsys_ltr.febr.features import AGGREGATORS, FeatureExtractor, build_affinities

    D = random_feedback(np.random.default_rng(k), 30, 15, 0.3)
    X = sp.csr_matrix(D)
    model = RP3beta(k=k, alpha=0.7, beta=0.6).fit(X)
    A = rp3beta_affinity(X, k, alpha=0.7, beta=0.6)
    assert A.kind == "rp3beta" and A.side == "item" and A.k_max == 14
    np.testing.assert_array_equal(A.matrix.toarray(), model.W_.T.toarray())
    for i, cols in enumerate(rows_of(A.matrix)):  # rows by weight, ties by smaller id
        assert cols == sorted(cols, key=lambda j: (-model.W_[j, i], j))
    longest = int(np.diff(A.matrix.indptr).max())
    assert longest > k  # the reverse neighbourhoods are not bounded by k
    s = AGGREGATORS.index("sum")
    for febr_k in (longest, 14):
        F = FeatureExtractor(X, febr_k, A).transform(np.arange(30))
        np.testing.assert_allclose(F[:, :, s], model.score(np.arange(30)), rtol=1e-13, atol=1e-15)
    truncated = FeatureExtractor(X, k, A).transform(np.arange(30))[:, :, s]
    np.testing.assert_allclose(truncated, D @ A.truncate(k).T.toarray(), rtol=1e-13, atol=1e-15)
    # the kind name builds the same affinity, item side only
    item, user = build_affinities(X, "rp3beta", "item", k, {"alpha": 0.7, "beta": 0.6})
    assert user is None and (item.matrix != A.matrix).nnz == 0
    with pytest.raises(ValueError, match="items only"):
        build_affinities(X, "rp3beta", "both", k)


def test_empty_users_and_items():
    D = random_feedback(np.random.default_rng(8), 12, 9, 0.3)  # user 0 and item 8 are empty
    model = RP3beta(k=4).fit(D)
    assert model.similarity_[8].nnz == 0 and model.similarity_[:, 8].nnz == 0
    assert not model.score([0]).any()
    pop = D.sum(axis=0)
    ids, _ = model.recommend(0, N=9)
    assert ids.tolist() == sorted(range(9), key=lambda i: (-pop[i], i))  # popularity order
    ids, vals = model.similar_items(8, N=3)
    assert ids.size == 0 and vals.size == 0


@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"k": 9}, ValueError, "larger than the catalogue"),
        ({"k": 0}, ValueError, "k must be >= 1"),
        ({"k": 2.5}, TypeError, "k must be an integer"),
        ({"k": True}, TypeError, "k must be an integer"),
        ({"alpha": "1"}, TypeError, "alpha must be a real number"),
        ({"alpha": None}, TypeError, "alpha must be a real number"),
        ({"alpha": True}, TypeError, "alpha must be a real number"),
        ({"alpha": np.nan}, ValueError, "alpha must be a finite number"),
        ({"alpha": np.inf}, ValueError, "alpha must be a finite number"),
        ({"alpha": -0.1}, ValueError, "alpha must be a finite number in \\[0.0, inf\\)"),
        ({"beta": -1.0}, ValueError, "beta must be a finite number in \\[0.0, inf\\)"),
        ({"beta": np.nan}, ValueError, "beta must be a finite number"),
        ({"beta": [0.5]}, TypeError, "beta must be a real number"),
        ({"alpha": 400.0}, ValueError, "underflow"),
        ({"num_threads": -1}, ValueError, "num_threads"),
        ({"show_progress": "no"}, TypeError, "show_progress"),
    ],
    ids=repr,
)
def test_bad_parameters(params, error, match):
    D = random_feedback(np.random.default_rng(9), 12, 9, 0.4)
    with pytest.raises(error, match=match):
        RP3beta(**{"k": 3, **params}).fit(D)
    if not {"num_threads", "show_progress"} & set(params):
        with pytest.raises(error, match=match):
            rp3beta_similarity(D, **{"k": 3, "alpha": 1.0, "beta": 0.5, **params})
    for bad in (np.full((3, 4), np.nan), sp.csr_matrix((3, 4)), np.ones(4)):
        with pytest.raises(ValueError):
            RP3beta(k=2).fit(bad)
    with pytest.raises(AttributeError, match="not fitted"):
        RP3beta().score([0])


def test_save_load_round_trip_and_malformed_state(tmp_path):
    D = random_feedback(np.random.default_rng(10), 15, 10, 0.4)
    model = RP3beta(k=4, alpha=0.5, beta=0.7).fit(D)
    model.save(tmp_path / "m")
    for loader in (RP3beta, Recommender):
        loaded = loader.load(tmp_path / "m.npz")
        assert type(loaded) is RP3beta and loaded.get_params() == model.get_params()
        np.testing.assert_array_equal(loaded.score(np.arange(15)), model.score(np.arange(15)))
        np.testing.assert_array_equal(loaded.with_k(2).W_.toarray(), model.with_k(2).W_.toarray())
    good = dict(np.load(tmp_path / "m.npz"))

    def refused(match, **changes):
        arrays = {**good, **changes}
        resave(tmp_path / "bad.npz", **arrays)
        with pytest.raises(ValueError, match=match):
            Recommender.load(tmp_path / "bad.npz")

    header = json.loads(str(good["header"]))
    header["params"]["beta"] = -1.0
    refused("invalid parameters: beta", header=np.array(json.dumps(header)))
    refused("values must be positive", **{"similarity_.data": -good["similarity_.data"]})
    refused("similarity_", **{"similarity_.indices": good["similarity_.indices"] + 10})
    header = json.loads(str(good["header"]))
    header["state"]["similarity_"]["shape"] = [9, 9]
    refused("similarity_", header=np.array(json.dumps(header)))


def test_estimator_conventions():
    D = random_feedback(np.random.default_rng(11), 20, 12, 0.3)
    model = RP3beta(k=4, alpha=0.9, beta=0.2, num_threads=1)
    assert model.get_params() == {"k": 4, "alpha": 0.9, "beta": 0.2, "num_threads": 1, "show_progress": None}
    assert model.fit(D) is model and model.item_based
    two = clone(model).set_params(num_threads=2).fit(D)
    np.testing.assert_array_equal(model.score(np.arange(20)), two.score(np.arange(20)))


def test_eval_cli_anchor_grids():
    from recsys_ltr.eval.methods import get_method

    rp3, item_p = get_method("RP3beta"), get_method("item-p")
    for budget in ("quick", "paper"):
        assert rp3.main_values(budget) == item_p.main_values(budget)
        assert rp3.defaults(budget) == {"alpha": 1.0, "beta": 0.5}  # the model's defaults come first
    assert len(rp3.secondary["quick"]) == 10 and len(rp3.secondary["paper"]) == 77
    assert {s["alpha"] for s in rp3.secondary["paper"]} == {0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0}
    assert max(s["beta"] for s in rp3.secondary["paper"]) == 2.0  # Dacrema et al.'s ranges
    model = rp3.build(k=5, alpha=0.5, beta=0.3, num_threads=1)
    assert isinstance(model, RP3beta) and model.get_params()["beta"] == 0.3 and hasattr(model, "with_k")


def test_kernel_scales_are_validated():
    from recsys_ltr.neighbors import knn_index, knn_query

    M = sp.csr_matrix(np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]], float))  # row 1 is empty
    with pytest.raises(ValueError, match="scale must be 3 finite non-negative"):
        knn_index(M, scale=np.ones(2))
    with pytest.raises(ValueError, match="scale must be 3 finite non-negative"):
        knn_index(M, scale=np.array([1.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="positive on every non-empty row"):
        knn_index(M, scale=np.array([1.0, 1.0, 0.0]))
    index = knn_index(M, scale=np.array([2.0, 0.0, 0.5]))  # an empty row may have scale 0
    with pytest.raises(ValueError, match="query_scale must be 3 finite non-negative"):
        knn_query(index, M, 1, query_scale=-np.ones(3))
    S = knn_query(index, M, 2, np.arange(3), query_scale=np.array([3.0, 0.0, 1.0]))
    np.testing.assert_array_equal(S.toarray(), [[0, 0, 3 * 0.5], [0, 0, 0], [2.0, 0, 0]])
