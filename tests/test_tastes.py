"""``make_tastes``: the model of its docstring, seeded, in O(positives) memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr.datasets import make_tastes


def _planted(n_users, n_items, n_tastes, mean_activity, activity_sigma, min_activity, seed):
    """The orders, tastes and activities of the model, drawn as the generator draws them first."""
    rng = np.random.default_rng(seed)
    orders = np.stack([rng.permutation(n_items) for _ in range(n_tastes + 1)])
    taste = rng.integers(0, n_tastes, n_users)
    mu = np.log(mean_activity) - activity_sigma**2 / 2
    want = np.clip(np.rint(rng.lognormal(mu, activity_sigma, n_users)), min_activity, n_items // 2)
    return orders, taste, want.astype(np.int64)


@settings(max_examples=30, deadline=None)
@given(
    n_users=st.integers(1, 60),
    n_items=st.integers(6, 80),
    n_tastes=st.integers(1, 5),
    share=st.floats(0.0, 1.0),
    exponent=st.floats(0.0, 3.0),
    mean=st.floats(0.5, 40.0),
    sigma=st.floats(0.0, 2.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_every_user_has_its_activity_of_distinct_items(n_users, n_items, n_tastes, share, exponent, mean, sigma, seed):
    """A binary canonical matrix whose row ``u`` holds exactly ``n_u`` distinct items, the clipped
    log-normal activity of the model."""
    X = make_tastes(n_users, n_items, n_tastes, share, exponent, mean, sigma, min_activity=3, random_state=seed).matrix
    assert X.shape == (n_users, n_items) and X.has_canonical_format and np.all(X.data == 1.0)
    want = _planted(n_users, n_items, n_tastes, mean, sigma, 3, seed)[2]
    np.testing.assert_array_equal(np.diff(X.indptr), want)


def test_draws_follow_the_global_zipf_order():
    """``taste_share=0``: every user draws from the global order, so an item's number of users falls
    with its rank there as ``(1 + r) ** -1`` (log-log slope -1 over ranks 10-300, where a user
    rarely draws an item twice) and a user's taste does not matter."""
    n_items = 3000
    X = make_tastes(20_000, n_items, n_tastes=4, taste_share=0.0, mean_activity=5, random_state=1).matrix
    order = _planted(20_000, n_items, 4, 5, 1.0, 3, 1)[0][-1]
    counts = np.bincount(X.indices, minlength=n_items)[order]
    ranks = np.arange(10, 300)
    slope = np.polyfit(np.log1p(ranks), np.log(counts[ranks]), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.08)


def test_users_of_a_taste_share_its_head():
    """``taste_share=1``: a user's items are its taste's head -- the users of a taste have that
    order's first item far more often than the users of other tastes."""
    X = make_tastes(4000, 1000, n_tastes=4, taste_share=1.0, mean_activity=10, random_state=2).matrix
    orders, taste, _ = _planted(4000, 1000, 4, 10, 1.0, 3, 2)
    for t in range(4):
        head = orders[t, 0]
        has = X[:, head].toarray().ravel() > 0
        assert has[taste == t].mean() > 0.3 and has[taste != t].mean() < 0.05


@settings(max_examples=20, deadline=None)
@given(
    n_items=st.integers(6, 40),
    n_tastes=st.integers(1, 4),
    share=st.floats(0.0, 1.0),
    exponent=st.floats(0.0, 3.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_planted_params_are_the_models(n_items, n_tastes, share, exponent, seed):
    """``return_params``: the same matrix, the tastes and orders drawn first, and one draw's
    probability of each item, computed item by item from the docstring's model."""
    kwargs = dict(n_tastes=n_tastes, taste_share=share, popularity_exponent=exponent, random_state=seed)
    data, planted = make_tastes(30, n_items, **kwargs, return_params=True)
    assert (data.matrix != make_tastes(30, n_items, **kwargs).matrix).nnz == 0
    orders, taste, _ = _planted(30, n_items, n_tastes, 30.0, 1.0, 3, seed)
    np.testing.assert_array_equal(planted["orders"], orders)
    np.testing.assert_array_equal(planted["taste"], taste)
    weight = [(1.0 + r) ** -exponent for r in range(n_items)]
    total = sum(weight)
    for t in range(n_tastes):
        for i in range(n_items):
            in_taste = weight[list(orders[t]).index(i)] / total
            in_global = weight[list(orders[-1]).index(i)] / total
            expected = share * in_taste + (1 - share) * in_global
            assert planted["draw_probability"][t, i] == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_seeded():
    a = make_tastes(500, 200, random_state=3).matrix
    b = make_tastes(500, 200, random_state=3).matrix
    c = make_tastes(500, 200, random_state=4).matrix
    assert (a != b).nnz == 0 and (a != c).nnz > 0


def test_memory_grows_with_the_positives_not_the_cells():
    """20,000 users x 200,000 items (4e9 cells, 32 GB dense) with about 600k positives: the peak of
    Python's allocations stays within 200 bytes per positive."""
    tracemalloc.start()
    X = make_tastes(20_000, 200_000, n_tastes=16, random_state=5).matrix
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert X.nnz > 500_000 and peak < 200 * X.nnz


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_items": 5}, ValueError, "min_activity"),
        ({"taste_share": 1.5}, ValueError, "taste_share"),
        ({"mean_activity": 0.0}, ValueError, "mean_activity"),
        ({"n_tastes": 0}, ValueError, "n_tastes"),
        ({"popularity_exponent": float("nan")}, ValueError, "popularity_exponent"),
        ({"n_users": 2.5}, TypeError, "n_users"),
    ],
)
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_tastes(**{"n_users": 10, "n_items": 100, **kwargs})
