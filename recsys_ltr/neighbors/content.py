"""Content affinity: item neighbourhoods from item content under a (learned) metric.

Items nobody has consumed have no collaborative neighbours, but they have content (tags, text).
:class:`ContentAffinity` embeds the content ``F`` (items x features) with a metric -- a fitted
:class:`~recsys_ltr.metric_learning.FRML` or anything with ``transform`` (Euclidean on ``F`` itself when
``metric=None``) -- and keeps, for every item ``i``, its ``k`` nearest other items

    KNN(i) = the k items j != i with the smallest d(i, j) = ||z_i - z_j||, ties by smaller id,

with the Gaussian affinity (a decreasing function of the distance, so neighbourhood order and
affinity order agree)

    A_ij = exp(-d(i, j)^2 / sigma^2),   sigma^2 = median of d(i, j)^2 over all stored (i, j)

(``bandwidth`` overrides ``sigma^2``).  The result is an :class:`~recsys_ltr.neighbors.affinity.Affinity`
(kind ``"custom"``, rows most similar first, so every ``k' <= k`` is a row prefix), usable as
FEBR's ``affinity=`` and by :class:`~recsys_ltr.models.content.ContentItemKNN` (item-p over
content).  It depends on content only: items without interactions get neighbours like any other.

Items whose content row is all zeros carry no information: they get no neighbours and are nobody's
neighbour (the convention of the cosine kernels, where rows without co-occurrence are never
neighbours).  ``metric=None`` uses ``F`` as given: the usual input is tf-idf weighted, L2-normalised
tag counts (then ``d^2 = 2 - 2 cos``, the cosine neighbourhood).

Distances are computed in blocks of rows (``||a||^2 + ||b||^2 - 2 a.b`` by BLAS, or sparse products
for sparse ``F`` without a metric); a block of ``b x n_items`` distances is never larger than
``2**22`` floats, so memory is ``O(n k)`` plus one block, never ``n x n``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.preprocessing import normalize
from sklearn.utils import metadata_routing
from sklearn.utils.validation import check_is_fitted

from .._progress import progress_enabled
from .._threads import check_num_threads, limit_threads
from .._topk import rank_dense_rows
from .._validation import INDEX_DTYPE, check_dense, check_real, check_sparse
from .affinity import Affinity, _sort_rows_by_value
from .knn import check_k, truncate_rows

__all__ = ["ContentAffinity", "blend_affinity", "coconsumption_relevance", "top_fraction"]


class ContentAffinity(BaseEstimator):
    """Top-``k`` item neighbours by distance in a content embedding, as an :class:`Affinity`.

    Parameters
    ----------
    k : int
        Neighbourhood size ``k_max`` of the affinity, ``1 <= k < n_items``.
    metric : None, fitted FRML or object with ``transform(F)``
        Embedding ``z_i``; ``None``: the rows of ``F`` themselves (Euclidean distance).
    bandwidth : float > 0, optional
        ``sigma^2`` of the Gaussian affinity; default: the median squared neighbour distance
        (1 when that median is 0).
    num_threads : int
        Threads of the distance blocks (BLAS) and of the neighbour selection (numba); 0 = all.
    show_progress : bool or None
        Progress bar over blocks of items (``None``: on when standard error is a terminal).

    Attributes
    ----------
    affinity_ : Affinity
        ``n_items x n_items``, kind ``"custom"``, side ``"item"``, ``k_max = k``.
    bandwidth_ : float
        The ``sigma^2`` used.
    n_items_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.neighbors import ContentAffinity
    >>> F = np.array([[1.0, 0.0], [1.1, 0.0], [5.0, 5.0], [5.0, 5.1]])  # item content
    >>> A = ContentAffinity(k=1).fit(F).affinity_
    >>> A.matrix.indices.tolist()  # each item's nearest other item
    [1, 0, 3, 2]
    """

    # F is the content itself, not metadata to route: no set_fit_request / set_transform_request
    __metadata_request__fit = {"F": metadata_routing.UNUSED}
    __metadata_request__transform = {"F": metadata_routing.UNUSED}

    def __init__(self, k=100, metric=None, bandwidth=None, num_threads=0, show_progress=None):
        self.k = k
        self.metric = metric
        self.bandwidth = bandwidth
        self.num_threads = num_threads
        self.show_progress = show_progress

    def fit(self, F, y=None):
        """Compute the neighbourhoods of the items whose content rows are ``F`` (n_items x d)."""
        F = _check_content(F)
        n = F.shape[0]
        k = check_k(self.k, n, "items")
        bandwidth = self._check_bandwidth()
        threads = check_num_threads(self.num_threads)
        show = progress_enabled(self.show_progress)
        Z = self._embed(F)
        has_content = np.diff(F.indptr) > 0 if sp.issparse(F) else np.any(F != 0, axis=1)
        with limit_threads(threads):
            S = _nearest(Z, k, has_content, show)  # data = squared distances
        self.bandwidth_ = gaussian_in_place(S, bandwidth)
        self.affinity_ = Affinity.trusted(S, k, "custom", "item")
        self.n_items_ = n
        return self

    def _check_bandwidth(self):
        return None if self.bandwidth is None else check_real(self.bandwidth, "bandwidth", low=0.0, low_open=True)

    def _embed(self, F):
        """``z_i``: dense ``metric.transform(F)``, or ``F`` itself (kept sparse) without a metric."""
        if self.metric is None:
            return F
        if not callable(getattr(self.metric, "transform", None)):
            raise TypeError(f"metric must be None or have a transform method, got {type(self.metric).__name__}")
        if isinstance(self.metric, BaseEstimator):
            check_is_fitted(self.metric)  # NotFittedError (a ValueError) with sklearn's message
        Z = np.asarray(self.metric.transform(F), dtype=np.float64)
        if Z.ndim != 2 or Z.shape[0] != F.shape[0]:
            raise ValueError(f"metric.transform returned shape {Z.shape}, expected ({F.shape[0]}, n_components)")
        if not np.all(np.isfinite(Z)):
            raise ValueError("metric.transform returned NaN or infinite values")
        return np.ascontiguousarray(Z)

    def transform(self, F=None):
        """The fitted affinity's CSR matrix (``F`` is ignored; scikit-learn pipeline habit)."""
        check_is_fitted(self, "affinity_")
        return self.affinity_.matrix.copy()


