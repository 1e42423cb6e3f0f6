"""Affinity matrices ``A`` of the neighbourhood models, k-truncated (dissertation sec. 4.5.2-4.5.6).

An affinity ``A_ij >= 0`` says how much having consumed ``j`` supports recommending ``i``
(item side; the user side is the same with users).  The neighbourhood predictors are
``aggsum`` over ``A``: by Theorem 4.3,

    aggsum(phi_ui) = sum_{j in O+_u  &  KNN(i)} A_ij = [ktrunc(A)]_i . u,

so every model scores a block of users as ``X_block @ ktrunc(A)^T``.

:class:`Affinity` stores ``ktrunc(A)`` for a largest size ``k_max`` with each row in
neighbourhood order (most similar first, ties by id), so ``ktrunc(A, k)`` for every
``k <= k_max`` is a row prefix (:meth:`Affinity.truncate`); memory is ``O(n k_max)``.

Builders:

* :func:`cosine_affinity` -- ``A_ij = cos(i, j)``, ``KNN`` by the same cosine;
* :func:`kunn_affinity` -- Eq. (4.5) (items) / (4.6) (users)::

      A_ij = i^T W_U j / (||i|| ||j||),  W_U = diag(1 / sqrt(c(u)))
      A_uv = u^T W_I v / (||u|| ||v||),  W_I = diag(1 / sqrt(c(i)))

  with ``c(.)`` the interaction counts; ``KNN`` is taken under this affinity itself
  (``sim_KUNN`` of Theorem 4.4, as in Verstrepen & Goethals 2014);
* :func:`slim_affinity` -- ``A = W^T`` of SLIM / fsSLIM (Ning & Karypis 2011).  fsSLIM
  restricts row ``i`` to its cosine ``KNN(i)``, so ``ktrunc(W^T) = W^T`` (appendix A) and the rows
  are kept in cosine order (zeros included); full SLIM rows are ordered by weight;
* :func:`rp3beta_affinity` -- ``A = W^T`` of RP3β (Paudel et al. 2017; see
  :mod:`recsys_ltr.neighbors.rp3beta`).  ``W`` keeps the top ``k`` per *source* item, so row ``i``
  of ``A`` holds all of ``i``'s reverse neighbours (any number), ordered by weight, and
  ``k_max = n - 1``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._io import register_csr_kind
from .._progress import progress_enabled
from .._validation import (
    INDEX_DTYPE,
    check_csr_structure,
    check_feedback,
    check_positive_int,
    check_sparse,
    stores_a_repeat,
)
from .knn import check_block_size, check_k, self_knn_trusted, side_matrix, truncate_rows
from .rp3beta import check_rp3beta_params, rp3beta_similarity_trusted, rp3beta_weights
from .slim import check_slim_params, fit_slim

__all__ = [
    "KINDS",
    "Affinity",
    "HoldsAffinities",
    "cosine_affinity",
    "kunn_affinity",
    "kunn_counts",
    "kunn_weights",
    "rp3beta_affinity",
    "slim_affinity",
]

#: Kinds of affinity an :class:`Affinity` may carry.
KINDS = ("cosine", "kunn", "slim", "rp3beta", "custom")


class Affinity:
    """A k-truncated affinity matrix valid for every neighbourhood size ``k <= k_max``.

    Parameters
    ----------
    matrix : scipy.sparse matrix, shape (n, n)
        Row ``i`` stores ``A_ij`` for ``j`` in ``KNN(i)`` (at most ``k_max`` entries), most
        similar first.  Explicit zeros are kept: a neighbour with zero affinity still counts
        as an active item for FEBR's ``agglen``.
    k_max : int
        Largest neighbourhood size the rows were built for.
    kind : str
        One of :data:`KINDS` (for records and ``repr``).
    side : {"item", "user"}
        Whether rows/columns are items or users.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.neighbors import Affinity
    >>> A = Affinity(sp.csr_matrix([[0.0, 0.5, 0.2], [0.5, 0.0, 0.0], [0.2, 0.0, 0.0]]), k_max=2)
    >>> A
    Affinity(kind='custom', side='item', n=3, k_max=2, nnz=4)
    >>> A.truncate(1).toarray()  # each row's first (most similar) neighbour
    array([[0. , 0.5, 0. ],
           [0.5, 0. , 0. ],
           [0.2, 0. , 0. ]])
    """

    def __init__(self, matrix, k_max, kind="custom", side="item"):
        if not sp.issparse(matrix):
            raise TypeError(f"matrix must be a scipy sparse matrix, got {type(matrix).__name__}")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if side not in ("item", "user"):
            raise ValueError(f"side must be 'item' or 'user', got {side!r}")
        self._k_max = check_positive_int(k_max, "k_max")
        self._matrix = _check_rows(matrix, self._k_max)
        self._kind, self._side = kind, side

    k_max = property(lambda self: self._k_max, doc="Largest neighbourhood size the rows were built for.")
    kind = property(lambda self: self._kind, doc="One of :data:`KINDS`.")
    side = property(lambda self: self._side, doc='``"item"`` or ``"user"``.')

    @property
    def matrix(self) -> sp.csr_matrix:
        """The rows, a read-only CSR matrix (``A_ij`` for ``j`` in ``KNN(i)``, most similar first)."""
        return self._matrix

    @classmethod
    def trusted(cls, matrix, k_max, kind, side) -> Affinity:
        """An affinity from rows this package built (canonical CSR, checked by construction):
        no validation pass, arrays made read-only."""
        self = cls.__new__(cls)
        for a in (matrix.data, matrix.indices, matrix.indptr):
            a.flags.writeable = False
        self._matrix, self._k_max, self._kind, self._side = matrix, int(k_max), kind, side
        return self

    @property
    def n(self) -> int:
        """Number of rows (items or users)."""
        return self.matrix.shape[0]

    def truncate(self, k=None) -> sp.csr_matrix:
        """``ktrunc(A, k)``: the first ``k`` neighbours of every row (``None``: ``k_max``)."""
        if k is None:
            return self.matrix.copy()
        k = check_positive_int(k, "k")
        if k > self.k_max:
            raise ValueError(f"k={k} exceeds k_max={self.k_max} this affinity was built for")
        return truncate_rows(self.matrix, k)

    def neighbors(self, i, k=None):
        """``(ids, affinities)`` of ``KNN(i)`` for size ``k`` (default ``k_max``), in order."""
        i = check_positive_int(i, "i", minimum=0, maximum=self.n - 1)
        k = self.k_max if k is None else check_positive_int(k, "k")
        if k > self.k_max:
            raise ValueError(f"k={k} exceeds k_max={self.k_max} this affinity was built for")
        lo, hi = self.matrix.indptr[i], self.matrix.indptr[i + 1]
        hi = min(hi, lo + k)
        return self.matrix.indices[lo:hi].astype(np.int64), self.matrix.data[lo:hi].copy()

    def __repr__(self):
        return (
            f"Affinity(kind={self.kind!r}, side={self.side!r}, n={self.n}, k_max={self.k_max}, nnz={self.matrix.nnz})"
        )


register_csr_kind("affinity", Affinity, ("k_max", "kind", "side"), Affinity)  # estimators save their affinities


def _check_rows(matrix, k_max) -> sp.csr_matrix:
    """The rows of an affinity: raw structure checked before any conversion (as feedback is),
    square, finite real values (negative allowed: the neighbourhood is the row order, not the
    sign), at most ``k_max`` per row, row order kept; arrays made read-only."""
    if matrix.format != "csr":
        matrix = check_sparse(matrix, "affinity matrix", allow_empty=True, nonnegative=False)
    else:  # keep the stored order (most similar first): only check the raw arrays
        nnz = check_csr_structure(matrix, "affinity matrix")
        matrix = sp.csr_matrix(
            (np.array(matrix.data[:nnz], np.float64), np.array(matrix.indices[:nnz], INDEX_DTYPE),
             np.array(matrix.indptr, INDEX_DTYPE)), shape=matrix.shape,
        )  # fmt: skip
        if stores_a_repeat(matrix):
            raise ValueError("the affinity matrix stores a neighbour twice in one row")
    n = matrix.shape[0]
    if matrix.shape != (n, n):
        raise ValueError(f"an affinity matrix must be square, got shape {matrix.shape}")
    longest = int(np.diff(matrix.indptr).max()) if n else 0
    if longest > k_max:
        raise ValueError(f"a row stores {longest} neighbours > k_max={k_max}")
    for a in (matrix.data, matrix.indices, matrix.indptr):
        a.flags.writeable = False
    return matrix


def cosine_affinity(
    X, k_max, *, side="item", num_threads=0, show_progress=None, executor=None, block_size=None
) -> Affinity:
    """``A_ij = cos(i, j)`` k-truncated by cosine (item-p / user-p, section 4.7.3); ``show_progress``:
    a bar over blocks of rows (``None``: on in a terminal).

    With ``executor`` (:mod:`recsys_ltr.executors`), each task computes the neighbours of
    ``block_size`` rows against the whole matrix (:func:`~recsys_ltr.neighbors.knn_query`); the
    affinity is the same, bit for bit, on every executor.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import cosine_affinity
    >>> A = cosine_affinity(X, 2)  # item-item, the 2 nearest neighbours of each item
    >>> A
    Affinity(kind='cosine', side='item', n=4, k_max=2, nnz=8)
    >>> A.matrix.toarray().round(3)
    array([[0.   , 0.667, 0.333, 0.   ],
           [0.667, 0.   , 0.667, 0.   ],
           [0.   , 0.667, 0.   , 0.667],
           [0.333, 0.   , 0.667, 0.   ]])
    >>> A.truncate(1).toarray().round(3)  # KNN for k=1: the first entry of every row
    array([[0.   , 0.667, 0.   , 0.   ],
           [0.667, 0.   , 0.   , 0.   ],
           [0.   , 0.667, 0.   , 0.   ],
           [0.   , 0.   , 0.667, 0.   ]])
    """
    X, block_size, show_progress = check_feedback(X), check_block_size(block_size), progress_enabled(show_progress)
    return cosine_affinity_trusted(X, k_max, side, num_threads, show_progress, executor, block_size)


def kunn_affinity(
    X, k_max, *, side="item", num_threads=0, show_progress=None, executor=None, block_size=None
) -> Affinity:
    """KUNN affinity, Equation (4.5) for ``side="item"`` and Equation (4.6) for ``side="user"``.

    Both are cosines of binary vectors whose inner product weights every shared user (resp.
    item) ``f`` by ``1 / sqrt(c(f))``; ``KNN`` is taken under the affinity itself.
    ``executor`` and ``block_size`` as in :func:`cosine_affinity`.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import kunn_affinity
    >>> kunn_affinity(X, 2).matrix.toarray().round(3)
    array([[0.   , 0.428, 0.   , 0.236],
           [0.428, 0.   , 0.385, 0.   ],
           [0.   , 0.385, 0.   , 0.428],
           [0.236, 0.   , 0.428, 0.   ]])
    """
    X, block_size, show_progress = check_feedback(X), check_block_size(block_size), progress_enabled(show_progress)
    return kunn_affinity_trusted(X, k_max, side, num_threads, show_progress, executor, block_size)


def cosine_affinity_trusted(
    X, k_max, side="item", num_threads=0, show_progress=False, executor=None, block_size=None
) -> Affinity:
    """:func:`cosine_affinity` of a canonical feedback matrix."""
    return _neighbourhood_affinity(X, k_max, side, "cosine", None, num_threads, show_progress, executor, block_size)


def kunn_affinity_trusted(
    X, k_max, side="item", num_threads=0, show_progress=False, executor=None, block_size=None
) -> Affinity:
    """:func:`kunn_affinity` of a canonical feedback matrix."""
    return _neighbourhood_affinity(
        X, k_max, side, "kunn", kunn_weights, num_threads, show_progress, executor, block_size
    )


def _neighbourhood_affinity(
    X, k_max, side, kind, weights_of, num_threads, show_progress, executor, block_size
) -> Affinity:
    M = side_matrix(X, side)
    k_max = check_k(k_max, M.shape[0], f"{side}s", "k_max")
    weights = None if weights_of is None else weights_of(M)
    S = self_knn_trusted(
        M,
        k_max,
        weights,
        num_threads=num_threads,
        show_progress=show_progress,
        desc=f"{kind} {side} affinity",
        executor=executor,
        block_size=block_size,
    )
    return Affinity.trusted(S, k_max, kind, side)


def kunn_counts(M) -> np.ndarray:
    """Row counts ``c(.)`` of a binary CSR matrix as float64, with 1 for empty rows.

    Empty rows never contribute to a KUNN sum, so the placeholder only avoids a division by 0.
    """
    counts = np.diff(M.indptr).astype(np.float64)
    counts[counts == 0] = 1.0
    return counts


def kunn_weights(M) -> np.ndarray:
    """``1 / sqrt(c(f))`` for the columns ``f`` of a binary CSR matrix (1 for empty columns).

    The feature weights of Eq. (4.5) (``M = X^T``, ``f`` = users) and Eq. (4.6) (``M = X``,
    ``f`` = items), and the ``1/sqrt(c(i))`` factor of Eq. (4.4).
    """
    return 1.0 / np.sqrt(kunn_counts(M.T.tocsr()))


def slim_affinity(X, k=None, *, l1=1.0, l2=1.0, max_iter=100, tol=1e-4, num_threads=0, show_progress=None) -> Affinity:
    """SLIM (``k=None``) or fsSLIM (``k`` cosine neighbours) item affinity ``A = W^T``.

    The penalties follow the SLIM library (``l1`` = lambda, ``l2`` = beta); see
    :func:`recsys_ltr.neighbors.slim.slim_weights` for the objective and its mapping to
    scikit-learn's ``ElasticNet(alpha=(l1 + l2) / n_users, l1_ratio=l1 / (l1 + l2))``.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import slim_affinity
    >>> slim_affinity(X, l1=0.1, l2=0.1).matrix.toarray().round(3)  # A = W^T, W_ii = 0
    array([[0.   , 0.58 , 0.   , 0.103],
           [0.464, 0.   , 0.463, 0.   ],
           [0.   , 0.464, 0.   , 0.463],
           [0.103, 0.   , 0.58 , 0.   ]])
    """
    X = check_feedback(X)
    l1, l2, max_iter, tol = check_slim_params(l1, l2, max_iter, tol)
    show_progress = progress_enabled(show_progress)
    return slim_affinity_trusted(
        X, k, l1=l1, l2=l2, max_iter=max_iter, tol=tol, num_threads=num_threads, show_progress=show_progress
    )


def slim_affinity_trusted(X, k=None, *, l1=1.0, l2=1.0, max_iter=100, tol=1e-4, num_threads=0, show_progress=False):
    """:func:`slim_affinity` of a canonical feedback matrix."""
    n = X.shape[1]
    if k is None:
        W = fit_slim(X, l1, l2, max_iter=max_iter, tol=tol, num_threads=num_threads, show_progress=show_progress)
        return Affinity.trusted(_sort_rows_by_value(sp.csr_matrix(W.T)), max(1, n - 1), "slim", "item")
    k = check_k(k, n, "items")
    knn = self_knn_trusted(X.T.tocsr(), k, num_threads=num_threads, show_progress=show_progress, desc="item KNN")
    W = fit_slim(
        X, l1, l2, neighbors=knn, max_iter=max_iter, tol=tol, num_threads=num_threads, show_progress=show_progress
    )
    A = sp.csr_matrix(W.T)
    # row i of A = W^T is supported on KNN(i): lay its values out in the KNN order
    rows = np.repeat(np.arange(n), np.diff(knn.indptr))
    values = np.asarray(A[rows, knn.indices]).ravel() if knn.nnz else np.zeros(0)
    return Affinity.trusted(sp.csr_matrix((values, knn.indices, knn.indptr), shape=(n, n)), k, "slim", "item")


def rp3beta_affinity(
    X, k, alpha=1.0, beta=0.5, *, num_threads=0, show_progress=None, executor=None, block_size=None
) -> Affinity:
    """RP3β item affinity ``A = W^T`` (``W``: ``k`` targets per source item, rows l1-normalised).

    ``k`` is RP3β's neighbourhood size (per source row of ``W``), not a truncation of ``A``: row
    ``i`` of ``A`` lists every ``j`` with ``i`` among the ``k`` targets of ``j``, with value
    ``W_ji``, largest first (ties: smaller id), and ``k_max = n - 1``.  Hence
    ``X @ ktrunc(A, k')^T = X @ W``, RP3β's scores, for every ``k'`` at least the longest row.

    Parameters
    ----------
    X : feedback matrix, users x items
    k : int
        ``1 <= k < n_items``.
    alpha, beta : float >= 0
        See :func:`recsys_ltr.neighbors.rp3beta.rp3beta_similarity`.
    num_threads, show_progress, executor, block_size :
        As in :func:`cosine_affinity` (the tasks share the similarity's rows, the source items).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import rp3beta_affinity
    >>> rp3beta_affinity(X, 2).matrix.toarray().round(3)
    array([[0.   , 0.556, 0.   , 0.375],
           [0.625, 0.   , 0.444, 0.   ],
           [0.   , 0.444, 0.   , 0.625],
           [0.375, 0.   , 0.556, 0.   ]])
    """
    X, block_size = check_feedback(X), check_block_size(block_size)
    alpha, beta = check_rp3beta_params(alpha, beta)
    show_progress = progress_enabled(show_progress)
    return rp3beta_affinity_trusted(X, k, alpha, beta, num_threads, show_progress, executor, block_size)


def rp3beta_affinity_trusted(
    X, k, alpha=1.0, beta=0.5, num_threads=0, show_progress=False, executor=None, block_size=None
) -> Affinity:
    """:func:`rp3beta_affinity` of a canonical ``X`` and checked exponents."""
    S = rp3beta_similarity_trusted(X, k, alpha, beta, num_threads, show_progress, executor, block_size)
    W = rp3beta_weights(S)
    return Affinity.trusted(_sort_rows_by_value(W.T.tocsr()), max(1, W.shape[0] - 1), "rp3beta", "item")


def _sort_rows_by_value(A):
    """Reorder every row by value descending, ties by id (``A`` has sorted indices)."""
    A.eliminate_zeros()
    A.sort_indices()
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    order = np.lexsort((A.indices, -A.data, rows))
    return sp.csr_matrix((A.data[order], A.indices[order], A.indptr), shape=A.shape)


class HoldsAffinities:
    """Mixin of the recommenders whose fitted state holds :class:`Affinity` objects (the names of
    ``_model_state`` ending in ``_affinity_``): the checks of a loaded file, before numba kernels
    read them -- each is an Affinity of the attribute's side, of the model's kind (``_affinity_kind``;
    ``None``: any), of the model's number of items or users, and ``k_max`` at most ``n - 1``."""

    _affinity_kind: str | None = None

    def _check_state(self):
        super()._check_state()
        for name in self._model_state:
            if not name.endswith("_affinity_"):
                continue
            value, side = getattr(self, name), name.split("_")[0]  # "item_affinity_" / "user_affinity_"
            n = self.n_items_ if side == "item" else self.n_users_
            if not isinstance(value, Affinity) or value.side != side:
                raise ValueError(f"{name} must be an Affinity with side={side!r}")
            if self._affinity_kind is not None and value.kind != self._affinity_kind:
                raise ValueError(f"{name} is a {value.kind!r} affinity, expected {self._affinity_kind!r}")
            if value.n != n:
                raise ValueError(f"{name} is {value.n} x {value.n} but the model has {n} {side}s")
            if value.k_max > max(1, n - 1):
                raise ValueError(f"{name}.k_max={value.k_max} exceeds the {n - 1} possible neighbours")
