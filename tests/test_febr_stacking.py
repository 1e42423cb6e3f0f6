"""Stacked FEBR: base features against a brute-force reference, the stacking analogue of Theorem
4.3, leak-free labels (a memoriser base), K-fold labels, LambdaMART trees, save/load, bad input."""

import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import brute_top_n, resave
from hypothesis import given, settings
from hypothesis import strategies as st
from test_febr import block_feedback

from recsys_ltr.datasets import make_synthetic
from recsys_ltr.febr import FEBR, AffinityFEBR, stacking
from recsys_ltr.febr.bases import CHEBY_POSITIVES, GRAPH_PAIRS, ITEM_PAIRS, SLIM_ITEMS, USER_PAIRS, named_bases
from recsys_ltr.febr.scoring import _compose_kernel, compose, head_key, tail_scores
from recsys_ltr.febr.stacking import (
    BaseFeatures,
    Pool,
    candidate_moments,
    concatenate_pools,
    feature_names,
    heads,
    pool_relevance,
    stacked_scores,
    with_items,
    z_column,
)
from recsys_ltr.febr.validation import MIN_CONFIRMATION_USERS, draw_samples
from recsys_ltr.ltr.trees import Trees, fit_lambdamart, predict_trees
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import EASE, KUNN, ItemKNN, Popularity, UserKNN
from recsys_ltr.models.base import Recommender
from recsys_ltr.split import holdout

pytestmark = pytest.mark.kernels


@pytest.fixture(scope="module")
def planted():
    return holdout(block_feedback(users=40, items=20), val=0.2, test=0.2, random_state=0)


def fast(**kw):
    params = dict(max_iter=4000, eval_every=1000, learning_rate=0.01, random_state=0, num_threads=1, candidates=20)
    return FEBR(**{**params, "validation_metric": "ADG", **kw})  # the decisions' tests below read ADG


class Planted(Recommender):
    """A base with nothing to learn: its scores are planted by ``_score_rows``."""

    def __init__(self, num_threads=0, show_progress=None):
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _fit(self, X):
        pass


class Memoriser(Planted):
    """Scores exactly its training positives 1, everything else 0."""

    def _score_rows(self, rows, ids, recalculate):
        return rows.toarray()


# ------------------------------------------------------------------------------ features
def reference_heads(S, rows, labels, context, popularity, n_top):
    """Per user: {item: (features, is_label)} of the head, written from the module docstring."""
    B, nb, n = S.shape
    out = []
    for r in range(B):
        known = set(rows[r].indices)
        cand = [i for i in range(n) if i not in known]
        tops = []
        for b in range(nb):
            ranked = sorted(cand, key=lambda i, b=b: (-S[r, b, i], -popularity[i], i))
            tops.append(set(ranked[:n_top]))
        head = sorted(set().union(*tops))
        feats = {}
        for i in head:
            phi = []
            for b in range(nb):
                values = S[r, b, cand]
                mu, sd = values.mean(), values.std()
                sd = sd if sd > 1e-12 * max(1.0, abs(mu)) else 1.0
                above = sum(S[r, b, j] > S[r, b, i] for j in head)
                phi += [(S[r, b, i] - context.mean[b]) / context.scale[b], (S[r, b, i] - mu) / sd]
                phi.append(1 / np.log2(2 + above))
            act = context.activity([len(known)])[0]
            phi += [context.pop[i], act, sum(i in t for t in tops) / nb]
            feats[i] = (np.array(phi), i in set(labels[r].indices))
        out.append(feats)
    return out


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 4),  # users
    st.integers(1, 3),  # bases
    st.integers(3, 9),  # items
    st.integers(1, 4),  # n_top
    st.integers(0, 2**31 - 1),
)
def test_heads_match_brute_force(B, nb, n, n_top, seed):
    rng = np.random.default_rng(seed)
    S = rng.integers(0, 4, size=(B, nb, n)).astype(np.float64)  # small integers: ties everywhere
    R = (rng.random((B, n)) < 0.3).astype(float)
    R[:, 0] = 0  # at least one candidate
    L = ((rng.random((B, n)) < 0.3) & (R == 0)).astype(float)
    rows, labels = sp.csr_matrix(R), sp.csr_matrix(L)
    context = BaseFeatures(rng.normal(size=nb), rng.random(nb) + 0.5, rng.normal(size=n), np.array([0.3, 1.7]))
    popularity = rng.integers(0, 3, n).astype(np.float64)
    items, phi, label, counts = heads(S, rows, labels, context, popularity, n_top)
    for r, expected in enumerate(reference_heads(S, rows, labels, context, popularity, n_top)):
        assert list(items[r, : counts[r]]) == sorted(expected)
        for p, i in enumerate(items[r, : counts[r]]):
            np.testing.assert_allclose(phi[r, p], expected[i][0], rtol=1e-12, atol=1e-12)
            assert label[r, p] == expected[i][1]


@pytest.mark.kernels
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 9), st.integers(0, 2**31 - 1))
def test_compose_swaps_head_places_like_brute_force(B, nb, n, seed):
    rng = np.random.default_rng(seed)
    S = rng.integers(0, 4, size=(B, nb, n)).astype(np.float64)  # ties in places and keys
    tail = int(rng.integers(nb))
    head = [np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False)) for _ in range(B)]
    items = np.concatenate(head).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum([h.size for h in head])]).astype(np.int64)
    key = rng.integers(0, 3, items.size).astype(np.float64)
    out = _compose_kernel(S[:, tail, :], offsets, items, key)
    for r, its in enumerate(head):
        expected = S[r, tail].copy()
        places = expected[its]
        by_place = sorted(range(its.size), key=lambda j: (-places[j], its[j]))
        k = key[offsets[r] : offsets[r + 1]]
        by_key = sorted(range(its.size), key=lambda j: (-k[j], -places[j], j))
        for a, b in zip(by_key, by_place):
            expected[its[a]] = places[b]
        runs = {}  # tied places: spread in key order (equal keys stay tied) down to the next lower tail score
        for a, b in zip(by_key, by_place):
            runs.setdefault(places[b], []).append(a)
        for v, members in runs.items():
            distinct = sorted({k[a] for a in members}, reverse=True)
            if len(distinct) > 1 and np.isfinite(v):
                below = S[r, tail][S[r, tail] < v]
                step = (v - below.max()) / len(distinct) if below.size else 1.0
                for a in members:
                    expected[its[a]] = v - distinct.index(k[a]) * step
        np.testing.assert_array_equal(out[r], expected)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(2, 8), st.integers(0, 2**31 - 1))
def test_candidate_moments_match_numpy(B, n, seed):
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(B, n))
    R = sp.csr_matrix((rng.random((B, n)) < 0.4).astype(float))
    mu, sigma = candidate_moments(S, R.indptr, R.indices)
    for r in range(B):
        cand = np.setdiff1d(np.arange(n), R[r].indices)
        if cand.size:
            assert mu[r] == pytest.approx(S[r, cand].mean(), abs=1e-12)
            assert sigma[r] == pytest.approx(S[r, cand].std() if cand.size > 1 else 1.0, abs=1e-9)


@pytest.mark.kernels
@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(2, 9), st.integers(0, 2**31 - 1))
def test_tail_scores_are_one_base_or_the_weighted_mean_of_standardised_scores(B, nb, n, seed):
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(B, nb, n)).astype(np.float32)
    R = sp.csr_matrix((rng.random((B, n)) < 0.4).astype(float))
    weights = np.where(rng.random(nb) < 0.6, rng.random(nb), 0.0)
    weights[int(rng.integers(nb))] = 0.5  # at least one base
    T = tail_scores(S, R, weights)
    if np.count_nonzero(weights) == 1:  # that base's scores as they are
        np.testing.assert_array_equal(T, S[:, int(np.argmax(weights)), :])
        return
    for r in range(B):
        cand = np.setdiff1d(np.arange(n), R[r].indices)
        expected = np.zeros(n)
        for b in np.flatnonzero(weights):
            v = S[r, b].astype(np.float64)
            sd = v[cand].std() if cand.size else 0.0
            expected += weights[b] * (v - (v[cand].mean() if cand.size else 0.0)) / (sd if sd > 1e-12 else 1.0)
        np.testing.assert_allclose(T[r], expected, rtol=1e-9, atol=1e-9)


