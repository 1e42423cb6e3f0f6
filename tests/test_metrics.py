"""Tests of recsys_ltr.metrics: hand-computed cases, a brute-force reference, bad inputs."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import _ranking
from recsys_ltr.metrics import METRICS, EvaluationResult, evaluate, rank_test_items

pytestmark = pytest.mark.kernels

ALL_KEYS = ("ADG", "ATOP", "REC@2", "MAP", "NDCG", "P@2", "AUC", "MRR")
AT_K = ("NDCG@2", "MAP@2", "HR@2")  # asked for by name


def csr(dense):
    return sp.csr_matrix(np.asarray(dense, dtype=np.float64))


# ----------------------------------------------------------------------------- brute force


def brute_force(scores, train, test, exclude, k):
    """Per-user metrics by sorting every candidate list in full (written for clarity, not speed).

    Returns (dict name -> per-user array, users, ranks dict (user, item) -> rank).
    """
    train, test, exclude = (np.asarray(m.todense()) > 0 for m in (train, test, exclude))
    n_users, n_items = scores.shape
    pop = train.sum(axis=0)
    items = np.arange(n_items)
    out = {name: [] for name in ALL_KEYS + AT_K}
    users, ranks = [], {}
    for u in range(n_users):
        relevant = set(np.flatnonzero(test[u]))
        if not relevant:
            continue
        users.append(u)
        cand = items[~train[u] & ~exclude[u]]
        # np.lexsort: last key is primary -> score desc, popularity desc, item id asc.
        ordered = cand[np.lexsort((cand, -pop[cand], -scores[u, cand]))]
        is_rel = np.array([i in relevant for i in ordered])
        n, m = len(ordered), len(relevant)
        rank = {int(i): pos for pos, i in enumerate(ordered) if i in relevant}
        ranks.update({(u, i): r for i, r in rank.items()})
        r = np.array(sorted(rank.values()))
        discount = 1 / np.log2(np.arange(n) + 2)
        out["ADG"].append(np.mean(1 / np.log2(r + 2)))
        out["ATOP"].append(np.mean(1 - r / (n - 1)) if n > 1 else 1.0)
        out["REC@2"].append(np.mean(r < k))
        precision_at = np.cumsum(is_rel) / np.arange(1, n + 1)
        out["MAP"].append(precision_at[is_rel].mean())
        out["NDCG"].append(discount[is_rel].sum() / discount[:m].sum())
        out["P@2"].append(is_rel[:k].sum() / k)
        pairs = [(a, b) for a in range(n) if is_rel[a] for b in range(n) if not is_rel[b]]
        out["AUC"].append(np.mean([a < b for a, b in pairs]) if pairs else 1.0)
        out["MRR"].append(1 / (r[0] + 1))
        top = is_rel[:k]  # implicit's ranking_metrics_at_k and LightGCN's definitions
        out["NDCG@2"].append(discount[:k][top].sum() / discount[: min(m, k)].sum())
        out["MAP@2"].append(precision_at[:k][top].sum() / min(m, k))
        out["HR@2"].append(float(top.any()))
    return {name: np.array(v) for name, v in out.items()}, np.array(users), ranks


def random_case(seed, n_users, n_items, n_levels):
    """Integer scores from a small range (many ties), some -inf; test disjoint from train and
    exclude, exclude overlapping train (an item in both is one non-candidate)."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, n_levels, size=(n_users, n_items)).astype(np.float64)
    scores[rng.random(scores.shape) < 0.1] = -np.inf
    cell = rng.integers(0, 4, size=(n_users, n_items))  # 0 train, 1 test, 2 exclude, 3 none
    cell[rng.random(cell.shape) < 0.3] = 3
    cell[0, 0], cell[-1, -1] = 0, 1  # train and test never empty
    train, test, exclude = (csr(cell == c) for c in range(3))
    exclude = csr(exclude.toarray() + ((cell == 0) & (rng.random(cell.shape) < 0.5)))
    return scores, train, test, exclude


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_users=st.integers(1, 7),
    n_items=st.integers(2, 14),
    n_levels=st.integers(1, 4),
    batch_size=st.integers(1, 4),
    linear_max=st.sampled_from([0, 2, _ranking.LINEAR_MAX]),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_matches_brute_force_with_ties(seed, n_users, n_items, n_levels, batch_size, linear_max, dtype):
    # linear_max switches between the per-test-item passes and the binary-search buckets.
    scores, train, test, exclude = random_case(seed, n_users, n_items, n_levels)
    scores = scores.astype(dtype)
    default, _ranking.LINEAR_MAX = _ranking.LINEAR_MAX, linear_max
    try:
        res = evaluate(lambda u: scores[u], train, test, exclude=exclude, k=2, batch_size=batch_size)
    finally:
        _ranking.LINEAR_MAX = default
    ref, users, ranks = brute_force(scores, train, test, exclude, k=2)
    np.testing.assert_array_equal(res.users, users)
    assert tuple(res) == ALL_KEYS
    for name in ALL_KEYS:
        np.testing.assert_allclose(res.per_user[name], ref[name], rtol=0, atol=1e-9, err_msg=name)
        assert res[name] == pytest.approx(ref[name].mean(), abs=1e-9)
    at_k = evaluate(lambda u: scores[u], train, test, exclude=exclude, metrics=AT_K + ("HR",), k=2)
    assert tuple(at_k) == AT_K  # bare HR takes k
    named = evaluate(lambda u: scores[u], train, test, exclude=exclude, metrics=["Recall@2", "Precision@2", "hr"], k=2)
    assert tuple(named) == ("Recall@2", "Precision@2", "hr@2")  # the names asked, bare ones with their k
    for asked, canonical in [("Recall@2", "REC@2"), ("Precision@2", "P@2"), ("hr@2", "HR@2")]:
        assert named[asked] == named[canonical] and canonical in named  # the canonical name stays an alias
        np.testing.assert_array_equal(named.per_user[canonical], named.per_user[asked])
        assert named.stderr[canonical] is named.stderr[asked]  # NaN for one user
    np.testing.assert_allclose(named.per_user["REC@2"], ref["REC@2"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(named.per_user["P@2"], ref["P@2"], rtol=0, atol=1e-9)
    with pytest.raises(KeyError, match="'NDCG' was not computed; available: Recall@2"):
        named["NDCG"]
    for name in AT_K:
        np.testing.assert_allclose(at_k.per_user[name], ref[name], rtol=0, atol=1e-9, err_msg=name)

    # Kernel-level API: ranks aligned with the test CSR, candidates counted.
    got, n_cand = rank_test_items(scores, train, test, exclude, popularity=np.asarray(train.sum(axis=0)).ravel())
    coo = test.tocoo()
    assert {(int(u), int(i)): int(r) for u, i, r in zip(coo.row, coo.col, got)} == ranks
    n_expected = n_items - np.asarray((train + exclude).astype(bool).sum(axis=1)).ravel()
    has_test = np.diff(test.indptr) > 0
    np.testing.assert_array_equal(n_cand[has_test], n_expected[has_test])
    assert np.all(n_cand[~has_test] == -1)


# ----------------------------------------------------------------------------- hand-computed


def hand_case():
    """Two users, six items.

    train: user 0 {5}; user 1 {2, 5}   -> popularity (0, 0, 1, 0, 0, 2)
    test:  user 0 {1, 3}; user 1 {3};   exclude: user 1 {1}
    user 0 scores (0.9, 0.5, 0.5, 0.1, 0.7, 2.0): candidates 0..4 (N=5), order 0, 4, 2, 1, 3
      (items 1 and 2 tie at 0.5; item 2 is more popular) -> rank(1) = 3, rank(3) = 4.
      ADG  = (1/log2 5 + 1/log2 6) / 2            ATOP = ((1 - 3/4) + (1 - 4/4)) / 2 = 0.125
      REC@2 = 0, P@2 = 0                            MAP  = (1/4 + 2/5) / 2 = 0.325
      NDCG = (1/log2 5 + 1/log2 6) / (1 + 1/log2 3)
      AUC: 3 irrelevant candidates, all above both relevant items -> 0;  MRR = 1/4
    user 1 scores all 1.0 (full tie, equal popularity -> item id): candidates 0, 3, 4 (N=3),
      rank(3) = 1.  ADG = 1/log2 3, ATOP = 1 - 1/2, REC@2 = 1, P@2 = 1/2, MAP = 1/2,
      NDCG = 1/log2 3, AUC = 1 - 1/2 (item 0 above, item 4 below), MRR = 1/2.
    """
    train = csr([[0, 0, 0, 0, 0, 1], [0, 0, 1, 0, 0, 1]])
    test = csr([[0, 1, 0, 1, 0, 0], [0, 0, 0, 1, 0, 0]])
    exclude = csr([[0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]])
    scores = np.array([[0.9, 0.5, 0.5, 0.1, 0.7, 2.0], [1.0] * 6])
    log2 = math.log2
    expected = {
        "ADG": [(1 / log2(5) + 1 / log2(6)) / 2, 1 / log2(3)],
        "ATOP": [0.125, 0.5],
        "REC@2": [0.0, 1.0],
        "MAP": [0.325, 0.5],
        "NDCG": [(1 / log2(5) + 1 / log2(6)) / (1 + 1 / log2(3)), 1 / log2(3)],
        "P@2": [0.0, 0.5],
        "AUC": [0.0, 0.5],
        "MRR": [0.25, 0.5],
    }
    return scores, train, test, exclude, expected


def test_hand_computed():
    scores, train, test, exclude, expected = hand_case()
    res = evaluate(lambda u: scores[u], train, test, exclude=exclude, k=2)
    np.testing.assert_array_equal(res.users, [0, 1])
    for name, values in expected.items():
        np.testing.assert_allclose(res.per_user[name], values, atol=1e-12, err_msg=name)
        assert res[name] == pytest.approx(np.mean(values), abs=1e-12)
        assert res.stderr[name] == pytest.approx(np.std(values, ddof=1) / np.sqrt(2), abs=1e-12)


def test_hand_computed_ranks():
    scores, train, test, exclude, _ = hand_case()
    ranks, n_cand = rank_test_items(scores, train, test, exclude, popularity=[0, 0, 1, 0, 0, 2])
    np.testing.assert_array_equal(ranks, [3, 4, 1])
    np.testing.assert_array_equal(n_cand, [5, 3])
    # Without the popularity tie-break, item 1 precedes item 2 in user 0's list.
    ranks, _ = rank_test_items(scores, train, test, exclude)
    np.testing.assert_array_equal(ranks, [2, 4, 1])


def test_single_candidate_and_all_relevant():
    # User 0: one candidate (ATOP defined as 1); user 1: every candidate relevant (AUC = 1).
    train = csr([[1, 1, 0], [1, 0, 0]])
    test = csr([[0, 0, 1], [0, 1, 1]])
    scores = np.array([[0.0, 0.0, -np.inf], [0.0, -1.0, 5.0]])
    res = evaluate(lambda u: scores[u], train, test, k=1)
    np.testing.assert_allclose(res.per_user["ATOP"], [1.0, 0.5])
    np.testing.assert_allclose(res.per_user["AUC"], [1.0, 1.0])
    np.testing.assert_allclose(res.per_user["NDCG"], [1.0, 1.0])
    np.testing.assert_allclose(res.per_user["MAP"], [1.0, 1.0])


# ----------------------------------------------------------------------------- API behaviour


class FactorModel:
    def __init__(self, seed, n_users, n_items):
        rng = np.random.default_rng(seed)
        self.U = rng.normal(size=(n_users, 4)).astype(np.float32)
        self.V = rng.normal(size=(n_items, 4)).astype(np.float32)

    def score(self, user_ids):
        return self.U[user_ids] @ self.V.T


@pytest.fixture(scope="module")
def medium():
    rng = np.random.default_rng(3)
    n_users, n_items = 120, 60
    cell = rng.random((n_users, n_items))
    train, test, exclude = csr(cell < 0.15), csr((cell >= 0.15) & (cell < 0.22)), csr(cell > 0.95)
    return FactorModel(1, n_users, n_items), train, test, exclude


def test_result_mapping_and_options(medium):
    model, train, test, exclude = medium
    res = evaluate(model, train, test, exclude=exclude)
    assert isinstance(res, EvaluationResult)
    assert list(res) == ["ADG", "ATOP", "REC@10", "MAP", "NDCG", "P@10", "AUC", "MRR"]
    assert dict(res) == {name: res[name] for name in res}
    assert all(v.shape == res.users.shape and v.dtype == np.float64 for v in res.per_user.values())
    assert res.users.dtype == np.int64
    assert np.all(np.diff(test[res.users].indptr) > 0)
    summary = res.to_dict()
    assert summary["means"] == dict(res) and summary["n_users"] == len(res.users) and summary["k"] == 10
    assert "ADG" in repr(res) and "n_users=" in repr(res)
    with pytest.raises(KeyError, match="available"):
        res["REC@5"]

    # Same numbers whatever the batch size, thread count, or model-vs-callable form.
    for kwargs in ({"batch_size": 1}, {"batch_size": 7, "num_threads": 1}, {"show_progress": True}):
        other = evaluate(model.score, train, test, exclude=exclude, **kwargs)
        for name in res:
            np.testing.assert_array_equal(other.per_user[name], res.per_user[name])

    # A subset of metrics, other cutoffs, case-insensitive names, restricted users.
    some = evaluate(model, train, test, exclude=exclude, metrics=("adg", "REC@5", "P", "REC@5"), k=3)
    assert list(some) == ["adg", "REC@5", "P@3"]  # the names as asked (the first spelling of each)
    np.testing.assert_array_equal(some.per_user["ADG"], res.per_user["ADG"])
    users = res.users[::3][::-1]
    sub = evaluate(model, train, test, exclude=exclude, users=np.r_[users, users])
    np.testing.assert_array_equal(sub.users, np.sort(users))
    np.testing.assert_array_equal(sub.per_user["MAP"], res.per_user["MAP"][::3])


def test_score_block_dtypes(medium):
    model, train, test, _exclude = medium
    ref = evaluate(model, train, test)
    as64 = evaluate(lambda u: model.score(u).astype(np.float64), train, test)
    assert dict(as64) == dict(ref)
    ints = evaluate(lambda u: np.round(model.score(u)).astype(np.int64), train, test)
    as_float_ints = evaluate(lambda u: np.round(model.score(u)).astype(np.float64), train, test)
    assert dict(ints) == dict(as_float_ints)


def test_score_fn_receives_int64_copies(medium):
    _model, train, test, _ = medium
    seen = []

    def score(u):
        seen.append(u.dtype)
        u[:] = 0  # mutating the argument must not affect the evaluation
        return np.zeros((len(u), train.shape[1]))

    res = evaluate(score, train, test, batch_size=50)
    assert set(seen) == {np.dtype(np.int64)}
    assert len(res.users) == np.count_nonzero(np.diff(test.indptr))


# ----------------------------------------------------------------------------- bad input


def test_bad_inputs(medium):
    model, train, test, exclude = medium
    n_users, n_items = train.shape
    with pytest.raises(ValueError, match="shape mismatch"):
        evaluate(model, train, test[:, :-1])
    with pytest.raises(ValueError, match="shape mismatch"):
        evaluate(model, train, test, exclude=exclude[:-1])
    with pytest.raises(ValueError, match="test and train share"):
        evaluate(model, train, test + train)
    with pytest.raises(ValueError, match="test and exclude share"):
        evaluate(model, train, test, exclude=test)
    with pytest.raises(ValueError, match="contain NaN"):
        evaluate(lambda u: np.where(np.arange(n_items) == 59, np.nan, 0.0) * np.ones((len(u), 1)), train, test)
    with pytest.raises(ValueError, match="must have shape"):
        evaluate(lambda u: np.zeros((len(u), n_items + 1)), train, test)
    with pytest.raises(ValueError, match="must have shape"):
        evaluate(lambda u: np.zeros(n_items), train, test)
    with pytest.raises(TypeError, match="real numbers"):
        evaluate(lambda u: np.full((len(u), n_items), "a"), train, test)
    with pytest.raises(TypeError, match="score"):
        evaluate(42, train, test)
    with pytest.raises(ValueError, match="out of range"):
        evaluate(model, train, test, users=[0, n_users])
    with pytest.raises(ValueError, match="nothing to evaluate"):
        evaluate(model, train, sp.csr_matrix(train.shape))
    without_user0 = sp.csr_matrix(sp.diags((np.arange(n_users) > 0).astype(float)) @ test)
    without_user0.eliminate_zeros()
    with pytest.raises(ValueError, match="nothing to evaluate: the test rows of the requested users"):
        evaluate(model, train, without_user0, users=[0])
    with pytest.raises(ValueError, match="unknown metric 'AUC@5'.*ADG"):
        evaluate(model, train, test, metrics=["AUC@5"])
    with pytest.raises(ValueError, match="unknown metric 'HIT'"):
        evaluate(model, train, test, metrics=["HIT"])
    with pytest.raises(ValueError, match="metrics is empty"):
        evaluate(model, train, test, metrics=[])
    with pytest.raises(ValueError, match=r"k=61 \(the cutoff of REC\) is larger than the catalogue"):
        evaluate(model, train, test, k=n_items + 1)
    assert list(evaluate(model, train, test, metrics=["ADG"], k=n_items + 1)) == ["ADG"]  # k unused
    with pytest.raises(ValueError, match="cutoff of 'REC@61'"):
        evaluate(model, train, test, metrics=["REC@61"])
    with pytest.raises(ValueError, match="k must be >= 1"):
        evaluate(model, train, test, k=0)
    with pytest.raises(ValueError, match="batch_size"):
        evaluate(model, train, test, batch_size=0)
    with pytest.raises(ValueError, match="no interactions"):
        evaluate(model, sp.csr_matrix(train.shape), test)
    with pytest.raises(ValueError, match="NaN"):
        evaluate(model, train.toarray() * np.nan, test)
    with pytest.raises(ValueError, match="popularity"):
        rank_test_items(np.zeros(train.shape), train, test, popularity=np.zeros(3))


def test_metric_names_documented():
    assert METRICS == ("ADG", "ATOP", "REC", "MAP", "NDCG", "P", "AUC", "MRR", "HR")


def test_metrics_from_ranks_matches_evaluate():
    # The kernel-level pair rank_test_items + metrics_from_ranks gives evaluate's table.
    scores, train, test, exclude, expected = hand_case()
    ranks, n_cand = rank_test_items(scores, train, test, exclude, popularity=[0, 0, 1, 0, 0, 2])
    table = _ranking.metrics_from_ranks(ranks, test.indptr.astype(np.int64), n_cand, np.arange(2), np.array([2]))
    columns = list(_ranking.BASE_METRICS) + [f"{m}@2" for m in _ranking.CUTOFF_METRICS]
    for name, values in expected.items():
        np.testing.assert_allclose(table[:, columns.index(name)], values, atol=1e-12, err_msg=name)


# ----------------------------------------------------------------------------- sparse scores


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_users=st.integers(1, 7),
    n_items=st.integers(2, 14),
    n_levels=st.integers(1, 3),
    n_chunks=st.integers(1, 3),
    version=st.sampled_from(["serial", "parallel"]),
)
def test_product_kernel_matches_brute_force(seed, n_users, n_items, n_levels, n_chunks, version):
    # Scores R @ B with few value levels and many zeros: ties among positive scores, test items
    # scoring 0 (ranked by popularity among the unscored candidates), non-candidates scoring 0 or > 0.
    _, train, test, exclude = random_case(seed, n_users, n_items, 2)
    rng = np.random.default_rng(seed)
    R = csr(rng.random((n_users, 5)) < 0.5)
    B = csr(rng.integers(0, n_levels + 1, size=(5, n_items)) * (rng.random((5, n_items)) < 0.4))
    scores = (R @ B).toarray()
    pop = np.asarray(train.sum(axis=0)).ravel()
    tiebreak = np.empty(n_items, np.int64)
    tiebreak[np.lexsort((np.arange(n_items), -pop))] = np.arange(n_items)
    users = np.flatnonzero(np.diff(test.indptr))
    parts = [(M[users].indptr, M[users].indices) for M in (train, test, exclude)]
    Ru = R[users]
    table = getattr(_ranking.evaluate_product_block, version)(
        Ru.indptr, Ru.indices, Ru.data, B.indptr, B.indices, B.data, tiebreak,
        *parts[0], *parts[1], *parts[2], np.array([2]), min(n_chunks, len(users)),
    )  # fmt: skip
    ref, ref_users, _ = brute_force(scores, train, test, exclude, k=2)
    np.testing.assert_array_equal(ref_users, users)
    columns = list(_ranking.BASE_METRICS) + [f"{m}@2" for m in _ranking.CUTOFF_METRICS]
    for name in ALL_KEYS:
        np.testing.assert_allclose(table[:, columns.index(name)], ref[name], rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.ItemKNN(k=8),
        lambda m: m.UserKNN(k=8),
        lambda m: m.KUNN(k=8, side="item"),
        lambda m: m.KUNN(k=8, side="user"),
        lambda m: m.RP3beta(k=8),
        lambda m: m.SLIM(k=8),
    ],
)
def test_evaluate_ranks_sparse_products_like_dense_scores(make, medium):
    # evaluate(model) ranks a neighbourhood model's sparse score product; the same model's dense
    # scores through a plain callable give the same table bit for bit.
    from recsys_ltr import models

    _, train, test, exclude = medium
    model = make(models).fit(train)
    assert model.score_product(np.arange(3)) is not None
    sparse = evaluate(model, train, test, exclude=exclude, batch_size=7)
    dense = evaluate(lambda u: model.score(u), train, test, exclude=exclude, batch_size=7)
    for key in sparse:
        np.testing.assert_array_equal(sparse.per_user[key], dense.per_user[key], err_msg=key)


