"""A seeded generator of large implicit feedback in O(positives) time and memory: clustered tastes,
power-law popularity and heavy-tailed activity.

The model (all draws from one ``numpy.random.Generator`` seeded by ``random_state``):

* tastes: each of ``n_tastes`` tastes orders the items by a random permutation of its own, and the
  catalogue has one more, global, order; each user has one taste, drawn uniformly;
* popularity: within an order, the item at rank ``r = 0, 1, ...`` is drawn with probability
  proportional to ``(1 + r) ** -popularity_exponent`` (Zipf's law);
* choice: each draw of a user follows its taste's order with probability ``taste_share``, else the
  global order, with replacement; a user's positives are its first ``n_u`` distinct draws;
* activity: ``n_u = clip(round(LogNormal(log(mean_activity) - activity_sigma**2 / 2, activity_sigma)),
  min_activity, n_items // 2)`` distinct items (mean about ``mean_activity``; the cap keeps the
  rejection of repeated draws cheap).

Draws are made in rounds: every user short of its ``n_u`` distinct items draws what it lacks (plus a
margin), the repeats are dropped by one sort of the round's pairs, and the users still short draw
again.  No users x items array is ever formed: memory is a few arrays of the positives, and time is
one sort of them per round (a handful of rounds).  Items nobody drew stay empty columns.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_positive_int, check_random_state, check_real
from ..interactions import Interactions

__all__ = ["make_tastes"]


def make_tastes(
    n_users=100_000,
    n_items=30_000,
    n_tastes=64,
    taste_share=0.7,
    popularity_exponent=1.0,
    mean_activity=30.0,
    activity_sigma=1.0,
    min_activity=3,
    random_state=0,
    return_params=False,
):
    """Generate a large :class:`~recsys_ltr.Interactions` of clustered tastes (model in the module
    docstring) in O(positives) time and memory.

    Parameters
    ----------
    n_users, n_items : int
        Shape of the feedback matrix; ``n_items >= 2 * min_activity``.
    n_tastes : int
        Number of tastes (item orders) users are clustered by.
    taste_share : float in [0, 1]
        Probability that a draw follows the user's taste rather than the global order.
    popularity_exponent : float >= 0
        Zipf exponent of each order (0: uniform).
    mean_activity : float > 0
        Mean number of positives per user (before the clip).
    activity_sigma : float >= 0
        Log-normal spread of the activity (0: every user ``round(mean_activity)``).
    min_activity : int
        Fewest positives of a user.
    random_state : None, int or numpy.random.Generator
    return_params : bool
        Also return the planted model: ``{"taste", "orders", "draw_probability"}``, each user's taste
        ``(n_users,)``, the item at each rank of each order ``(n_tastes + 1, n_items)`` (the last is the
        global order) and the probability that one draw of a user of each taste is each item
        ``(n_tastes, n_items)``.  Ranking a user's unseen items by the row of its taste is the
        generator's own ranking: the ceiling a recommender can approach (``benchmarks/tastes_catalogue.py``).

    Returns
    -------
    Interactions or (Interactions, dict)
        Ids ``0..n-1``; a binary matrix.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_tastes
    >>> data = make_tastes(n_users=2_000, n_items=500, n_tastes=8, random_state=0)
    >>> data
    Interactions(2000 users x 500 items, 60076 positives)
    >>> int(data.matrix.getnnz(axis=1).min())  # min_activity
    3
    >>> data, planted = make_tastes(n_users=2_000, n_items=500, n_tastes=8, random_state=0, return_params=True)
    >>> planted["draw_probability"].shape, bool(abs(planted["draw_probability"].sum(axis=1) - 1).max() < 1e-12)
    ((8, 500), True)
    """
    n_users = check_positive_int(n_users, "n_users")
    n_items = check_positive_int(n_items, "n_items")
    n_tastes = check_positive_int(n_tastes, "n_tastes")
    taste_share = check_real(taste_share, "taste_share", low=0.0, high=1.0)
    popularity_exponent = check_real(popularity_exponent, "popularity_exponent", low=0.0)
    mean_activity = check_real(mean_activity, "mean_activity", low=0.0, low_open=True)
    activity_sigma = check_real(activity_sigma, "activity_sigma", low=0.0)
    min_activity = check_positive_int(min_activity, "min_activity")
    if n_items < 2 * min_activity:
        raise ValueError(f"n_items={n_items} must be at least 2 * min_activity={2 * min_activity}")
    rng = check_random_state(random_state, "random_state")

    orders = np.stack([rng.permutation(n_items) for _ in range(n_tastes + 1)])  # the last: global
    cdf = np.cumsum((1.0 + np.arange(n_items)) ** -popularity_exponent)
    cdf /= cdf[-1]
    taste = rng.integers(0, n_tastes, n_users)
    mu = np.log(mean_activity) - activity_sigma**2 / 2
    want = np.clip(np.rint(rng.lognormal(mu, activity_sigma, n_users)), min_activity, n_items // 2)
    want = want.astype(np.int64)

    codes = np.zeros(0, np.int64)  # the distinct pairs so far, user * n_items + item, sorted
    when = np.zeros(0, np.int64)  # the number of each pair's first draw
    have, short, drawn = np.zeros(n_users, np.int64), np.arange(n_users), 0
    while short.size:
        lack = want[short] - have[short]
        who = np.repeat(short, lack + (lack >> 2) + 1)  # what each lacks, and a margin for repeats
        rank = np.minimum(np.searchsorted(cdf, rng.random(who.size), side="right"), n_items - 1)
        order = np.where(rng.random(who.size) < taste_share, taste[who], n_tastes)
        codes, first = np.unique(np.concatenate((codes, who * n_items + orders[order, rank])), return_index=True)
        when = np.concatenate((when, drawn + np.arange(who.size)))[first]  # earlier pairs keep theirs
        drawn += who.size
        have = np.bincount(codes // n_items, minlength=n_users)
        short = np.flatnonzero(have < want)
    users = codes // n_items
    by_draw = np.lexsort((when, users))  # each user's pairs in the order they were first drawn
    owner = users[by_draw]
    start = np.concatenate(([0], np.cumsum(have)[:-1]))
    kept = by_draw[np.arange(codes.size) - start[owner] < want[owner]]
    kept.sort()  # back to (user, item) order
    items = codes[kept] - users[kept] * n_items
    indptr = np.zeros(n_users + 1, np.int64)
    np.cumsum(want, out=indptr[1:])
    X = sp.csr_matrix((np.ones(items.size), items, indptr), shape=(n_users, n_items))
    if return_params:
        return Interactions(X), {
            "taste": taste,
            "orders": orders,
            "draw_probability": _draw_probability(orders, cdf, taste_share),
        }
    return Interactions(X)


def _draw_probability(orders, cdf, taste_share) -> np.ndarray:
    """``(n_tastes, n_items)``: ``taste_share`` times the Zipf weight of the item's rank in the taste's
    order plus the rest times its weight in the global order (the last of ``orders``)."""
    weight = np.diff(cdf, prepend=0.0)  # of each rank
    by_order = np.empty(orders.shape)
    np.put_along_axis(by_order, orders, np.broadcast_to(weight, orders.shape), axis=1)
    return taste_share * by_order[:-1] + (1.0 - taste_share) * by_order[-1]