def test_concatenated_pools_are_queries_in_turn():
    a = Pool(
        np.array([0, 2, 3], np.int32),
        np.array([1, 4, 0], np.int32),
        np.arange(6.0).reshape(3, 2),
        np.array([1, 0, 1], bool),
    )
    b = Pool(np.array([0, 1, 1], np.int32), np.array([2], np.int32), np.array([[9.0, 9.0]]), np.array([0], bool))
    c = concatenate_pools([a, b])
    assert c.indptr.tolist() == [0, 2, 3, 4, 4]
    assert c.items.tolist() == [1, 4, 0, 2] and c.label.tolist() == [True, False, True, False]
    relevant, irrelevant = pool_relevance(c, 5)
    assert relevant.shape == (4, 5) and relevant.toarray()[0].tolist() == [0, 1, 0, 0, 0]
    assert irrelevant.toarray()[2].tolist() == [0, 0, 1, 0, 0]
    assert feature_names(["A"]) == ["A_raw", "A_z", "A_rr", "pop", "act", "votes"] and z_column(1) == 4


def test_pool_statistics_in_blocks_equal_numpy(monkeypatch):
    phi = np.random.default_rng(4).normal(size=(53, 4)) * [1.0, 3.0, 0.0, 2.0] + 5.0
    monkeypatch.setattr(stacking, "rows_per_block", lambda row_bytes: 7)  # 8 blocks, the last one short
    mean, scale = Pool(None, None, phi, None).statistics()
    np.testing.assert_allclose(mean, phi.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(scale, [*phi.std(axis=0)[:2], 1.0, phi.std(axis=0)[3]], rtol=1e-12)


def test_concatenate_releasing_equals_concatenate_and_empties_its_list():
    chunks = [np.arange(6.0).reshape(3, 2), np.zeros((0, 2)), np.ones((2, 2))]
    expected = np.concatenate(chunks)
    np.testing.assert_array_equal(stacking.concatenate_releasing(chunks), expected)
    assert chunks == []


# ------------------------------------------------------------------------------ the model
def test_one_base_gives_its_ranking_exactly(planted):
    """The stacking analogue of Theorem 4.3: with the weight on one base's score, FEBR ranks as it."""
    train, val, _ = planted
    users = np.arange(train.shape[0])
    for bases in ([ItemKNN(k=10)], [UserKNN(k=10), EASE(regularization=50.0), Popularity()]):
        model = fast(bases=bases, max_iter=0, fallback_p=None).fit(train, validation=val)
        tail = model.bases_[int(np.argmax(model.tail_weights_))]
        assert np.count_nonzero(model.tail_weights_) == 1  # without the test, no tie: the best alone
        np.testing.assert_array_equal(model.score(users), tail.score(users))
        ids, _ = model.recommend(users, train[users], N=10)
        expected, _ = tail.recommend(users, train[users], N=10)
        np.testing.assert_array_equal(ids, expected)


def test_tail_base_is_the_best_on_validation_and_never_beaten(planted):
    train, val, _ = planted
    model = fast(bases=[UserKNN(k=10), ItemKNN(k=10), Popularity()]).fit(train, validation=val)
    base_adg = model.history_[0]["base_val_adg"]  # over every validation user (159: some held out)
    assert model.tail_gain_ is None and np.count_nonzero(model.tail_weights_) == 1
    assert model.base_names_[int(np.argmax(model.tail_weights_))] == max(base_adg, key=base_adg.get)
    start = model.history_[1]["val_adg"]  # the tail base alone on the selection sample
    assert max(h["val_adg"] for h in model.history_[1:] if "val_adg" in h) >= start


def memoriser_weight(model):
    """Largest |theta| on the memoriser's features (base 1) relative to the item-p base's (base 0)."""
    theta = np.abs(model.coef_)
    return theta[3:6].max(), theta[0:3].max()


def test_memoriser_gets_no_weight_leak_free_and_dominates_with_leakage(planted):
    train, val, _ = planted
    common = dict(init="zeros", max_iter=6000, validation_fraction=0.0)  # no validation: the last model
    alone = fast(bases=[ItemKNN(k=10)], **common).fit(train)
    clean = fast(bases=[ItemKNN(k=10), Memoriser()], **common).fit(train)
    leaky = fast(bases=[ItemKNN(k=10), Memoriser()], holdout=0.0, **common).fit(train)
    mem, knn = memoriser_weight(clean)
    assert mem == 0.0 and knn > 0  # its scores are constant on every training pair: no gradient
    # equal within noise (2 standard errors of the paired difference; the memoriser's top list, the
    # most popular candidates, still enters the head and the votes feature)
    a, c = (evaluate(m, train, val, metrics=["ADG"]).per_user["ADG"] for m in (alone, clean))
    assert abs(np.mean(c - a)) <= 2 * np.std(c - a) / np.sqrt(a.size)
    mem, knn = memoriser_weight(leaky)
    assert mem > 2 * knn  # trained on X itself, the memoriser separates every label


def test_kfold_labels_use_every_part(planted, monkeypatch):
    train, val, _ = planted
    from recsys_ltr.febr import bases as febr_bases

    seen = []
    original = febr_bases.build_pool

    def spy(bases, context, X, labels, *args, **kwargs):
        seen.append((X.nnz, labels.nnz))
        return original(bases, context, X, labels, *args, **kwargs)

    monkeypatch.setattr(febr_bases, "build_pool", spy)
    fast(bases=[ItemKNN(k=10)], holdout=4).fit(train, validation=val)
    training = seen[:4]
    assert sum(labels for _, labels in training) == train.nnz - sum(  # every positive but the lone ones
        1 for u in range(train.shape[0]) if train[u].nnz == 1
    )
    assert all(x + labels == train.nnz for x, labels in training)


def test_seed_and_one_thread_reproduce(planted):
    train, val, _ = planted
    a = fast(bases=[ItemKNN(k=10), UserKNN(k=10)]).fit(train, validation=val)
    b = fast(bases=[ItemKNN(k=10), UserKNN(k=10)]).fit(train, validation=val)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.score([0, 5]), b.score([0, 5]))


def test_auto_bases_on_a_small_catalogue(planted, tmp_path):
    train, val, _ = planted
    model = fast(max_iter=1000, fallback_p=None).fit(train, validation=val)  # the scorer kept: every base
    assert model.base_names_ == ["EASE", "GF-CF", "ChebyCF", "ALS", "RP3beta", "KUNN", "user-p", "item-p", "SLIM"]
    loaded = Recommender.load(model.save(tmp_path / "auto.npz"))  # the fitted names round-trip
    for name in ("base_names_", "feature_names_", "tail_bases_"):
        assert getattr(loaded, name) == getattr(model, name), name
    assert [type(b) for b in loaded.bases_] == [type(b) for b in model.bases_]
    assert all((b.user_items_ != model.user_items_).nnz == 0 for b in model.bases_)  # refitted on all of X
    assert model.coef_.shape == (3 * 9 + 3,)


def test_auto_bases_follow_the_catalogue_size():
    """fsSLIM is stacked up to SLIM_ITEMS items; the command line's stacked methods stack the same rows."""
    from recsys_ltr.eval.methods import get_method
    from recsys_ltr.febr.bases import Workload, resolve_bases

    small, _ = resolve_bases("auto", sp.csr_matrix((50, SLIM_ITEMS)))
    large, _ = resolve_bases("auto", sp.csr_matrix((50, SLIM_ITEMS + 1)))
    assert small == ["EASE", "GF-CF", "ChebyCF", "ALS", "RP3beta", "KUNN", "user-p", "item-p", "SLIM"]
    assert large == small[:-1]
    stack = get_method("FEBR-stack")
    assert list(stack.stacked(Workload(SLIM_ITEMS, 0, 0, 0))) == small
    assert list(stack.stacked(Workload(SLIM_ITEMS + 1, 0, 0, 0))) == large


