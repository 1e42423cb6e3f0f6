"""Neighbourhood predictors: item-p, user-p and KUNN (dissertation sec. 4.5.5 and 4.7.2).

All are ``aggsum`` of an affinity over a k-nearest neighbourhood (Theorem 4.3):

* item-p: ``score(u, i) = sum_{j in O+_u & KNN(i)} A_ij = [ktrunc(A_item)]_i . u``;
* user-p: ``score(u, i) = sum_{v in O+_i & KNN(u)} A_uv = [ktrunc(A_user)]_u . i``;
* KUNN (Verstrepen & Goethals 2014), Eq. (4.3) = Eq. (4.4) by Theorem 4.4:
  ``score(u, i) = aggsum(phi_item) / sqrt(c(u)) + aggsum(phi_user) / sqrt(c(i))`` with the KUNN
  affinities Eq. (4.5)-(4.6); KUNN-i and KUNN-u (sec. 4.7.2) are item-p and user-p over those
  affinities (one half of the sum, without its ``1/sqrt(c)`` factor).

Neighbourhoods are built once for ``k`` and stored as row prefixes, so :meth:`with_k` gives
the model of any smaller ``k`` without recomputing similarities (sec. 4.5.6).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from .._topk import sparse_dense_product
from .._validation import check_positive_int
from ..neighbors.affinity import (
    Affinity,
    HoldsAffinities,
    cosine_affinity_trusted,
    kunn_affinity_trusted,
    kunn_counts,
    kunn_weights,
)
from ..neighbors.knn import check_k, cosine_rows, knn_index_trusted, knn_query_trusted, side_matrix
from .base import Recommender
from .updates import replace_rows

__all__ = ["KUNN", "ItemKNN", "PrefixK", "UserKNN"]

_KUNN_SIDES = ("both", "item", "user")


class PrefixK:
    """``with_k`` for models whose fitted state holds row prefixes for every ``k <= _k_limit()``
    (sec. 4.5.6): the model of a smaller ``k`` shares the state and only re-derives its scorer."""

    def with_k(self, k):
        """The fitted model for a smaller neighbourhood size ``k``, without recomputation."""
        self._check_fitted()
        limit = self._k_limit()
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k > limit:
            raise ValueError(f"k={k} exceeds the k={limit} this model was fitted with; refit instead")
        model = clone(self).set_params(**self.params_).set_params(k=k)
        model._check_params()
        model._check_data_params(self.user_items_)
        for name in self._state_attributes:
            setattr(model, name, getattr(self, name))
        model.params_ = model.get_params(deep=False)
        model._prepare()
        return model


class _Neighborhood(PrefixK, HoldsAffinities, Recommender):
    """Shared machinery: fitting the affinities, ``k`` validation, truncated scorers, :meth:`with_k`."""

    uses_items = True
    uses_users = False
    _affinity_kind = "cosine"
    _build_affinity = staticmethod(cosine_affinity_trusted)

    def __init__(self, k=100, num_threads=0, show_progress=None):
        self.k = k
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _fit(self, X):
        for name in self._model_state:  # "item_affinity_" / "user_affinity_"
            side = name.split("_")[0]
            k = self._param("k")
            setattr(self, name, self._build_affinity(X, k, side, self.num_threads, self._progress()))

    def _score_product(self, rows, ids, recalculate):
        if self.uses_items:
            return rows, self.item_scorer_
        return self._user_neighbor_rows(rows, ids, recalculate), self.user_items_

    def _item_affinity(self):
        return self.item_affinity_ if self.uses_items else super()._item_affinity()

    def _users_state(self, ids, rows, grown):
        return self._relearnt("user", ids, grown) if self.uses_users else {}

    def _items_state(self, ids, cols, grown):
        return self._relearnt("item", ids, grown) if self.uses_items else {}

    def _relearnt(self, side, ids, grown) -> dict:
        """The ``side``'s affinity with the rows ``ids`` computed against the ``grown`` matrix
        (the rows a refit computes for them), the other rows kept."""
        A = getattr(self, f"{side}_affinity_")
        M = side_matrix(grown, side)
        rows = knn_query_trusted(knn_index_trusted(M, self._weights_of(M)), M[ids], A.k_max, ids, self.num_threads)
        return {f"{side}_affinity_": Affinity.trusted(replace_rows(A.matrix, ids, rows), A.k_max, A.kind, side)}

    def _check_params(self):
        super()._check_params()
        check_positive_int(self.k, "k")

    def _check_data_params(self, X):
        if self.uses_items:
            check_k(self._param("k"), X.shape[1], "items")
        if self.uses_users:
            check_k(self._param("k"), X.shape[0], "users")

    def _feature_weights(self, M):
        """Feature weights of the similarity between the rows of ``M`` (None: plain cosine)."""
        return None

    def _prepare(self):
        super()._prepare()
        k = self._param("k")
        if self.uses_items:
            # item-p scores a block of users as rows @ ktrunc(A_item)^T
            self.item_scorer_ = sp.csr_matrix(self.item_affinity_.truncate(k).T)
        if self.uses_users:
            self.user_neighbors_ = self.user_affinity_.truncate(k)
            # built once so that recommend(..., recalculate_user=True) costs O(nnz of the query)
            self.user_index_ = knn_index_trusted(self.user_items_, self._weights_of(self.user_items_))
        self._item_users = None  # items x users, built on first use (_item_columns)

    def _item_columns(self) -> sp.csr_matrix:
        """The training items' user columns as CSR rows, transposed once on first use (only
        ``similar_items`` of user-based models and ``recalculate_item`` need them)."""
        if self._item_users is None:
            self._item_users = self.user_items_.T.tocsr()
        return self._item_users

    def _weights_of(self, M):
        w = self._feature_weights(M)
        return np.ones(M.shape[1]) if w is None else w

    def _item_part(self, rows):
        return sparse_dense_product(rows, self.item_scorer_)

    def _user_part(self, rows, ids, recalculate):
        """``[ktrunc(A_user)]_u . i`` for every item: neighbours' rows weighted by affinity."""
        return sparse_dense_product(self._user_neighbor_rows(rows, ids, recalculate), self.user_items_)

    def _user_neighbor_rows(self, rows, ids, recalculate):
        """The users' truncated neighbour rows (recomputed from ``rows`` with ``recalculate``)."""
        if recalculate:
            query_ids = np.where(ids < self.n_users_, ids, -1)
            return knn_query_trusted(self.user_index_, rows, self._param("k"), query_ids, self.num_threads)
        return self.user_neighbors_[ids]

    def _item_similarity_matrix(self):
        return self.item_affinity_.matrix if self.uses_items else None

    def _item_similarity_rows(self, items):
        if self.uses_items:
            return super()._item_similarity_rows(items)
        # user-based: the items' cosine (KUNN: Eq. 4.5) over their user columns, on demand
        M = self._item_columns()
        return cosine_rows(M, items, self._feature_weights(M))

    def _recalculated_item_rows(self, cols):
        """Cosine (KUNN: Eq. 4.5) of new user columns with every training item's column."""
        M = sp.vstack([self._item_columns(), cols]).tocsr()
        n = self.n_items_
        return cosine_rows(M, np.arange(n, n + cols.shape[0]), self._feature_weights(M))[:, :n]

    def _user_similarity_rows(self, users):
        if self.uses_users:
            return self.user_affinity_.matrix[users].toarray()
        return super()._user_similarity_rows(users)

    def _check_state(self):
        super()._check_state()
        for name in self._model_state:
            if self.k > getattr(self, name).k_max:
                raise ValueError(f"k={self.k} exceeds the stored {name}.k_max")

    def _k_limit(self) -> int:
        return min(getattr(self, name).k_max for name in self._model_state)


