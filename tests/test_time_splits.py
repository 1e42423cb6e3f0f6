"""Timestamps in Interactions and the time-ordered splits (last_n, last_fraction, time_cut): brute-force
references on random inputs (hypothesis), hand cases and bad input."""

import datetime
import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr import Interactions, split
from recsys_ltr.interactions import check_timestamps


# ----------------------------------------------------------------------------- references
def _reference_times(users, items, weights, times, threshold, min_user, min_item):
    """Plain Python: sum each pair's weights, keep its latest time, binarize, k-core, drop empties."""
    total, latest = {}, {}
    for u, i, w, t in zip(users, items, weights, times):
        total[(u, i)] = total.get((u, i), 0.0) + w
        latest[(u, i)] = max(latest.get((u, i), t), t)
    pos = {p for p, w in total.items() if (w > 0 if threshold is None else w >= threshold)}
    while True:
        per_user, per_item = {}, {}
        for u, i in pos:
            per_user[u] = per_user.get(u, 0) + 1
            per_item[i] = per_item.get(i, 0) + 1
        keep = {(u, i) for u, i in pos if per_user[u] >= max(min_user, 1) and per_item[i] >= max(min_item, 1)}
        if keep == pos:
            return {(u, i): latest[(u, i)] for u, i in pos}
        pos = keep


def _triples(data):
    df = data.to_dataframe()
    return {(u, i): t for u, i, t in zip(df["user"].tolist(), df["item"].tolist(), df["timestamp"].tolist())}


def _entries(X, times):
    """Per user, the (time, item) pairs of a CSR matrix and its aligned times."""
    return [[(times[p], int(X.indices[p])) for p in range(X.indptr[u], X.indptr[u + 1])] for u in range(X.shape[0])]


def _items(P, u):
    return set(P.indices[P.indptr[u] : P.indptr[u + 1]].tolist())


def _check_partition(X, parts, exact=True):
    for P in parts:
        assert isinstance(P, sp.csr_matrix) and P.shape == X.shape and P.has_sorted_indices
        assert P.dtype == np.float64 and np.all(P.data == 1)
    total = parts[0] + parts[1] + parts[2]
    assert total.nnz == 0 or total.max() <= 1  # disjoint
    if exact:
        assert (total != X).nnz == 0
    else:
        assert (total - total.multiply(X)).nnz == 0  # a subset of X