@pytest.mark.parametrize(
    ("user_pairs", "item_pairs", "positives", "left_out"),
    [
        (USER_PAIRS, ITEM_PAIRS, CHEBY_POSITIVES, []),
        (USER_PAIRS + 1, ITEM_PAIRS, CHEBY_POSITIVES, ["KUNN", "user-p"]),
        (USER_PAIRS, ITEM_PAIRS + 1, CHEBY_POSITIVES, ["EASE"]),
        (USER_PAIRS, GRAPH_PAIRS, CHEBY_POSITIVES, ["EASE"]),
        (USER_PAIRS, ITEM_PAIRS, CHEBY_POSITIVES + 1, ["ChebyCF"]),
        (USER_PAIRS, GRAPH_PAIRS + 1, CHEBY_POSITIVES, ["EASE", "GF-CF", "ChebyCF"]),
        (USER_PAIRS + 1, GRAPH_PAIRS + 1, CHEBY_POSITIVES + 1, ["EASE", "GF-CF", "ChebyCF", "KUNN", "user-p"]),
    ],
)
def test_auto_bases_leave_out_the_bases_past_their_cost_limit(user_pairs, item_pairs, positives, left_out):
    """Past USER_PAIRS the user-side neighbourhoods are left out, past ITEM_PAIRS EASE, past GRAPH_PAIRS GF-CF
    and ChebyCF, past CHEBY_POSITIVES ChebyCF, in FEBR and in the command line's stacked methods alike."""
    from recsys_ltr.eval.methods import get_method
    from recsys_ltr.febr.bases import Workload, auto_bases

    every = ["EASE", "GF-CF", "ChebyCF", "ALS", "RP3beta", "KUNN", "user-p", "item-p"]
    workload = Workload(SLIM_ITEMS + 1, float(user_pairs), float(item_pairs), positives)
    kept = [b.name for b in auto_bases(workload)]
    assert kept == [n for n in every if n not in left_out]
    assert list(get_method("FEBR-stack").stacked(workload)) == kept


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_workload_counts_the_pairs_of_both_sides(n_users, n_items, density, seed):
    """Workload.of against the pairs counted one by one: (u, v, i) with u, v users of item i, and
    (i, j, u) with i, j items of user u."""
    from recsys_ltr.febr.bases import Workload

    X = sp.random(n_users, n_items, density=density, format="csr", random_state=seed)
    X.data[:] = 1.0
    D = X.toarray()
    user_pairs = sum(D[u, i] * D[v, i] for u in range(n_users) for v in range(n_users) for i in range(n_items))
    item_pairs = sum(D[u, i] * D[u, j] for u in range(n_users) for i in range(n_items) for j in range(n_items))
    assert Workload.of(X) == (n_items, user_pairs, item_pairs, X.nnz)


def test_a_refit_keeps_the_bases_chosen_on_the_training_split(planted, monkeypatch):
    """The cost limits are read on the split FEBR trains on; the refit on all of X refits the same
    bases where X itself passes a limit."""
    import recsys_ltr.febr.bases as bases_module

    train, _, _ = planted
    limit = bases_module.Workload.of(train).user_pairs - 1  # above the carved training split's pairs
    capped = tuple(b._replace(max_user_pairs=limit) if b.max_user_pairs else b for b in bases_module.AUTO_BASES)
    monkeypatch.setattr(bases_module, "AUTO_BASES", capped)
    assert "KUNN" not in bases_module.resolve_bases("auto", train)[0]
    model = fast(max_iter=1000, fallback_p=None).fit(train)  # the scorer kept: every base
    assert model.base_names_ == ["EASE", "GF-CF", "ChebyCF", "ALS", "RP3beta", "KUNN", "user-p", "item-p", "SLIM"]
    kinds = ["EASE", "GFCF", "ChebyCF", "ALS", "RP3beta", "KUNN", "UserKNN", "ItemKNN", "SLIM"]
    assert [type(b).__name__ for b in model.bases_] == kinds
    assert all((b.user_items_ != train).nnz == 0 for b in model.bases_)  # refitted on all of X


@pytest.mark.parametrize(("n_items", "users"), [(285, 2**21 // 285), (1024, 2048), (17_632, 1000)])
def test_auto_validation_users_grow_on_small_catalogues(n_items, users):
    assert fast()._validation_limit(n_items) == users
    assert fast(validation_users=7)._validation_limit(n_items) == 7
    assert fast(validation_users=None)._validation_limit(n_items) is None


def test_carved_validation_and_refit(planted):
    train, _, _ = planted
    model = fast(bases=[ItemKNN(k=10)], validation_fraction=0.2).fit(train)
    assert model.bases_[0].user_items_.nnz == train.nnz  # refitted on all of X
    assert model.history_[0]["base_val_adg"]


def _trained_on(monkeypatch, model, X, validation):
    """``(X_fit, validation)`` that ``model.fit`` hands to its training."""
    seen = {}

    def spy(self, X_fit, validation, final, rng, bar):
        seen.update(X_fit=X_fit, validation=validation)
        raise StopIteration

    monkeypatch.setattr(type(model), "_train", spy)
    with pytest.raises(StopIteration):
        model.fit(X, validation=validation)
    return seen["X_fit"], seen["validation"]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), covered=st.floats(0.0, 1.0), top=st.sampled_from([None, 3]))
def test_users_the_validation_leaves_out_are_validated_on_a_carve_of_their_own(seed, covered, top):
    rng = np.random.default_rng(seed)
    X = sp.random(60, 25, density=0.25, format="csr", random_state=rng, data_rvs=lambda n: np.ones(n))
    X, V, _ = holdout(X, val=0.2, test=0.0, random_state=seed)
    keep = rng.random(60) < covered
    keep[np.argmax(np.diff(V.indptr))] = True  # a validation matrix is not empty
    V = sp.diags(keep.astype(float)) @ V  # the others: no validation positive
    V.eliminate_zeros()
    model = fast(validation_fraction=0.3, label_exclude_top=top, random_state=seed)
    with pytest.MonkeyPatch.context() as mp:
        X_fit, validation = _trained_on(mp, model, X, V)
    carved = X - X_fit
    assert carved.min() >= 0 and (X_fit.multiply(carved)).nnz == 0  # a part of X, taken out of it
    assert (validation - V - carved).nnz == 0 and validation.has_canonical_format
    covered_users = np.diff(V.indptr) > 0
    assert np.diff(carved.indptr)[covered_users].sum() == 0  # only the users the matrix leaves out
    ranked = np.ones(X.shape[1])
    ranked[model.excluded_items_] = 0.0
    eligible = sp.csr_matrix(X @ sp.diags(ranked))
    eligible.eliminate_zeros()
    assert not np.isin(carved.indices, model.excluded_items_).any()  # drawn as the labels are
    from_users = np.diff(carved.indptr) > 0
    assert np.all(np.diff((eligible - carved).tocsr().indptr)[from_users] >= 1)  # one eligible positive kept
    expected = 0.3 * np.diff(X.indptr)[~covered_users]
    assert np.diff(carved.indptr)[~covered_users].sum() <= expected.sum() + (~covered_users).sum()


def test_a_validation_of_every_user_leaves_the_fit_as_it_was(planted):
    train, val, _ = planted
    train = sp.csr_matrix(sp.diags((np.diff(val.indptr) > 0).astype(float)) @ train)  # every user validated
    train.eliminate_zeros()
    fitted = [
        fast(bases=[ItemKNN(k=10), UserKNN(k=10)], validation_fraction=f).fit(train, validation=val) for f in (0.0, 0.3)
    ]
    np.testing.assert_array_equal(fitted[0].coef_, fitted[1].coef_)
    assert fitted[0].history_ == fitted[1].history_


def test_the_tail_is_chosen_on_the_users_the_validation_leaves_out_too():
    """msweb's case, planted: a validation split rounded half up holds out of the active users
    only; base ``Oracle(light=False)`` knows their positives, ``Oracle(light=True)`` those of the light
    users, three times as many.  On the matrix alone the tail is the first; with the light users'
    carve it is the second, the better on every user."""
    rng = np.random.default_rng(0)
    n_users, n_items = 400, 40
    light = np.arange(n_users) >= 100  # 100 active users (12 positives), 300 light ones (3)
    activity = np.where(light, 3, 12)
    rows = np.repeat(np.arange(n_users), activity)
    cols = np.concatenate([rng.choice(n_items, a, replace=False) for a in activity])
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_users, n_items))
    full = X.toarray()
    train, val, _ = holdout(X, val=0.1, test=0.0, random_state=0)  # half up: nothing of the light users
    assert np.diff(val.indptr)[light].sum() == 0

    class Oracle(Planted):
        def __init__(self, light=True, num_threads=0, show_progress=None):
            super().__init__(num_threads, show_progress)
            self.light = light

        def _score_rows(self, rows, ids, recalculate):
            knows = (light[ids] == self.light)[:, None]
            return np.where(knows, full[ids], 0.0) + Noise()._score_rows(rows, ids, recalculate) / 2

    def tail(fraction):
        bases = [("active", Oracle(light=False)), ("light", Oracle(light=True))]
        model = fast(bases=bases, validation_fraction=fraction, fallback_p=None, max_iter=200, eval_every=100)
        return model.fit(train, validation=val).history_[0]["base_val_adg"]

    alone, every = tail(0.0), tail(0.3)
    assert alone["active"] > alone["light"]
    assert every["light"] > every["active"]


def test_fitted_base_is_reused(planted):
    train, val, _ = planted
    knn = ItemKNN(k=10).fit(train)
    model = fast(bases=[knn, UserKNN(k=10)], fallback_p=None).fit(train, validation=val)
    assert model.bases_[0] is knn
    held_out = fast(bases=[knn, UserKNN(k=10)], fallback_p=None).fit(
        train
    )  # validation held out of train: the refit reuses it
    assert held_out.bases_[0] is knn and held_out.bases_[1].user_items_ is held_out.user_items_


