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
    show_progress : bool
        Unused (nothing to fit); kept for a uniform API.
    """

    def __init__(self, num_threads=0, show_progress=False):
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _fit(self, X):
        pass

    def _score_rows(self, rows, ids, recalculate):
        return np.repeat(self.item_popularity_[None, :], rows.shape[0], axis=0)

    def _similar(self, items, n_out):
        """``similar_items``: the popularity order (count, then smaller id) without the item."""
        ranked = np.lexsort((np.arange(self.n_items_), -self.item_popularity_))[: n_out + 1]
        candidates = np.broadcast_to(ranked, (items.size, ranked.size))
        # stable sort moves the item itself (if among the first n_out + 1) to the end
        first = np.argsort(candidates == items[:, None], axis=1, kind="stable")[:, :n_out]
        out_ids = np.full((items.size, n_out), -1, np.int64)
        chosen = np.take_along_axis(candidates, first, axis=1)
        valid = chosen != items[:, None]
        out_ids[:, : chosen.shape[1]] = np.where(valid, chosen, -1)
        out_scores = np.where(out_ids >= 0, self.item_popularity_[np.maximum(out_ids, 0)], -np.inf)
        return out_ids, out_scores
