"""The global popularity baseline (dissertation sec. 4.7.2)."""

from __future__ import annotations

import numpy as np

from .base import Recommender

__all__ = ["Popularity"]


class Popularity(Recommender):
    """Score every item by its number of training interactions, the same for all users.

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