@pytest.mark.parametrize("scorer", ["linear", "lambdamart"])
def test_save_load_round_trip(tmp_path, planted, scorer):
    train, val, _ = planted
    model = fast(bases=[ItemKNN(k=10), KUNN(k=10)], scorer=scorer, fallback_p=None).fit(train, validation=val)
    path = tmp_path / "febr.npz"
    model.save(path)
    loaded = Recommender.load(path)
    users = np.arange(train.shape[0])
    np.testing.assert_array_equal(loaded.score(users), model.score(users))
    assert (loaded.trees_ is None) == (scorer == "linear")
    assert loaded.base_names_ == ["ItemKNN", "KUNN"]


def test_bases_named_by_pairs_and_their_checks(tmp_path, planted):
    """``(name, recommender)`` pairs name the features and the tail; the names are saved; a name
    twice, an empty name or a pair of the wrong kind is refused naming the problem."""
    train, val, _ = planted
    bases = [("near", ItemKNN(k=10)), UserKNN(k=10), ("far", ItemKNN(k=30))]
    model = fast(bases=bases, fallback_p=None).fit(train, validation=val)
    assert model.base_names_ == ["near", "UserKNN", "far"]
    assert model.feature_names_[:3] == ["near_raw", "near_z", "near_rr"]
    loaded = Recommender.load(model.save(tmp_path / "named.npz"))
    assert (loaded.base_names_, loaded.feature_names_, loaded.tail_bases_) == (
        model.base_names_,
        model.feature_names_,
        model.tail_bases_,
    )
    assert fast(bases=[ItemKNN(k=10), ItemKNN(k=20)])._nested_templates()[1].k == 20
    assert [n for n, _ in named_bases([ItemKNN(), ItemKNN(), UserKNN()])] == ["ItemKNN", "ItemKNN1", "UserKNN"]
    for bases, error, match in (
        ([("a", ItemKNN()), ("a", UserKNN())], ValueError, "names must differ"),
        ([("", ItemKNN())], TypeError, "non-empty str"),
        ([(3, ItemKNN())], TypeError, "non-empty str"),
        ([("a", "ItemKNN")], TypeError, "recommenders"),
        ([("a", FEBR())], TypeError, "cannot be a base"),
    ):
        with pytest.raises(error, match=match):
            FEBR(bases=bases).fit(train)


def test_lambdamart_reranks_and_reports(planted):
    train, val, _ = planted
    model = fast(bases=[ItemKNN(k=10), UserKNN(k=10)], scorer="lambdamart", fallback_p=None)
    model.fit(train, validation=val)
    tried = [h for h in model.history_ if h["iteration"] == "lambdamart"]
    assert len(tried) == 2 and model.lambdamart_iterations_ >= 1
    assert model.trees_ is not None
    one = fast(bases=[ItemKNN(k=10)], scorer="lambdamart", lambdamart_params={"num_leaves": 3, "n_estimators": 5})
    one.set_params(fallback_p=None)
    one.fit(train, validation=val)
    assert one.lambdamart_iterations_ <= 5 and one.trees_.roots.size <= 5


# ------------------------------------------------------------------------------ trees
def test_flattened_trees_predict_as_lightgbm():
    lightgbm = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    groups = np.full(30, 10)
    trees, rounds = fit_lambdamart((X, y, groups), None, {"num_iterations": 20, "num_leaves": 5}, 0, 1)
    booster = lightgbm.train(
        {"objective": "lambdarank", "num_leaves": 5, "learning_rate": 0.05, "min_data_in_leaf": 20,
         "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8, "verbosity": -1, "seed": 0,
         "num_threads": 1, "deterministic": True, "force_row_wise": True},
        lightgbm.Dataset(X, y, group=groups),
        num_boost_round=20,
    )  # fmt: skip
    assert rounds == 20
    Z = rng.normal(size=(100, 5))
    np.testing.assert_allclose(predict_trees(trees, Z), booster.predict(Z), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(feature=[5, -1, -1]), "features in"),
        (dict(left=[7, -1, -1]), "node ids"),
        (dict(left=[0, -1, -1]), "follow their parent"),
        (dict(threshold=[np.nan, 0, 0]), "finite"),
        (dict(roots=[3]), "node ids"),
    ],
)
def test_bad_trees_are_refused(change, match):
    arrays = dict(
        feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1], value=[0, 1, 2], roots=[0]
    )
    arrays.update(change)
    with pytest.raises(ValueError, match=match):
        Trees.from_arrays([np.array(arrays[k]) for k in ("feature", "threshold", "left", "right", "value", "roots")], 5)


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(bases="all"), TypeError, "bases must be"),
        (dict(bases=[]), TypeError, "bases must be"),
        (dict(bases=[FEBR()]), TypeError, "cannot be a base"),
        (dict(bases=[ItemKNN()], affinity="cosine"), TypeError, "unexpected keyword argument 'affinity'"),
        (dict(scorer="trees"), ValueError, "scorer must be"),
        (dict(init="sum"), ValueError, "init must be one of"),
        (dict(holdout=1), ValueError, "holdout must be >= 2"),
        (dict(holdout=1.5), ValueError, "holdout must be"),
        (dict(candidates=0), ValueError, "candidates must be"),
        (dict(label_exclude_top=80), ValueError, "leaves no item"),
        (dict(lambdamart_params=[("a", 1)]), TypeError, "lambdamart_params"),
        (dict(lambdamart_params={"num_leave": 7}), ValueError, "not LightGBM parameters: 'num_leave' .*'num_leaves'"),
        (dict(lambdamart_params={"bogus": 1}), ValueError, "not LightGBM parameters: 'bogus'"),
        (dict(refit=1), TypeError, "refit must be a bool"),
        (dict(training_users=0), ValueError, "training_users must be"),
        (dict(training_users="all"), ValueError, "training_users must be a positive int, 'auto' or None"),
        (dict(training_users=2.5), TypeError, "training_users"),
    ],
)
def test_bad_parameters(planted, params, error, match):
    train, _, _ = planted
    with pytest.raises(error, match=match):
        fast(**{"bases": [ItemKNN(k=5)], **params}).fit(train)


def test_the_two_febrs_refuse_each_others_parameters(planted):
    """One class, one estimator: the dissertation's parameters are AffinityFEBR's, the stacked ones FEBR's."""
    train, _, _ = planted
    for params in (dict(side="both"), dict(k=5), dict(affinity_params={"bogus": 1})):
        with pytest.raises(TypeError, match="unexpected keyword"):
            FEBR(**params)
    for params in (dict(bases=[ItemKNN()]), dict(scorer="lambdamart"), dict(candidates=10)):
        with pytest.raises(TypeError, match="unexpected keyword"):
            AffinityFEBR(**params)
    with pytest.raises(ValueError, match="holdout must be a finite number"):
        AffinityFEBR(holdout=3, k=5).fit(train)  # out-of-fold labels are stacked FEBR's
    with pytest.raises(TypeError, match="bases must be"):
        FEBR(bases=None).fit(train)


def test_set_params_after_fit_leaves_the_answers_alone(planted):
    """The head size is read from the fitted parameters: ``set_params(candidates=...)`` after fit
    changes nothing, while the same change made before scoring a fitted model would (checked on a
    scorer that disagrees with the tail base, so the head's size matters)."""
    train, val, _ = planted
    m = fast(bases=[ItemKNN(k=10), UserKNN(k=10)], candidates=15, max_iter=0).fit(train, validation=val)
    m.coef_[:] = -m.coef_ - 0.1  # the head reversed against the tail base: its size shows in the ranking
    users = np.arange(train.shape[0])
    before = m.score(users)
    m.set_params(candidates=2)
    np.testing.assert_array_equal(m.score(users), before)
    m.params_["candidates"] = 2  # what a model reading its parameters at prediction would see
    assert not np.array_equal(m.score(users), before)


