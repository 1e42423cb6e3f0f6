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
Train, validation and test are disjoint and sum to the input matrix.

Everything is vectorised: one uniform random key per nonzero, ineligible entries pushed to
the end of their row, and a lexsort by (row, key) ranks each user's positives at once.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp

from ._validation import check_feedback, check_positive_int, check_random_state, check_real

__all__ = [
    "eligible_positives",
    "folds",
    "holdout",
    "holdout_trusted",
    "kfold",
    "kfold_trusted",
    "leave_k_out",
    "novelty_holdout",
    "sample_users",
    "split_counts",
    "top_items",
]


def holdout(X, val=0.1, test=0.2, random_state=0, exclude_top=None):
    """Split each user's positives at random into train / validation / test.

    Parameters
    ----------
    X : sparse matrix, array or Interactions
        Binary users x items feedback (see :func:`recsys_ltr._validation.check_feedback`).
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
    """
    X = check_feedback(X)
    val, test = _check_fractions(val, test)
    return holdout_trusted(
        X, val, test, check_random_state(random_state, "random_state"), eligible_positives(X, exclude_top)
    )


def holdout_trusted(X, val, test, rng, eligible=None):
    """:func:`holdout` of a canonical ``X``, checked fractions, a Generator and the mask of
    eligible positives (default all)."""
    eligible = np.ones(X.nnz, dtype=bool) if eligible is None else eligible
    n = np.diff(X.indptr)
    m = np.bincount(_rows(X)[eligible], minlength=X.shape[0])
    n_test, n_val = split_counts(n, m, val, test)
    return _assign(X, eligible, n_test, n_val, rng)


def novelty_holdout(X, val=0.1, test=0.2, random_state=0, exclude_top=100):
    """:func:`holdout` under the novelty protocol (dissertation section 4.7.5)."""
    if exclude_top is None:
        raise ValueError("novelty_holdout needs exclude_top (an int >= 1)")
    return holdout(X, val=val, test=test, random_state=random_state, exclude_top=exclude_top)


def folds(X, n_folds=3, val=0.1, test=0.2, random_state=0, exclude_top=None) -> Iterator[tuple]:
    """Yield ``n_folds`` independent :func:`holdout` splits (the paper uses three).

    Fold ``f`` is ``holdout(X, ..., random_state=random_state + f)`` for an int seed (so any single fold can be
    reproduced on its own); a Generator is consumed fold after fold.
    """
    n_folds = check_positive_int(n_folds, "n_folds")
    X = check_feedback(X)
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
    """
    X = check_feedback(X)
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


def leave_k_out(X, k=1, random_state=0, val_k=0, exclude_top=None):
    """Hold out exactly ``k`` test and ``val_k`` validation positives per user.

    Users with fewer than ``k + val_k + 1`` eligible positives (so that at least one
    training positive remains) stay entirely in train.  ``exclude_top`` as in :func:`holdout`.

    Returns
    -------
    train, val, test : scipy.sparse.csr_matrix
        ``val`` is empty when ``val_k == 0``.
    """
    X = check_feedback(X)
    k = check_positive_int(k, "k")
    val_k = check_positive_int(val_k, "val_k", minimum=0)
    eligible = eligible_positives(X, exclude_top)
    n = np.diff(X.indptr)
    m = np.bincount(_rows(X)[eligible], minlength=X.shape[0])
    ok = (m >= k + val_k) & (n >= k + val_k + 1)
    return _assign(
        X, eligible, np.where(ok, k, 0), np.where(ok, val_k, 0), check_random_state(random_state, "random_state")
    )


def split_counts(n, m, val, test) -> tuple[np.ndarray, np.ndarray]:
    """Per-user ``(n_test, n_val)`` of :func:`holdout` (module docstring) from the numbers of
    positives ``n`` and eligible positives ``m``."""
    n = np.asarray(n, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    n_test = np.minimum(np.floor(test * m + 0.5).astype(np.int64), np.maximum(n - 1, 0))
    n_val = np.minimum(np.floor(val * m + 0.5).astype(np.int64), np.minimum(m - n_test, n - 1 - n_test))
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
    banned[top_items(X, exclude_top)] = True
    return ~banned[X.indices]


def top_items(X: sp.csr_matrix, n: int) -> np.ndarray:
    """The ``n`` items of a canonical ``X`` with the most positives (ties: the lower id first): the
    items the novelty protocol never holds out."""
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
    # int32 is safe: X passed check_feedback (nnz < 2**31) and a subset has fewer entries.
    counts = np.bincount(rows[mask], minlength=X.shape[0])
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return sp.csr_matrix((np.ones(int(mask.sum())), X.indices[mask].astype(np.int32), indptr), shape=X.shape)


def sample_users(X: sp.csr_matrix, size, rng=None, exclude=None) -> np.ndarray:
    """At most ``size`` of the users with interactions in ``X`` (canonical CSR) and not in ``exclude``,
    sorted: evenly spaced (a fixed sample, for statistics) without ``rng``, a uniform random sample
    with it; all of them when ``size`` is ``None`` or not smaller."""
    users = np.flatnonzero(np.diff(X.indptr) > 0)
    if exclude is not None:
        users = np.setdiff1d(users, exclude)
    if size is None or users.size <= size:
        return users
    if rng is None:
        return users[np.unique(np.linspace(0, users.size - 1, size).astype(np.int64))]
    return np.sort(rng.choice(users, size, replace=False))
