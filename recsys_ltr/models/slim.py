"""SLIM and fsSLIM predictors (Ning & Karypis 2011; dissertation sec. 4.5.5)."""

from __future__ import annotations

import scipy.sparse as sp

from ..neighbors.affinity import HoldsAffinities, slim_affinity_trusted
from ..neighbors.knn import check_k
from ..neighbors.slim import check_slim_params
from .base import Recommender

__all__ = ["SLIM"]


class SLIM(HoldsAffinities, Recommender):
    """Sparse linear method: ``score(u, .) = u @ W`` with ``W >= 0`` sparse, zero diagonal.

    Column ``i`` of ``W`` is an elastic net with non-negative coefficients regressing item
    ``i`` on the other items (see :func:`recsys_ltr.neighbors.slim.slim_weights`).  With
    ``A = W^T`` this is item-p's ``aggsum`` over the SLIM affinity (Theorem 4.3).

    Parameters
    ----------
    k : int or None
        ``None``: full SLIM (every other item is a regressor).  An int: fsSLIM, regressors of
        item ``i`` restricted to its ``k`` cosine nearest neighbours, so ``ktrunc(W^T) = W^T``.
    l1, l2 : float >= 0
        L1 and L2 penalties as in the SLIM library (lambda and beta); equivalent to
        scikit-learn's ``ElasticNet(alpha=(l1 + l2) / n_users, l1_ratio=l1 / (l1 + l2),
        positive=True, fit_intercept=False)``.
    max_iter, tol :
        Coordinate-descent sweeps per item and convergence tolerance.
    num_threads : int
        numba threads (0 = all); ``W`` does not depend on it.
    show_progress : bool or None
        Progress bar over items (and, for fsSLIM, over the neighbour search) while fitting
        (``None``: on when standard error is a terminal).

    Attributes
    ----------
    item_affinity_ : Affinity
        ``A = W^T``; fsSLIM rows in cosine-neighbour order.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import SLIM
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = SLIM(l1=1.0, l2=1.0).fit(X)
    >>> W = model.item_affinity_.matrix.T  # sparse, non-negative, zero diagonal
    >>> W.shape, bool(W.diagonal().max() == 0), bool(W.data.min() >= 0)
    ((100, 100), True, True)
    >>> ids, scores = model.recommend(0, N=3)
    >>> ids.shape
    (3,)
    >>> fs = SLIM(k=20).fit(X)  # fsSLIM: regressors among each item's 20 cosine neighbours
    """

    _log_fit = True  # start and end of each fit logged at INFO (size, setting, seconds)

    _model_state = ("item_affinity_",)
    _affinity_kind = "slim"

    def __init__(self, k=None, l1=1.0, l2=1.0, max_iter=100, tol=1e-4, num_threads=0, show_progress=None):
        self.k = k
        self.l1 = l1
        self.l2 = l2
        self.max_iter = max_iter
        self.tol = tol
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_params(self):
        super()._check_params()
        check_slim_params(self.l1, self.l2, self.max_iter, self.tol)

    def _check_data_params(self, X):
        if self.k is not None:
            check_k(self.k, X.shape[1], "items")

    def _check_state(self):
        super()._check_state()
        expected = max(1, self.n_items_ - 1) if self.k is None else self.k
        if self.item_affinity_.k_max != expected:
            raise ValueError(f"item_affinity_.k_max={self.item_affinity_.k_max} but k={self.k} means {expected}")

    def _fit(self, X):
        self.item_affinity_ = slim_affinity_trusted(
            X,
            self.k,
            l1=self.l1,
            l2=self.l2,
            max_iter=self.max_iter,
            tol=self.tol,
            num_threads=self.num_threads,
            show_progress=self._progress(),
        )

    def _prepare(self):
        super()._prepare()
        W = sp.csr_matrix(self.item_affinity_.matrix.T)
        W.eliminate_zeros()
        self.W_ = W

    def _score_product(self, rows, ids, recalculate):
        return rows, self.W_

    def _item_affinity(self):
        return self.item_affinity_

    def _item_similarity_matrix(self):
        return self.item_affinity_.matrix