def test_the_default_fit_validates_x_once(planted, monkeypatch):
    """``FEBR().fit(X)``: ``X`` goes through ``check_feedback`` once, at the boundary; the bases are
    fitted and scored on the validated matrix (and its parts) without a check or copy."""
    import sys

    from recsys_ltr import _validation

    calls, original = [], _validation.check_feedback

    def counting(X, *args, **kwargs):
        calls.append(X)
        return original(X, *args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("recsys_ltr") and getattr(module, "check_feedback", None) is original:
            monkeypatch.setattr(module, "check_feedback", counting)
    train = planted[0]
    FEBR(max_iter=2000, eval_every=1000, random_state=0, num_threads=1).fit(train)
    assert len(calls) == 1 and calls[0] is train


def test_score_is_monotone_in_febrs_ranking(planted):
    """``score`` / ``recommend`` give values monotone in FEBR's ranking: within each user's head a
    larger learnt key never scores lower, and ``recommend`` returns ``score``'s values, best first
    (the values are the tail base's scale, assigned in FEBR's order: the documented equivalent of
    the scorer's own values, which would not leave the items outside the head in their places)."""
    train, val, _ = planted
    m = fast(bases=[ItemKNN(k=10), UserKNN(k=10)], candidates=8).fit(train, validation=val)
    m.coef_[:] = m.coef_ + np.random.default_rng(0).normal(size=m.coef_.size)  # a scorer unlike any base
    users = np.arange(train.shape[0])
    S = m.score(users)
    ids, scores = m.recommend(users, N=10)
    valid = ids >= 0
    np.testing.assert_array_equal(scores[valid], np.take_along_axis(S, np.where(valid, ids, 0), axis=1)[valid])
    assert np.all(np.diff(np.where(valid, scores, -np.inf), axis=1) <= 0)
    indptr, items, phi = m.head_features(users)
    for u in users:
        head = items[indptr[u] : indptr[u + 1]]
        key = (phi[indptr[u] : indptr[u + 1]] - m.feature_mean_) @ (m.coef_ / m.feature_scale_)
        higher = key[:, None] > key[None, :] + 1e-9  # (a near-tie may round either way)
        assert np.all(S[u, head][:, None] >= S[u, head][None, :], where=higher)


def test_stages_are_logged_for_runs_outside_a_terminal(planted, caplog):
    """Each stage of a fit is one INFO line of the module's logger (what a run under a scheduler
    shows once logging is configured), and names the base being fitted."""
    import logging

    train = planted[0]
    with caplog.at_level(logging.INFO, logger="recsys_ltr"):
        fast(bases=[ItemKNN(k=10), UserKNN(k=10)], show_progress=False).fit(train)
    lines = [r.getMessage() for r in caplog.records]
    for stage in (
        "bases 1/2: ItemKNN",
        "bases 2/2: UserKNN",
        "features of the training pairs",
        "bases on X 2/2: UserKNN",
        "training (OPT-ADG)",
        "refit on all of X",
    ):
        assert any(stage in line for line in lines), (stage, lines)
    assert all(line.startswith("FEBR: ") for line in lines)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 300), shift=st.floats(-0.05, 0.05), seed=st.integers(0, 2**31 - 1))
def test_paired_gain_is_the_one_sided_t_test_of_the_mean(n, shift, seed):
    """The decisions compare means, so the paired test is of the mean: scipy's one-sided t-test."""
    from scipy.stats import ttest_1samp

    from recsys_ltr.febr.validation import paired_gain

    gain = np.random.default_rng(seed).normal(shift, 0.1, n)
    result = paired_gain(gain)
    assert result["users"] == n and result["gain"] == pytest.approx(gain.mean())
    assert result["p_value"] == pytest.approx(ttest_1samp(gain, 0.0, alternative="greater").pvalue, rel=1e-9)


def test_paired_gain_tests_the_mean_not_the_median():
    """Hand case: 60 users lose .001, 20 gain .1 -- most users lose, the mean gains .024.  A
    signed-rank test finds no gain (p = .86), the test of the mean does (p < 1e-5); all-zero gains
    and constant gains have no spread: p is 1, or 0 for a positive constant."""
    from scipy.stats import wilcoxon

    from recsys_ltr.febr.validation import paired_gain

    gain = np.r_[np.full(60, -0.001), np.full(20, 0.1)]
    assert wilcoxon(gain, alternative="greater").pvalue > 0.85
    result = paired_gain(gain)
    assert result["gain"] == pytest.approx(0.02425) and result["p_value"] < 1e-5
    assert paired_gain(np.zeros(70))["p_value"] == 1.0
    assert paired_gain(np.full(70, 0.01))["p_value"] == 0.0
    assert paired_gain(np.full(70, -0.01))["p_value"] == 1.0


def test_a_gain_that_is_noise_falls_back_to_the_tail_base():
    """Planted: the bases know nothing (random data), so whatever theta training keeps is noise on
    held-out validation users; FEBR then ranks as its tail base, exactly."""
    rng = np.random.default_rng(3)
    X = sp.csr_matrix((rng.random((400, 60)) < 0.15).astype(float))
    train, val, _ = holdout(X, val=0.2, test=0.2, random_state=0)
    m = fast(bases=[ItemKNN(k=10), UserKNN(k=10), Popularity()], validation_users=200).fit(train, validation=val)
    assert m.stacked_gain_["users"] >= 50 and m.stacked_gain_["p_value"] >= 0.05
    users = np.arange(train.shape[0])
    tail = m.bases_[int(np.argmax(m.tail_weights_))]
    assert np.count_nonzero(m.tail_weights_) == 1
    np.testing.assert_array_equal(m.recommend(users, N=20)[0], tail.recommend(users, N=20)[0])


def test_a_tail_choice_among_few_users_keeps_the_first_base_unless_significant():
    """Planted: random data and 80 users, too few to hold validation users out of the selection:
    Popularity looks best on validation by chance, with a gain over the first base that is not
    significant, so the tail base stays the first, and FEBR then ranks as it."""
    rng = np.random.default_rng(3)
    X = sp.csr_matrix((rng.random((80, 60)) < 0.15).astype(float))
    train, val, _ = holdout(X, val=0.2, test=0.2, random_state=0)
    m = fast(bases=[ItemKNN(k=10), UserKNN(k=10), Popularity()]).fit(train, validation=val)
    selected = m.history_[0]["base_val_adg"]
    assert max(selected, key=selected.get) == "Popularity"
    assert m.tail_gain_["users"] == np.count_nonzero(np.diff(val.indptr))
    assert m.tail_gain_["gain"] > 0 and m.tail_gain_["p_value"] >= 0.05
    assert m.tail_bases_ == m.base_names_ == ["ItemKNN"]  # the scorer dropped: the tail's base alone kept
    ids = np.arange(train.shape[0])
    np.testing.assert_array_equal(m.recommend(ids, N=20)[0], m.bases_[0].recommend(ids, N=20)[0])


def test_the_tail_base_is_the_best_over_every_validation_user():
    """With users to hold out, the tail base is the best by the mean ADG of the selection sample and
    the test users together (no test against the first base): a base that knows the blocks beats
    Popularity, listed first."""
    train, val, _ = holdout(block_feedback(users=200, items=40, seed=1), val=0.2, test=0.2, random_state=0)
    m = fast(bases=[Popularity(), ItemKNN(k=10)], validation_users=None).fit(train, validation=val)
    assert m.tail_bases_ == ["ItemKNN"]
    assert m.tail_gain_ is None
    selected = m.history_[0]["base_val_adg"]
    assert selected["ItemKNN"] > selected["Popularity"]
    every = [evaluate(b.fit(train), train, val, metrics=["ADG"])["ADG"] for b in (Popularity(), ItemKNN(k=10))]
    np.testing.assert_allclose([selected["Popularity"], selected["ItemKNN"]], every, rtol=1e-9)


def _synthetic_split(seed):
    X = make_synthetic(n_users=400, n_items=80, density=0.1, factor_scale=2.0, random_state=seed).matrix
    return holdout(X, val=0.2, test=0.2, random_state=0)


@pytest.mark.parametrize("seed, tail", [(2, ["ItemKNN", "UserKNN"]), (0, ["UserKNN"]), (5, ["UserKNN"])])
def test_the_tail_is_the_mean_of_the_tied_bases_when_it_beats_the_best(seed, tail):
    """Planted: ItemKNN and UserKNN on factor data.  Seed 2: tied on validation, and the mean of their
    standardised scores beats the better one there significantly, so it is the tail; seed 0: tied, the
    mean better only by noise (a one-sided paired p above .05), UserKNN alone stays; seed 5: UserKNN
    beats ItemKNN significantly, no mean is tried."""
    train, val, _ = _synthetic_split(seed)
    m = fast(bases=[ItemKNN(k=20), UserKNN(k=20)], max_iter=0, validation_users=200, validation_fraction=0.0)
    m.fit(train, validation=val)  # the matrix alone
    assert m.tail_bases_ == tail and np.allclose(m.tail_weights_, 1 / len(tail))
    record = m.history_[0]
    best = max(record["base_val_adg"].values())
    if seed == 5:
        assert "tail_mean_val_adg" not in record
        return
    mean = record["tail_mean_val_adg"]
    assert mean["bases"] == ["ItemKNN", "UserKNN"] and mean["users"] == np.count_nonzero(np.diff(val.indptr))
    assert (mean["p_value"] < 0.05) == (seed == 2)
    if seed == 2:
        assert mean["value"] > best and mean["gain"] > 0
        # fallen back to the mean: its scores without the heads, equal to the heads composed in the tail's order
        users = np.arange(train.shape[0])
        stack, rows = m._stack, m.user_items_
        S, excluded = stack.scores(rows, users), stack.excluded(rows)
        indptr, items, phi = stack.head(S, rows, excluded)
        composed = compose(tail_scores(S, excluded, m.tail_weights_), (indptr, items), head_key(m._scorer, phi))
        candidates = excluded.toarray() == 0
        np.testing.assert_array_equal(m.score(users)[candidates], composed[candidates])


