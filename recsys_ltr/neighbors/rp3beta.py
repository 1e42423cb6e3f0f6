"""RP3β item similarity (Paudel et al. 2017), as formulated by Dacrema et al. (2019).

A random walk of three steps item -> user -> item on the bipartite graph of the binary feedback
``X`` has the transition probabilities ``P_iu = X_ui / deg(i)`` and ``P_ui = X_ui / deg(u)``; P3α
raises both elementwise to ``alpha`` and RP3β divides the arrival item's probability by its
popularity ``deg(j)^beta``:

    S_ij = [P_iu^α P_ui^α]_ij / deg(j)^β = deg(i)^-α deg(j)^-β sum_u X_ui X_uj deg(u)^-α,  j != i.

The RP3β weights ``W`` keep, in every source row ``i``, the ``k`` largest positive ``S_ij`` (ties:
smaller ``j``) and then divide the row by its sum (l1), and a user's scores are ``X_u W``.  Every
detail follows Dacrema et al.'s ``RP3betaRecommender`` with its default ``normalize_similarity=True``:
the diagonal is zeroed *before* the selection (an item is never its own neighbour, and row ``i``
still gets ``k`` others), zero entries are never kept, and the l1 normalisation comes *after* the
top-``k`` selection, so each row of ``W`` sums to 1 over its ``k`` kept entries.

``S`` is the product computed by the weighted-cosine kernel of :mod:`recsys_ltr.neighbors.knn`
(feature weights ``deg(u)^-α`` on the users, query scale ``deg(i)^-α``, base scale ``deg(j)^-β``),
so :func:`rp3beta_similarity` stores ``S``'s rows best first, cut at ``k``: the rows for any
``k' <= k`` are row prefixes, and :func:`rp3beta_weights` turns them into ``W`` without
recomputation.

Affinity.  In this package an item affinity ``A`` scores users by ``X ktrunc(A)^T`` (Theorem 4.3):
``A_ij`` is how much having consumed ``j`` supports ``i``.  RP3β's support of ``i`` by ``j`` is
``W_ji``, so its affinity is ``A = W^T``: row ``i`` lists the *reverse* neighbours of ``i`` (the
``j`` with ``i`` among their top ``k``), of any number between 0 and ``n - 1``.  The affinity
(:func:`recsys_ltr.neighbors.affinity.rp3beta_affinity`) therefore stores every reverse neighbour,
most supportive first (ties: smaller id), with ``k_max = n - 1``: ``X ktrunc(A, k')^T = X W`` for
every ``k'`` at least the longest row, and a smaller ``k'`` keeps each item's ``k'`` strongest
supporters.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._progress import progress_enabled
from .._validation import check_feedback, check_real
from .knn import check_block_size, check_k, knn_index_trusted, knn_query_trusted, truncate_rows

__all__ = ["check_rp3beta_params", "rp3beta_similarity", "rp3beta_weights"]


def check_rp3beta_params(alpha, beta) -> tuple[float, float]:
    """Validate RP3β's exponents: finite reals ``>= 0`` (Dacrema et al. search ``[0, 2]``)."""
    return check_real(alpha, "alpha", low=0.0), check_real(beta, "beta", low=0.0)


def _powers(counts, exponent):
    """``counts^-exponent`` with 1 in place of empty rows (never touched by the kernel)."""
    return np.power(np.maximum(counts, 1).astype(np.float64), -exponent)


def rp3beta_similarity(
    X, k, alpha=1.0, beta=0.5, *, num_threads=0, show_progress=None, executor=None, block_size=None
) -> sp.csr_matrix:
    """The ``k`` largest RP3β similarities ``S_ij`` of every source item ``i`` (module docstring).

    Parameters
    ----------
    X : feedback matrix, users x items
        Any positive entry is an interaction.
    k : int
        Neighbours kept per source item, ``1 <= k < n_items``.
    alpha, beta : float >= 0
        Exponent of the transition probabilities and of the arrival item's popularity.
    num_threads : int
        numba threads (0 = all); the result does not depend on it.
    show_progress : bool or None
        Progress bar over blocks of items (``None``: on when standard error is a terminal).
    executor, block_size :
        Where blocks of source items are computed, and their size
        (:func:`recsys_ltr.neighbors.knn_query`); the result does not depend on them.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (n_items, n_items)
        Row ``i`` lists its at most ``k`` targets ``j != i`` with ``S_ij > 0``, largest first (ties:
        smaller id), values ``S_ij`` before normalisation.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.neighbors import rp3beta_similarity
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, random_state=0).matrix
    >>> S = rp3beta_similarity(X, k=20, alpha=1.0, beta=0.5)
    >>> S.shape, int(S.getnnz(axis=1).max())
    ((100, 100), 20)
    """
    X, block_size = check_feedback(X), check_block_size(block_size)
    k = check_k(k, X.shape[1], "items")
    alpha, beta = check_rp3beta_params(alpha, beta)
    show_progress = progress_enabled(show_progress)
    return rp3beta_similarity_trusted(X, k, alpha, beta, num_threads, show_progress, executor, block_size)


def rp3beta_similarity_trusted(
    X, k, alpha, beta, num_threads=0, show_progress=False, executor=None, block_size=None
) -> sp.csr_matrix:
    """:func:`rp3beta_similarity` of a canonical ``X`` and checked parameters."""
    k = check_k(k, X.shape[1], "items")
    M = X.T.tocsr()  # items x users
    deg_i = np.diff(M.indptr)
    deg_u = np.diff(X.indptr)
    user_w, item_q, item_s = _powers(deg_u, alpha), _powers(deg_i, alpha), _powers(deg_i, beta)
    # every S_ij > 0 is at least this bound; below it values would underflow and lose their order
    if user_w.min() * item_q.min() * item_s.min() < np.finfo(np.float64).tiny:
        raise ValueError(
            f"alpha={alpha} and beta={beta} are too large for this data (degrees up to {deg_u.max()} "
            f"per user and {deg_i.max()} per item): RP3β similarities underflow float64"
        )
    index = knn_index_trusted(M, user_w, item_s)
    ids = np.arange(M.shape[0], dtype=np.int64)
    return knn_query_trusted(index, M, k, ids, num_threads, show_progress, "RP3β", item_q, executor, block_size)


def rp3beta_weights(S, k=None) -> sp.csr_matrix:
    """RP3β's ``W``: the first ``k`` entries of every row of ``S`` (all: ``None``), l1-normalised.

    ``S`` is a row-ordered similarity from :func:`rp3beta_similarity` built for ``k`` or more;
    rows keep their order (largest first) and an empty row stays empty.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.neighbors import rp3beta_similarity, rp3beta_weights
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, random_state=0).matrix
    >>> W = rp3beta_weights(rp3beta_similarity(X, k=20), k=10)  # the first 10 of each row, summing to 1
    >>> int(W.getnnz(axis=1).max()), round(float(W.sum(axis=1).max()), 6)
    (10, 1.0)
    """
    W = (S if k is None else truncate_rows(S, k)).astype(np.float64, copy=True)
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    W.data /= np.bincount(rows, weights=W.data, minlength=W.shape[0])[rows]
    return W
