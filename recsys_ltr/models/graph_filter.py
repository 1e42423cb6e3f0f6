"""GF-CF: graph filters for collaborative filtering (Shen et al., "How Powerful is Graph Convolution
for Recommendation?", CIKM 2021), in closed form on a CPU.

With ``X`` the binary users x items matrix and ``R = D_U^{-1/2} X D_I^{-1/2}`` its degree-normalised
form, a user's scores are the row ``r_u`` of ``X`` passed through two filters of the item-item graph
``P = R^T R``::

    score(u, .) = r_u P  +  alpha r_u D_I^{-1/2} V_k^T V_k D_I^{1/2}

a linear filter (``P`` itself) and an ideal low-pass filter built from ``V_k``, the ``k`` leading right
singular vectors of ``R`` (a truncated SVD; here scikit-learn's randomized SVD, seeded).  The paper's
setting is ``alpha = 0.3`` and ``k = 256``.  ``P`` is never formed: a block of users is scored as
``(r_u R^T) R`` by two sparse products, and the low-pass term through the ``k x n_items`` factors, so
memory is ``O(nnz + k n_items)`` besides one bounded block of scores.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import randomized_svd

from .._threads import limit_threads
from .._validation import check_positive_int, check_random_state, check_real
from ..neighbors.knn import inverse_sqrt
from .base import Recommender, sparse_dense_product

__all__ = ["GFCF"]


class GFCF(Recommender):
    """GF-CF: the linear and ideal low-pass graph filters of Shen et al., (2021) (module docstring).

    Parameters
    ----------
    factors : int
        ``k``, the number of leading singular vectors of the normalised matrix in the low-pass
        filter (the paper's 256); at most ``min(n_users, n_items)``.
    alpha : float >= 0
        Weight of the low-pass filter (the paper's 0.3; 0: the linear filter alone).
    iterations : int
        Power iterations of the randomized SVD (more: closer to the exact singular vectors).
    random_state : int or None
        Seed of the randomized SVD.
    num_threads : int
        BLAS and numba threads (0 = all).
    show_progress : bool or None
        Unused (the fit is one SVD; kept for the common interface).

    Attributes
    ----------
    normalized_ : scipy.sparse.csr_matrix, shape (n_users, n_items)
        ``R = D_U^{-1/2} X D_I^{-1/2}``.
    components_ : ndarray, shape (factors, n_items)
        ``V_k``: the leading right singular vectors of ``R``, one per row.
    singular_values_ : ndarray, shape (factors,)

    Scores depend only on the user's row (``item_based``): new users are scored from ``user_items``
    (``recalculate_user=True``) without refitting.  ``similar_items(i)`` ranks row ``i`` of the filter
    ``P + alpha D_I^{-1/2} V_k^T V_k D_I^{1/2}``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.models import GFCF
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = GFCF(factors=16, alpha=0.3, random_state=0).fit(X)
    >>> model.components_.shape
    (16, 100)
    >>> new_user = sp.csr_matrix(X[:1])  # scored from its row: no refit
    >>> ids, scores = model.recommend(X.shape[0], new_user, N=3, recalculate_user=True)
    >>> ids.shape
    (3,)
    """

    _log_fit = True  # start and end of each fit logged at INFO (size, setting, seconds)

    _model_state = ("normalized_", "components_", "singular_values_")
    _similar_drop_zero = False

    def __init__(self, factors=256, alpha=0.3, iterations=7, random_state=0, num_threads=0, show_progress=None):
        self.factors = factors
        self.alpha = alpha
        self.iterations = iterations
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    def _check_params(self):
        super()._check_params()
        check_positive_int(self.factors, "factors")
        check_real(self.alpha, "alpha", low=0.0)
        check_positive_int(self.iterations, "iterations", minimum=0)
        check_random_state(self.random_state)

    def _check_data_params(self, X):
        if self._param("factors") > min(X.shape):
            raise ValueError(f"factors={self._param('factors')} exceeds min(n_users, n_items) = {min(X.shape)}")

    def _fit(self, X):
        R = _normalized(X)
        with limit_threads(self.num_threads):
            seed = int(check_random_state(self.random_state).integers(2**32))  # scikit-learn takes an int
            _, s, Vt = randomized_svd(R, self.factors, n_iter=self.iterations, random_state=seed)
        self.normalized_, self.components_, self.singular_values_ = R, np.ascontiguousarray(Vt), s

    def _prepare(self):
        super()._prepare()
        self.normalized_t_ = self.normalized_.T.tocsr()
        degree = self.item_popularity_  # the item degrees of the binary training matrix
        inv = inverse_sqrt(degree)
        self.left_ = self.components_.T * inv[:, None]  # D_I^{-1/2} V_k^T  (n_items, k)
        self.right_ = self.components_ * np.sqrt(degree)[None, :]  # V_k D_I^{1/2}  (k, n_items)

    def _score_rows(self, rows, ids, recalculate):
        with limit_threads(self.num_threads):
            scores = sparse_dense_product((rows @ self.normalized_t_).tocsr(), self.normalized_)
            if self.alpha:
                scores += float(self.alpha) * ((rows @ self.left_) @ self.right_)
        return scores

    def _item_similarity_rows(self, items):
        unit = sp.csr_matrix(
            (np.ones(len(items)), np.asarray(items, np.int32), np.arange(len(items) + 1, dtype=np.int32)),
            shape=(len(items), self.n_items_),
        )
        return self._score_rows(unit, np.asarray(items), False)

    def _check_state(self):
        super()._check_state()
        m, n = self.user_items_.shape
        k = self._param("factors")
        if self.normalized_.shape != (m, n):
            raise ValueError(f"normalized_ must be {m} x {n}, got {self.normalized_.shape}")
        self._check_dense_state({"components_": (k, n), "singular_values_": (k,)})


def _normalized(X) -> sp.csr_matrix:
    """``D_U^{-1/2} X D_I^{-1/2}`` of a canonical binary CSR ``X`` (empty rows and columns stay 0)."""
    rows = inverse_sqrt(np.diff(X.indptr))
    cols = inverse_sqrt(np.bincount(X.indices, minlength=X.shape[1]))
    R = X.copy()
    R.data = R.data * np.repeat(rows, np.diff(X.indptr)) * cols[X.indices]
    return R
