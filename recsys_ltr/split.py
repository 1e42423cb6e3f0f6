"""Per-user splits of a binary feedback matrix into train / validation / test.

The dissertation's protocol (sec. 4.7.4): for every user, validation and test items are drawn
uniformly without replacement from the user's positives O+_u; the rest is training data.
The novelty protocol (sec. 4.7.5) draws them only from O+_u minus the ``exclude_top`` most
popular items, popularity being the number of positives of each item in the full matrix.

Counts per user (``r(x) = floor(x + 0.5)``, i.e. rounding half up).  Let ``n`` be the user's
positives and ``m`` the *eligible* ones (``m = n``, or the positives outside the top items
under the novelty protocol):

* ``n_test = min(r(test * m), n - 1)``
* ``n_val  = min(r(val * m), m - n_test, n - 1 - n_test)``

so every user keeps at least one training positive, and users with too few positives
(``r(test * m) = r(val * m) = 0``, e.g. ``n <= 2`` at the defaults) stay entirely in train.
Train, validation and test are disjoint and sum to the input matrix: each positive keeps its
value, so a weighted matrix (counts, :mod:`recsys_ltr.weighting`) splits into weighted parts (the
models that read weights use them, the others and the metrics binarise them).

Everything is vectorised: one uniform random key per nonzero, ineligible entries pushed to
the end of their row, and a lexsort by (row, key) ranks each user's positives at once.

Time-ordered splits (the positives' times: ``Interactions.timestamps``, or an array
aligned with the stored entries of the canonical ``X``) return the same ``(train, val, test)``:

* :func:`last_n` -- per user, the ``n`` latest positives are test and the ``val_n`` before them
  validation (LensKit's ``LastN``); users with fewer than ``n + val_n + 1`` positives stay in train;
* :func:`last_fraction` -- per user, the latest ``test`` fraction is test and the ``val`` fraction
  before it validation, counts as :func:`holdout`'s (LensKit's ``LastFrac``);
* :func:`time_cut` -- one cut for everyone: train before ``test_start``, test from it, optional
  validation from ``val_start`` to ``test_start``.

Ties in time (several positives of a user at the same time) are ordered by a uniform random key
drawn from ``random_state`` (one draw per stored entry), so the same seed gives the same split
and no item is favoured by its index; validation then always precedes test and train precedes
validation, ties aside.  Each user's ordering is one lexsort by (row, time, tie key).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._validation import (
    check_bool,
    check_ids,
    check_positive_int,
    check_positive_values,
    check_random_state,
    check_real,
)
from .interactions import check_timestamps, time_order_key

__all__ = [
    "eligible_positives",
    "folds",
    "holdout",
    "holdout_trusted",
    "kfold",
    "kfold_trusted",
    "label_parts",
    "last_fraction",
    "last_n",
    "leave_k_out",
    "novelty_holdout",
    "sample_users",
    "sample_users_trusted",
    "split_counts",
    "time_cut",
    "top_items",
    "top_items_trusted",
]


def holdout(X, val=0.1, test=0.2, random_state=0, exclude_top=None):
    """Split each user's positives at random into train / validation / test.

    Parameters
    ----------
    X : sparse matrix, array or Interactions
        Users x items feedback: every positive stored value is an interaction and its value is
        kept in the part it goes to (weights; an Interactions gives its binary ``matrix``).
    val, test : float
        Fractions of each user's eligible positives held out (``0 <= val, test``,
        ``val + test < 1``); see the module docstring for the exact rounding.
    random_state : None, int or numpy.random.Generator
        Same seed, same split.
    exclude_top : int or None
        Novelty protocol: validation and test items are never among the ``exclude_top`` most
        popular items of ``X`` (ties in popularity broken by lower item index).

    Returns
    -------
    train, val, test : scipy.sparse.csr_matrix
        Canonical matrices of ``X``'s shape; disjoint, and ``train + val + test == X``.

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> train, val, test = split.holdout(X, val=0.1, test=0.2, random_state=0)
    >>> train.nnz, val.nnz, test.nnz, X.nnz
    (670, 85, 210, 965)
    >>> (train + val + test != X).nnz  # disjoint parts that sum to X
    0
    """
    X = check_positive_values(X)
    val, test = _check_fractions(val, test)
    return holdout_trusted(
        X, val, test, check_random_state(random_state, "random_state"), eligible_positives(X, exclude_top)
    )


def holdout_trusted(X, val, test, rng, eligible=None, proportional=False):
    """:func:`holdout` of a canonical ``X``, checked fractions, a Generator and the mask of
    eligible positives (default all).  ``proportional``: each count rounded at random (``floor(x +
    U)``, ``U`` uniform, so that every user holds out ``val * m`` and ``test * m`` in expectation)
    instead of half up, which holds nothing out of users with fewer than ``0.5 / val`` eligible
    positives: a sample of held-out positives drawn so is one of every user, as a model's own
    validation must be when it is judged on every user (FEBR's carved validation and label parts)."""
    eligible = np.ones(X.nnz, dtype=bool) if eligible is None else eligible
    n = np.diff(X.indptr)
    m = np.bincount(_rows(X)[eligible], minlength=X.shape[0])
    offsets = rng.random((2, X.shape[0])) if proportional else None
    n_test, n_val = split_counts(n, m, val, test, offsets)
    return _assign(X, eligible, n_test, n_val, rng)


def novelty_holdout(X, val=0.1, test=0.2, random_state=0, exclude_top=100):
    """:func:`holdout` under the novelty protocol (dissertation section 4.7.5).

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> train, val, test = split.novelty_holdout(X, exclude_top=10)
    >>> set(test.indices) & set(split.top_items(X, 10))  # the 10 most popular items are never held out
    set()
    """
    if exclude_top is None:
        raise ValueError("novelty_holdout needs exclude_top (an int >= 1)")
    return holdout(X, val=val, test=test, random_state=random_state, exclude_top=exclude_top)


def folds(X, n_folds=3, val=0.1, test=0.2, random_state=0, exclude_top=None) -> Iterator[tuple]:
    """Yield ``n_folds`` independent :func:`holdout` splits (the paper uses three).

    Fold ``f`` is ``holdout(X, ..., random_state=random_state + f)`` for an int seed (so any single fold can be
    reproduced on its own); a Generator is consumed fold after fold.

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> [test.nnz for train, val, test in split.folds(X, n_folds=3)]
    [210, 210, 210]
    """
    n_folds = check_positive_int(n_folds, "n_folds")
    X = check_positive_values(X)
    val, test = _check_fractions(val, test)
    eligible = eligible_positives(X, exclude_top)
    rng = check_random_state(random_state, "random_state")  # fail on a bad seed now, not at the first fold
    if isinstance(random_state, numbers.Integral):
        check_random_state(random_state + n_folds - 1, "random_state + n_folds - 1")
    return (
        holdout_trusted(
            X,
            val,
            test,
            check_random_state(random_state + f) if isinstance(random_state, numbers.Integral) else rng,
            eligible,
        )
        for f in range(n_folds)
    )


def kfold(X, n_folds=5, random_state=0, exclude_top=None) -> Iterator[tuple]:
    """Yield ``n_folds`` ``(train, held_out)`` splits whose held-out parts are disjoint.

    Every eligible positive (``exclude_top`` as in :func:`holdout`) of a user with at least two
    positives is held out in exactly one fold: the user's eligible positives, in random order, go
    to the folds in turn from a random first fold, so a user with fewer eligible positives than
    folds is held out in some folds only, and every fold's ``train`` keeps at least one of the
    user's positives.  ``train + held_out == X`` in every fold.

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> parts = list(split.kfold(X, n_folds=5))
    >>> sum(held_out.nnz for train, held_out in parts), X.nnz  # users with one positive stay in train
    (962, 965)
    """
    X = check_positive_values(X)
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    return kfold_trusted(
        X, n_folds, check_random_state(random_state, "random_state"), eligible_positives(X, exclude_top)
    )


def kfold_trusted(X, n_folds, rng, eligible=None) -> Iterator[tuple]:
    """:func:`kfold` of a canonical ``X``, a checked ``n_folds``, a Generator and the mask of
    eligible positives (default all)."""
    eligible = np.ones(X.nnz, dtype=bool) if eligible is None else eligible
    rows = _rows(X)
    eligible = eligible & (np.diff(X.indptr) >= 2)[rows]
    key = rng.random(X.nnz)
    key[~eligible] = 2.0
    order = np.lexsort((key, rows))
    rank = np.empty(X.nnz, dtype=np.int64)
    rank[order] = np.arange(X.nnz) - X.indptr[rows[order]]
    fold = (rank + rng.integers(n_folds, size=X.shape[0])[rows]) % n_folds
    fold[~eligible] = -1
    return ((_subset(X, rows, fold != f), _subset(X, rows, fold == f)) for f in range(n_folds))


def label_parts(X, holdout, rng, exclude_top=None) -> list[tuple[sp.csr_matrix, sp.csr_matrix]]:
    """``[(F, L), ...]``: feature parts and their labels, a training label never among the data of
    its features (FEBR's leak-free training): one holdout of the fraction ``holdout`` of each user's
    positives (in proportion: :func:`holdout_trusted`'s ``proportional``), ``K`` out-of-fold parts
    for an int ``holdout = K`` (:func:`kfold_trusted`), ``[(X, X)]`` for ``0``; labels drawn outside
    the ``exclude_top`` most popular items when given.  Trusted inputs; a split that leaves no label
    is refused."""
    if holdout == 0:
        return [(X, X)]
    eligible = eligible_positives(X, exclude_top)
    if isinstance(holdout, (int, np.integer)):
        parts = list(kfold_trusted(X, int(holdout), rng, eligible))
    else:
        parts = [holdout_trusted(X, float(holdout), 0.0, rng, eligible, proportional=True)[:2]]
    if parts[0][1].nnz == 0:
        outside = f" outside the label_exclude_top={exclude_top} most popular items" * bool(exclude_top)
        raise ValueError(f"holdout={holdout} leaves no label positive: users have too few interactions{outside}")
    return parts


def leave_k_out(X, k=1, random_state=0, val_k=0, exclude_top=None):
    """Hold out exactly ``k`` test and ``val_k`` validation positives per user.

    Users with fewer than ``k + val_k + 1`` eligible positives (so that at least one
    training positive remains) stay entirely in train.  ``exclude_top`` as in :func:`holdout`.

    Returns
    -------
    train, val, test : scipy.sparse.csr_matrix
        ``val`` is empty when ``val_k == 0``.

    Examples
    --------
    >>> from recsys_ltr import split
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> train, val, test = split.leave_k_out(X, k=1, val_k=1)
    >>> int(test.getnnz(axis=1).max()), int(val.getnnz(axis=1).max())
    (1, 1)
    """
    X = check_positive_values(X)
    k = check_positive_int(k, "k")
    val_k = check_positive_int(val_k, "val_k", minimum=0)
    eligible = eligible_positives(X, exclude_top)
    n = np.diff(X.indptr)
    m = np.bincount(_rows(X)[eligible], minlength=X.shape[0])
    ok = (m >= k + val_k) & (n >= k + val_k + 1)
    return _assign(
        X, eligible, np.where(ok, k, 0), np.where(ok, val_k, 0), check_random_state(random_state, "random_state")
    )


def split_counts(n, m, val, test, offsets=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-user ``(n_test, n_val)`` of :func:`holdout` (module docstring) from the numbers of
    positives ``n`` and eligible positives ``m``.

    ``offsets``, shape ``(2, n_users)`` with values from 0 up to but excluding 1, round ``test * m``
    and ``val * m`` as ``floor(x + offset)`` (default ``0.5``: half up).

    Examples
    --------
    >>> from recsys_ltr import split
    >>> n_test, n_val = split.split_counts([1, 2, 3, 10, 10], [1, 2, 3, 10, 4], val=0.1, test=0.2)
    >>> n_test.tolist(), n_val.tolist()  # a user keeps one training positive; r(x) rounds half up
    ([0, 0, 1, 2, 1], [0, 0, 0, 1, 0])
    """
    n = np.asarray(n, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    at_test, at_val = (0.5, 0.5) if offsets is None else offsets
    n_test = np.minimum(np.floor(test * m + at_test).astype(np.int64), np.maximum(n - 1, 0))
    n_val = np.minimum(np.floor(val * m + at_val).astype(np.int64), np.minimum(m - n_test, n - 1 - n_test))
    return n_test, np.maximum(n_val, 0)


# ---------------------------------------------------------------------- internals
def _check_fractions(val, test) -> tuple[float, float]:
    val = check_real(val, "val", low=0.0, high=1.0, high_open=True)
    test = check_real(test, "test", low=0.0, high=1.0, high_open=True)
    if val + test >= 1:
        raise ValueError(f"val + test must be < 1 to leave training data, got {val} + {test}")
    return val, test


def _rows(X: sp.csr_matrix) -> np.ndarray:
    return np.repeat(np.arange(X.shape[0], dtype=np.int64), np.diff(X.indptr))


def eligible_positives(X: sp.csr_matrix, exclude_top) -> np.ndarray:
    """Mask over the stored positives of a canonical ``X``: True where the item may be held out
    (outside the ``exclude_top`` most popular items; all of them for ``None``)."""
    if exclude_top is None:
        return np.ones(X.nnz, dtype=bool)
    exclude_top = check_positive_int(exclude_top, "exclude_top", minimum=0)
    if exclude_top >= X.shape[1]:
        raise ValueError(f"exclude_top={exclude_top} leaves no item to hold out (X has {X.shape[1]} items)")
    banned = np.zeros(X.shape[1], dtype=bool)
    banned[top_items_trusted(X, exclude_top)] = True
    return ~banned[X.indices]


def top_items(X, n: int) -> np.ndarray:
    """The ``n`` items of the feedback ``X`` with the most positives (ties: the lower id first): the
    items the novelty protocol never holds out (all of them, by popularity, when ``n`` exceeds
    the catalogue).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from recsys_ltr import split
    >>> X = sp.csr_matrix([[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    >>> split.top_items(X, 3)  # items 1 and 3 have two positives, then 0 before 2 (ties: lower id)
    array([1, 3, 0])
    """
    return top_items_trusted(check_positive_values(X), check_positive_int(n, "n", minimum=0))


def top_items_trusted(X: sp.csr_matrix, n: int) -> np.ndarray:
    """:func:`top_items` of a canonical ``X`` and a checked ``n``."""
    pop = np.bincount(X.indices, minlength=X.shape[1])
    return np.argsort(-pop, kind="stable")[:n]


def _assign(X, eligible, n_test, n_val, rng):
    """Route each user's first ``n_test`` randomly ordered eligible positives to test, the next
    ``n_val`` to validation, the rest to train."""
    rows = _rows(X)
    key = rng.random(X.nnz)
    key[~eligible] = 2.0  # after every eligible entry of the row
    order = np.lexsort((key, rows))
    rank = np.empty(X.nnz, dtype=np.int64)
    rank[order] = np.arange(X.nnz) - X.indptr[rows[order]]
    is_test = rank < n_test[rows]
    is_val = ~is_test & (rank < (n_test + n_val)[rows])
    return _subset(X, rows, ~(is_test | is_val)), _subset(X, rows, is_val), _subset(X, rows, is_test)


def _subset(X, rows, mask) -> sp.csr_matrix:
    # int32 is safe: X passed check_positive_values (nnz < 2**31) and a subset has fewer entries.
    counts = np.bincount(rows[mask], minlength=X.shape[0])
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return sp.csr_matrix((X.data[mask], X.indices[mask].astype(np.int32), indptr), shape=X.shape)


def sample_users(X, size, rng=None, exclude=None) -> np.ndarray:
    """At most ``size`` of the users with interactions in the feedback ``X`` and not in ``exclude``
    (user ids), sorted: evenly spaced (a fixed sample, for statistics) without ``rng`` (a seed or
    a Generator), a uniform random sample with it; all of them when ``size`` is ``None`` or not
    smaller.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from recsys_ltr import split
    >>> X = sp.csr_matrix(np.eye(10))
    >>> split.sample_users(X, 4)  # evenly spaced
    array([0, 3, 6, 9])
    >>> len(split.sample_users(X, 4, rng=np.random.default_rng(0), exclude=[0, 1]))
    4
    """
    X = check_positive_values(X)
    size = None if size is None else check_positive_int(size, "size")
    rng = None if rng is None else check_random_state(rng, "rng")
    exclude = None if exclude is None else check_ids(exclude, X.shape[0], "exclude")
    return sample_users_trusted(X, size, rng, exclude)


def sample_users_trusted(X: sp.csr_matrix, size, rng=None, exclude=None) -> np.ndarray:
    """:func:`sample_users` of a canonical ``X``, a checked ``size``, a Generator or ``None`` and
    checked ``exclude`` ids."""
    users = np.flatnonzero(np.diff(X.indptr) > 0)
    if exclude is not None:
        users = np.setdiff1d(users, exclude)
    if size is None or users.size <= size:
        return users
    if rng is None:
        return users[np.unique(np.linspace(0, users.size - 1, size).astype(np.int64))]
    return np.sort(rng.choice(users, size, replace=False))


# ---------------------------------------------------------------------- time-ordered splits
def last_n(X, n=1, val_n=0, *, timestamps=None, random_state=0):
    """Hold out each user's ``n`` latest positives for test and the ``val_n`` before them for
    validation (LensKit's ``LastN``).

    Parameters
    ----------
    X : Interactions, sparse matrix or array
        Binary users x items feedback; an :class:`~recsys_ltr.Interactions` brings its own
        ``timestamps``.
    n, val_n : int
        Test and validation positives per user (``n >= 1``, ``val_n >= 0``).  Users with fewer
        than ``n + val_n + 1`` positives (so that one training positive remains) stay entirely
        in train, as in :func:`leave_k_out`.
    timestamps : array-like or None
        The time of each stored entry of the canonical ``X`` (row by row, columns ascending), as
        ``Interactions.timestamps``: numbers or datetimes
        (:func:`recsys_ltr.interactions.check_timestamps`); None: ``X.timestamps``.
    random_state : None, int or numpy.random.Generator
        Orders ties in time (module docstring).

    Returns
    -------
    train, val, test : scipy.sparse.csr_matrix
        Canonical, disjoint, ``train + val + test == X``; ``val`` is empty when ``val_n == 0``.

    Examples
    --------
    >>> import pandas as pd
    >>> from recsys_ltr import Interactions, split
    >>> log = pd.DataFrame({"user": ["ann"] * 4 + ["bob"] * 3, "item": list("abcdabe"),
    ...                     "time": [1, 2, 3, 4, 5, 6, 7]})
    >>> data = Interactions.from_dataframe(log, timestamp_col="time")
    >>> train, val, test = split.last_n(data, n=1, val_n=1)
    >>> [data.item_ids[test[u].indices].tolist() for u in range(2)]  # each user's latest item
    [['d'], ['e']]
    >>> [data.item_ids[val[u].indices].tolist() for u in range(2)]  # the one before it
    [['c'], ['b']]
    """
    X, times = _timed(X, timestamps)
    n = check_positive_int(n, "n")
    val_n = check_positive_int(val_n, "val_n", minimum=0)
    rng = check_random_state(random_state, "random_state")
    ok = np.diff(X.indptr) >= n + val_n + 1
    return _assign_by_time(X, time_order_key(times), np.where(ok, n, 0), np.where(ok, val_n, 0), rng)


def last_fraction(X, val=0.1, test=0.2, *, timestamps=None, random_state=0):
    """Hold out each user's latest ``test`` fraction of positives for test and the ``val``
    fraction before them for validation (LensKit's ``LastFrac``).

    The counts are :func:`holdout`'s (module docstring: ``n_test = min(r(test * n), n - 1)``,
    ``n_val = min(r(val * n), n - 1 - n_test)``, rounding half up), so every user keeps at least
    one training positive and a user with ``n <= 2`` positives stays in train at the defaults;
    only which positives go where differs: the latest ones instead of random ones.  ``X``,
    ``timestamps`` and ``random_state`` (ties in time) as in :func:`last_n`.

    Returns
    -------
    train, val, test : scipy.sparse.csr_matrix
        Canonical, disjoint, ``train + val + test == X``.

    Examples
    --------
    >>> import pandas as pd
    >>> from recsys_ltr import Interactions, split
    >>> log = pd.DataFrame({"user": ["ann"] * 4 + ["bob"] * 3, "item": list("abcdabe"),
    ...                     "time": [1, 2, 3, 4, 5, 6, 7]})
    >>> data = Interactions.from_dataframe(log, timestamp_col="time")
    >>> train, val, test = split.last_fraction(data, val=0.0, test=0.25)
    >>> [data.item_ids[test[u].indices].tolist() for u in range(2)]  # r(0.25 * 4) = 1, r(0.25 * 3) = 1
    [['d'], ['e']]
    """
    X, times = _timed(X, timestamps)
    val, test = _check_fractions(val, test)
    rng = check_random_state(random_state, "random_state")
    counts = np.diff(X.indptr)
    n_test, n_val = split_counts(counts, counts, val, test)
    return _assign_by_time(X, time_order_key(times), n_test, n_val, rng)


def time_cut(X, test_start, val_start=None, *, timestamps=None, drop_cold_users=False, drop_cold_items=False):
    """One cut in time for every user: train before ``test_start``, test from it on.

    Parameters
    ----------
    X : Interactions, sparse matrix or array
        As in :func:`last_n`.
    test_start : number or datetime-like
        First time of the test part: a number for numeric timestamps; for ``datetime64`` ones
        anything ``pandas.Timestamp`` reads (``"1998-03-01"``, a ``datetime``; a
        time-zone-aware value is converted to UTC).  Both parts must be non-empty: it must be
        later than the earliest time and not later than the latest.
    val_start : number, datetime-like or None
        First time of the validation part, later than the earliest time and before
        ``test_start``: validation is ``val_start <= t < test_start``, train ``t < val_start``.
        None: no validation (an empty ``val``).
    timestamps : array-like or None
        As in :func:`last_n`.
    drop_cold_users, drop_cold_items : bool
        A user or item is *cold* for a part when it has no positive in the parts before it
        (for validation: none in train; for test: none in train nor in the validation part
        returned).  False (the default): their positives stay in validation and test,
        ``train + val + test == X``, and a user without history is ranked as the model ranks an
        empty row (by popularity, for most models).  True: they are dropped from validation and
        test, and are then in no part (the parts sum to less than ``X``).

    Returns
    -------
    train, val, test : scipy.sparse.csr_matrix
        Canonical and disjoint; every train time is before every validation time, and every
        validation time before every test time.

    Examples
    --------
    >>> import pandas as pd
    >>> from recsys_ltr import Interactions, split
    >>> log = pd.DataFrame({"user": ["ann"] * 4 + ["bob"] * 3, "item": list("abcdabe"),
    ...                     "time": [1, 2, 3, 4, 5, 6, 7]})
    >>> data = Interactions.from_dataframe(log, timestamp_col="time")
    >>> train, val, test = split.time_cut(data, test_start=6, val_start=4)
    >>> train.nnz, val.nnz, test.nnz  # times 1-3, 4-5, 6-7
    (3, 2, 2)
    >>> train, val, test = split.time_cut(data, test_start=6, drop_cold_users=True)
    >>> test.nnz  # bob's items after 6 stay: bob has history before it
    2
    """
    X, times = _timed(X, timestamps)
    drop_cold_users = check_bool(drop_cold_users, "drop_cold_users")
    drop_cold_items = check_bool(drop_cold_items, "drop_cold_items")
    key = time_order_key(times)
    first, last = times[np.argmin(key)], times[np.argmax(key)]
    span = f"the timestamps run from {_show(first)} to {_show(last)}"
    test_at = _cut_key(test_start, times, "test_start")
    if not key.min() < test_at <= key.max():
        empty = "training" if test_at <= key.min() else "test"
        raise ValueError(
            f"test_start={test_start!r} leaves the {empty} part empty: {span}; test_start must be after the "
            "first time and at most the last"
        )
    val_at = test_at
    if val_start is not None:
        val_at = _cut_key(val_start, times, "val_start")
        if not key.min() < val_at < test_at:
            raise ValueError(
                f"val_start={val_start!r} must be after the first time and before test_start={test_start!r} ({span})"
            )
    rows = _rows(X)
    is_test = key >= test_at
    is_val = ~is_test & (key >= val_at)
    is_train = ~(is_test | is_val)
    cold = [(rows, X.shape[0])] * drop_cold_users + [(X.indices, X.shape[1])] * drop_cold_items
    for of, size in cold:  # validation: history in train
        is_val &= (np.bincount(of[is_train], minlength=size) > 0)[of]
    for of, size in cold:  # test: history in train or in the validation part kept
        is_test &= (np.bincount(of[is_train | is_val], minlength=size) > 0)[of]
    return _subset(X, rows, is_train), _subset(X, rows, is_val), _subset(X, rows, is_test)


def _show(time) -> str:
    """A time as people read it (``1998-04-22 23:10:38``, ``5``)."""
    kind = np.asarray(time).dtype.kind
    return str(pd.Timestamp(time) if kind == "M" else pd.Timedelta(time) if kind == "m" else np.asarray(time).item())


def _timed(X, timestamps) -> tuple[sp.csr_matrix, np.ndarray]:
    """The canonical ``X`` and the checked times of its stored entries: ``timestamps``, else the
    ``timestamps`` of an Interactions ``X``."""
    C = check_positive_values(X)
    if timestamps is not None:
        return C, check_timestamps(timestamps, C.nnz, "timestamps", "stored entry of X, row by row")
    own = getattr(X, "timestamps", None)
    if own is None:
        what = "this Interactions has none" if hasattr(X, "timestamps") else f"X is a {type(X).__name__}"
        raise ValueError(
            "a time-ordered split needs timestamps: pass timestamps= (one per stored entry of X) or an "
            f"Interactions built with timestamp_col= or timestamps= ({what})"
        )
    return C, check_timestamps(own, C.nnz, "X.timestamps", "stored entry of X.matrix")


def _cut_key(value, times, name):
    """The cut ``value`` in the units of :func:`~recsys_ltr.interactions.time_order_key` of ``times``."""
    kind = times.dtype.kind
    if kind not in "mM":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number like the timestamps, got {value!r}")
        if not np.isfinite(float(value)):
            raise ValueError(f"{name} must be finite, got {value!r}")
        return value
    what = "duration" if kind == "m" else "date or time"
    if value is None or isinstance(value, (bool, numbers.Number, np.number)):
        raise TypeError(f"{name} must be a {what} like the timestamps, got {value!r}")
    try:
        stamp = pd.Timedelta(value) if kind == "m" else pd.Timestamp(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a {what} like the timestamps, got {value!r} ({exc})") from None
    if stamp is pd.NaT:
        raise ValueError(f"{name} is a missing time (NaT)")
    if kind == "M" and stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    value = stamp.to_timedelta64() if kind == "m" else stamp.to_datetime64()
    return _count_in_unit(value, times.dtype)


#: seconds per unit of the linear datetime64 / timedelta64 units (years and months are not linear)
_UNIT_SECONDS = {
    "W": Fraction(604_800),
    "D": Fraction(86_400),
    "h": Fraction(3_600),
    "m": Fraction(60),
    "s": Fraction(1),
    **{unit: Fraction(1, 1000**k) for k, unit in enumerate(("ms", "us", "ns", "ps", "fs", "as"), start=1)},
}
_INT64 = np.iinfo(np.int64)


def _count_in_unit(value, dtype) -> int:
    """``value`` (a datetime64 / timedelta64) as a count of ``dtype``'s units, floored as numpy casts,
    computed exactly: numpy's cast wraps past the unit's range (2262 for nanoseconds) by 2**64 units.
    A time outside the range is clamped to its ends, later or earlier than every timestamp there."""
    unit, step = np.datetime_data(dtype)
    if unit in ("Y", "M"):  # coarser than pandas's units (at most seconds): the cast divides
        return int(value.astype(dtype).astype(np.int64))
    src, src_step = np.datetime_data(value.dtype)
    ratio = _UNIT_SECONDS[src] * src_step / (_UNIT_SECONDS[unit] * step)
    count = (int(value.astype(np.int64)) * ratio.numerator) // ratio.denominator
    return min(max(count, _INT64.min + 1), _INT64.max)  # int64's minimum is NaT


def _assign_by_time(X, key, n_test, n_val, rng):
    """Route each user's ``n_test`` latest positives to test, the ``n_val`` before them to
    validation, the rest to train (ties in ``key`` ordered by one uniform draw per entry)."""
    rows = _rows(X)
    order = np.lexsort((rng.random(X.nnz), key, rows))  # within a row: earliest first
    position = np.empty(X.nnz, dtype=np.int64)
    position[order] = np.arange(X.nnz)
    from_end = X.indptr[1:][rows].astype(np.int64) - 1 - position  # 0: the user's latest positive
    is_test = from_end < n_test[rows]
    is_val = ~is_test & (from_end < (n_test + n_val)[rows])
    return _subset(X, rows, ~(is_test | is_val)), _subset(X, rows, is_val), _subset(X, rows, is_test)