class _Values:
    """A validation sample reduced to its per-user values: ``values[tuple(weights)]``."""

    def __init__(self, values):
        self.values = values

    def user_values(self, weights):
        return np.asarray(self.values[tuple(float(w) for w in weights)])


def test_the_tail_decisions_test_the_means_they_compare():
    """Hand values of 100 users.  Base 1 is the best in mean; base 0 trails it by .002 on average,
    not significantly (tied), base 2 by .05 (not tied).  A mean of the tied bases that is worse than
    the best leaves the best; a better one is the tail.  A base below another on most users but
    above it in mean is the best, and beats it: the choice and the tie test are of the mean."""
    from scipy.stats import wilcoxon

    from recsys_ltr.febr.validation import Samples, choose_tail

    rng = np.random.default_rng(0)
    best = rng.uniform(0.2, 0.4, 100)
    noise = rng.normal(0, 0.05, 100)
    near, far = best - 0.002 + (noise - noise.mean()), best - 0.05 + noise / 5

    def tail(values):
        selection, tests = _Values(values), _Values({w: [] for w in values})  # the tests add no users
        return choose_tail(Samples(selection, tests, False), ["a", "b", "c"], 0.05, "val_adg")

    for mixed, weights in ((best - 0.01, [0, 1, 0]), (best + 0.01, [0.5, 0.5, 0])):
        chosen = tail({(1.0, 0.0, 0.0): near, (0.0, 1.0, 0.0): best, (0.0, 0.0, 1.0): far, (0.5, 0.5, 0.0): mixed})
        np.testing.assert_array_equal(chosen.weights, weights)
        assert chosen.record["tail_mean_val_adg"]["bases"] == ["a", "b"]
    mostly_below = best.copy()
    mostly_below[:90] -= 0.001  # 90 users a little below, 10 far above: above in mean
    mostly_below[90:] += 0.02
    chosen = tail({(1.0, 0.0, 0.0): mostly_below, (0.0, 1.0, 0.0): best, (0.0, 0.0, 1.0): far, (0.5, 0.5, 0.0): far})
    np.testing.assert_array_equal(chosen.weights, [1, 0, 0])
    assert "tail_mean_val_adg" not in chosen.record  # b is significantly below a in mean: not tied
    assert wilcoxon(mostly_below - best, alternative="greater").pvalue > 0.5  # though below on most users


def test_a_mean_tail_ranks_as_the_mean_of_standardised_scores(tmp_path):
    """With the scorer at its start (``max_iter=0``), FEBR ranks as its tail: here the mean of the two
    bases' scores standardised over each user's candidates (brute force), head and tail alike; the
    items outside the head keep those scores exactly, and a file keeps the tail."""
    train, val, _ = _synthetic_split(2)
    m = fast(bases=[ItemKNN(k=20), UserKNN(k=20)], max_iter=0, validation_users=200).fit(train, validation=val)
    np.testing.assert_array_equal(m.tail_weights_, [0.5, 0.5])
    users = np.arange(train.shape[0])
    expected = np.zeros((users.size, train.shape[1]))
    for base in m.bases_:
        S = base.score(users)
        for u in users:
            cand = np.setdiff1d(np.arange(train.shape[1]), train[u].indices)
            expected[u] += 0.5 * (S[u] - S[u, cand].mean()) / S[u, cand].std()
    scores = m.score(users)
    ids, _ = m.recommend(users, N=10)
    popularity = np.bincount(train.indices, minlength=train.shape[1])
    for u in users:  # ties by popularity, then id
        np.testing.assert_array_equal(ids[u], brute_top_n(expected[u], popularity, 10, set(train[u].indices)))
    np.testing.assert_allclose(scores, expected, rtol=1e-9, atol=1e-9)  # head places swapped in the same order
    loaded = Recommender.load(m.save(tmp_path / "febr.npz"))
    np.testing.assert_array_equal(loaded.tail_weights_, m.tail_weights_)
    np.testing.assert_array_equal(loaded.score(users), scores)


@pytest.mark.parametrize(
    "weights, match",
    [([1.0], "tail_weights_ must be a dense float array of shape \\(2,\\)"), ([np.nan, 1.0], "finite"),
     ([-1.0, 2.0], "non-negative"), ([0.0, 0.0], "not all zero")],
)  # fmt: skip
def test_a_file_with_a_bad_tail_is_refused(tmp_path, planted, weights, match):
    import json

    train, val, _ = planted
    m = fast(bases=[ItemKNN(k=10), UserKNN(k=10)], fallback_p=None).fit(train, validation=val)
    with np.load(m.save(tmp_path / "good.npz"), allow_pickle=False) as f:
        arrays = {name: f[name] for name in f.files}
    header = json.loads(str(arrays["header"]))
    header["state"]["tail_weights_"]["shape"] = [len(weights)]
    arrays.update(tail_weights_=np.array(weights), header=np.array(json.dumps(header)))
    with pytest.raises(ValueError, match=match):
        Recommender.load(resave(tmp_path / "bad.npz", **arrays))


def test_every_validation_decision_uses_the_validation_metric():
    """``validation_metric="Recall@5"``: the tail base is the best by validation REC@5 (its recorded
    values are ``evaluate``'s), early stopping and the paired test judge by it, and no ADG is taken."""
    train, val, _ = holdout(block_feedback(users=200, items=40, seed=1), val=0.2, test=0.2, random_state=0)
    m = fast(bases=[Popularity(), ItemKNN(k=10)], validation_users=None, validation_metric="Recall@5")
    m.fit(train, validation=val)
    selected = m.history_[0]["base_val_rec@5"]
    every = [evaluate(b.fit(train), train, val, metrics=["REC@5"])["REC@5"] for b in (Popularity(), ItemKNN(k=10))]
    np.testing.assert_allclose([selected["Popularity"], selected["ItemKNN"]], every, rtol=1e-9)
    assert m.tail_bases_ == [max(selected, key=selected.get)]
    checkpoints = [h for h in m.history_[1:] if isinstance(h["iteration"], int)]
    assert all("val_rec@5" in h for h in checkpoints) and not any("val_adg" in h for h in m.history_)
    assert max(h["val_rec@5"] for h in checkpoints) >= m.history_[1]["val_rec@5"]  # the start is kept or beaten
    assert m.stacked_gain_["users"] >= MIN_CONFIRMATION_USERS
    with pytest.raises(ValueError, match="unknown metric"):
        fast(bases=[Popularity()], validation_metric="Recall5").fit(train, validation=val)
    with pytest.raises(ValueError, match="cutoff"):
        fast(bases=[Popularity()], validation_metric=f"REC@{train.shape[1] + 1}").fit(train, validation=val)
    with pytest.raises(TypeError, match="validation_metric"):
        fast(bases=[Popularity()], validation_metric=("ADG",)).fit(train)


