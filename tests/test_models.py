"""Recommenders: brute-force predictors, Theorem 4.4, recommend/similar_items, persistence."""

import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import (
    assert_recommend_like_brute_force,
    brute_knn,
    brute_similarity,
    brute_top_n,
    kunn_item_affinity_literal,
    random_feedback,
    resave,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from recsys_ltr.models import ALS, EASE, KUNN, SLIM, ItemKNN, Popularity, Recommender, RP3beta, UserKNN
from recsys_ltr.neighbors.slim import slim_weights

pytestmark = pytest.mark.kernels

ALL_MODELS = [
    Popularity(),
    ItemKNN(k=3),
    UserKNN(k=3),
    KUNN(k=3),
    KUNN(k=3, side="item"),
    KUNN(k=3, side="user"),
    SLIM(l1=0.1, l2=0.5),
    SLIM(k=3, l1=0.1, l2=0.5),
    RP3beta(k=3, alpha=0.7, beta=0.4),
]


def itemp_literal(D, k):
    """score(u, i) = sum of cos(i, j) over j in O+_u & KNN(i)."""
    knn = brute_knn(brute_similarity(D.T), k)
    cos = brute_similarity(D.T)
    return np.array([[sum(cos[i, j] for j in knn[i] if D[u, j]) for i in range(D.shape[1])] for u in range(D.shape[0])])


def userp_literal(D, k):
    """score(u, i) = sum of cos(u, v) over v in O+_i & KNN(u)."""
    return itemp_literal(D.T, k).T


def kunn_eq_4_3(D, knn_item, knn_user):
    """Eq. (4.3) computed literally as the double sum over users v and items j."""
    m, n = D.shape
    cu, ci = D.sum(axis=1), D.sum(axis=0)
    S = np.zeros((m, n))
    for u in range(m):
        for i in range(n):
            for v in range(m):
                for j in range(n):
                    if D[u, j] and D[v, j] and D[v, i]:
                        ind = (j in knn_item[i]) + (v in knn_user[u])
                        S[u, i] += ind / np.sqrt(cu[u] * ci[i] * cu[v] * ci[j])
    return S


def feedback(seed, m=12, n=9, density=0.3):
    return random_feedback(np.random.default_rng(seed), m, n, density)


@settings(max_examples=12, deadline=None)
@given(st.integers(4, 12), st.integers(4, 10), st.floats(0.15, 0.5), st.integers(1, 3), st.integers(0, 10**6))
def test_item_and_user_p_match_brute_force(m, n, density, k, seed):
    D = random_feedback(np.random.default_rng(seed), m, n, density)
    users = np.arange(m)
    np.testing.assert_allclose(ItemKNN(k=k).fit(D).score(users), itemp_literal(D, k), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(UserKNN(k=k).fit(D).score(users), userp_literal(D, k), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(Popularity().fit(D).score(users[:2]), np.tile(D.sum(axis=0), (2, 1)))


@settings(max_examples=10, deadline=None)
@given(st.integers(4, 10), st.integers(4, 9), st.floats(0.2, 0.5), st.integers(1, 3), st.integers(0, 10**6))
def test_theorem_4_4_kunn_double_sum(m, n, density, k, seed):
    """KUNN's Eq. (4.4) (the model) equals the literal double sum Eq. (4.3) over neighbourhoods
    found by brute force on the literal KUNN affinities Eq. (4.5)-(4.6)."""
    D = random_feedback(np.random.default_rng(seed), m, n, density)
    # Eq. (4.5)/(4.6) summed in the kernel's order (so exact ties break alike), checked literal
    A_item = brute_similarity(D.T, 1 / np.sqrt(np.maximum(D.sum(axis=1), 1)))
    A_user = brute_similarity(D, 1 / np.sqrt(np.maximum(D.sum(axis=0), 1)))
    np.testing.assert_allclose(A_item, kunn_item_affinity_literal(D), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(A_user, kunn_item_affinity_literal(D.T), rtol=1e-12, atol=1e-15)
    knn_item, knn_user = brute_knn(A_item, k), brute_knn(A_user, k)
    model = KUNN(k=k).fit(D)
    np.testing.assert_allclose(model.score(np.arange(m)), kunn_eq_4_3(D, knn_item, knn_user), rtol=1e-10, atol=1e-14)
    # KUNN-i / KUNN-u: item-p / user-p over the KUNN affinities (Eq. 4.5 / 4.6)
    for side, A, knn, M in (("item", A_item, knn_item, D), ("user", A_user, knn_user, D.T)):
        ref = np.array(
            [[sum(A[i, j] for j in knn[i] if M[u, j]) for i in range(M.shape[1])] for u in range(M.shape[0])]
        )
        got = KUNN(k=k, side=side).fit(D).score(np.arange(m))
        np.testing.assert_allclose(got if side == "item" else got.T, ref, rtol=1e-10, atol=1e-14)


def test_slim_scores_are_x_w():
    D = feedback(2, 30, 10)
    for k in (None, 4):
        model = SLIM(k=k, l1=0.1, l2=0.5).fit(D)
        nb = None if k is None else ItemKNN(k=k).fit(D).item_affinity_.matrix
        W = slim_weights(sp.csr_matrix(D), 0.1, 0.5, neighbors=nb)
        np.testing.assert_allclose(model.score(np.arange(30)), D @ W.toarray(), rtol=1e-12, atol=1e-15)


def test_slim_recovers_planted_pairs():
    """Items come in identical twins: each item's strongest regressor is its twin."""
    rng = np.random.default_rng(0)
    base = (rng.random((200, 6)) < 0.3).astype(float)
    D = np.repeat(base, 2, axis=1)  # items 2t and 2t+1 identical
    model = SLIM(l1=0.5, l2=1.0).fit(D)
    for i in range(12):
        ids, _ = model.similar_items(i, N=1)
        assert ids.tolist() == [i ^ 1]


@pytest.mark.parametrize("model", ALL_MODELS, ids=repr)
def test_recommend_matches_brute_force_top_n(model):
    D = feedback(4)
    model = clone(model).fit(D)
    pop = D.sum(axis=0)
    users = np.arange(D.shape[0])
    scores = model.score(users)
    for N, filt, liked in ((3, None, True), (5, [0, 4], True), (20, [1], False)):
        ids, vals = model.recommend(users, N=N, filter_items=filt, filter_already_liked_items=liked)
        assert ids.shape == (len(users), min(N, D.shape[1]))
        for u in users:
            excluded = set(filt or []) | (set(np.flatnonzero(D[u])) if liked else set())
            ref = brute_top_n(scores[u], pop, N, excluded)
            assert ids[u][ids[u] >= 0].tolist() == ref
            np.testing.assert_array_equal(vals[u][: len(ref)], scores[u][ref])
            assert np.all(vals[u][len(ref) :] == -np.inf)
            one_ids, one_vals = model.recommend(int(u), N=N, filter_items=filt, filter_already_liked_items=liked)
            assert one_ids.tolist() == ref and one_vals.shape == (len(ref),)


def test_user_without_history_gets_popularity_order():
    D = feedback(5)
    assert D[0].sum() == 0
    pop = D.sum(axis=0)
    expected = sorted(range(D.shape[1]), key=lambda i: (-pop[i], i))[:5]
    for model in ALL_MODELS:
        ids, _ = clone(model).fit(D).recommend(0, N=5)
        assert ids.tolist() == expected, model


@pytest.mark.parametrize(
    "model", [ItemKNN(k=3), KUNN(k=3, side="item"), SLIM(k=3, l1=0.1, l2=0.5), RP3beta(k=3), Popularity()], ids=repr
)
def test_item_based_models_score_new_users_without_refit(model):
    D = feedback(6)
    model = clone(model).fit(D)
    rows = sp.csr_matrix(D[[3, 5]])
    new_ids = np.array([D.shape[0], D.shape[0] + 7])  # unknown users, declared as such
    ids, vals = model.recommend(new_ids, rows, N=4, recalculate_user=True)
    ref_ids, ref_vals = model.recommend(np.array([3, 5]), N=4)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(vals, ref_vals)
    assert model.item_based


@pytest.mark.parametrize("model", ALL_MODELS + [EASE(), ALS(factors=3, random_state=0)], ids=repr)
def test_a_user_id_has_one_meaning_in_every_model(model):
    """An id >= n_users is a new user only when declared (recalculate_user=True), in every model:
    otherwise it is an error that says how to fold a user in, never someone else's list."""
    D = feedback(6)
    model = clone(model).fit(D)
    for bad in (D.shape[0], 2000, 10**6):
        with pytest.raises(ValueError, match=r"out of range .*recalculate_user=True"):
            model.recommend(bad, sp.csr_matrix(D[:1]), N=4)
        with pytest.raises(ValueError, match="out of range"):
            model.recommend(bad, N=4)
    for bad in (3.0, np.float64(3.0), [1.0, 2.0], True):  # ids are integers, 3.0 as much as 3.5
        with pytest.raises(TypeError, match="userid must be integers"):
            model.recommend(bad, N=4)
    assert model.recommend(np.int32(3), N=4)[0].tolist() == model.recommend(3, N=4)[0].tolist()


@pytest.mark.parametrize("model", [UserKNN(k=3), KUNN(k=3), KUNN(k=3, side="user")], ids=repr)
def test_user_based_models_recalculate_user(model):
    D = feedback(7)
    model = clone(model).fit(D)
    users = np.arange(1, 6)
    ref = model.recommend(users, N=4)
    got = model.recommend(users, sp.csr_matrix(D[users]), N=4, recalculate_user=True)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    # a changed history changes the neighbours only when recalculating
    changed = sp.csr_matrix(np.roll(D[users], 1, axis=1))
    kept = model.recommend(users, changed, N=4, filter_already_liked_items=False)
    np.testing.assert_array_equal(kept[0], model.recommend(users, N=4, filter_already_liked_items=False)[0])
    with pytest.raises(ValueError, match="out of range"):
        model.recommend([D.shape[0]], sp.csr_matrix(D[:1]))
    if isinstance(model, UserKNN):  # a new user = an appended copy of user 3 (KUNN's counts would change)
        new = model.recommend(D.shape[0] + 3, sp.csr_matrix(D[3]), N=4, recalculate_user=True)
        twin = UserKNN(k=3).fit(np.vstack([D, D[3]])).recommend(D.shape[0], N=4)
        np.testing.assert_array_equal(new[0], twin[0])
    with pytest.raises(ValueError, match="userid must be >= 0"):
        model.recommend(-1, sp.csr_matrix(D[:1]), recalculate_user=True)
    assert not model.item_based


@pytest.mark.parametrize("cls", [ItemKNN, UserKNN, KUNN, RP3beta])
def test_with_k_equals_refit(cls):
    D = feedback(8, 15, 12)
    big = cls(k=8).fit(D)
    for k in (1, 4):
        np.testing.assert_array_equal(big.with_k(k).score(np.arange(15)), cls(k=k).fit(D).score(np.arange(15)))
    with pytest.raises(ValueError, match="refit"):
        big.with_k(9)


@pytest.mark.parametrize("model", ALL_MODELS, ids=repr)
def test_save_load_round_trip(model, tmp_path):
    D = feedback(9)
    model = clone(model).fit(D)
    path = tmp_path / "model"
    model.save(path)
    for loader in (type(model), Recommender):
        loaded = loader.load(path)
        assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
        np.testing.assert_array_equal(loaded.score(np.arange(D.shape[0])), model.score(np.arange(D.shape[0])))
        np.testing.assert_array_equal(loaded.recommend(np.arange(3), N=4)[0], model.recommend(np.arange(3), N=4)[0])


def test_load_rejects_malformed_files(tmp_path):
    D = feedback(10)
    ItemKNN(k=3).fit(D).save(tmp_path / "m.npz")
    good = dict(np.load(tmp_path / "m.npz"))

    def write(name, arrays):
        resave(tmp_path / name, **arrays)
        return tmp_path / name

    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not a readable recsys_ltr model file"):
        Recommender.load(tmp_path / "junk.npz")
    with pytest.raises(ValueError, match="no 'header'"):
        Recommender.load(write("a.npz", {k: v for k, v in good.items() if k != "header"}))
    with pytest.raises(ValueError, match="malformed JSON"):
        Recommender.load(write("b.npz", {**good, "header": np.array("{oops")}))
    with pytest.raises(ValueError, match="not a UserKNN"):
        UserKNN.load(tmp_path / "m.npz")
    header = json.loads(str(good["header"]))
    header["version"] = 99
    with pytest.raises(ValueError, match="version"):
        Recommender.load(write("c.npz", {**good, "header": np.array(json.dumps(header))}))
    bad = dict(good)
    bad["item_affinity_.indices"] = bad["item_affinity_.indices"] + 100  # out of range ids
    with pytest.raises(ValueError, match="item_affinity_"):
        Recommender.load(write("d.npz", bad))
    with pytest.raises(ValueError, match="item_affinity_"):
        Recommender.load(write("e.npz", {k: v for k, v in good.items() if k != "item_affinity_.data"}))
    with pytest.raises(FileNotFoundError):
        Recommender.load(tmp_path / "missing.npz")


def _edited(tmp_path, model, edit):
    """Save ``model``, apply ``edit(header, arrays)`` to the file and return its new path."""
    model.save(tmp_path / "good.npz")
    arrays = dict(np.load(tmp_path / "good.npz"))
    header = json.loads(str(arrays["header"]))
    edit(header, arrays)
    arrays["header"] = np.array(json.dumps(header))
    resave(tmp_path / "bad.npz", **arrays)
    return tmp_path / "bad.npz"


def _set(*keys_value):
    *keys, value = keys_value

    def edit(header, arrays):
        node = header
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


@pytest.mark.parametrize(
    "model, edit, message",
    [
        (ItemKNN(k=3), _set("params", "k", "x"), "invalid parameters: k must be an integer"),
        (ItemKNN(k=3), _set("params", "k", 1.5), "invalid parameters: k must be an integer"),
        (ItemKNN(k=3), _set("params", "k", -1), "invalid parameters: k must be >= 1"),
        (ItemKNN(k=3), _set("params", "k", 50), "larger than the catalogue"),
        (ItemKNN(k=3), _set("params", "num_threads", -3), "invalid parameters: num_threads"),
        (
            ItemKNN(k=3),
            _set("params", "show_progress", "yes"),
            "invalid parameters: show_progress must be True, False or None",
        ),
        (ItemKNN(k=3), _set("params", "k", 5), "k=5 exceeds the stored item_affinity_.k_max"),
        (ItemKNN(k=3), _set("state", "item_affinity_", "k_max", 10**6), "k_max=1000000 exceeds"),
        (ItemKNN(k=3), _set("state", "item_affinity_", "k_max", "7"), "malformed fitted state"),
        (ItemKNN(k=3), _set("state", "item_affinity_", "kind", "kunn"), "expected 'cosine'"),
        (ItemKNN(k=3), _set("state", "item_affinity_", "side", "user"), "Affinity with side=.item."),
        (KUNN(k=3), _set("params", "side", "items"), "invalid parameters: side must be one of"),
        (KUNN(k=3, side="user"), _set("params", "side", "item"), "fitted state holds"),
        (SLIM(l1=0.1, l2=0.5), _set("params", "l1", -1.0), "invalid parameters: l1"),
        (SLIM(l1=0.1, l2=0.5), _set("params", "l2", True), "invalid parameters: l2"),
        (SLIM(l1=0.1, l2=0.5), _set("params", "k", 3), "k=3 means 3"),
        (SLIM(k=3, l1=0.1, l2=0.5), _set("params", "k", 20), "larger than the catalogue"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_load_revalidates_parameters_and_state(tmp_path, model, edit, message):
    """A file whose parameters or state disagree is refused, never silently used."""
    model = clone(model).fit(feedback(10))
    with pytest.raises(ValueError, match=message):
        Recommender.load(_edited(tmp_path, model, edit))


def test_similar_items():
    D = feedback(11, 20, 8)
    model = ItemKNN(k=4).fit(D)
    ids, vals = model.similar_items(2, N=3)
    cos = brute_similarity(D.T)
    assert ids.tolist() == brute_knn(cos, 3)[2]
    np.testing.assert_allclose(vals, cos[2, ids])
    with pytest.raises(ValueError, match="out of range"):
        model.similar_items(8)


def test_similar_items_says_when_the_neighbourhood_is_shorter_than_n():
    D = feedback(14, 20, 8)
    model = ItemKNN(k=2).fit(D)
    with pytest.warns(UserWarning, match=r"ItemKNN.similar_items found fewer than N=5 items .* k=2 nearest"):
        ids, _ = model.similar_items(0, N=5)
    assert 0 < len(ids) <= 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as many as the neighbourhood holds: no warning
        assert len(model.similar_items(0, N=len(ids))[0]) == len(ids)


@pytest.mark.filterwarnings("ignore:.*found fewer than N")
@pytest.mark.parametrize("model", ALL_MODELS, ids=repr)
def test_similar_items_shapes_like_recommend(model):
    """Every model answers; arrays padded with -1/-inf to min(N, n_items - 1); never the item."""
    D = feedback(14, 20, 8)
    model = clone(model).fit(D)
    items = np.arange(8)
    for N in (3, 50):
        ids, vals = model.similar_items(items, N=N)
        assert ids.shape == vals.shape == (8, min(N, 7))
        for i in items:
            valid = ids[i] >= 0
            assert i not in ids[i] and np.all(valid[: valid.sum()])  # padding only at the end
            assert np.all(vals[i][~valid] == -np.inf) and np.all(np.diff(vals[i][valid]) <= 0)
            one_ids, one_vals = model.similar_items(int(i), N=N)
            np.testing.assert_array_equal(one_ids, ids[i][valid])
            np.testing.assert_array_equal(one_vals, vals[i][valid])


@pytest.mark.filterwarnings("ignore:.*found fewer than N")
def test_similar_items_of_user_based_models_and_popularity():
    D = feedback(15, 20, 8)
    pop = D.sum(axis=0)
    kunn_item = brute_similarity(D.T, 1 / np.sqrt(np.maximum(D.sum(axis=1), 1)))  # Eq. (4.5)
    for model, S in ((UserKNN(k=3), brute_similarity(D.T)), (KUNN(k=3, side="user"), kunn_item)):
        ids, vals = model.fit(D).similar_items(np.arange(8), N=7)
        for i, expected in enumerate(brute_knn(S, 7)):  # all positive neighbours, not k-limited
            assert ids[i][ids[i] >= 0].tolist() == expected
            np.testing.assert_allclose(vals[i][: len(expected)], S[i, expected], rtol=1e-12)
    ids, vals = Popularity().fit(D).similar_items(3, N=4)
    assert ids.tolist() == sorted((j for j in range(8) if j != 3), key=lambda j: (-pop[j], j))[:4]
    np.testing.assert_array_equal(vals, pop[ids])


@pytest.mark.filterwarnings("ignore:Method expects CSR")
def test_similar_items_convention_versus_implicit():
    """implicit lists the item itself first; ours drops it: implicit's N + 1 minus its head = our N."""
    implicit_nn = pytest.importorskip("implicit.nearest_neighbours")
    D = random_feedback(np.random.default_rng(16), 40, 10, 0.4, duplicate=False)  # cos(i, j) < 1
    ref = implicit_nn.CosineRecommender(K=10)
    ref.fit(sp.csr_matrix(D), show_progress=False)
    ours = ItemKNN(k=9).fit(D)
    for i in range(9):  # item 9 is empty
        their_ids, their_vals = ref.similar_items(i, N=5)
        assert their_ids[0] == i
        _ids, vals = ours.similar_items(i, N=4)
        np.testing.assert_allclose(vals, their_vals[1:], rtol=1e-6)  # ties may be ordered differently


def test_bad_inputs():
    D = feedback(12, 10, 6)
    with pytest.raises(ValueError, match="larger than the catalogue"):
        ItemKNN(k=6).fit(D)
    with pytest.raises(ValueError, match="larger than the catalogue"):
        UserKNN(k=10).fit(D)
    with pytest.raises(ValueError, match="larger than the catalogue"):
        KUNN(k=6).fit(D)
    with pytest.raises(ValueError, match="side"):
        KUNN(side="items").fit(D)
    with pytest.raises(ValueError, match="l1"):
        SLIM(l1=-1.0).fit(D)
    with pytest.raises(ValueError, match="larger than the catalogue"):
        SLIM(k=6).fit(D)
    with pytest.raises(ValueError, match="no interactions"):
        ItemKNN(k=1).fit(sp.csr_matrix((3, 3)))
    with pytest.raises(NotFittedError, match="not fitted"):
        ItemKNN().score([0])
    model = ItemKNN(k=2).fit(D)
    with pytest.raises(ValueError, match="out of range"):
        model.score([10])
    with pytest.raises(TypeError, match="integers"):
        model.score([0.5])
    with pytest.raises(ValueError, match="expected shape"):
        model.recommend([0, 1], sp.csr_matrix(D[:1]))
    dense_rows = model.recommend(0, D[:1])  # implicit's user_items, dense allowed
    np.testing.assert_array_equal(dense_rows[0], model.recommend(0, sp.csr_matrix(D[:1]))[0])
    with pytest.raises(ValueError, match="out of range"):
        model.recommend(0, filter_items=[6])
    with pytest.raises(ValueError, match=">= 1"):
        model.recommend(0, N=0)
    with pytest.raises(ValueError, match="needs the users' rows"):
        model.recommend(0, recalculate_user=True)


def test_estimator_conventions_and_threads():
    D = feedback(13, 25, 12)
    model = KUNN(k=4, side="user", num_threads=1)
    assert model.get_params() == {"k": 4, "side": "user", "num_threads": 1, "show_progress": None}
    assert clone(model.set_params(k=5)).k == 5
    one = model.fit(D).score(np.arange(25))
    two = clone(model).set_params(num_threads=2).fit(D).score(np.arange(25))
    np.testing.assert_array_equal(one, two)


# ----------------------------------------------------------------------------- sparse recommend
@pytest.mark.kernels
@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**16),
    st.sampled_from(["item", "user", "user-recalc", "rp3", "slim", "kunn-i", "kunn-u"]),
    st.integers(1, 30),
    st.booleans(),
    st.sampled_from([None, "filter", "items"]),
)
def test_recommend_of_neighbourhood_models_ranks_the_sparse_product_like_brute_force(seed, kind, N, liked, restrict):
    """The sparse top-N path (no dense score rows) against a brute-force ranking of the dense
    scores: the same ids in the same order and bitwise-equal scores, zero scores included."""
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(random_feedback(rng, 12, 9, density=0.3))
    make = {
        "item": lambda: ItemKNN(k=3),
        "user": lambda: UserKNN(k=3),
        "user-recalc": lambda: UserKNN(k=3),
        "rp3": lambda: RP3beta(k=3),
        "slim": lambda: SLIM(k=4),
        "kunn-i": lambda: KUNN(k=3, side="item"),
        "kunn-u": lambda: KUNN(k=3, side="user"),
    }[kind]
    model = make().fit(X)
    users = np.arange(X.shape[0])
    extra = rng.choice(9, 3, replace=False)
    kwargs = {"filter_items": extra} if restrict == "filter" else {"items": extra} if restrict == "items" else {}
    recalc = kind == "user-recalc"
    ids, scores = model.recommend(
        users, X, N=N, filter_already_liked_items=liked, recalculate_user=recalc, **kwargs
    )  # fmt: skip
    R, B = model._score_product(X, users, recalc)
    liked_rows = X if liked else None
    assert_recommend_like_brute_force(
        ids, scores, (R @ B).toarray(), liked_rows, model.item_popularity_, N, extra, restrict
    )


@pytest.mark.kernels
@settings(max_examples=20, deadline=None)
@given(
    st.integers(0, 2**16),
    st.sampled_from(["item", "rp3", "slim", "kunn"]),
    st.integers(1, 12),
    st.sampled_from([None, "filter", "items"]),
)
@pytest.mark.filterwarnings("ignore:.*found fewer than N")
def test_similar_items_of_sparse_affinities_rank_like_brute_force(seed, kind, N, restrict):
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(random_feedback(rng, 12, 9, density=0.3))
    make = {"item": ItemKNN, "rp3": RP3beta, "slim": lambda k: SLIM(k=k + 1), "kunn": KUNN}[kind]
    model = make(k=3).fit(X)
    S = model._item_similarity_matrix().toarray()
    extra = rng.choice(9, 3, replace=False)
    kwargs = {"filter_items": extra} if restrict == "filter" else {"items": extra} if restrict == "items" else {}
    ids, scores = model.similar_items(np.arange(9), N=N, **kwargs)
    for i in range(9):
        out = set(extra) if restrict == "filter" else set(range(9)) - set(extra) if restrict == "items" else set()
        want = sorted((j for j in range(9) if j != i and j not in out and S[i, j] != 0), key=lambda j: (-S[i, j], j))
        got = [j for j in ids[i] if j >= 0]
        assert got == want[:N]
        np.testing.assert_array_equal(scores[i, : len(got)], S[i, got])
