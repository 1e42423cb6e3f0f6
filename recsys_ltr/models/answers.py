"""What a fitted recommender answers: ``recommend``, ``similar_items`` and ``similar_users``, each
checking its inputs and handing :mod:`recsys_ltr.models.ranking` the scores or similarities that
the model family defines (the hooks below)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._threads import numba_threads
from .._validation import check_bool, check_ids, check_item_selection, check_new_ids, check_positive_int
from ..neighbors.knn import cosine_rows
from .ranking import DenseRows, Factors, Product, top_n, top_similar, top_similar_sparse, unpad, warn_if_short

__all__ = ["NEW_USER_HINT", "Answers"]

NEW_USER_HINT = (
    "; ids are the rows of the training matrix: to score a user outside it, pass their interactions as "
    "user_items with recalculate_user=True"
)


class Answers:
    """The answers of a :class:`~recsys_ltr.models.Recommender` (from its fitted ``user_items_``,
    ``item_popularity_``, ``n_items_``, ``n_users_``, its ``item_based``, ``num_threads`` and scoring
    hooks)."""

    #: ``similar_items`` leaves out items of similarity 0 (no evidence)
    _similar_drop_zero = True

    # ------------------------------------------------------------------ recommendation
    def recommend(
        self,
        userid,
        user_items=None,
        N=10,
        filter_already_liked_items=True,
        filter_items=None,
        recalculate_user=False,
        items=None,
    ):
        """Top-``N`` items for one user or an array of users.

        Parameters
        ----------
        userid : int or array of int
            Training user id(s), rows of the training matrix: ``[0, n_users)``.  A user outside
            the training data (any id ``>= n_users``, e.g. an id of your own) is scored from
            ``user_items`` with ``recalculate_user=True``; without it such an id is an error.
        user_items : sparse matrix or 2-D array, shape (len(userid), n_items), optional
            The users' interactions, one row per id (default: their training rows); weights for
            models with ``uses_weights``, binarised by the others.  Used to
            filter liked items and, for item-based models or with ``recalculate_user``, to
            score (no refit needed); user-based models otherwise score the training rows.
        N : int
            Number of items to return.
        filter_already_liked_items : bool
            Exclude the items of ``user_items`` (or of the training rows).
        filter_items : array of int, optional
            Items excluded for every user.
        recalculate_user : bool
            Score the users from ``user_items`` alone, with no stored state of theirs: new users,
            or training users with updated rows (user-based models rebuild their neighbours, ALS
            solves for the user's factors; models that learn users only by ``fit`` raise).
        items : array of int, optional
            Rank only these items (implicit's ``items``); cannot be combined with ``filter_items``.

        Returns
        -------
        (ids, scores) : ndarrays
            Shape ``(N',)`` for a scalar ``userid`` (``N' <= N`` when fewer items remain) and
            ``(len(userid), min(N, n_candidates))`` for an array, padded with id ``-1`` and score
            ``-inf`` where a user has fewer candidates.

        Examples
        --------
        >>> import numpy as np
        >>> from recsys_ltr.datasets import make_synthetic
        >>> from recsys_ltr.models import ItemKNN
        >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
        >>> model = ItemKNN(k=20).fit(X)
        >>> ids, scores = model.recommend(0, N=3)
        >>> ids
        array([29, 52,  4], dtype=int32)
        >>> model.recommend(0, N=3, filter_items=[29])[0]  # never item 29
        array([52,  4, 95], dtype=int32)
        >>> model.recommend(0, N=2, items=np.arange(10))[0]  # only among items 0-9
        array([4, 6], dtype=int32)
        >>> model.recommend(np.array([0, 1]), N=2)[0]  # a batch: one row per user
        array([[29, 52],
               [59, 41]], dtype=int32)
        >>> row = X[[0]].tolil()  # user 0 after a new click on item 52, no refit
        >>> row[0, 52] = 1.0
        >>> model.recommend(0, user_items=row, N=3)[0]
        array([29,  4, 51], dtype=int32)
        """
        rows, ids, liked, excluded, n_out = self._recommend_inputs(
            userid, user_items, N, filter_already_liked_items, filter_items, recalculate_user, items
        )
        # without recalculation a user-based model scores from the stored training rows
        scored = rows if self.item_based or recalculate_user else self.user_items_[ids]
        with numba_threads(self.num_threads):
            scores = self._scores_of(scored, ids, recalculate_user)
            found = top_n(scores, self.item_popularity_, liked, excluded, n_out, self.num_threads)
        return unpad(*found) if np.ndim(userid) == 0 else found

    def _recommend_inputs(self, userid, user_items, N, filter_already_liked_items, filter_items, recalculate, items):
        """:meth:`recommend`'s arguments checked: ``(rows, ids, liked, excluded, n_out)``, the users'
        rows and ids, the rows left out (empty without ``filter_already_liked_items``), the mask of
        the excluded items and the length of the answers."""
        self._check_fitted()
        N = check_positive_int(N, "N")
        filter_already_liked_items = check_bool(filter_already_liked_items, "filter_already_liked_items")
        recalculate = check_bool(recalculate, "recalculate_user")
        rows, ids = self._user_rows(userid, user_items, recalculate)  # checks userid first
        excluded = check_item_selection(filter_items, items, self.n_items_, "items")
        # canonical int32 CSR either way (rows are checked at the boundary): the kernels take its arrays as they are
        liked = rows if filter_already_liked_items else sp.csr_matrix(rows.shape, dtype=np.float64)
        n_out = min(N, self.n_items_ if items is None else int(np.count_nonzero(~excluded)))
        return rows, ids, liked, excluded, n_out

    def _scores_of(self, rows, ids, recalculate):
        """The scores of ``rows`` as :mod:`~recsys_ltr.models.ranking` ranks them: a non-negative
        product, factors, or dense rows block by block."""
        product = self._nonnegative_product(rows, ids, recalculate)
        if product is not None:
            return Product(*product)
        factors = self._score_factors(rows, ids, recalculate)
        if factors is not None:
            return Factors(*factors)
        return DenseRows(lambda block: self._score_rows(rows[block], ids[block], recalculate), len(ids))

    def _user_rows(self, userid, user_items, recalculate):
        """The rows ``recommend`` scores and the checked ids: a training id in ``[0, n_users)``, or
        with ``recalculate_user=True`` any id ``>= 0`` (a user outside the training data, scored
        from ``user_items``)."""
        if recalculate:
            if user_items is None:
                raise ValueError("recalculate_user=True needs the users' rows in user_items")
            ids = check_new_ids(userid, "userid", "n_users")
        else:
            ids = check_ids(userid, self.n_users_, "userid", NEW_USER_HINT)
        if user_items is None:
            return self.user_items_[ids], ids
        rows = self._check_input(user_items, "user_items", allow_empty=True)
        if rows.shape != (len(ids), self.n_items_):
            raise ValueError(
                f"user_items must have one row per userid and {self.n_items_} item columns: "
                f"expected shape {(len(ids), self.n_items_)}, got {rows.shape}"
            )
        return rows, ids

    # ------------------------------------------------------------------ similar items and users

    def similar_items(self, itemid, N=10, recalculate_item=False, item_users=None, filter_items=None, items=None):
        """``(ids, scores)`` of the ``N`` items most similar to ``itemid``, most similar first.

        The similarity is the model's item affinity (ItemKNN, KUNN, SLIM, RP3beta: the stored
        ``KNN`` rows; EASE: the weights ``B``; factor models: the cosine of the item factors;
        user-based models: the cosine of the items' user columns, KUNN's Eq. 4.5 weighting),
        ties by smaller id; items with similarity 0 are left out, so fewer than ``N`` may come back
        (e.g. from a neighbourhood of ``k < N`` items), with a ``UserWarning`` saying so.
        :class:`~recsys_ltr.models.Popularity` returns the popularity order.

        Unlike implicit, whose ``similar_items`` lists the item itself first (its self-similarity
        is maximal for cosine), the item itself is never returned: self-affinity is not defined
        for SLIM (``W_ii = 0``) nor maximal for KUNN.  implicit's ``similar_items(i, N + 1)``
        with its first entry dropped corresponds to ``similar_items(i, N)``.

        Parameters
        ----------
        itemid : int or array of int
            Item id(s); with ``recalculate_item`` they may be new ids ``>= n_items``.
        N : int
        recalculate_item : bool
            Compute the items' similarities from ``item_users`` (their users, one row per id)
            instead of the fitted state (models with an item side built from users: item and
            user cosine / KUNN neighbourhoods, ALS).
        item_users : sparse matrix or 2-D array, shape (len(itemid), n_users), optional
        filter_items, items : array of int, optional
            As in :meth:`recommend`.

        Returns
        -------
        (ids, scores) : ndarrays
            ``(N',)`` for a scalar ``itemid`` and ``(len(itemid), min(N, n_items - 1))`` for an
            array, padded with id ``-1`` and score ``-inf``.

        Examples
        --------
        >>> from recsys_ltr.datasets import make_synthetic
        >>> from recsys_ltr.models import ItemKNN
        >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
        >>> model = ItemKNN(k=20).fit(X)
        >>> model.similar_items(5, N=3)[0]  # item 5 itself is never in its answer
        array([51,  6, 55], dtype=int32)
        """
        self._check_fitted()
        N = check_positive_int(N, "N")
        excluded = check_item_selection(filter_items, items, self.n_items_, "items")
        if check_bool(recalculate_item, "recalculate_item"):
            if item_users is None:
                raise ValueError("recalculate_item=True needs the items' users in item_users")
            ids = check_new_ids(itemid, "itemid", "n_items")
            cols = self._check_input(item_users, "item_users", allow_empty=True)
            if cols.shape != (len(ids), self.n_users_):
                raise ValueError(f"item_users must have shape {(len(ids), self.n_users_)}, got {cols.shape}")
            rows_of = lambda chunk: self._recalculated_item_rows(cols[chunk])  # noqa: E731
            positions = np.arange(len(ids))
        else:
            if item_users is not None:
                raise ValueError("item_users is used only with recalculate_item=True")
            ids = check_ids(itemid, self.n_items_, "itemid")
            S = self._item_similarity_matrix()
            if S is not None and S.data.min(initial=0.0) >= 0.0:
                with numba_threads(self.num_threads):
                    found = top_similar_sparse(S, ids, N, excluded)
                return self._short_warned(found, N, excluded, "item", np.ndim(itemid) == 0)
            rows_of, positions = self._item_similarity_rows, ids
        with numba_threads(self.num_threads):
            found = top_similar(rows_of, positions, ids, N, excluded, self.n_items_, self._similar_drop_zero)
        return self._short_warned(found, N, excluded, "item", np.ndim(itemid) == 0)

    def similar_users(self, userid, N=10, filter_users=None, users=None):
        """``(ids, scores)`` of the ``N`` training users most similar to ``userid`` (the user left
        out), shaped like :meth:`similar_items`: the model's user affinity (user-based
        neighbourhoods), the cosine of the user factors (factor models), else the cosine of the
        users' training rows.  ``filter_users`` / ``users`` as ``filter_items`` / ``items``."""
        self._check_fitted()
        N = check_positive_int(N, "N")
        excluded = check_item_selection(filter_users, users, self.n_users_, "users")
        ids = check_ids(userid, self.n_users_, "userid")
        with numba_threads(self.num_threads):
            found = top_similar(
                self._user_similarity_rows, ids, ids, N, excluded, self.n_users_, self._similar_drop_zero
            )
        return self._short_warned(found, N, excluded, "user", np.ndim(userid) == 0)

    def _short_warned(self, found, N, excluded, side, scalar):
        """``found`` (the query's one row for a ``scalar`` id), warning when an id got fewer than
        ``N`` answers (:func:`~recsys_ltr.models.ranking.warn_if_short`)."""
        k = self.get_params().get("k")  # the neighbourhood of the side the model is based on
        kept = (
            f" (it keeps the k={k} nearest neighbours)"
            if isinstance(k, int) and self.item_based == (side == "item")
            else ""
        )
        warn_if_short(found, N, excluded, side, type(self).__name__, kept)
        return unpad(*found) if scalar else found

    def _item_similarity_matrix(self):
        """The CSR matrix whose rows :meth:`_item_similarity_rows` returns densely, for models that
        store it sparsely and leave zero similarities out; ``None`` otherwise."""
        return None

    def _item_similarity_rows(self, items) -> np.ndarray:
        """Dense similarities of ``items`` to every item (default: the item affinity's rows)."""
        return self._item_affinity().matrix[items].toarray()

    def _item_affinity(self):
        raise NotImplementedError(f"{type(self).__name__} has no item-item affinity")

    def _recalculated_item_rows(self, cols) -> np.ndarray:
        raise ValueError(f"{type(self).__name__} cannot compute similarities of items from item_users")

    def _user_similarity_rows(self, users) -> np.ndarray:
        """Dense similarities of ``users`` to every training user (default: cosine of rows)."""
        return cosine_rows(self.user_items_, users)