def test_the_paired_tests_run_on_users_the_selection_never_saw():
    """The selection sample (tail choice, early stopping) takes ``validation_users`` users while
    MIN_CONFIRMATION_USERS others remain, else half of the validation users; the paired tests' users
    are others; with fewer than 2 x MIN_CONFIRMATION_USERS validation users both are the same sample."""
    rng = np.random.default_rng(0)
    m = MIN_CONFIRMATION_USERS
    cases = (
        (300, None, "half"),
        (300, 300 - 2 * m, 300 - 2 * m),
        (300, 300 - m + 10, "half"),
        (2 * m - 10, None, "all"),
    )
    for users, limit, selected in cases:
        X = sp.csr_matrix((rng.random((users, 30)) < 0.3).astype(float))
        train, val, _ = holdout(X, val=0.2, test=0.0, random_state=0)
        model = fast(bases=[ItemKNN(k=10), Popularity()], validation_users=limit).fit(train, validation=val)
        with_val = np.count_nonzero(np.diff(val.indptr))  # nearly every user
        most = model._validation_limit(train.shape[1])
        samples = draw_samples(model._stack, train, val, most, "ADG", np.random.default_rng(0), 1)
        selection, tests = samples.selection, samples.tests
        if selected != "all":
            assert selection.users.size == (with_val // 2 if selected == "half" else selected)
            assert np.intersect1d(selection.users, tests.users).size == 0 and not samples.shared
            assert tests.users.size == min(with_val - selection.users.size, limit or with_val)
            assert samples.every == [selection, tests]
        else:
            assert samples.shared and tests is selection and selection.users.size == with_val
            assert samples.every == [selection]
        alone = draw_samples(model._stack, train, val, most, "ADG", np.random.default_rng(0), 1, tests=False)
        assert alone.tests is None and np.array_equal(alone.selection.users, selection.users)


def test_the_validation_sample_is_scored_block_by_block_and_caches_one_tail(monkeypatch):
    """The validation sample's heads, every base's per-user values and the tail's scores, built from
    blocks of a few users (a planted block budget), equal those of the whole sample at once; its size
    is bounded by one float64 row of the tail per user, whatever the number of bases."""
    from recsys_ltr import _memory
    from recsys_ltr.febr import validation

    train, val, _ = _synthetic_split(0)
    model = fast(bases=[ItemKNN(k=20), UserKNN(k=20), Popularity()], max_iter=0, validation_users=None)
    model.fit(train, validation=val)
    monkeypatch.setattr(validation, "CACHE_BYTES", 8 * train.shape[1] * 150)

    def sample():
        return draw_samples(model._stack, train, val, None, "ADG", np.random.default_rng(0), 1, False).selection

    whole = sample()
    assert whole.users.size == 150
    monkeypatch.setattr(_memory, "BLOCK_BYTES", 8 * train.shape[1] * 3 * 7)  # blocks of 7 users
    blocks = sample()
    np.testing.assert_array_equal(blocks.users, whole.users)
    rows = train[whole.users]
    S = stacked_scores(model.bases_, rows, whole.users, dtype=np.float32)  # the sample's precision
    for a, b in zip(blocks.head, model._stack.head(S.astype(np.float64), rows)):
        np.testing.assert_array_equal(a, b)
    for b in range(3):
        scores = lambda ids, b=b: S[np.searchsorted(whole.users, ids), b, :]  # noqa: E731
        expected = evaluate(scores, train, val, metrics=["ADG"], users=whole.users).per_user["ADG"]
        np.testing.assert_array_equal(blocks.user_values(np.eye(3)[b]), expected)
    mean = np.array([0.5, 0.5, 0.0])
    expected = tail_scores(S, with_items(rows, model.excluded_items_), mean)
    np.testing.assert_array_equal(blocks.tail(mean), expected)
    assert blocks.tail(mean) is blocks.tail(mean.copy())  # kept while the weights stay
    np.testing.assert_array_equal(blocks.tail(np.eye(3)[1]), S[:, 1, :])


def test_the_scorer_is_kept_only_on_a_significant_gain(planted, monkeypatch):
    """The decision itself: the trained scorer stays when the mean gain is positive and the paired
    test's p is below ``fallback_p``; the tail base alone (theta = its within-user score) replaces it
    otherwise, a significant signed-rank test of a negative mean gain included."""
    from recsys_ltr.febr import validation

    train, val, _ = planted
    trained = np.linspace(1.0, 2.0, 9)  # what training found: unlike the tail base alone

    def trained_run(self, sampler, state, fns, theta, *args):
        self.best_iteration_ = 4000
        theta[:] = trained

    monkeypatch.setattr(FEBR, "_run_optadg", trained_run)
    for p, gain, kept in ((0.001, 0.01, True), (0.5, 0.01, False), (0.001, -0.001, False)):
        monkeypatch.setattr(validation, "paired_gain", lambda *a, p=p, g=gain: {"users": 60, "gain": g, "p_value": p})
        m = fast(bases=[ItemKNN(k=10), UserKNN(k=10)]).fit(train, validation=val)
        assert m.stacked_gain_["p_value"] == p
        assert m.history_[-1] == {"iteration": "paired test", "kept": kept, **m.stacked_gain_}
        assert m.best_iteration_ == (4000 if kept else 0)  # the tail is reached before any sample
        if kept:
            np.testing.assert_array_equal(m.coef_, trained)
        else:
            start = np.zeros_like(m.coef_)
            for b in np.flatnonzero(m.tail_weights_):
                start[z_column(b)] = m.feature_scale_[z_column(b)] * m.tail_weights_[b]
            np.testing.assert_array_equal(m.coef_, start)


@pytest.mark.parametrize("stacked", [True, False])
def test_items_never_drawn_as_labels_are_ranked_last(stacked):
    """With ``label_exclude_top``, the most popular items of X can never be a label, so FEBR (both
    estimators) scores them -inf: below every other item, in ``score`` and ``recommend``."""
    X = block_feedback(seed=2)
    if stacked:
        model = fast(bases=[ItemKNN(k=10), UserKNN(k=10)], label_exclude_top=5).fit(X)
    else:
        model = AffinityFEBR(k=10, max_iter=2000, eval_every=1000, label_exclude_top=5, random_state=0).fit(X)
    top = np.argsort(-np.bincount(X.indices, minlength=X.shape[1]), kind="stable")[:5]
    np.testing.assert_array_equal(model.excluded_items_, top)
    users = np.arange(X.shape[0])
    scores = model.score(users)
    assert np.all(np.isneginf(scores[:, top])) and np.isfinite(np.delete(scores, top, axis=1)).all()
    ids, _ = model.recommend(users, N=10)
    assert not np.isin(ids, top).any()
    back = type(model).load(model.save(str(Path(tempfile.mkdtemp()) / "m")))
    np.testing.assert_array_equal(back.excluded_items_, top)


def test_items_never_a_label_are_no_ones_candidate():
    """``with_items`` adds the excluded items to every row; the heads of a FEBR with
    ``label_exclude_top`` (training pools and prediction) never hold them."""
    rows = sp.csr_matrix(np.array([[1, 0, 0, 1, 0], [0, 0, 0, 0, 0]], dtype=float))
    both = stacking.with_items(rows, np.array([3, 1]))
    assert both.toarray().tolist() == [[1, 1, 0, 1, 0], [0, 1, 0, 1, 0]] and both.has_canonical_format
    X = block_feedback(seed=2)
    model = fast(bases=[ItemKNN(k=10), UserKNN(k=10)], label_exclude_top=5).fit(X)
    _, items, _ = model.head_features(np.arange(X.shape[0]))
    assert items.size and not np.isin(items, model.excluded_items_).any()


@pytest.mark.parametrize("scorer", ["linear", "lambdamart"])
def test_no_usable_label_is_said_before_training(scorer):
    """Was the sampler's "no query has a relevant item, an irrelevant item and beta_q >= 1"."""
    if scorer == "lambdamart":
        pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = sp.csr_matrix((rng.random((40, 25)) < 0.3).astype(float))
    X = X[np.diff(X.indptr) > 0]
    kw = dict(bases=[ItemKNN(k=5), Popularity()], scorer=scorer, max_iter=200, eval_every=100, random_state=0)
    with pytest.raises(ValueError, match=r"no user has a held-out label among the bases' top candidates=10 .*"):
        FEBR(candidates=10, label_exclude_top=24, **kw).fit(X)  # one item left: a label with nothing beside it
    single = sp.csr_matrix(np.eye(25)[rng.integers(0, 25, 40)])  # one positive per user: all kept to train
    with pytest.raises(ValueError, match="no label positive: .* outside the label_exclude_top=20 most popular"):
        FEBR(candidates=10, label_exclude_top=20, **kw).fit(single)


def _pool_queries(monkeypatch):
    """The queries (users with a pool) of every FEBR fit that follows, recorded as training starts."""
    from recsys_ltr.febr import model as febr_model

    seen, train_scorer = [], febr_model.FEBR._train_scorer

    def recording(self, pool, *args, **kwargs):
        seen.append(np.flatnonzero(np.diff(pool.indptr)))
        return train_scorer(self, pool, *args, **kwargs)

    monkeypatch.setattr(febr_model.FEBR, "_train_scorer", recording)
    return seen


@pytest.mark.parametrize("holdout_", [0.25, 2])
def test_the_training_pools_keep_at_most_training_users_label_users(monkeypatch, holdout_):
    """``training_users`` bounds the label users of each part's pool (a random sample of them); with
    two out-of-fold parts each part keeps its own sample.  The sample is drawn from a stream of its
    own: the fit's other draws (the label parts, the validation samples) stay as they are."""
    seen = _pool_queries(monkeypatch)
    train, val, _ = _synthetic_split(0)
    bases = [ItemKNN(k=20), UserKNN(k=20)]
    a = fast(bases=bases, holdout=holdout_, max_iter=0).fit(train, validation=val)
    b = fast(bases=bases, holdout=holdout_, max_iter=0, training_users=40).fit(train, validation=val)
    assert a.history_[0] == b.history_[0]  # the same validation values of the same bases
    np.testing.assert_array_equal(a.tail_weights_, b.tail_weights_)
    everyone, sampled = seen
    n_parts = 1 if holdout_ == 0.25 else 2
    assert everyone.size > n_parts * 300  # nearly every one of the 400 users has a label in each part
    assert sampled.size == n_parts * 40
    if n_parts == 2:  # queries of part 2 follow those of part 1: two samples, not one repeated
        assert not np.array_equal(sampled[:40], sampled[40:] - sampled[40] + sampled[0])


def test_training_users_auto_follows_the_cost_model(monkeypatch):
    """``"auto"``: as many label users as keep users x items x bases x parts within POOL_SCORES and
    the parts' users within POOL_USERS;
    a limit at or above the label users leaves the fit unchanged, bit for bit (no sample is drawn)."""
    from recsys_ltr.febr import bases as febr_bases

    limit = febr_bases.pool_user_limit
    assert limit("auto", 40_981, 7, 1) == febr_bases.POOL_SCORES // (40_981 * 7) == 3_742
    assert limit("auto", 40_981, 7, 2) == febr_bases.POOL_SCORES // (40_981 * 14)
    assert limit(None, 10**9, 10, 5) is None and limit(7, 10**9, 10, 5) == 7
    assert limit("auto", 285, 7, 1) == febr_bases.POOL_USERS  # a small catalogue: the users' limit
    assert limit("auto", 285, 7, 3) == febr_bases.POOL_USERS // 3  # over the parts
    train, val, _ = _synthetic_split(0)
    monkeypatch.setattr(febr_bases, "POOL_SCORES", 80 * 2 * 100)  # 100 users of the 80-item catalogue
    seen = _pool_queries(monkeypatch)
    auto = fast(bases=[ItemKNN(k=20), UserKNN(k=20)]).fit(train, validation=val)
    assert seen[0].size == 100
    monkeypatch.setattr(febr_bases, "POOL_SCORES", 2**31)
    a = fast(bases=[ItemKNN(k=20), UserKNN(k=20)]).fit(train, validation=val)
    b = fast(bases=[ItemKNN(k=20), UserKNN(k=20)], training_users=None).fit(train, validation=val)
    assert seen[1].size == seen[2].size > 300
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.score(np.arange(50)), b.score(np.arange(50)))
    assert not np.array_equal(auto.coef_, a.coef_)