def _check_content(F):
    """Content as float64 CSR (sparse input) or C-contiguous 2-D array; finite, real, non-empty."""
    if sp.issparse(F):
        F = check_sparse(F, "content F", allow_empty=True, nonnegative=False)
        F.eliminate_zeros()
        values = F.data
    else:
        F = values = np.ascontiguousarray(check_dense(F, "content F"))
    if F.shape[0] < 2:
        raise ValueError(f"content F needs at least 2 items, got shape {F.shape}")
    if not np.any(values != 0):
        raise ValueError("content F is all zeros: no item has content")
    return F


def _nearest(Z, k, has_content, show_progress=False) -> sp.csr_matrix:
    """CSR of the ``k`` nearest other rows of ``Z`` (rows with content only), nearest first, ties
    by smaller id; values are squared distances."""
    n = Z.shape[0]
    sparse = sp.issparse(Z)
    norms = np.asarray(Z.multiply(Z).sum(axis=1)).ravel() if sparse else np.einsum("ij,ij->i", Z, Z)
    if not np.all(np.isfinite(norms)):
        raise ValueError("content vectors are too large: their squared norms overflow; rescale the content")
    ZT = Z.T.tocsc() if sparse else Z.T

    def neg_distances(rows):
        G = (Z[rows] @ ZT).toarray() if sparse else Z[rows] @ ZT
        D = np.maximum(norms[rows, None] + norms[None, :] - 2.0 * G, 0.0)
        D[:, ~has_content] = np.inf  # rows without content are nobody's neighbour
        D[~has_content[rows]] = np.inf  # ... and have none
        return -D

    ids, neg = rank_dense_rows(
        neg_distances, np.arange(n), k, n, drop_zero=False, drop_nonfinite=True, show_progress=show_progress,
        desc="content affinity",
    )  # fmt: skip
    count = np.count_nonzero(ids >= 0, axis=1)
    indptr = np.zeros(n + 1, INDEX_DTYPE)
    np.cumsum(count, out=indptr[1:])
    valid = ids >= 0
    return sp.csr_matrix((-neg[valid], ids[valid].astype(INDEX_DTYPE), indptr), shape=(n, n))


def gaussian_in_place(S, bandwidth=None) -> float:
    """Turn the stored squared distances (or costs) of ``S`` into ``exp(-S / bandwidth)``; without a
    ``bandwidth``, the median stored value (1 when it is 0).  Returns the bandwidth used."""
    if bandwidth is None:
        median = float(np.median(S.data)) if S.nnz else 0.0
        bandwidth = median if median > 0 else 1.0
    S.data = np.exp(-S.data / bandwidth)
    return float(bandwidth)


def top_fraction(S, frac, exclude_self):
    """CSR with ones at the ``ceil(frac * width)`` largest entries of each row of the dense block ``S``.

    The collaborative relevance of the cold-start protocol: with ``S`` the cosines of items' user
    vectors, row ``q`` marks the ``5%`` (``frac=0.05``) nearest items of ``q``.  ``exclude_self``
    (``S`` square, rows = columns) leaves the diagonal out and counts ``width - 1`` columns.  Ties
    go to the smaller column id.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.neighbors import top_fraction
    >>> S = np.array([[1.0, 0.9, 0.1, 0.2], [0.9, 1.0, 0.3, 0.8], [0.1, 0.3, 1.0, 0.4], [0.2, 0.8, 0.4, 1.0]])
    >>> top_fraction(S, frac=0.5, exclude_self=True).toarray()  # ceil(0.5 * 3) = 2 per row
    array([[0., 1., 0., 1.],
           [1., 0., 0., 1.],
           [0., 1., 0., 1.],
           [0., 1., 1., 0.]])
    """
    return _top_fraction(lambda rows: S[rows], S.shape[0], S.shape[1], frac, exclude_self)