class ItemKNN(_Neighborhood):
    """item-p: item-based cosine KNN (Deshpande & Karypis 2004, in the row form of Theorem 4.3).

    ``score(u, i) = sum of cos(i, j)`` over the items ``j`` of ``u`` among the ``k`` nearest
    neighbours of ``i``.  ItemKNN reads weights (``uses_weights``): with a weighted ``X`` (counts,
    :func:`recsys_ltr.weighting.bm25_weight`) the cosine is of the weighted item columns and each
    ``cos(i, j)`` counts ``r_uj`` times, as in implicit's ``CosineRecommender``; binary input gives
    the formula above.

    Parameters
    ----------
    k : int
        Neighbourhood size, ``1 <= k < n_items``.
    num_threads : int
        numba threads (0 = all); results do not depend on it.
    show_progress : bool or None
        Progress bar over blocks of items while computing neighbours (``None``: on when
        standard error is a terminal).

    Attributes
    ----------
    item_affinity_ : Affinity
        Cosine ``KNN(i)`` of every item, most similar first.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> from recsys_ltr.models import ItemKNN
    >>> model = ItemKNN(k=20).fit(X)
    >>> model.recommend([0, 1, 2], N=2)[0]  # one row per user
    array([[29, 52],
           [59, 41],
           [41,  2]], dtype=int32)
    >>> model.similar_items(5, N=3)[0]
    array([51,  6, 55], dtype=int32)
    """

    uses_weights = True
    _model_state = ("item_affinity_",)