def _random_timed(seed, n_users=25, n_items=20, density=0.3, n_times=6):
    """A random binary CSR with integer times drawn from few values (many ties)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n_users, n_items, density=density, random_state=rng, format="csr")
    X.data[:] = 1.0
    X.sort_indices()
    return X, rng.integers(0, n_times, X.nnz)


# ----------------------------------------------------------------------------- Interactions
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 80),
    threshold=st.sampled_from([None, 1.0, 2.5]),
    min_user=st.integers(0, 3),
    min_item=st.integers(0, 3),
)
def test_timestamps_follow_duplicates_binarization_and_the_k_core(seed, n, threshold, min_user, min_item):
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 8, n)
    items = rng.choice(np.array(["a", "b", "c", "d", "e", "f"], dtype=object), n)
    weights = rng.integers(-1, 4, n).astype(float)
    times = rng.integers(0, 1000, n)
    expected = _reference_times(
        users.tolist(), items.tolist(), weights.tolist(), times.tolist(), threshold, min_user, min_item
    )
    kwargs = dict(threshold=threshold if threshold is not None else 0.0, rule=">" if threshold is None else ">=")
    kwargs.update(min_user_count=min_user, min_item_count=min_item, timestamps=times)
    if not expected:
        with pytest.raises(ValueError):
            Interactions.from_arrays(users, items, weights, **kwargs)
        return
    data = Interactions.from_arrays(users, items, weights, **kwargs)
    assert _triples(data) == expected
    assert data.timestamps.dtype == np.int64 and data.timestamps.size == data.nnz
    # the same through the DataFrame constructor
    df = pd.DataFrame({"u": users, "i": items, "w": weights, "t": times})
    other = Interactions.from_dataframe(
        df,
        user_col="u",
        item_col="i",
        weight_col="w",
        timestamp_col="t",
        **{k: v for k, v in kwargs.items() if k != "timestamps"},
    )
    np.testing.assert_array_equal(other.timestamps, data.timestamps)


def test_a_duplicate_keeps_its_latest_time_hand_case():
    log = pd.DataFrame(
        {
            "user": ["ann", "ann", "ann", "bob", "bob", "cy"],
            "item": ["x", "y", "x", "x", "y", "y"],
            "rating": [5, 2, 1, 4, 5, 1],
            "when": [30, 10, 50, 20, 40, 60],
        }
    )
    data = Interactions.from_dataframe(log, weight_col="rating", threshold=4, timestamp_col="when")
    # (ann, x): 5 + 1 = 6 >= 4, latest event at 50 (its weight 1 alone would not pass); (ann, y) = 2 drops;
    # (cy, y) = 1 drops, so cy is dropped with it
    assert _triples(data) == {("ann", "x"): 50, ("bob", "x"): 20, ("bob", "y"): 40}
    assert repr(data) == "Interactions(2 users x 2 items, 3 positives, timestamps)"
    np.testing.assert_array_equal(data.timestamps, [50, 20, 40])  # aligned with matrix.indices, row by row
    assert data.with_item_features(np.ones((2, 1))).timestamps is not None


def test_datetimes_are_kept_and_time_zones_become_utc():
    stamps = pd.to_datetime(["2024-03-01 10:00", "2024-03-01 09:00"]).tz_localize("Europe/Paris")
    data = Interactions.from_dataframe(pd.DataFrame({"user": [1, 2], "item": [1, 1], "t": stamps}), timestamp_col="t")
    assert data.timestamps.dtype.kind == "M"
    assert list(pd.DatetimeIndex(data.timestamps)) == [
        pd.Timestamp("2024-03-01 09:00"),
        pd.Timestamp("2024-03-01 08:00"),
    ]
    py = [datetime.datetime(2020, 1, 2), datetime.datetime(2020, 1, 1)]
    data = Interactions.from_arrays([1, 2], [1, 1], timestamps=py)
    assert data.timestamps.dtype.kind == "M"
    floats = Interactions.from_arrays([1, 2], [1, 1], timestamps=[1.5, 0.25]).timestamps
    assert floats.dtype == np.float64 and floats.tolist() == [1.5, 0.25]


@pytest.mark.parametrize(
    "times, error, message",
    [
        ([1, 2], ValueError, "timestamps has length 2, expected 3"),
        ([1.0, np.nan, 3.0], ValueError, "NaN or infinite"),
        ([1.0, np.inf, 3.0], ValueError, "NaN or infinite"),
        ([1, None, 3], ValueError, "missing times"),
        (np.array(["2020-01-01", "NaT", "2020-01-02"], dtype="datetime64[D]"), ValueError, "NaT"),
        (["2020-01-01", "2020-01-02", "2020-01-03"], TypeError, "pandas.to_datetime"),
        ([True, False, True], TypeError, "booleans"),
        ([1j, 2j, 3j], TypeError, "complex"),
        ([[1], [2], [3]], ValueError, "1-D"),
        ([1, "a", 2.0], TypeError, "numbers or datetimes"),
    ],
)
def test_bad_timestamps_are_clear_errors(times, error, message):
    with pytest.raises(error, match=message):
        Interactions.from_arrays([1, 2, 3], [1, 1, 2], timestamps=times)


def test_timestamps_missing_column_and_constructor_length():
    with pytest.raises(ValueError, match=r"column\(s\) \['t'\] not in the DataFrame"):
        Interactions.from_dataframe(pd.DataFrame({"user": [1], "item": [1]}), timestamp_col="t")
    with pytest.raises(ValueError, match="has length 1, expected 2"):
        Interactions(sp.csr_matrix(np.eye(2)), timestamps=[1])
    assert check_timestamps(np.array([3, 1], dtype=np.uint8), 2).dtype == np.int64


# ----------------------------------------------------------------------------- last_n, last_fraction
def _expected_counts(n, val, test):
    r = lambda x: math.floor(x + 0.5)  # noqa: E731
    n_test = min(r(test * n), max(n - 1, 0))
    return n_test, max(min(r(val * n), n - n_test, n - 1 - n_test), 0)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    density=st.floats(0.05, 0.7),
    val=st.sampled_from([0.0, 0.1, 0.3]),
    test=st.sampled_from([0.1, 0.2, 0.5]),
    n=st.integers(1, 3),
    val_n=st.integers(0, 2),
)
def test_per_user_time_splits_against_a_brute_force(seed, density, val, test, n, val_n):
    X, times = _random_timed(seed, density=density)
    if X.nnz == 0:
        return
    cases = [
        (split.last_fraction(X, val, test, timestamps=times, random_state=seed), None),
        (split.last_n(X, n, val_n, timestamps=times, random_state=seed), (n, val_n)),
    ]
    for parts, fixed in cases:
        _check_partition(X, parts)
        train, v, t = parts
        for u, entries in enumerate(_entries(X, times)):
            count = len(entries)
            if fixed is None:
                n_test, n_val = _expected_counts(count, val, test)
            else:
                n_test, n_val = fixed if count >= sum(fixed) + 1 else (0, 0)
            assert (len(_items(t, u)), len(_items(v, u))) == (n_test, n_val)
            when = {item: time for time, item in entries}
            # the latest go to test, the ones before to validation: no later train or validation positive
            groups = [[when[i] for i in _items(P, u)] for P in (train, v, t)]
            for early, late in ((groups[0], groups[1]), (groups[1], groups[2]), (groups[0], groups[2])):
                assert not early or not late or max(early) <= min(late)
            # with distinct times, exactly the brute force's choice
            if len(set(when.values())) == count:
                ordered = [item for _, item in sorted(entries)]
                assert _items(t, u) == set(ordered[count - n_test :])
                assert _items(v, u) == set(ordered[count - n_test - n_val : count - n_test])


def test_ties_are_ordered_by_the_seed_not_by_the_item_index():
    # one user, 40 items all at the same time: which item is "latest" depends on the seed only
    X = sp.csr_matrix(np.ones((1, 40)))
    times = np.zeros(40, dtype=np.int64)
    picks = [split.last_n(X, 1, timestamps=times, random_state=s)[2].indices[0] for s in range(30)]
    assert len(set(picks)) > 5  # not always the largest index
    again = [split.last_n(X, 1, timestamps=times, random_state=s)[2].indices[0] for s in range(30)]
    assert picks == again  # same seed, same split


def test_last_n_and_last_fraction_hand_cases():
    log = pd.DataFrame(
        {
            "user": ["a"] * 5 + ["b"] * 2 + ["c"] * 10,
            "item": [1, 2, 3, 4, 5, 1, 2, *range(1, 11)],
            "t": [5, 1, 4, 2, 3, 7, 8, *[10 - k for k in range(10)]],
        }
    )
    data = Interactions.from_dataframe(log, timestamp_col="t")
    _, val, test = split.last_n(data, n=1, val_n=1)
    # a: latest item 1 (t=5), then 3 (t=4); b has 2 < 3 positives: all in train; c: item 1 (t=10), item 2 (t=9)
    assert [_items(test, u) for u in range(3)] == [{0}, set(), {0}]
    assert [_items(val, u) for u in range(3)] == [{2}, set(), {1}]
    _, val, test = split.last_fraction(data, val=0.1, test=0.2)
    # a: n=5 -> 1 test + 1 val (0.5 rounds up); b: n=2 -> 0; c: n=10 -> 2 test, 1 val (the latest: items 1, 2; 3)
    assert [_items(test, u) for u in range(3)] == [{0}, set(), {0, 1}]
    assert [_items(val, u) for u in range(3)] == [{2}, set(), {2}]
    counts = np.diff(data.matrix.indptr)
    n_test, n_val = split.split_counts(counts, counts, 0.1, 0.2)
    np.testing.assert_array_equal(np.diff(test.indptr), n_test)
    np.testing.assert_array_equal(np.diff(val.indptr), n_val)


# ----------------------------------------------------------------------------- time_cut
def _warm(u, i, history, drop_users, drop_items):
    return (not drop_users or any(v == u for v, _ in history)) and (not drop_items or any(j == i for _, j in history))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cut=st.integers(1, 5),
    window=st.one_of(st.none(), st.integers(1, 4)),
    drop_users=st.booleans(),
    drop_items=st.booleans(),
)
def test_time_cut_against_a_brute_force(seed, cut, window, drop_users, drop_items):
    X, times = _random_timed(seed, n_times=7)
    if X.nnz == 0 or times.min() >= cut or times.max() < cut:
        return
    val_start = None if window is None or cut - window <= times.min() else cut - window
    train, val, test = split.time_cut(
        X, cut, val_start, timestamps=times, drop_cold_users=drop_users, drop_cold_items=drop_items
    )
    _check_partition(X, (train, val, test), exact=not (drop_users or drop_items))
    start = cut if val_start is None else val_start
    entries = [(u, i, t) for u, row in enumerate(_entries(X, times)) for t, i in row]
    ref_train = {(u, i) for u, i, t in entries if t < start}
    ref_val = {(u, i) for u, i, t in entries if start <= t < cut}
    ref_test = {(u, i) for u, i, t in entries if t >= cut}
    # cold: no positive in the parts returned before (validation: train; test: train and the validation kept)
    ref_val = {(u, i) for u, i in ref_val if _warm(u, i, ref_train, drop_users, drop_items)}
    ref_test = {(u, i) for u, i in ref_test if _warm(u, i, ref_train | ref_val, drop_users, drop_items)}

    def pairs(P):
        coo = P.tocoo()
        return set(zip(coo.row.tolist(), coo.col.tolist()))

    assert (pairs(train), pairs(val), pairs(test)) == (ref_train, ref_val, ref_test)


def test_time_cut_with_dates_hand_case():
    log = pd.DataFrame(
        {
            "user": ["a", "a", "a", "b", "b", "c"],
            "item": ["x", "y", "z", "x", "z", "w"],
            "t": pd.to_datetime(["2024-01-01", "2024-02-10", "2024-03-05", "2024-01-20", "2024-03-01", "2024-03-02"]),
        }
    )
    data = Interactions.from_dataframe(log, timestamp_col="t")
    train, val, test = split.time_cut(data, "2024-03-01", val_start=datetime.date(2024, 2, 1))
    # internal order: users a, b, c; items w, x, y, z
    assert [_items(train, u) for u in range(3)] == [{1}, {1}, set()]  # a: x (Jan 1); b: x (Jan 20)
    assert [_items(val, u) for u in range(3)] == [{2}, set(), set()]  # a: y (Feb 10)
    assert [_items(test, u) for u in range(3)] == [{3}, {3}, {0}]  # a: z, b: z (Mar 1: the cut is in test), c: w
    # c (only "w" on 2024-03-02) has no history: kept by default, dropped on request; "w" is a cold item too
    _, _, warm = split.time_cut(data, "2024-03-01", drop_cold_users=True)
    assert warm.nnz == 2 and _items(warm, data.user_index("c")) == set()
    _, _, warm_items = split.time_cut(data, "2024-03-01", drop_cold_items=True)
    assert data.item_index("w") not in warm_items.indices
    # a time-zone-aware cut is read in UTC
    tz = split.time_cut(data, pd.Timestamp("2024-03-01 01:00", tz="Europe/Paris"))[2]
    assert (tz != test).nnz == 0


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda d: split.time_cut(d, 0), ValueError, "leaves the training part empty: the timestamps run from 0 to 9"),
        (lambda d: split.time_cut(d, 10), ValueError, "leaves the test part empty"),
        (
            lambda d: split.time_cut(d, 5, val_start=5),
            ValueError,
            "val_start=5 must be after the first time and before",
        ),
        (lambda d: split.time_cut(d, 5, val_start=0), ValueError, "val_start=0 must be after the first time"),
        (lambda d: split.time_cut(d, "2020-01-01"), TypeError, "test_start must be a real number"),
        (lambda d: split.time_cut(d, float("nan")), ValueError, "test_start must be finite"),
        (lambda d: split.time_cut(d, 5, drop_cold_users="yes"), TypeError, "drop_cold_users must be True or False"),
        (lambda d: split.last_n(d.matrix), ValueError, "a time-ordered split needs timestamps"),
        (lambda d: split.last_n(d.matrix, timestamps=np.arange(3)), ValueError, "timestamps has length 3, expected 10"),
        (
            lambda d: split.last_fraction(d.matrix, timestamps=np.r_[np.arange(9.0), np.inf]),
            ValueError,
            "NaN or infinite",
        ),
        (lambda d: split.last_fraction(d.matrix, timestamps=np.array(["x"] * 10)), TypeError, "numbers or datetimes"),
        (lambda d: split.last_fraction(d, val=0.5, test=0.5), ValueError, "val \\+ test must be < 1"),
        (lambda d: split.last_n(d, n=0), ValueError, "n must be >= 1"),
    ],
)
def test_bad_time_split_input_is_a_clear_error(call, error, message):
    data = Interactions.from_arrays(np.repeat([0, 1], 5), np.tile(np.arange(5), 2), timestamps=np.arange(10))
    with pytest.raises(error, match=message):
        call(data)


def test_datetime_cut_types():
    data = Interactions.from_arrays(
        [1, 1, 2], [1, 2, 1], timestamps=pd.to_datetime(["2020-01-01", "2020-06-01", "2021-01-01"])
    )
    with pytest.raises(TypeError, match="test_start must be a date or time"):
        split.time_cut(data, 1_600_000_000)
    with pytest.raises(
        ValueError, match=r"leaves the test part empty: the timestamps run from 2020-01-01 00:00:00 to 2021-01-01"
    ):
        split.time_cut(data, "2030-01-01")
    assert split.time_cut(data, np.datetime64("2020-06-01"))[2].nnz == 2


@pytest.mark.realdata
def test_movielens_timestamps():
    from recsys_ltr import datasets

    if "movielens-100k" not in datasets.available():
        pytest.skip("movielens-100k not in the data directory")
    data = datasets.load("movielens-100k")
    assert data.timestamps is not None and data.timestamps.dtype == np.int64 and data.timestamps.size == data.nnz
    assert 874_724_710 <= data.timestamps.min() and data.timestamps.max() <= 893_286_638  # Sep 1997 - Apr 1998
    train, val, test = split.last_fraction(data)
    _check_partition(data.matrix, (train, val, test))


def _nanosecond_data():
    """The campaign's data (n1201/tsplit/time_cut/ns): 236 positives of 2020 stamped in nanoseconds."""
    times = (np.datetime64("2020-01-01T00:00:00", "ns") + np.arange(236) * np.timedelta64(3600, "s")).astype("M8[ns]")
    return Interactions.from_arrays(np.arange(236) % 20, np.arange(236) % 17, timestamps=times)