class Noise(Planted):
    """Scores every pair by a fixed pseudo-random value of (user, item): a base that knows nothing."""

    def _score_rows(self, rows, ids, recalculate):
        items = np.arange(rows.shape[1])
        return np.sin(np.asarray(ids)[:, None] * 12.9898 + items[None, :] * 78.233) % 1.0


def test_a_stack_never_ends_below_its_strong_base():
    """A planted strong base (ItemKNN on block data) among a base that knows nothing and one that
    knows only popularity, listed first: ``fit(X)`` with its carved validation ends at or above the
    strong base on held-out test users, on the full list and on the top 20 alike (one-sided paired
    t-test that FEBR is below it: p > .05), and the validation decisions kept it in the tail."""
    from scipy.stats import ttest_rel

    X = block_feedback(n_groups=6, users=80, items=30, p_in=0.25, p_out=0.03, seed=3)
    train, _, test = holdout(X, val=0.0, test=0.2, random_state=0)
    strong = ItemKNN(k=20)
    model = FEBR(bases=[Popularity(), Noise(), strong], random_state=0, num_threads=1).fit(train)
    assert "ItemKNN" in model.tail_bases_ and "Noise" not in model.tail_bases_
    values = model.history_[0]["base_val_ndcg@20"]  # the default validation metric
    assert values["ItemKNN"] > max(values["Popularity"], values["Noise"])
    alone = strong.fit(train)
    metrics = ["ADG", "NDCG@20", "REC@20", "MAP"]
    ours, theirs = (evaluate(m, train, test, metrics=metrics).per_user for m in (model, alone))
    for metric in metrics:
        if np.any(ours[metric] != theirs[metric]):  # identical lists (the strong base alone) pass
            below = ttest_rel(ours[metric], theirs[metric], alternative="less").pvalue
            assert below > 0.05, (metric, ours[metric].mean(), theirs[metric].mean())


@pytest.mark.parametrize("refit", [True, False])
def test_a_model_fallen_back_to_its_tail_keeps_only_the_tails_bases(refit, tmp_path, monkeypatch):
    """With the scorer dropped (``fallback_p=0``: never kept) FEBR ranks as its tail, so it keeps the
    tail's bases alone (refitted on all of X with ``refit``): the scores of that base fitted on the
    same data, saved and loaded with it, and ranks by the base's own route."""
    X = block_feedback(n_groups=6, users=80, items=30, p_in=0.25, p_out=0.03, seed=3)
    train, _, _ = holdout(X, val=0.0, test=0.2, random_state=0)
    bases = [Popularity(), Noise(), ItemKNN(k=20)]
    model = FEBR(bases=bases, fallback_p=0.0, refit=refit, random_state=0, num_threads=1).fit(train)
    assert model.base_names_ == model.tail_bases_ == ["ItemKNN"]
    assert set(model.history_[0]["base_val_ndcg@20"]) == {"Popularity", "Noise", "ItemKNN"}
    assert model.feature_names_ == stacking.feature_names(["ItemKNN"]) and model.coef_.shape == (6,)
    assert np.array_equal(model.tail_weights_, [1.0]) and model.context_mean_.shape == (1,)
    fitted_on = model.bases_[0].user_items_
    assert ((fitted_on != train).nnz == 0) == refit
    users = np.arange(train.shape[0])
    candidates = train.toarray() == 0
    alone = ItemKNN(k=20).fit(fitted_on)._score_rows(train, users, False)  # item-based: scored from X's rows
    np.testing.assert_allclose(model.score(users)[candidates], alone[candidates], rtol=1e-12)
    loaded = Recommender.load(model.save(tmp_path / "tail.npz"))
    assert loaded.base_names_ == ["ItemKNN"]
    np.testing.assert_array_equal(loaded.score(users), model.score(users))
    # ranked by the base's own sparse route: its top lists, never FEBR's heads
    R, B = model.score_product(users)
    np.testing.assert_allclose((R @ B).toarray()[candidates], alone[candidates], rtol=1e-12)
    seen = []
    monkeypatch.setattr(stacking.Stack, "head", lambda *a, **k: seen.append(1))
    for m in (model, loaded):
        np.testing.assert_array_equal(m.recommend(users, N=10)[0], m.bases_[0].recommend(users, train, N=10)[0])
    assert not seen


def test_no_dense_users_by_items_block_beyond_the_budget(monkeypatch):
    """Every dense score block of a fit -- the training pools, the context statistics, the
    validation samples and their evaluations -- holds at most the rows of a planted block budget
    (a spy on the one route by which FEBR scores a base), and the tail cached for the validation
    decisions at most the rows of the cache budget."""
    from recsys_ltr import _memory
    from recsys_ltr.febr import validation

    train, val, _ = _synthetic_split(0)
    n_items, n_bases = train.shape[1], 3
    monkeypatch.setattr(_memory, "BLOCK_BYTES", 8 * n_items * n_bases * 9)  # blocks of 9 users of 3 bases
    monkeypatch.setattr(validation, "CACHE_BYTES", 8 * n_items * 60)  # a tail of 60 users
    rows_seen, original = [], stacking.base_scores

    def spy(base, rows, ids, recalculate=False):
        rows_seen.append(rows.shape[0])
        return original(base, rows, ids, recalculate)

    monkeypatch.setattr(stacking, "base_scores", spy)
    model = fast(bases=[ItemKNN(k=20), UserKNN(k=20), Popularity()], validation_users=None)
    model.fit(train, validation=val)
    assert len(rows_seen) > 100 and max(rows_seen) <= 27  # a block of one base at most 3 x 9 rows
    assert model.stacked_gain_["users"] <= 60


def test_the_default_validation_metric_is_ndcg_at_20_or_the_catalogue():
    """``validation_metric="auto"``, stacked FEBR's default: NDCG@20, NDCG@n on a catalogue of fewer
    than 20 items; the dissertation's FEBR keeps ADG."""
    X = block_feedback(n_groups=3, users=30, items=6, seed=0)  # 18 items
    assert FEBR().validation_metric == "auto" and AffinityFEBR().validation_metric == "ADG"
    assert FEBR()._validation_metric(100) == "NDCG@20" and FEBR()._validation_metric(18) == "NDCG@18"
    model = FEBR(bases=[ItemKNN(k=5), Popularity()], max_iter=500, eval_every=250, num_threads=1).fit(X)
    assert "base_val_ndcg@18" in model.history_[0]
    assert all("val_ndcg@18" in h for h in model.history_[1:] if isinstance(h["iteration"], int))