class UserKNN(_Neighborhood):
    """user-p: user-based cosine KNN.

    ``score(u, i) = sum of cos(u, v)`` over the users ``v`` who consumed ``i`` among the ``k``
    nearest neighbours of ``u``.  A user's neighbours are fixed at ``fit``; ``recommend`` with
    ``recalculate_user=True`` recomputes them from the ``user_items`` passed in (against an
    index of the training users built once, so the cost is that of the query rows).
    ``similar_items(i)`` ranks items by ``cos(i, j)`` of their user columns, computed for the
    requested items only (KUNN with ``side="user"``: the Eq. 4.5 affinity).  UserKNN reads weights
    (``uses_weights``): with a weighted ``X`` the cosine is of the weighted user rows and each
    ``cos(u, v)`` counts ``r_vi`` times.

    Parameters
    ----------
    k : int
        Neighbourhood size, ``1 <= k < n_users``.
    num_threads, show_progress :
        As in :class:`ItemKNN`.

    Attributes
    ----------
    user_affinity_ : Affinity
        Cosine ``KNN(u)`` of every user, most similar first.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> from recsys_ltr.models import UserKNN
    >>> model = UserKNN(k=20).fit(X)
    >>> model.recommend(0, N=3)[0]
    array([52, 29, 61], dtype=int32)
    >>> new_user = X[[0]]  # a user outside the training data, scored from their row
    >>> model.recommend(500, user_items=new_user, N=3, recalculate_user=True)[0]
    array([52, 29, 61], dtype=int32)
    """

    item_based = False
    uses_weights = True
    uses_items = False
    uses_users = True
    _model_state = ("user_affinity_",)


class KUNN(_Neighborhood):
    """KUNN, unified user and item nearest neighbours (Verstrepen & Goethals 2014).

    ``side="both"``: Eq. (4.4), ``aggsum(phi_item) / sqrt(c(u)) + aggsum(phi_user) / sqrt(c(i))``,
    which equals the double sum Eq. (4.3) (Theorem 4.4); ``side="item"`` (KUNN-i) keeps
    ``aggsum(phi_item)`` and ``side="user"`` (KUNN-u) keeps ``aggsum(phi_user)``.  Affinities are
    Eq. (4.5)-(4.6) and ``KNN`` is taken under them.  ``c(u)`` counts the user's items (in the
    row scored), ``c(i)`` the item's training users; a zero count makes its term 0.

    Parameters
    ----------
    k : int
        Neighbourhood size of both sides (``< n_items`` and/or ``< n_users``).
    side : {"both", "item", "user"}
        KUNN, KUNN-i or KUNN-u.
    num_threads, show_progress :
        As in :class:`ItemKNN`.

    Attributes
    ----------
    item_affinity_, user_affinity_ : Affinity
        Eq. (4.5) and Eq. (4.6), each fitted only when ``side`` uses it.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
    >>> from recsys_ltr.models import KUNN
    >>> model = KUNN(k=20).fit(X)
    >>> model.recommend(0, N=3)[0]
    array([29, 99,  4], dtype=int32)
    >>> model.with_k(10).recommend(0, N=3)[0].shape  # a smaller k without recomputation
    (3,)
    """

    _affinity_kind = "kunn"
    _build_affinity = staticmethod(kunn_affinity_trusted)

    def __init__(self, k=100, side="both", num_threads=0, show_progress=None):
        self.k = k
        self.side = side
        self.num_threads = num_threads
        self.show_progress = show_progress

    @property
    def uses_items(self):
        return self._param("side") in ("both", "item")

    @property
    def uses_users(self):
        return self._param("side") in ("both", "user")

    @property
    def item_based(self):
        return self._param("side") == "item"

    @property
    def _model_state(self):
        return ("item_affinity_",) * self.uses_items + ("user_affinity_",) * self.uses_users

    def _check_params(self):
        if self.side not in _KUNN_SIDES:
            raise ValueError(f"side must be one of {_KUNN_SIDES}, got {self.side!r}")
        super()._check_params()

    def _feature_weights(self, M):
        """Eq. (4.5)-(4.6): a shared feature ``f`` counts ``1 / sqrt(c(f))``."""
        return kunn_weights(M)

    def _prepare(self):
        super()._prepare()
        # 1/sqrt(c(i)) of Eq. (4.4); the placeholder 1 of an unseen item multiplies a zero column
        self.item_factor_ = kunn_weights(self.user_items_)

    def _score_product(self, rows, ids, recalculate):
        return None if self._param("side") == "both" else super()._score_product(rows, ids, recalculate)

    def _score_rows(self, rows, ids, recalculate):
        side = self._param("side")
        if side == "item":
            return self._item_part(rows)
        user = self._user_part(rows, ids, recalculate)
        if side == "user":
            return user
        item = self._item_part(rows)
        item /= np.sqrt(kunn_counts(rows))[:, None]  # 1/sqrt(c(u)); an empty row's item part is 0
        user *= self.item_factor_[None, :]
        item += user
        return item
