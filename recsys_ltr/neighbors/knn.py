"""Cosine nearest neighbours stored as sorted rows, and the ktrunc operator (Algorithm 4.1).

Dissertation sec. 4.5.6 ("k_max storage"): for every row ``i`` we keep only its ``k_max`` most
similar other rows, most similar first, so the neighbourhood ``KNN(i)`` of any ``k <= k_max`` is a
prefix of row ``i``; memory is ``O(n * k_max)`` and tuning ``k`` needs no recomputation.

Conventions shared by every neighbourhood in the package:

* ``KNN(i)`` holds the up-to-``k`` rows ``j != i`` with the largest **positive** similarity, ties
  broken by the smaller id (rows without any co-occurrence are never neighbours, so a row may
  hold fewer than ``k`` entries);
* a neighbourhood is a ``scipy.sparse.csr_matrix`` whose row ``i`` lists ``KNN(i)`` in that
  order (column indices are therefore *not* sorted by id).

The similarity kernel computes, for rows ``a`` and ``b`` of a binary matrix ``M``,

    sim(a, b) = sum_f M_af M_bf w_f / (||a|| ||b||),

with feature weights ``w`` (all ones: cosine; ``1/sqrt(c(f))``: the KUNN affinities, Eq. 4.5-4.6).
The row scales ``1/||a||`` and ``1/||b||`` are inputs of the kernel too, so other products of the
form ``q_a s_b sum_f M_af M_bf w_f`` reuse it (RP3β, :mod:`recsys_ltr.neighbors.rp3beta`).  It
runs in parallel over rows with one sparse accumulator per chunk of rows (never an ``n x n`` dense
block), and is deterministic: results do not depend on the number of threads.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from tqdm.auto import tqdm

from .._validation import check_feedback, check_num_threads, check_positive_int, numba_threads

__all__ = [
    "KnnIndex",
    "check_k",
    "cosine_knn",
    "knn_index",
    "knn_query",
    "ktrunc",
    "truncate_rows",
    "weighted_cosine_knn",
]

_SIDES = ("item", "user")


# --------------------------------------------------------------------------------------------
# Bounded selection: a heap whose root is the *worst* kept element.  "Better" means a larger
# primary key, then a larger secondary key, then a smaller id.  Shared with the top-N kernel
# of ``recsys_ltr.models.base``.
# --------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def better(a, b, primary, secondary):
    """Whether element ``a`` ranks before ``b``."""
    pa = primary[a]
    pb = primary[b]
    if pa != pb:
        return pa > pb
    sa = secondary[a]
    sb = secondary[b]
    if sa != sb:
        return sa > sb
    return a < b


@njit(cache=True)
def _sift_down(heap, size, pos, primary, secondary):
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and better(heap[child], heap[child + 1], primary, secondary):
            child += 1  # the worse of the two children
        if better(heap[pos], heap[child], primary, secondary):
            heap[pos], heap[child] = heap[child], heap[pos]
            pos = child
        else:
            return


@njit(cache=True)
def heap_offer(heap, size, cand, primary, secondary):
    """Offer ``cand`` to a bounded heap of capacity ``len(heap)``; return the new size."""
    if size < heap.shape[0]:
        pos = size
        heap[pos] = cand
        while pos > 0:
            parent = (pos - 1) // 2
            if better(heap[parent], heap[pos], primary, secondary):
                heap[parent], heap[pos] = heap[pos], heap[parent]
                pos = parent
            else:
                break
        return size + 1
    if size > 0 and better(cand, heap[0], primary, secondary):
        heap[0] = cand
        _sift_down(heap, size, 0, primary, secondary)
    return size


@njit(cache=True)
def heap_sort_best_first(heap, size, primary, secondary):
    """Sort ``heap[:size]`` in place, best element first."""
    for last in range(size - 1, 0, -1):
        heap[0], heap[last] = heap[last], heap[0]
        _sift_down(heap, last, 0, primary, secondary)


# --------------------------------------------------------------------------------------------
# Similarity kernel
# --------------------------------------------------------------------------------------------
@njit(cache=True)
def _kth_largest(a, m, k):
    """The ``k``-th largest of ``a[:m]`` by Hoare quickselect (reorders ``a[:m]``)."""
    target = m - k  # position in ascending order
    lo = 0
    hi = m - 1
    while lo < hi:
        x, y, z = a[lo], a[(lo + hi) >> 1], a[hi]
        pivot = max(min(x, y), min(max(x, y), z))  # median of three
        i = lo
        j = hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if target <= j:
            hi = j
        elif target >= i:
            lo = i
        else:
            break  # a[j+1:i] all equal the pivot
    return a[target]


@njit(cache=True)
def _take_best(cand, vals, m, need, out, start, scratch):
    """Write the best ``need <= m`` of ``cand[:m]`` (values ``vals[:m]``, ties: smaller id) to
    ``out[start:start + need]`` in no particular order.  Reorders the prefix of ``cand``."""
    if need == m:
        out[start : start + m] = cand[:m]
        return
    scratch[:m] = vals[:m]
    kth = _kth_largest(scratch, m, need)
    pos = start
    n_ties = 0
    for t in range(m):
        if vals[t] > kth:
            out[pos] = cand[t]
            pos += 1
        elif vals[t] == kth:
            cand[n_ties] = cand[t]  # t >= n_ties: that part of the prefix is already read
            n_ties += 1
    ties = np.sort(cand[:n_ties])
    out[pos : start + need] = ties[: start + need - pos]


# Histogram pre-selection: the bit pattern of a positive double increases with its value, so
# its top bits (exponent and 6 mantissa bits: 64 buckets an octave from 2**-24 up) give
# monotone buckets.  One counting pass finds the bucket holding the k-th largest value; only
# that bucket needs an exact selection.
_SHIFT = 46
_BASE = int(np.float64(2.0**-24).view(np.int64)) >> _SHIFT
_N_BUCKETS = 25 * 64 + 1


@njit(cache=True)
def _select_best(cand, vals, bits, bucket, hist, scratch, m, k, primary, out):
    """Best ``min(k, m)`` of ``cand[:m]`` (positive values ``vals[:m]`` = ``primary[cand]``,
    ``bits`` = ``vals`` viewed as int64; ``hist`` all zeros) into ``out``, best first (ties: smaller id), in time
    linear in ``m``; returns their number."""
    if m > k:
        edge = 0  # becomes the highest bucket used
        for t in range(m):
            q = min(max((bits[t] >> _SHIFT) - _BASE, 0), _N_BUCKETS - 1)
            bucket[t] = q
            hist[q] += 1
            edge = max(edge, q)
        above = 0
        while above + hist[edge] < k:
            above += hist[edge]
            edge -= 1
        size = 0
        n_edge = 0
        for t in range(m):
            q = bucket[t]
            hist[q] = 0  # leave the histogram zeroed for the next row
            if q > edge:
                out[size] = cand[t]
                size += 1
            elif q == edge:
                cand[n_edge] = cand[t]  # n_edge <= t: compacting in place is safe
                vals[n_edge] = vals[t]
                n_edge += 1
        _take_best(cand, vals, n_edge, k - size, out, size, scratch)
        m = k
    else:
        out[:m] = cand[:m]
    ids = np.sort(out[:m])  # then a stable sort by value: ties stay in id order
    out[:m] = ids[np.argsort(-primary[ids], kind="mergesort")]
    return m


@njit(parallel=True, cache=True)
def _knn_kernel(
    start,
    stop,
    n_chunks,
    q_indptr,
    q_indices,
    q_scale,
    self_ids,
    b_indptr,
    b_indices,
    b_scale,
    weights,
    n_base,
    out_ids,
    out_sims,
    out_count,
):
    k = out_ids.shape[1]
    for c in prange(n_chunks):
        acc = np.zeros(n_base)
        touched = np.empty(n_base + 1, np.int64)  # +1: the branch-free append writes one ahead
        cand = np.empty(n_base, np.int64)
        vals = np.empty(n_base)
        bits = vals.view(np.int64)
        bucket = np.empty(n_base, np.int32)
        hist = np.zeros(_N_BUCKETS, np.int64)
        scratch = np.empty(n_base)
        out = np.empty(k, np.int64)
        # strided rows balance the load when heavy rows cluster in id order
        for a in range(start + c, stop, n_chunks):
            n_touched = 0
            for p in range(q_indptr[a], q_indptr[a + 1]):
                f = q_indices[p]
                w = weights[f]
                for pp in range(b_indptr[f], b_indptr[f + 1]):
                    b = b_indices[pp]
                    touched[n_touched] = b  # branch-free: kept only on the first touch
                    n_touched += acc[b] == 0.0
                    acc[b] += w
            m = 0
            for t in range(n_touched):
                b = touched[t]
                # the product of the scales is symmetric, so cosine's sim(a, b) == sim(b, a) bitwise
                s = acc[b] * (q_scale[a] * b_scale[b])
                acc[b] = s
                if b != self_ids[a]:
                    cand[m] = b
                    vals[m] = s
                    m += 1
            size = _select_best(cand, vals, bits, bucket, hist, scratch, m, k, acc, out)
            for t in range(size):
                out_ids[a, t] = out[t]
                out_sims[a, t] = acc[out[t]]
            out_count[a] = size
            for t in range(n_touched):
                acc[touched[t]] = 0.0


def check_k(k, n: int, what: str = "items", name: str = "k") -> int:
    """Validate a neighbourhood size: an int in ``[1, n - 1]`` (self is never a neighbour)."""
    k = check_positive_int(k, name)
    if k > n - 1:
        raise ValueError(
            f"{name}={k} is larger than the catalogue allows: there are only {n} {what}, so at "
            f"most {n - 1} neighbours (self excluded)"
        )
    return k


@njit(parallel=True, cache=True)
def _compact(out_ids, out_sims, indptr, indices, data):
    for a in prange(indptr.shape[0] - 1):
        lo = indptr[a]
        for t in range(indptr[a + 1] - lo):
            indices[lo + t] = out_ids[a, t]
            data[lo + t] = out_sims[a, t]


def _dense_rows_to_csr(ids, sims, count, n_cols):
    indptr = np.zeros(ids.shape[0] + 1, np.int64)
    np.cumsum(count, out=indptr[1:])
    indices = np.empty(indptr[-1], np.int32)
    data = np.empty(indptr[-1])
    _compact(ids, sims, indptr, indices, data)
    return sp.csr_matrix((data, indices, indptr), shape=(ids.shape[0], n_cols))


class KnnIndex(NamedTuple):
    """The rows of ``M`` prepared once for repeated :func:`knn_query` calls (see :func:`knn_index`).

    ``indptr``/``indices``: CSR structure of ``M^T`` (feature -> rows), ``scale``: the factor ``s_b``
    of every row (cosine: ``1/||row||`` of ``M``), ``weights``: the feature weights ``w_f``;
    ``n_rows``, ``n_features``: ``M.shape``.
    """

    indptr: np.ndarray
    indices: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    n_rows: int
    n_features: int


def knn_index(M, weights=None, scale=None) -> KnnIndex:
    """Validate, transpose and normalise the binary rows of ``M`` once, in ``O(nnz)``.

    Parameters
    ----------
    M : scipy.sparse matrix, shape (n, d)
        Binary rows to search (canonical feedback, see ``check_feedback``); for items pass ``X.T``.
    weights : ndarray of shape (d,), optional
        Positive feature weights ``w_f`` (default ones: plain cosine).
    scale : ndarray of shape (n,), optional
        Factor ``s_b`` of every row, positive on non-empty rows (default ``1/||row||``: cosine).
    """
    M = check_feedback(M, "M")
    n, d = M.shape
    weights = np.ones(d) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    if weights.shape != (d,) or not np.all(np.isfinite(weights)) or np.any(weights <= 0):
        raise ValueError(f"weights must be {d} finite positive numbers")
    scale = _inverse_norms(M) if scale is None else _check_scale(scale, M, "scale")
    Mt = M.T.tocsr()
    return KnnIndex(Mt.indptr.astype(np.int64), Mt.indices.astype(np.int32), scale, weights, n, d)


def _check_scale(scale, M, name):
    """Row factors of the kernel: finite, non-negative, positive on the non-empty rows of ``M``."""
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    counts = np.diff(M.indptr)
    if scale.shape != counts.shape or not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError(f"{name} must be {counts.size} finite non-negative numbers")
    if np.any(scale[counts > 0] == 0):
        raise ValueError(f"{name} must be positive on every non-empty row")
    return scale


def knn_query(
    index: KnnIndex, queries, k, query_ids=None, *, query_scale=None, num_threads=0, show_progress=False, desc="KNN"
) -> sp.csr_matrix:
    """The ``k`` rows of an indexed matrix most similar to each query row.

    Costs ``O(nnz(queries) + work of the kernel)``: nothing proportional to the indexed
    matrix is redone, so a model can answer one new user per call cheaply.

    Parameters
    ----------
    index : KnnIndex
        Built once by :func:`knn_index`.
    queries : scipy.sparse matrix, shape (q, d)
        Binary query rows (empty rows allowed: they get no neighbours).
    k : int
        Neighbourhood size, ``1 <= k <= n - 1``.
    query_ids : array of int, shape (q,), optional
        Row of ``M`` each query stands for, excluded from its own neighbours; ``-1`` for none
        (the default).
    query_scale : ndarray of shape (q,), optional
        Factor ``q_a`` of every query row, positive on non-empty rows (default ``1/||row||``:
        cosine); the similarity is ``q_a s_b sum_f Q_af M_bf w_f`` with ``s_b`` the index's scale.
    num_threads : int
        numba threads, 0 = all.
    show_progress : bool
        tqdm bar over blocks of rows.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (q, n)
        Row ``a`` lists ``KNN(a)`` most similar first (ties by id), values ``sim(a, b) > 0``.
    """
    if not isinstance(index, KnnIndex):
        raise TypeError(f"index must be a KnnIndex from knn_index, got {type(index).__name__}")
    n = index.n_rows
    k = check_k(k, n, "rows")
    Q = check_feedback(queries, "queries", allow_empty=True)
    if Q.shape[1] != index.n_features:
        raise ValueError(f"queries have {Q.shape[1]} columns but the indexed rows have {index.n_features}")
    nq = Q.shape[0]
    if query_ids is None:
        self_ids = np.full(nq, -1, np.int64)
    else:
        self_ids = np.asarray(query_ids, dtype=np.int64).reshape(-1)
        if self_ids.shape != (nq,):
            raise ValueError(f"query_ids must have one id per query row ({nq})")
    out_ids = np.zeros((nq, k), np.int32)
    out_sims = np.zeros((nq, k))
    out_count = np.zeros(nq, np.int64)
    threads = check_num_threads(num_threads)
    n_blocks = 32 if show_progress else 1
    block = max(1, -(-nq // n_blocks))
    args = (
        Q.indptr.astype(np.int64),
        Q.indices.astype(np.int32),
        _inverse_norms(Q) if query_scale is None else _check_scale(query_scale, Q, "query_scale"),
        self_ids,
        index.indptr,
        index.indices,
        index.scale,
        index.weights,
        n,
    )
    with numba_threads(num_threads), tqdm(total=nq, desc=desc, disable=not show_progress) as bar:
        for start in range(0, nq, block):
            stop = min(nq, start + block)
            n_chunks = min(stop - start, 16 * threads)
            _knn_kernel(start, stop, n_chunks, *args, out_ids, out_sims, out_count)
            bar.update(stop - start)
    return _dense_rows_to_csr(out_ids, out_sims, out_count, n)


def weighted_cosine_knn(
    M, k, weights=None, *, queries=None, query_ids=None, num_threads=0, show_progress=False, desc="KNN"
):
    """The ``k`` most similar rows of the binary matrix ``M`` for every row (or query row).

    One-shot form of :func:`knn_index` + :func:`knn_query`; answering many small batches of
    queries against the same ``M`` should build the index once instead.

    Parameters
    ----------
    M : scipy.sparse matrix, shape (n, d)
        Binary rows to compare (canonical feedback, see ``check_feedback``); for items pass
        ``X.T``.
    k : int
        Neighbourhood size, ``1 <= k <= n - 1``.
    weights : ndarray of shape (d,), optional
        Positive feature weights ``w_f`` (default ones: plain cosine).
    queries : scipy.sparse matrix, shape (q, d), optional
        Rows whose neighbours among the rows of ``M`` are wanted (default: ``M`` itself).
    query_ids : array of int, shape (q,), optional
        Row of ``M`` each query stands for, excluded from its own neighbours; ``-1`` for none.
        Defaults to ``arange(n)`` when ``queries`` is ``None``, else to all ``-1``.
    num_threads, show_progress, desc :
        As in :func:`knn_query`.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (q, n)
        Row ``a`` lists ``KNN(a)`` most similar first (ties by id), values ``sim(a, b) > 0``.
    """
    index = knn_index(M, weights)
    if queries is None:
        queries = M
        if query_ids is None:
            query_ids = np.arange(index.n_rows, dtype=np.int64)
    return knn_query(index, queries, k, query_ids, num_threads=num_threads, show_progress=show_progress, desc=desc)


def _inverse_norms(M):
    """``1 / ||row||`` of a binary CSR matrix (0 for empty rows, which are never touched)."""
    return inverse_sqrt(np.diff(M.indptr).astype(np.float64))


def inverse_sqrt(counts):
    """``1 / sqrt(counts)`` elementwise, 0 where a count is 0."""
    counts = np.asarray(counts, dtype=np.float64)
    return np.divide(1.0, np.sqrt(counts), out=np.zeros_like(counts), where=counts > 0)


def cosine_knn(X, k, *, side="item", num_threads=0, show_progress=False):
    """Item-item (``side="item"``) or user-user cosine KNN of a feedback matrix.

    ``cos(i, j) = |users(i) & users(j)| / sqrt(c(i) c(j))``; returns the ``n x n`` CSR
    neighbourhood described in the module docstring (at most ``k`` entries a row).
    """
    X = check_feedback(X)
    M = _side_matrix(X, side)
    return weighted_cosine_knn(M, k, num_threads=num_threads, show_progress=show_progress, desc=f"{side} KNN")


def _side_matrix(X, side):
    if side not in _SIDES:
        raise ValueError(f"side must be one of {_SIDES}, got {side!r}")
    return X.T.tocsr() if side == "item" else X


def truncate_rows(S, k) -> sp.csr_matrix:
    """Keep the first ``k`` stored entries of every row of a row-ordered CSR neighbourhood.

    On a neighbourhood built for ``k_max >= k`` this is ``ktrunc`` for size ``k``.
    """
    k = check_positive_int(k, "k")
    S = sp.csr_matrix(S)
    counts = np.diff(S.indptr)
    pos = np.arange(S.nnz) - np.repeat(S.indptr[:-1], counts)
    keep = pos < k
    indptr = np.zeros(S.shape[0] + 1, np.int64)
    np.cumsum(np.minimum(counts, k), out=indptr[1:])
    return sp.csr_matrix((S.data[keep], S.indices[keep], indptr), shape=S.shape)


@njit(parallel=True, cache=True)
def _topk_stored(indptr, indices, data, out_ids, out_count):
    k = out_ids.shape[1]
    for i in prange(indptr.shape[0] - 1):
        lo = indptr[i]
        hi = indptr[i + 1]
        # heap over positions in the row: sorted indices make "smaller position" = "smaller id"
        key = data[lo:hi]
        tie = np.zeros(hi - lo)
        heap = np.empty(min(k, hi - lo), np.int64)
        size = 0
        for p in range(hi - lo):
            if indices[lo + p] != i and key[p] > 0:
                size = heap_offer(heap, size, p, key, tie)
        heap_sort_best_first(heap, size, key, tie)
        for t in range(size):
            out_ids[i, t] = indices[lo + heap[t]]
        out_count[i] = size


def ktrunc(A, k, sim=None) -> sp.csr_matrix:
    """Algorithm 4.1: keep ``A_ij`` only for ``j in KNN(i)`` under the similarity ``sim``.

    Parameters
    ----------
    A : array or sparse matrix, shape (n, n)
        Affinity matrix.
    k : int
        Neighbourhood size, ``1 <= k <= n - 1``.
    sim : array or sparse matrix, shape (n, n), optional
        Similarity defining ``KNN(i)`` (default ``A`` itself); only positive off-diagonal
        similarities make neighbours, ties go to the smaller id.

    Returns
    -------
    scipy.sparse.csr_matrix
        Row ``i`` stores ``A_ij`` for every ``j in KNN(i)`` (zeros included), most similar
        first, so :func:`truncate_rows` of it gives ``ktrunc`` for any smaller ``k``.
    """
    A = _square(A, "A")
    S = A if sim is None else _square(sim, "sim")
    if S.shape != A.shape:
        raise ValueError(f"shape mismatch: A is {A.shape} but sim is {S.shape}")
    n = A.shape[0]
    k = check_k(k, n, "rows")
    S.sort_indices()
    out_ids = np.zeros((n, k), np.int64)
    out_count = np.zeros(n, np.int64)
    _topk_stored(S.indptr.astype(np.int64), S.indices.astype(np.int64), S.data, out_ids, out_count)
    rows = np.repeat(np.arange(n), out_count)
    cols = out_ids[np.arange(k) < out_count[:, None]]
    values = np.asarray(A[rows, cols]).ravel() if rows.size else np.zeros(0)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(out_count, out=indptr[1:])
    return sp.csr_matrix((values.astype(np.float64), cols.astype(np.int32), indptr), shape=(n, n))


def _square(A, name):
    if not (sp.issparse(A) or isinstance(A, np.ndarray)):
        raise TypeError(f"{name} must be a numpy array or scipy sparse matrix, got {type(A).__name__}")
    A = sp.csr_matrix(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A.data)):
        raise ValueError(f"{name} contains NaN or infinite values")
    A.sum_duplicates()
    return A