@pytest.mark.parametrize(
    "test_start, val_start, message",
    [  # outside datetime64[ns]'s range (1677-09-21 to 2262-04-11): numpy's cast wrapped them by 2**64 ns
        ("2604-08-09T20:04:33", None, "leaves the test part empty"),
        ("2300-01-01", None, "leaves the test part empty"),
        ("2263-01-01", None, "leaves the test part empty"),
        ("9999-12-31", None, "leaves the test part empty"),
        ("1600-01-01", None, "leaves the training part empty"),
        ("1677-01-01", None, "leaves the training part empty"),
        ("2020-01-05", "1435-01-01", "val_start='1435-01-01' must be after the first time"),
        ("2020-01-05", "2604-08-09", "val_start='2604-08-09' must be after the first time and before test_start"),
    ],
)
def test_cut_dates_outside_the_timestamps_resolution_never_wrap(test_start, val_start, message):
    data = _nanosecond_data()
    assert data.timestamps.dtype == np.dtype("M8[ns]")
    with pytest.raises(ValueError, match=message):
        split.time_cut(data, test_start, val_start=val_start)


@pytest.mark.parametrize("unit", ["ns", "us", "s", "D"])
def test_cut_dates_are_converted_exactly_in_the_datas_resolution(unit):
    times = np.datetime64("2020-01-01", "D") + np.arange(10) * np.timedelta64(1, "D")
    data = Interactions.from_arrays(np.zeros(10, int), np.arange(10), timestamps=times.astype(f"M8[{unit}]"))
    for cut, n_test in [("2020-01-04", 7), ("2020-01-04T12:00", 7 - (unit != "D")), (datetime.date(2020, 1, 10), 1)]:
        assert split.time_cut(data, cut)[2].nnz == n_test