def test_at_k_metrics_equal_implicits_ranking_metrics_at_k():
    """NDCG@10 and MAP@10 are implicit's ``ranking_metrics_at_k(K=10)`` on the same scores and split
    (implicit normalises MAP by ``min(K, |test|)`` and NDCG's ideal by the same count, as here)."""
    from implicit.cpu.als import AlternatingLeastSquares
    from implicit.evaluation import ranking_metrics_at_k

    from recsys_ltr import datasets, split
    from recsys_ltr.models import ALS

    X = datasets.make_synthetic(n_users=300, n_items=120, factor_scale=3.0, random_state=0).matrix
    train, _, test = split.holdout(X, val=0.0, test=0.3, random_state=0)
    fitted = ALS(factors=8, iterations=5, random_state=0, num_threads=1).fit(train)
    peer = AlternatingLeastSquares(factors=8)
    peer.user_factors = fitted.user_factors_.astype(np.float32)  # implicit ranks float32 scores
    peer.item_factors = fitted.item_factors_.astype(np.float32)
    theirs = ranking_metrics_at_k(peer, train, test, K=10, show_progress=False)
    ours = evaluate(
        lambda u: (peer.user_factors[u] @ peer.item_factors.T).astype(np.float64),
        train, test, metrics=["NDCG@10", "MAP@10"], show_progress=False,
    )  # fmt: skip
    assert ours["NDCG@10"] == pytest.approx(theirs["ndcg"], abs=1e-12)
    assert ours["MAP@10"] == pytest.approx(theirs["map"], abs=1e-12)


@pytest.mark.parametrize("name", ["ALS", "ItemKNN", "EASE"])
def test_an_unfitted_model_is_not_fitted_error(name):
    from sklearn.exceptions import NotFittedError

    from recsys_ltr import models

    train = sp.csr_matrix(np.eye(4))
    with pytest.raises(NotFittedError, match="not fitted"):
        evaluate(getattr(models, name)(), train, sp.csr_matrix(np.roll(np.eye(4), 1, axis=1)))
