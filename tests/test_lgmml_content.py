"""LGMMLAffinity: L-GMML item-to-item retrieval from content for cold start (issue 20 sec. 1)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import normalize

from recsys_ltr.ltr import LGMML, LGMMLAffinity
from recsys_ltr.ltr.content import PAIRS, candidate_relevance, pair_vectors, rerank_costs
from recsys_ltr.models.content import ContentItemKNN
from recsys_ltr.neighbors import Affinity, ContentAffinity, blend_affinity, coconsumption_relevance
from recsys_ltr.neighbors.content import top_fraction

pytestmark = pytest.mark.kernels

N_ITEMS, COLD = 40, (0, 3, 7, 12, 30)
SMALL = dict(n_metrics=3, queries_per_metric=6, iterations=2)


def problem(seed=0, n=N_ITEMS, t=12, users=50, cold=COLD):
    """Random positive content (every item has some) and feedback without the ``cold`` items."""
    rng = np.random.default_rng(seed)
    F = rng.random((n, t)) * (rng.random((n, t)) < 0.5)
    F[np.arange(n), rng.integers(0, t, n)] += 0.5
    X = (rng.random((users, n)) < 0.25).astype(float)
    X[:, [c for c in cold if c < n]] = 0.0
    return F, sp.csr_matrix(X)


def model(**params):
    base = dict(k=5, n_candidates=15, n_components=6, content_weight=0.0, lgmml=LGMML(**SMALL), random_state=0)
    return LGMMLAffinity(**{**base, **params})


@pytest.fixture(scope="module")
def fitted():
    F, X = problem()
    return F, X, model().fit(F, X)


def embedding(m, F):
    """Reduced content ``u_i`` written out from the fitted components."""
    return normalize(normalize(F) @ m.components_.T)


# ----------------------------------------------------------------------------- pair vectors
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 8), d=st.integers(1, 5), pair=st.sampled_from(PAIRS))
def test_pair_vectors_are_symmetric_and_match_a_loop(seed, n, d, pair):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n, d))
    q, c = rng.integers(0, n, 10), rng.integers(0, n, 10)
    got = pair_vectors(U, q, c, pair)
    np.testing.assert_array_equal(got, pair_vectors(U, c, q, pair))
    for t in range(10):
        a, b = U[q[t]], U[c[t]]
        row = {"absdiff": [abs(x - y) for x, y in zip(a, b)], "product": [x * y for x, y in zip(a, b)]}
        want = row["product"] + row["absdiff"] if pair == "both" else row[pair]
        np.testing.assert_allclose(got[t], want, rtol=0, atol=0)


def test_pair_vectors_hand_computed_and_bad_kind():
    U = np.array([[1.0, -2.0], [3.0, 0.5]])
    np.testing.assert_array_equal(pair_vectors(U, [0], [1]), [[2.0, 2.5]])
    np.testing.assert_array_equal(pair_vectors(U, [0], [1], "product"), [[3.0, -1.0]])
    np.testing.assert_array_equal(pair_vectors(U, [0], [1], "both"), [[3.0, -1.0, 2.0, 2.5]])
    with pytest.raises(ValueError, match="pair must be one of"):
        pair_vectors(U, [0], [1], "sum")


# ----------------------------------------------------------------------------- relevance
def test_coconsumption_relevance_is_top_fraction_of_user_cosines():
    _, X = problem(1)
    warm = np.flatnonzero(X.getnnz(axis=0) > 0)
    U = normalize(X.T.tocsr()[warm])
    cosines = (U @ U.T).toarray()  # the sparse product, as the function's: a dense BLAS product may flip near-ties
    for frac in (0.05, 0.2):
        np.testing.assert_array_equal(
            coconsumption_relevance(X, frac, warm).toarray(), top_fraction(cosines, frac, True).toarray()
        )
    # hand-computed: items 0 and 1 share user 0, item 2 is alone with user 1
    X3 = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    assert [r.indices.tolist() for r in coconsumption_relevance(X3, 0.5)] == [[1], [0], [0]]  # 0-cosine tie: id 0
    with pytest.raises(ValueError, match="items must be"):
        coconsumption_relevance(X3, 0.5, [0])
    with pytest.raises(ValueError, match="frac"):
        coconsumption_relevance(X3, 0.0)


def test_candidate_relevance_hand_computed():
    # item user sets: 0 {0, 1}, 1 {0, 2}, 2 {1}, 3 {2}
    X = sp.csr_matrix(np.array([[1.0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1]]))
    cand = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    # ceil(0.34 * 3) = 2 per row; cosines row 0: [1/2, 1/sqrt2, 0]; row 2: [1/sqrt2, 0, 0] (one positive)
    want = [[1, 1, 0], [1, 0, 1], [1, 0, 0], [0, 1, 0]]
    np.testing.assert_array_equal(candidate_relevance(X, cand, 0.34), want)
    np.testing.assert_array_equal(candidate_relevance(X, cand, 0.1), [[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]])


def test_candidate_scope_labels_within_the_preselection():
    F, X = problem(6)
    m = model(relevance_scope="candidates", relevance_fraction=0.2).fit(F, X)
    assert m.affinity_.matrix.nnz == 5 * N_ITEMS
    other = model(relevance_fraction=0.2).fit(F, X)
    assert not np.array_equal(m.lgmml_.anchors_, other.lgmml_.anchors_)


# ----------------------------------------------------------------------------- re-ranking cost
def test_rerank_costs_hand_computed():
    cand = np.array([[1, 2, 3], [0, 2, 3]])
    f = np.array([[-1.0, -3.0, -2.0], [-2.0, -2.0, -4.0]])
    d2 = np.array([[0.5, 1.0, 1.5], [1.0, 2.0, 3.0]])
    # median(-f) = 2, median(d2) = 1.25: s = 1.6; w = 0.5 costs row 0: [0.9, 2.3, 2.2], row 1: [1.8, 2.6, 4.4]
    S = rerank_costs(cand, f, d2, 2, 0.5)
    np.testing.assert_array_equal(S.indices, [1, 3, 0, 2])
    np.testing.assert_allclose(S.data, [0.9, 2.2, 1.8, 2.6])
    L = rerank_costs(cand, f, d2, 2, 0.0)  # L-GMML alone: -f, ties keep candidate order
    np.testing.assert_array_equal(L.indices, [1, 3, 0, 2])
    np.testing.assert_allclose(L.data, [1.0, 2.0, 2.0, 2.0])
    E = rerank_costs(cand, f, d2, 2, 1.0)  # content alone: the pre-selection order
    np.testing.assert_array_equal(E.indices, [1, 2, 0, 2])


def test_content_weight_one_is_the_content_affinity_ranking():
    F, X = problem(7)
    m = model(content_weight=1.0).fit(F, X)
    C = ContentAffinity(k=5).fit(normalize(F)).affinity_
    for i in range(N_ITEMS):
        np.testing.assert_array_equal(m.affinity_.neighbors(i)[0], C.neighbors(i)[0])
    cand, f, d2 = m.candidate_scores(F)  # other weights without refitting
    half = model(content_weight=0.5).fit(F, X)
    np.testing.assert_array_equal(rerank_costs(cand, f, d2, 5, 0.5).indices, half.affinity_.matrix.indices)
    np.testing.assert_array_equal(rerank_costs(cand, f, d2, 5, 1.0).indices, m.affinity_.matrix.indices)
    with pytest.raises(ValueError, match="F has 11 features"):
        m.candidate_scores(F[:, :11])
    with pytest.raises(ValueError, match="no content"):
        m.candidate_scores(np.vstack([F, np.zeros((1, F.shape[1]))]))
    with pytest.raises(ValueError, match="not fitted"):
        model().candidate_scores(F)


def test_distance_feature_is_the_last_ranker_column(tmp_path):
    F, X = problem(8)
    m = model(distance_feature=True, content_weight=0.5).fit(F, X)
    assert m.lgmml_.n_features_in_ == m.components_.shape[0] + 1
    loaded = LGMMLAffinity.load(m.save(tmp_path / "d"))
    np.testing.assert_array_equal(loaded.affinity_.matrix.toarray(), m.affinity_.matrix.toarray())
    assert loaded.get_params()["distance_feature"] is True and loaded.get_params()["content_weight"] == 0.5


# ----------------------------------------------------------------------------- the affinity
def test_rows_are_the_brute_force_lgmml_ranking_when_preselection_is_the_catalogue():
    F, X = problem(2, n=18)
    m = model(k=6, n_candidates=17).fit(F, X)
    U = embedding(m, F)
    n = F.shape[0]
    for i in range(n):
        others = np.array([j for j in range(n) if j != i])
        f = m.lgmml_.predict(pair_vectors(U, np.full(others.size, i), others), np.zeros(others.size, int))
        best = others[np.argsort(-f, kind="stable")[:6]]
        ids, vals = m.affinity_.neighbors(i)
        assert set(ids.tolist()) == set(best.tolist()), f"row {i}"
        np.testing.assert_allclose(vals, np.exp(np.sort(f)[::-1][:6] / m.bandwidth_), rtol=1e-9)
    stored = -np.log(m.affinity_.matrix.data) * m.bandwidth_
    assert np.isclose(m.bandwidth_, np.median(stored))


def test_preselection_keeps_every_top_k_of_the_full_ranking_on_its_candidates(fitted):
    F, _, m = fitted
    C = ContentAffinity(k=15).fit(normalize(F)).affinity_  # the pre-selection: cosine order
    U = embedding(m, F)
    for i in range(F.shape[0]):
        cand = C.neighbors(i)[0]
        f = m.lgmml_.predict(pair_vectors(U, np.full(cand.size, i), cand), np.zeros(cand.size, int))
        assert set(m.affinity_.neighbors(i)[0].tolist()) == set(cand[np.argsort(-f, kind="stable")[:5]].tolist())


def test_structure_cold_items_get_neighbours_and_item_p_scores_them(fitted):
    _, X, m = fitted
    A = m.affinity_
    assert isinstance(A, Affinity) and A.kind == "custom" and A.side == "item" and A.k_max == 5
    assert np.all(A.matrix.getnnz(axis=1) == 5) and np.all(np.diff(A.matrix.data.reshape(-1, 5), axis=1) <= 0)
    assert all(i not in A.neighbors(i)[0] for i in range(A.n))
    np.testing.assert_array_equal(m.warm_, np.setdiff1d(np.arange(N_ITEMS), COLD))
    scores = ContentItemKNN(m, k=5).fit(X).score(np.arange(X.shape[0]))
    assert all(scores[:, c].max() > 0 for c in COLD)  # cold items reached through warm neighbours


def test_the_ranker_learns_from_warm_items_only():
    F, X = problem(3)
    G = F.copy()
    G[list(COLD)] = np.random.default_rng(9).random((len(COLD), F.shape[1]))
    a, b = model().fit(F, X), model().fit(G, X)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.lgmml_.phi_, b.lgmml_.phi_)
    np.testing.assert_array_equal(a.lgmml_.anchors_, b.lgmml_.anchors_)


def test_given_relevance_equals_the_feedback_path(fitted):
    F, X, m = fitted
    warm = m.warm_
    R = coconsumption_relevance(X, 0.05, warm).tocoo()
    full = sp.csr_matrix((R.data, (warm[R.row], warm[R.col])), shape=(N_ITEMS, N_ITEMS))
    other = model().fit(F, relevance=full)
    np.testing.assert_array_equal(other.affinity_.matrix.toarray(), m.affinity_.matrix.toarray())


def test_reproducible_by_seed(fitted):
    F, X, m = fitted
    again = model().fit(F, X)
    for attr in ("indices", "indptr", "data"):
        np.testing.assert_array_equal(getattr(again.affinity_.matrix, attr), getattr(m.affinity_.matrix, attr))
    other = model(random_state=1).fit(F, X)
    assert not np.array_equal(other.lgmml_.anchors_, m.lgmml_.anchors_)


@pytest.mark.parametrize("pair", ["product", "both"])
def test_other_pair_vectors_fit(pair):
    F, X = problem(4)
    m = model(pair=pair).fit(sp.csr_matrix(F), X)
    assert m.lgmml_.n_features_in_ == m.components_.shape[0] * (2 if pair == "both" else 1)
    assert m.affinity_.matrix.nnz == 5 * N_ITEMS


def test_save_load_round_trip(fitted, tmp_path):
    F, X, m = fitted
    path = m.save(tmp_path / "lg")
    loaded = LGMMLAffinity.load(path)
    np.testing.assert_array_equal(loaded.affinity_.matrix.toarray(), m.affinity_.matrix.toarray())
    np.testing.assert_array_equal(loaded.components_, m.components_)
    assert loaded.bandwidth_ == m.bandwidth_ and loaded.get_params()["k"] == 5
    U = embedding(m, F)
    rows = pair_vectors(U, np.zeros(10, int), np.arange(1, 11))
    np.testing.assert_array_equal(
        loaded.lgmml_.predict(rows, np.zeros(10, int)), m.lgmml_.predict(rows, np.zeros(10, int))
    )
    knn = ContentItemKNN(loaded, k=3).fit(X)
    np.testing.assert_array_equal(knn.score([0, 1]), ContentItemKNN(m, k=3).fit(X).score([0, 1]))
    default = LGMMLAffinity(k=2, n_candidates=4, n_components=3, content_weight=0.0, random_state=0).set_params(
        lgmml=None, relevance_fraction=0.2
    )
    small = default.set_params(lgmml=LGMML(**SMALL)).fit(F[:12], X[:, :12])
    small.set_params(k=3)  # the file keeps the fitted parameters
    assert LGMMLAffinity.load(small.save(tmp_path / "s")).get_params()["k"] == 2


def test_usable_as_febr_affinity(fitted):
    from recsys_ltr.febr import AffinityFEBR

    _, X, m = fitted
    febr = AffinityFEBR(
        affinity=m.affinity_, holdout=0.0, validation_fraction=0.0, k=5, max_iter=0, random_state=0,
        num_threads=1,
    ).fit(X)  # fmt: skip
    assert np.all(np.isfinite(febr.score(np.arange(5))))


# ----------------------------------------------------------------------------- blend
def test_blend_affinity_hand_computed():
    A = Affinity(sp.csr_matrix(np.array([[0, 0.9, 0.5], [0.2, 0, 0], [0.4, 0.4, 0]])), 2)
    B = Affinity(sp.csr_matrix(np.array([[0, 0.1, 0.8], [0, 0, 1.0], [0.6, 0, 0]])), 2)
    C = blend_affinity(A, B, 0.25, k=1)
    assert C.k_max == 1 and C.kind == "custom"
    # row 0: 0.75*[.9, .5] + 0.25*[.1, .8] = [.7, .575]; row 1: [.15, .25]; row 2: [.45, .3]
    assert [C.neighbors(i)[0].tolist() for i in range(3)] == [[1], [2], [0]]
    np.testing.assert_allclose([C.neighbors(i)[1][0] for i in range(3)], [0.7, 0.25, 0.45])
    full = blend_affinity(A, B, 0.5)
    assert full.k_max == 2 and full.neighbors(2)[0].tolist() == [0, 1]  # 0.5 then 0.2
    assert blend_affinity(A, B, 0.0).neighbors(0)[0].tolist() == [1, 2]
    with pytest.raises(ValueError, match="weight"):
        blend_affinity(A, B, 1.5)
    with pytest.raises(ValueError, match="same rows"):
        blend_affinity(A, Affinity(sp.eye(4, format="csr"), 1), 0.5)
    with pytest.raises(TypeError, match="Affinity"):
        blend_affinity(A, B.matrix, 0.5)


# ----------------------------------------------------------------------------- bad input
def test_bad_input_gets_clear_errors():
    F, X = problem(5, n=12, cold=(0,))
    with pytest.raises(ValueError, match="no content"):
        model(n_candidates=8).fit(np.vstack([F[:-1], np.zeros((1, F.shape[1]))]), X)
    bad = F.copy()
    bad[2, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model(n_candidates=8).fit(bad, X)
    with pytest.raises(ValueError, match="at most 11 neighbours"):
        model(k=12, n_candidates=8).fit(F, X)
    with pytest.raises(ValueError, match="n_candidates=12 is larger"):
        model(n_candidates=12).fit(F, X)
    with pytest.raises(ValueError, match="exceeds n_candidates"):
        model(k=9, n_candidates=8).fit(F, X)
    with pytest.raises(ValueError, match="either the training feedback X or a relevance"):
        model(n_candidates=8).fit(F)
    with pytest.raises(ValueError, match="not both"):
        model(n_candidates=8).fit(F, X, relevance=sp.eye(12))
    with pytest.raises(ValueError, match="X has 11 items"):
        model(n_candidates=8).fit(F, X[:, :11])
    with pytest.raises(ValueError, match="at least 2 warm items"):
        model(n_candidates=8).fit(F, sp.csr_matrix(X.toarray() * (np.arange(12) == 5)))
    with pytest.raises(ValueError, match=r"relevance must be \(12, 12\)"):
        model(n_candidates=8).fit(F, relevance=sp.eye(11))
    with pytest.raises(TypeError, match="lgmml must be None or an LGMML"):
        model(lgmml=ContentAffinity()).fit(F, X)
    with pytest.raises(ValueError, match="pair must be one of"):
        model(pair="sum").fit(F, X)
    with pytest.raises(ValueError, match="relevance_fraction"):
        model(relevance_fraction=0).fit(F, X)
    with pytest.raises(ValueError, match="bandwidth"):
        model(bandwidth=-1.0).fit(F, X)
    with pytest.raises(ValueError, match="content_weight"):
        model(content_weight=1.5).fit(F, X)
    with pytest.raises(TypeError, match="distance_feature must be a bool"):
        model(distance_feature=1).fit(F, X)
    with pytest.raises(ValueError, match="relevance_scope must be one of"):
        model(relevance_scope="warm").fit(F, X)
    with pytest.raises(ValueError, match="not fitted"):
        ContentItemKNN(model(), k=2).fit(X)
    with pytest.raises(ValueError, match="all zeros"):
        model().fit(np.zeros((12, 3)), X)
