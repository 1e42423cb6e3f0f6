"""Weights from counts: BM25, TF-IDF and log scaling of a feedback matrix.

The models that read weights (``uses_weights``: :class:`~recsys_ltr.models.ALS`,
:class:`~recsys_ltr.models.EASE`, :class:`~recsys_ltr.models.ItemKNN`,
:class:`~recsys_ltr.models.ContentItemKNN`, :class:`~recsys_ltr.models.UserKNN`) take the stored
values of their input as weights; the others
binarise it.  These helpers turn play or click counts into such weights.

:func:`bm25_weight` and :func:`tfidf_weight` are implicit's ``bm25_weight`` and ``tfidf_weight``
(``implicit.nearest_neighbours``), value for value on the same input: rows are the *documents*
and columns the *terms*, whose inverse document frequency is ``idf_j = log N - log(1 + df_j)``
with ``N`` rows and ``df_j`` the rows storing column ``j``.  implicit's examples weigh the
items x users matrix (idf over users, length per item) and transpose: ``bm25_weight(X.T).T`` for a
users x items ``X``.  A column stored in ``N - 1`` or more rows has ``idf <= 0``: its weights are
0 or negative, which the models refuse (drop such columns or use :func:`log_weight`).

:func:`log_weight` is Hu, Koren & Volinsky's (2008) log confidence ``1 + alpha log(1 + r / epsilon)``,
positive for every count.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._validation import check_real, check_sparse

__all__ = ["bm25_weight", "log_weight", "tfidf_weight"]


def _idf(X) -> np.ndarray:
    """``log N - log(1 + df_j)`` of every column of the canonical ``X`` (stored entries per column)."""
    df = np.bincount(X.indices, minlength=X.shape[1])
    return np.log(float(X.shape[0])) - np.log1p(df)


def _with_data(X, data) -> sp.csr_matrix:
    return sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)


def bm25_weight(X, K1=100.0, B=0.8) -> sp.csr_matrix:
    """Okapi BM25 weights of the rows of ``X`` (implicit's ``bm25_weight``).

    ``w_ij = x_ij (K1 + 1) / (K1 ((1 - B) + B |i| / avg|.|) + x_ij) * idf_j`` with ``|i|`` the sum
    of row ``i`` and ``avg|.|`` its mean over the rows (module docstring for ``idf``).

    Parameters
    ----------
    X : sparse matrix or 2-D array
        Non-negative counts (duplicates summed); rows are documents, columns terms.
    K1 : float >= 0
        Saturation of the counts (implicit's default 100; 0: binary term weights).
    B : float in [0, 1]
        Length normalisation (0: none, 1: full).

    Returns
    -------
    scipy.sparse.csr_matrix
        Canonical CSR of ``X``'s shape and structure.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.weighting import bm25_weight
    >>> plays = np.array([[3, 0, 1, 0], [0, 5, 1, 0], [2, 0, 0, 7], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 4, 0]])
    >>> np.round(bm25_weight(plays, K1=1.2).toarray(), 2)
    array([[0.64, 0.  , 0.41, 0.  ],
           [0.  , 1.15, 0.34, 0.  ],
           [0.41, 0.  , 0.  , 1.82],
           [0.  , 1.04, 0.  , 0.  ],
           [0.61, 0.  , 0.  , 0.  ],
           [0.  , 0.  , 0.69, 0.  ]])
    """
    X = check_sparse(X, "X", allow_empty=True)  # non-negative counts, duplicates summed
    K1 = check_real(K1, "K1", low=0.0)
    B = check_real(B, "B", low=0.0, high=1.0)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    with np.errstate(over="ignore"):
        lengths = np.bincount(rows, weights=X.data, minlength=X.shape[0])
        mean = lengths.mean() if lengths.size else 0.0
    if not np.isfinite(mean):
        raise ValueError("X: the row sums of its counts overflow float64 (bm25's lengths); scale the counts down")
    norm = (1.0 - B) + B * lengths / (mean or 1.0)  # an empty X has no weight to scale
    idf = _idf(X)
    _check_bm25_range(X.data, K1, float(norm.max(initial=0.0)), float(np.abs(idf).max(initial=0.0)))
    return _with_data(X, X.data * (K1 + 1.0) / (K1 * norm[rows] + X.data) * idf[X.indices])


def _check_bm25_range(counts, K1, norm, idf):
    """Refuse, before computing them, BM25 weights whose terms overflow float64: ``x (K1 + 1)``,
    ``K1 norm + x`` and the weight itself, at most ``(K1 + 1) |idf|`` (``x / (K1 norm + x) <= 1``)."""
    top = float(counts.max(initial=0.0))
    big = np.finfo(np.float64).max
    with np.errstate(over="ignore"):
        terms = ((K1 + 1.0) * top, K1 * norm + top, (K1 + 1.0) * idf)
    if not all(t < big for t in terms):
        raise ValueError(
            f"K1={K1:g} with the largest count of X ({top:g}) overflows float64 in BM25's weights; use a smaller "
            "K1 (implicit's default is 100) or scale the counts down (e.g. log_weight)"
        )


def tfidf_weight(X) -> sp.csr_matrix:
    """TF-IDF weights ``sqrt(x_ij) idf_j`` (implicit's ``tfidf_weight``; module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.weighting import tfidf_weight
    >>> X = np.array([[3, 0, 1, 0], [0, 5, 1, 0], [2, 0, 0, 7], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 4, 0]])
    >>> np.round(tfidf_weight(X).toarray(), 2)
    array([[0.7 , 0.  , 0.41, 0.  ],
           [0.  , 1.55, 0.41, 0.  ],
           [0.57, 0.  , 0.  , 2.91],
           [0.  , 0.69, 0.  , 0.  ],
           [0.41, 0.  , 0.  , 0.  ],
           [0.  , 0.  , 0.81, 0.  ]])
    """
    X = check_sparse(X, "X", allow_empty=True)  # non-negative counts, duplicates summed
    return _with_data(X, np.sqrt(X.data) * _idf(X)[X.indices])


def log_weight(X, alpha=1.0, epsilon=1.0) -> sp.csr_matrix:
    """Hu, Koren & Volinsky's log confidence ``1 + alpha log(1 + x_ij / epsilon)`` of every stored
    count (sec. 4 of "Collaborative filtering for implicit feedback datasets", 2008).

    ``ALS(alpha=1).fit(log_weight(X, a, e))`` trains on exactly their confidence ``c_ui`` (our
    :class:`~recsys_ltr.models.ALS` multiplies the weights by its ``alpha``).

    Parameters
    ----------
    X : sparse matrix or 2-D array
        Non-negative counts.
    alpha : float >= 0
        Growth of the confidence with the count.
    epsilon : float > 0
        Count scale.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.weighting import log_weight
    >>> log_weight(np.array([[1.0, 0.0], [0.0, np.e - 1]])).data
    array([1.69314718, 2.        ])
    """
    X = check_sparse(X, "X", allow_empty=True)  # non-negative counts, duplicates summed
    alpha = check_real(alpha, "alpha", low=0.0)
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True)
    with np.errstate(over="ignore"):
        ratio = X.data / epsilon
    # log(1 + r / e) = log r - log e (+ a term below float64's precision) where r / e overflows
    logs = np.where(np.isfinite(ratio), np.log1p(ratio), np.log(X.data) - np.log(epsilon))
    top = float(logs.max(initial=0.0))
    if not alpha * top < np.finfo(np.float64).max:
        raise ValueError(
            f"alpha={alpha:g} times log(1 + count / epsilon) (up to {top:g} here) overflows float64; use a smaller alpha"
        )
    return _with_data(X, 1.0 + alpha * logs)
