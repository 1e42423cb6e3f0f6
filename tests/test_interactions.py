"""Tests for recsys_ltr.Interactions: construction, binarization, k-core, id maps, bad input."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import Interactions
from recsys_ltr.interactions import UnknownIdError


def _reference(users, items, weights, threshold=None, rule=">="):
    """Plain-Python reference: sum duplicates, binarize, drop empty rows/columns."""
    total = {}
    for u, i, w in zip(users, items, weights):
        total[(u, i)] = total.get((u, i), 0.0) + w
    if threshold is None:
        pos = {p for p, w in total.items() if w > 0}
    else:
        pos = {p for p, w in total.items() if (w >= threshold if rule == ">=" else w > threshold)}
    return pos


def _pairs(inter):
    df = inter.to_dataframe()
    return set(zip(df["user"].tolist(), df["item"].tolist()))


def _canonical(X):
    assert isinstance(X, sp.csr_matrix)
    assert X.dtype == np.float64 and X.indices.dtype == np.int32
    assert X.has_sorted_indices
    assert np.all(X.data == 1.0)


# ---------------------------------------------------------------------- construction
def test_from_dataframe_hand_case():
    df = pd.DataFrame({"u": ["b", "a", "a", "c", "b", "b"], "i": [10, 20, 10, 30, 10, 20], "r": [5, 3, 4, 1, 1, 4]})
    inter = Interactions.from_dataframe(df, user_col="u", item_col="i", weight_col="r", threshold=4)
    # sums: (b,10)=6, (a,20)=3, (a,10)=4, (c,30)=1, (b,20)=4 -> positives (a,10),(b,10),(b,20)
    assert list(inter.user_ids) == ["a", "b"]
    assert list(inter.item_ids) == [10, 20]
    np.testing.assert_array_equal(inter.matrix.toarray(), [[1, 0], [1, 1]])
    assert inter.shape == (2, 2) and inter.n_users == 2 and inter.n_items == 2 and inter.nnz == 3
    np.testing.assert_array_equal(inter.item_popularity, [2, 1])
    np.testing.assert_array_equal(inter.user_activity, [1, 2])
    _canonical(inter.matrix)


@pytest.mark.parametrize(
    "roles, message",
    [
        (dict(user_col="u", item_col="u"), "user_col and item_col both name the column 'u'"),
        (dict(item_col="i", weight_col="i"), "item_col and weight_col both name the column 'i'"),
        (dict(weight_col="r", timestamp_col="r"), "weight_col and timestamp_col both name the column 'r'"),
    ],
)
def test_one_column_in_two_roles_is_refused(roles, message):
    df = pd.DataFrame({"u": ["a", "b"], "i": [1, 2], "r": [1, 2]})
    with pytest.raises(ValueError, match=message):
        Interactions.from_dataframe(df, **{"user_col": "u", "item_col": "i", **roles})


def test_strict_rule_and_summing_before_threshold():
    # (1, 1) has two events of 2 -> sum 4: a positive for >= 4 and not for > 4
    users, items, w = [1, 1, 2], [1, 1, 1], [2, 2, 5]
    assert Interactions.from_arrays(users, items, w, threshold=4).nnz == 2
    assert Interactions.from_arrays(users, items, w, threshold=4, rule=">").nnz == 1


def test_negative_weights_allowed_as_explicit_negatives_with_threshold():
    inter = Interactions.from_arrays([0, 0, 1], [0, 1, 1], [-1.0, 1.0, 2.0], threshold=0, rule=">")
    assert _pairs(inter) == {(0, 1), (1, 1)}
    with pytest.raises(ValueError, match="negative weight"):
        Interactions.from_arrays([0, 0, 1], [0, 1, 1], [-1.0, 1.0, 2.0])


def test_zero_summed_weight_is_not_a_positive():
    inter = Interactions.from_arrays([0, 0, 1], [0, 0, 1], [1.0, -1.0, 1.0], threshold=0, rule=">")
    assert _pairs(inter) == {(1, 1)}


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from(["x", "y", "z", "w"]), st.integers(-2, 5)),
        min_size=1,
        max_size=40,
    ),
    threshold=st.one_of(st.none(), st.integers(-1, 4)),
    rule=st.sampled_from([">=", ">"]),
)
def test_from_arrays_matches_reference(data, threshold, rule):
    users, items, weights = map(list, zip(*data))
    if threshold is None:
        weights = [abs(w) for w in weights]
    expected = _reference(users, items, weights, threshold, rule)
    if not expected:
        with pytest.raises(ValueError, match="no positive"):
            Interactions.from_arrays(users, items, weights, threshold=threshold, rule=rule)
        return
    inter = Interactions.from_arrays(users, items, weights, threshold=threshold, rule=rule)
    assert _pairs(inter) == expected
    assert list(inter.user_ids) == sorted({u for u, _ in expected})
    assert list(inter.item_ids) == sorted({i for _, i in expected})
    _canonical(inter.matrix)
    # id maps both ways
    for u, i in expected:
        assert inter.matrix[inter.user_index(u), inter.item_index(i)] == 1
    np.testing.assert_array_equal(inter.user_index(inter.user_ids), np.arange(inter.n_users))


def test_no_weights_counts_each_event_and_keeps_all_pairs():
    inter = Interactions.from_arrays(["u1", "u1", "u2"], ["a", "a", "b"])
    assert _pairs(inter) == {("u1", "a"), ("u2", "b")}


def test_mixed_hashable_ids_are_kept_with_their_type():
    inter = Interactions.from_arrays([1, "x", 2.5], ["a", "a", "b"])
    assert set(inter.user_ids.tolist()) == {1, "x", 2.5}
    assert inter.user_index("x") == list(inter.user_ids).index("x")
    assert inter.user_index(1) == list(inter.user_ids).index(1)


@pytest.mark.parametrize("users", [[2, "2", 3], [2.5, "2.5"], [(0, 1), "(0, 1)"]])
def test_ids_of_two_types_that_read_the_same_are_refused(users):
    """2 and "2" in one log (two files, one parsed as numbers) were silently two users."""
    with pytest.raises(ValueError, match="users holds ids of different types that read the same"):
        Interactions.from_arrays(users, ["a"] * len(users))
    with pytest.raises(ValueError, match="items holds ids of different types"):
        Interactions.from_dataframe(pd.DataFrame({"user": ["u"] * len(users), "item": users}))


def test_from_sparse_keeps_index_and_ids():
    X = sp.csr_matrix(np.array([[0, 2, 0], [0, 0, 0], [1, 0, 3]]))
    inter = Interactions.from_sparse(X, user_ids=["a", "b", "c"], item_ids=[7, 8, 9])
    assert inter.shape == (3, 3)  # empty row kept
    np.testing.assert_array_equal(inter.matrix.toarray(), (X.toarray() > 0).astype(float))
    assert inter.user_index("c") == 2 and inter.item_index(8) == 1
    dropped = Interactions.from_sparse(X, user_ids=["a", "b", "c"], drop_empty=True)
    assert list(dropped.user_ids) == ["a", "c"]
    thr = Interactions.from_sparse(X, threshold=2)
    np.testing.assert_array_equal(thr.matrix.toarray(), [[0, 1, 0], [0, 0, 0], [0, 0, 1]])


def test_from_sparse_dense_array_and_duplicate_coo():
    coo = sp.coo_matrix(([1.0, 1.0, 1.0], ([0, 0, 1], [1, 1, 0])), shape=(2, 2))
    inter = Interactions.from_sparse(coo, threshold=2)
    np.testing.assert_array_equal(inter.matrix.toarray(), [[0, 1], [0, 0]])
    dense = Interactions.from_sparse(np.array([[0.0, 1.0], [3.0, 0.0]]))
    assert dense.nnz == 2


def test_constructor_matrix_matches_check_feedback():
    rng = np.random.default_rng(0)
    X = sp.random(30, 20, density=0.2, random_state=rng, format="csr")
    inter = Interactions.from_sparse(X)
    _canonical(inter.matrix)
    np.testing.assert_array_equal(inter.matrix.toarray(), (X.toarray() > 0).astype(float))


# ---------------------------------------------------------------------- k-core
def _kcore_reference(pairs, min_u, min_i):
    pairs = set(pairs)
    while True:
        uc, ic = {}, {}
        for u, i in pairs:
            uc[u] = uc.get(u, 0) + 1
            ic[i] = ic.get(i, 0) + 1
        keep = {(u, i) for u, i in pairs if uc[u] >= min_u and ic[i] >= min_i}
        if keep == pairs:
            return pairs
        pairs = keep


@settings(max_examples=40, deadline=None)
@given(
    pairs=st.sets(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=60),
    min_u=st.integers(0, 4),
    min_i=st.integers(0, 4),
)
def test_k_core_matches_reference(pairs, min_u, min_i):
    users, items = zip(*sorted(pairs))
    expected = _kcore_reference(pairs, min_u, min_i)
    if not expected:
        with pytest.raises(ValueError, match="k-core"):
            Interactions.from_arrays(users, items, min_user_count=min_u, min_item_count=min_i)
        return
    inter = Interactions.from_arrays(users, items, min_user_count=min_u, min_item_count=min_i)
    assert _pairs(inter) == expected
    assert inter.user_activity.min() >= min_u and inter.item_popularity.min() >= min_i


def test_k_core_cascades():
    # item 2 has one user; removing it leaves user 1 with one item, which then removes item 1
    users = [0, 0, 0, 1, 1, 2, 2, 2]
    items = [0, 1, 3, 1, 2, 0, 3, 1]
    inter = Interactions.from_arrays(users, items, min_user_count=2, min_item_count=2)
    assert _pairs(inter) == {(0, 0), (0, 1), (0, 3), (2, 0), (2, 1), (2, 3)}


def test_k_core_that_removes_everything_says_so_plainly():
    # 9 ratings, 6 positives (>= 4): no user reaches 5 positives, so the filter leaves nothing
    df = pd.DataFrame(
        {"user": [1, 1, 1, 2, 2, 3, 3, 3, 3], "item": [10, 11, 12, 10, 13, 11, 12, 13, 14],
         "rating": [5, 4, 3, 4, 5, 2, 4, 5, 4]}
    )  # fmt: skip
    with pytest.raises(ValueError) as err:
        Interactions.from_dataframe(df, weight_col="rating", threshold=4, min_user_count=5)
    msg = str(err.value)
    assert msg.startswith("the k-core filter removed every interaction")
    for part in ("min_user_count=5", "of the 7 positives", "most active user had 3", "most popular item 2"):
        assert part in msg
    assert Interactions.from_dataframe(df, weight_col="rating", threshold=4, min_user_count=2).nnz == 7


# ---------------------------------------------------------------------- item features
def test_with_item_features_aligns_by_external_id():
    inter = Interactions.from_arrays([0, 0, 1], ["b", "a", "c"])
    F = np.array([[1, 0], [0, 2], [5, 5]])  # rows for items c, a, zz (zz unknown)
    out = inter.with_item_features(F, item_ids=["c", "a", "zz"], feature_names=["f", "g"])
    np.testing.assert_array_equal(out.item_features.toarray(), [[0, 2], [0, 0], [1, 0]])  # a, b, c
    assert list(out.item_feature_names) == ["f", "g"]
    assert inter.item_features is None  # original unchanged
    assert out.matrix is inter.matrix


def test_item_features_bad_input():
    inter = Interactions.from_arrays([0, 1], [0, 1])
    with pytest.raises(ValueError, match="rows"):
        inter.with_item_features(np.ones((3, 2)))
    with pytest.raises(ValueError, match="non-negative"):
        inter.with_item_features(-np.ones((2, 2)))
    with pytest.raises(ValueError, match="names"):
        inter.with_item_features(np.ones((2, 2)), feature_names=["a"])
    with pytest.raises(ValueError, match="length"):
        inter.with_item_features(np.ones((2, 2)), item_ids=[0])
    with pytest.raises(ValueError, match=r"unique .*duplicated: \[0\]"):  # would sum the two rows
        inter.with_item_features(np.ones((3, 2)), item_ids=[0, 1, 0])


# ---------------------------------------------------------------------- lookups and output
def test_lookup_unknown_ids_named():
    inter = Interactions.from_arrays(["a", "b"], [1, 2])
    with pytest.raises(UnknownIdError, match=r"^unknown user id\(s\): \['zz'\]$"):
        inter.user_index(["a", "zz"])
    for exc in (KeyError, ValueError):  # the issue asks for ValueError; KeyError kept for mappings
        with pytest.raises(exc, match="99"):
            inter.item_index(99)
    assert inter.item_index([]).size == 0


def test_tuple_ids_are_scalars_only_when_ids_are_tuples():
    inter = Interactions.from_arrays([(1, 2), (3, 4), (1, 2)], ["x", "y", "z"])
    assert inter.user_index((3, 4)) == list(inter.user_ids).index((3, 4))
    np.testing.assert_array_equal(inter.user_index([(3, 4), (1, 2)]), [1, 0])
    with pytest.raises(UnknownIdError, match=r"\(9, 9\)"):
        inter.user_index((9, 9))
    ints = Interactions.from_arrays([5, 7], [1, 2])  # non-tuple ids: a tuple is a sequence
    np.testing.assert_array_equal(ints.user_index((7, 5)), [1, 0])
    mixed = Interactions.from_arrays(np.array([0, 1, (0, 1)], dtype=object), ["x", "y", "z"])
    assert mixed.user_index((0, 1)) == 2  # one id, though a tuple of two known ids too
    with pytest.raises(TypeError, match="hashable"):
        mixed.user_index([[0, 1]])


def test_to_dataframe_round_trip():
    rng = np.random.default_rng(3)
    users = rng.integers(0, 20, 200)
    items = rng.choice(np.array(list("abcdefghij"), dtype=object), 200)
    inter = Interactions.from_arrays(users, items)
    back = Interactions.from_dataframe(inter.to_dataframe())
    assert (back.matrix != inter.matrix).nnz == 0
    np.testing.assert_array_equal(back.user_ids, inter.user_ids)
    assert "Interactions(" in repr(inter)


# ---------------------------------------------------------------------- bad input, one by one
def test_empty_data():
    with pytest.raises(ValueError, match="empty"):
        Interactions.from_arrays([], [])
    with pytest.raises(ValueError, match="empty dimension"):
        Interactions.from_sparse(sp.csr_matrix((0, 3)))
    with pytest.raises(ValueError, match="no positive"):
        Interactions.from_sparse(sp.csr_matrix((3, 3)))


def test_nan_and_inf_weights():
    with pytest.raises(ValueError, match="NaN or infinite"):
        Interactions.from_arrays([0, 1], [0, 1], [1.0, np.nan])
    with pytest.raises(ValueError, match="NaN or infinite"):
        Interactions.from_arrays([0, 1], [0, 1], [1.0, np.inf], threshold=1)
    X = sp.csr_matrix(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        Interactions.from_sparse(X)


def test_missing_ids():
    with pytest.raises(ValueError, match="missing ids"):
        Interactions.from_arrays([0, None], [0, 1])
    with pytest.raises(ValueError, match="missing ids"):
        Interactions.from_arrays([0, 1], [0.0, np.nan])


def test_negative_weights_without_threshold():
    with pytest.raises(ValueError, match="negative"):
        Interactions.from_arrays([0, 1], [0, 1], [1.0, -2.0])
    with pytest.raises(ValueError, match="negative"):
        Interactions.from_sparse(sp.csr_matrix(np.array([[1.0, -1.0]])))


def test_columns_of_different_lengths():
    with pytest.raises(ValueError, match="different lengths"):
        Interactions.from_arrays([0, 1, 2], [0, 1])
    with pytest.raises(ValueError, match="weights has length"):
        Interactions.from_arrays([0, 1], [0, 1], [1.0])


def test_non_numeric_weights_and_bad_types():
    with pytest.raises(TypeError, match="numeric"):
        Interactions.from_arrays([0, 1], [0, 1], ["a", "b"])
    with pytest.raises(TypeError, match="DataFrame"):
        Interactions.from_dataframe({"user": [0], "item": [0]})
    with pytest.raises(ValueError, match="not in the DataFrame"):
        Interactions.from_dataframe(pd.DataFrame({"user": [0], "item": [0]}), weight_col="rating")
    with pytest.raises(TypeError, match="sparse"):
        Interactions.from_sparse([[1, 0]])
    with pytest.raises(TypeError, match="threshold"):
        Interactions.from_arrays([0], [0], threshold="4")
    with pytest.raises(ValueError, match="rule"):
        Interactions.from_arrays([0], [0], threshold=1, rule="=>")
    with pytest.raises(TypeError, match="min_user_count"):
        Interactions.from_arrays([0], [0], min_user_count=1.5)
    with pytest.raises(ValueError, match="min_item_count"):
        Interactions.from_arrays([0], [0], min_item_count=-1)


def test_sparse_with_explicit_zeros():
    X = sp.csr_matrix((np.array([1.0, 0.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    with pytest.raises(ValueError, match="explicit zero"):
        Interactions.from_sparse(X)
    # a threshold makes the zero an explicit negative
    assert Interactions.from_sparse(X, threshold=0, rule=">").nnz == 1


def test_sparse_wrong_shape_or_id_map_length():
    X = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="user_ids has length 2"):
        Interactions.from_sparse(X, user_ids=["a", "b"])
    with pytest.raises(ValueError, match="item_ids has length 4"):
        Interactions.from_sparse(X, item_ids=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="unique"):
        Interactions.from_sparse(X, user_ids=["a", "a", "b"])
    with pytest.raises(ValueError, match="2-D"):
        Interactions.from_sparse(np.ones(3))
