"""RP3β (Paudel et al. 2017) in the formulation of Dacrema et al. (2019)."""

from __future__ import annotations

import numpy as np

from .._validation import check_positive_int, stores_a_repeat
from ..neighbors.knn import check_k
from ..neighbors.rp3beta import check_rp3beta_params, rp3beta_similarity_trusted, rp3beta_weights
from .base import Recommender
from .neighborhood import PrefixK

__all__ = ["RP3beta"]


class RP3beta(PrefixK, Recommender):
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
    show_progress : bool or None
        Progress bar over blocks of items while computing similarities (``None``: on when
        standard error is a terminal).

    Attributes
    ----------
    similarity_ : scipy.sparse.csr_matrix, shape (n_items, n_items)
        ``S`` before normalisation, row ``i`` its at most ``k`` targets, largest first.
    W_ : scipy.sparse.csr_matrix, shape (n_items, n_items)
        The l1-normalised rows: ``score = X W_``.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import RP3beta
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = RP3beta(k=20, alpha=1.0, beta=0.5).fit(X)
    >>> model.W_.shape, int(model.W_.getnnz(axis=1).max())
    ((100, 100), 20)
    >>> ids, scores = model.recommend([0, 1], N=3)  # a batch of users: one row each
    >>> ids.shape
    (2, 3)
    >>> smaller = model.with_k(10)  # the model of k=10, no new similarities
    """

    _model_state = ("similarity_",)

    def __init__(self, k=100, alpha=1.0, beta=0.5, num_threads=0, show_progress=None):
        self.k = k
        self.alpha = alpha
        self.beta = beta
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_params(self):
        super()._check_params()
        check_positive_int(self.k, "k")
        check_rp3beta_params(self.alpha, self.beta)

    def _check_data_params(self, X):
        check_k(self._param("k"), X.shape[1], "items")

    def _fit(self, X):
        self.similarity_ = rp3beta_similarity_trusted(
            X, self.k, float(self.alpha), float(self.beta), self.num_threads, self._progress()
        )

    def _prepare(self):
        super()._prepare()
        self.W_ = rp3beta_weights(self.similarity_, self._param("k"))

    def _k_limit(self) -> int:
        return int(np.diff(self.similarity_.indptr).max(initial=1)) if self.similarity_.nnz else self.n_items_ - 1

    def _score_product(self, rows, ids, recalculate):
        return rows, self.W_

    def _item_similarity_matrix(self):
        return self.W_

    def _item_similarity_rows(self, items):
        return self.W_[items].toarray()

    def _check_state(self):
        S = self.similarity_
        n = self.n_items_
        if S.shape != (n, n):
            raise ValueError(f"similarity_ must be {n} x {n}, got {S.shape}")
        if np.any(S.data <= 0):
            raise ValueError("similarity_ values must be positive")
        if stores_a_repeat(S, diagonal=True):
            raise ValueError("similarity_ stores a neighbour twice in a row, or an item as its own neighbour")
