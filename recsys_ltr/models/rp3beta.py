"""RP3β (Paudel et al. 2017) in the formulation of Dacrema et al. (2019)."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import clone

from ..neighbors.knn import check_k, truncate_rows
from ..neighbors.rp3beta import check_rp3beta_params, rp3beta_similarity, rp3beta_weights
from .base import Recommender, rank_rows, sparse_dense_product

__all__ = ["RP3beta"]


class RP3beta(Recommender):
    """RP3β: a three-step random walk user -> item -> user -> item, popularity-discounted.

    ``score(u, .) = X_u W`` with ``W`` the RP3β weights of :mod:`recsys_ltr.neighbors.rp3beta`:
    ``S_ij = deg(i)^-α deg(j)^-β sum_v X_vi X_vj deg(v)^-α``, the ``k`` largest per source item
    ``i`` (self excluded, ties by smaller id), each row then divided by its sum.  As Dacrema et
    al.'s ``RP3betaRecommender`` with ``normalize_similarity=True`` on binary feedback.  With the
    affinity ``A = W^T`` this is item-p's ``aggsum`` (Theorem 4.3; see
    :func:`recsys_ltr.neighbors.affinity.rp3beta_affinity`).

    ``similar_items(i)`` lists row ``i`` of ``W``: where the walk from ``i`` arrives, most probable
    first.  :meth:`with_k` gives the model of a smaller ``k`` without recomputing similarities.

    Parameters
    ----------
    k : int
        Neighbours kept per source item, ``1 <= k < n_items``.
    alpha : float >= 0
        Exponent of the transition probabilities (``alpha=1``: the plain walk).
    beta : float >= 0
        Popularity discount of the arrival item (``beta=0``: P3α).
    num_threads : int
        numba threads (0 = all); results do not depend on it.
    show_progress : bool
        Progress bar while computing similarities.

    Attributes
    ----------
    similarity_ : scipy.sparse.csr_matrix, shape (n_items, n_items)
        ``S`` before normalisation, row ``i`` its at most ``k`` targets, largest first.
    W_ : scipy.sparse.csr_matrix, shape (n_items, n_items)
        The l1-normalised rows: ``score = X W_``.
    """

    _state_attributes = ("similarity_",)

    def __init__(self, k=100, alpha=1.0, beta=0.5, num_threads=0, show_progress=False):
        self.k = k
        self.alpha = alpha
        self.beta = beta
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _validate_params(self, X):
        super()._validate_params(X)
        check_k(self.k, X.shape[1], "items")
        check_rp3beta_params(self.alpha, self.beta)

    def _fit(self, X):
        self.similarity_ = rp3beta_similarity(
            X, self.k, self.alpha, self.beta, num_threads=self.num_threads, show_progress=self.show_progress
        )

    def _prepare(self):
        super()._prepare()
        self.W_ = rp3beta_weights(self.similarity_)

    def _score_rows(self, rows, ids, recalculate):
        return sparse_dense_product(rows, self.W_)

    def _similar(self, items, n_out):
        return rank_rows(self.W_[items], n_out)

    def _check_state(self, path):
        S = self.similarity_
        n = self.n_items_
        if S.shape != (n, n):
            raise ValueError(f"{path}: similarity_ must be {n} x {n}, got {S.shape}")
        if S.nnz and int(np.diff(S.indptr).max()) > self.k:
            raise ValueError(f"{path}: similarity_ stores more than k={self.k} neighbours in a row")
        if not np.all(np.isfinite(S.data)) or np.any(S.data <= 0):
            raise ValueError(f"{path}: similarity_ values must be finite and positive")

    def with_k(self, k):
        """The fitted model for a smaller ``k``: every row's first ``k`` similarities, renormalised."""
        self._check_fitted()
        if isinstance(k, numbers.Integral) and not isinstance(k, bool) and k > self.k:
            raise ValueError(f"k={k} exceeds the k={self.k} this model was fitted with; refit instead")
        model = clone(self).set_params(k=k)
        model._validate_params(self.user_items_)
        model.user_items_ = self.user_items_
        model.similarity_ = truncate_rows(self.similarity_, k)
        model._prepare()
        return model