def _top_fraction(rows_of, n_rows, width, frac, exclude_self):
    """:func:`top_fraction` of the dense rows ``rows_of(ids)``, computed in blocks of rows."""
    k = int(np.ceil(frac * (width - int(exclude_self))))
    ids, _ = rank_dense_rows(rows_of, np.arange(n_rows), k, width, exclude_self=exclude_self, drop_zero=False)
    rows = np.repeat(np.arange(n_rows), k)
    return sp.csr_matrix((np.ones(rows.size), (rows, ids.ravel())), shape=(n_rows, width))


def coconsumption_relevance(X, frac=0.05, items=None):
    """Co-consumption relevance among ``items``: the cold-start supervision of FRML and L-GMML.

    Row ``q`` marks the ``ceil(frac * (m - 1))`` items of ``items`` (``m`` of them) whose user
    columns in the feedback ``X`` (users x items) have the largest cosine with ``q``'s, ``q`` left
    out, ties to the smaller position (:func:`top_fraction` of the cosines, in blocks of rows, so
    no ``m x m`` matrix is formed).

    Parameters
    ----------
    X : sparse matrix, users x items
        Training feedback (binary or weighted).
    frac : float in (0, 1]
        Fraction of the other items marked relevant per row.
    items : int array or None
        Item ids (columns of ``X``), e.g. the warm items; ``None``: every item.

    Returns
    -------
    csr_matrix (m, m)
        Ones at the relevant pairs, rows and columns in the order of ``items``.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.neighbors import coconsumption_relevance
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, random_state=0).matrix
    >>> R = coconsumption_relevance(X, frac=0.05)  # ceil(0.05 * 99) = 5 relevant items per item
    >>> R.shape, set(R.getnnz(axis=1).tolist())
    ((100, 100), {5})
    """
    X = check_sparse(X, "X", allow_empty=True)
    items = np.arange(X.shape[1]) if items is None else np.asarray(items, dtype=np.int64)
    if items.ndim != 1 or items.size < 2 or np.any((items < 0) | (items >= X.shape[1])):
        raise ValueError(f"items must be at least 2 column ids of X in [0, {X.shape[1]}), got {items!r}")
    check_real(frac, "frac", low=0.0, high=1.0, low_open=True)
    U = normalize(sp.csr_matrix(X.T)[items])
    UT = U.T.tocsc()
    return _top_fraction(lambda rows: (U[rows] @ UT).toarray(), items.size, items.size, frac, True)


def blend_affinity(A, B, weight, k=None) -> Affinity:
    """``(1 - weight) A + weight B`` over the union of both rows' neighbours, as an :class:`Affinity`.

    A neighbour missing from one affinity counts 0 there; each row is reordered by the blended
    value (largest first, ties by smaller id) and cut to ``k`` (default: the larger ``k_max``).
    Blends two content affinities (their Gaussian values share the scale ``exp(-1)`` at the median
    neighbour), e.g. L-GMML's and tags + FRML's, with ``weight`` chosen on validation.

    Parameters
    ----------
    A, B : Affinity
        Item (or user) affinities over the same ``n`` rows, same side.
    weight : float in [0, 1]
        Weight of ``B``.
    k : int, optional
        ``k_max`` of the result, ``1 <= k < n``.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.neighbors import ContentAffinity, blend_affinity
    >>> rng = np.random.default_rng(0)
    >>> tags, text = rng.random((50, 4)), rng.random((50, 6))  # two contents of 50 items
    >>> A, B = (ContentAffinity(k=10).fit(F).affinity_ for F in (tags, text))
    >>> blended = blend_affinity(A, B, weight=0.3)
    >>> blended.matrix.shape, blended.k_max
    ((50, 50), 10)
    """
    if not isinstance(A, Affinity) or not isinstance(B, Affinity):
        raise TypeError(f"A and B must be Affinity objects, got {type(A).__name__} and {type(B).__name__}")
    if A.n != B.n or A.side != B.side:
        raise ValueError(f"A and B must cover the same rows on the same side, got {A!r} and {B!r}")
    weight = check_real(weight, "weight", low=0.0, high=1.0)
    k = check_k(max(A.k_max, B.k_max) if k is None else k, A.n, f"{A.side}s")
    M = sp.csr_matrix((1.0 - weight) * A.matrix + weight * B.matrix)
    M = truncate_rows(_sort_rows_by_value(M), k)
    M.indices, M.indptr = M.indices.astype(INDEX_DTYPE), M.indptr.astype(INDEX_DTYPE)
    return Affinity.trusted(M, k, "custom", A.side)
