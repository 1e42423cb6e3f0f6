"""The global popularity baseline (dissertation sec. 4.7.2)."""

from __future__ import annotations

import numpy as np

from .base import Recommender

__all__ = ["Popularity"]


class Popularity(Recommender):
    """Score every item by its number of training interactions, the same for all users.

    ``similar_items(i)`` returns the most popular items other than ``i`` (there is no item
    similarity), so every model answers it.

    Parameters
    ----------
    num_threads : int
        numba threads for ``recommend`` (0 = all).
    show_progress : bool or None
        Unused (nothing to fit); kept for a uniform API.

    ``similar_users`` ranks users by the cosine of their training rows.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.models import Popularity
    >>> X = sp.csr_matrix(np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0]]))
    >>> model = Popularity().fit(X)
    >>> model.recommend(0, N=2)  # item 0 and 1 are user 0's already
    (array([2, 3], dtype=int32), array([2., 0.]))
    """

    def __init__(self, num_threads=0, show_progress=None):
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _fit(self, X):
        pass

    def _items_state(self, ids, cols, grown):
        return {}  # the popularity is derived from the grown matrix

    def _score_rows(self, rows, ids, recalculate):
        return np.repeat(self.item_popularity_[None, :], rows.shape[0], axis=0)

    _similar_drop_zero = False  # items nobody consumed still have a place in the order

    def _item_similarity_rows(self, items):
        """``similar_items``: the popularity order (count, then smaller id); the item is left out."""
        return np.broadcast_to(self.item_popularity_, (len(items), self.n_items_))
