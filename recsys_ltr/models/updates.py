"""Updates without a refit: implicit's ``partial_fit_users`` / ``partial_fit_items``.

``partial_fit_users(userids, user_items)`` gives the *full* rows of some users: known ids have
their row replaced, new ids (``n_users_``, ``n_users_ + 1``, ... in any order, without gaps) grow
the model.  Each model then re-learns **the parameters of those users alone** from their rows and
keeps every other parameter as ``fit`` left it (implicit's meaning: ALS folds the users in with the
item factors fixed); ``partial_fit_items(itemids, item_users)`` is the same for items and their
columns.  What a model re-learns, by family:

* item-based models (EASE, SLIM, RP3beta, ItemKNN, GF-CF, BSPM, Popularity, KUNN-i) have no user
  parameters: a user is its row, so ``partial_fit_users`` only stores the rows (the scores of an
  updated user equal ``recommend(..., user_items=row, recalculate_user=True)``);
* ALS: the closed-form least squares of each user given the item factors (of each item given the
  user factors), :class:`~recsys_ltr.models.ALS`'s fold-in;
* UserKNN / KUNN: the given users' neighbour rows (items: the given items' rows) computed against
  the grown matrix, equal to the rows a refit computes for them; the other rows are kept;
* everything a model derives from its training matrix rather than learns (item popularity, the
  tie-breaker; GF-CF's linear filter ``R^T R``; KUNN's counts) is derived again from the grown one.

A model that cannot re-learn a side without a refit (BPR, LightFM: users learnt only by SGD; the
item side of EASE, SLIM, RP3beta and the graph filters, whose item parameters couple every item)
raises ``NotImplementedError`` naming ``fit``, and is left unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._validation import INDEX_DTYPE, check_new_ids

__all__ = ["Update", "check_update", "grow_rows", "replace_columns", "replace_rows"]


class Update(NamedTuple):
    """A model's re-learnt state, computed in full before any of it is applied (an update that
    fails leaves the model as it was)."""

    model: object
    user_items: sp.csr_matrix  #: the grown training matrix
    state: dict  #: fitted attributes to replace
    parts: tuple = ()  #: updates of nested models (FEBR's bases), applied first

    def apply(self):
        for part in self.parts:
            part.apply()
        for name, value in self.state.items():
            setattr(self.model, name, value)
        self.model.user_items_ = self.user_items
        self.model._prepare()


def check_update(ids, n: int, kind: str) -> np.ndarray:
    """The ids of an update as int64: unique, ``>= 0``, the new ones (``>= n``) numbered on from ``n``."""
    name = f"{kind}ids"
    ids = check_new_ids(ids, name, f"n_{kind}s_")
    values, counts = np.unique(ids, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"{name} repeats ids {values[counts > 1][:5].tolist()}: give each {kind}'s full row once")
    new = values[values >= n]
    if new.size and new[-1] != n + new.size - 1:
        raise ValueError(
            f"new {kind} ids must continue the numbering without gaps: {new.size} new {kind}(s) are "
            f"{n}..{n + new.size - 1}, got ids up to {int(new[-1])}"
        )
    return ids


def grow_rows(X: sp.csr_matrix, n_rows: int, n_cols: int) -> sp.csr_matrix:
    """Canonical ``X`` padded with empty rows and columns to ``(n_rows, n_cols)`` (no copy of the entries)."""
    indptr = np.concatenate([X.indptr, np.full(n_rows - X.shape[0], X.indptr[-1], X.indptr.dtype)])
    return sp.csr_matrix((X.data, X.indices, indptr), shape=(n_rows, n_cols))


def replace_rows(X: sp.csr_matrix, ids: np.ndarray, rows: sp.csr_matrix) -> sp.csr_matrix:
    """Canonical ``X`` with its rows ``ids`` replaced by ``rows`` (ids ``>= X.shape[0]`` append rows,
    :func:`check_update`'s numbering); ``rows`` may be wider than ``X`` (the grown columns)."""
    n = X.shape[0] + int(np.count_nonzero(ids >= X.shape[0]))
    width = max(X.shape[1], rows.shape[1])
    order = np.arange(n)
    order[ids] = n + np.arange(ids.size)  # the rows of the update, stacked after the (grown) old ones
    stacked = sp.vstack([grow_rows(X, n, width), grow_rows(rows, rows.shape[0], width)], format="csr")
    out = stacked[order]
    out.indices = out.indices.astype(INDEX_DTYPE, copy=False)
    out.indptr = out.indptr.astype(INDEX_DTYPE, copy=False)
    return out


def replace_columns(X: sp.csr_matrix, ids: np.ndarray, cols: sp.csr_matrix) -> sp.csr_matrix:
    """Canonical ``X`` with its columns ``ids`` replaced by the rows of ``cols`` (items x users)."""
    out = replace_rows(X.T.tocsr(), ids, cols).T.tocsr()
    out.sort_indices()
    out.indices = out.indices.astype(INDEX_DTYPE, copy=False)
    out.indptr = out.indptr.astype(INDEX_DTYPE, copy=False)
    return out
