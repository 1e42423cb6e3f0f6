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

The similarity kernel computes, for rows ``a`` and ``b`` of a matrix ``M`` (binary, or weighted for
the models that read weights: ``uses_weights``),

    sim(a, b) = sum_f M_af M_bf w_f / (||a|| ||b||),

with feature weights ``w`` (all ones: cosine; ``1/sqrt(c(f))``: the KUNN affinities, Eq. 4.5-4.6)
and ``||a||`` the Euclidean norm of row ``a`` (of a binary row: the square root of its count).
The row scales ``1/||a||`` and ``1/||b||`` are inputs of the kernel too, so other products of the
form ``q_a s_b sum_f M_af M_bf w_f`` reuse it (RP3β, :mod:`recsys_ltr.neighbors.rp3beta`).  It
runs in parallel over rows (serially for small calls: :mod:`recsys_ltr._parallel`) with one sparse
accumulator per chunk of rows (never an ``n x n`` dense block), and is deterministic: results do not
depend on the number of threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import prange

from .._memory import rows_per_block
from .._parallel import product_work, row_kernel
from .._progress import progress, progress_enabled
from .._threads import check_num_threads, numba_threads
from .._topk import N_BUCKETS, ZERO, select_best_positive, top_k_sparse
from .._validation import (
    INDEX_DTYPE,
    check_compressed,
    check_feedback,
    check_positive_int,
    check_sparse,
    check_weighted,
)
from ..executors import SerialExecutor, check_executor, executor_scope

__all__ = [
    "KnnIndex",
    "check_block_size",
    "check_k",
    "check_scale",
    "check_weights",
    "cosine_knn",
    "cosine_rows",
    "knn_index",
    "knn_query",
    "ktrunc",
    "truncate_rows",
    "weighted_cosine_knn",
]

_SIDES = ("item", "user")


@row_kernel(seconds_per_unit=2.1e-9)
def _knn_kernel(
    start,
    stop,
    n_chunks,
    q_indptr,
    q_indices,
    q_data,
    q_scale,
    self_ids,
    b_indptr,
    b_indices,
    b_data,
    b_scale,
    weights,
    weighted,
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
        hist = np.zeros(N_BUCKETS, np.int64)
        scratch = np.empty(n_base)
        out = np.empty(k, np.int64)
        # strided rows balance the load when heavy rows cluster in id order
        for a in range(start + c, stop, n_chunks):
            n_touched = 0
            for p in range(q_indptr[a], q_indptr[a + 1]):
                f = q_indices[p]
                w = weights[f] * q_data[p]
                for pp in range(b_indptr[f], b_indptr[f + 1]):
                    b = b_indices[pp]
                    touched[n_touched] = b  # branch-free: kept only on the first touch
                    n_touched += acc[b] == 0.0
                    # > 0: checked weights are >= 1e-100 (check_weighted); binary rows skip the load
                    acc[b] += w * b_data[pp] if weighted else w
            m = ZERO
            for t in range(n_touched):
                b = touched[t]
                # the product of the scales is symmetric, so cosine's sim(a, b) == sim(b, a) bitwise
                s = acc[b] * (q_scale[a] * b_scale[b])
                acc[b] = s
                if b != self_ids[a]:
                    cand[m] = b
                    vals[m] = s
                    m += 1
            size = select_best_positive(cand, vals, bits, bucket, hist, scratch, m, k, acc, out)
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


def _dense_rows_to_csr(ids, sims, count, n_cols):
    """CSR rows from the first ``count[a]`` entries of every row ``a`` of ``ids`` and ``sims``."""
    kept = np.arange(ids.shape[1]) < count[:, None]  # row-major: each row's entries in order
    indptr = np.zeros(ids.shape[0] + 1, INDEX_DTYPE)
    np.cumsum(count, out=indptr[1:])
    return sp.csr_matrix((sims[kept], ids[kept], indptr), shape=(ids.shape[0], n_cols))


class KnnIndex:
    """The rows of a matrix ``M`` prepared once for repeated :func:`knn_query` calls.

    Build it with :func:`knn_index`.  The constructor takes the attributes below (``data``
    optional: ``None`` for a binary ``M``, else weights as :func:`~recsys_ltr._validation.check_weighted`
    accepts them), checks every array against the others (a hand-built index with a bad entry
    would make the kernel write out of bounds) and stores them read-only, so an index is valid for
    as long as it exists.

    Attributes
    ----------
    indptr, indices : int32 arrays
        CSR structure of ``M^T`` (feature -> rows).
    data : float64 array
        The values of ``M^T`` in that structure (ones for a binary ``M``).
    scale : float64 array (n_rows,)
        The factor ``s_b`` of every row (cosine: ``1 / ||row||`` of ``M``, 0 for an empty row).
    weights : float64 array (n_features,)
        Feature weights ``w_f``.
    n_rows, n_features : int
        ``M.shape``.
    weighted : bool
        Whether ``data`` holds other values than ones (binary rows skip reading them).

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.neighbors import KnnIndex
    >>> # 2 rows over 2 features: row 0 has feature 0, row 1 features 0 and 1 (M^T in CSR form)
    >>> index = KnnIndex(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([1.0, 0.5 ** 0.5]), np.ones(2), 2, 2)
    >>> index.indices
    array([0, 1, 1], dtype=int32)
    """

    __slots__ = ("data", "indices", "indptr", "n_features", "n_rows", "scale", "weighted", "weights")

    def __init__(self, indptr, indices, scale, weights, n_rows, n_features, data=None):
        n_rows = check_positive_int(n_rows, "n_rows")
        n_features = check_positive_int(n_features, "n_features")
        nnz = check_compressed(indptr, indices, n_features, n_rows, "KnnIndex", "row index")  # before scipy sees them
        values = np.ones(nnz) if data is None else np.asarray(data)[:nnz]
        Mt = (check_feedback if data is None else check_weighted)(
            sp.csr_matrix((values, np.asarray(indices)[:nnz], np.asarray(indptr)), shape=(n_features, n_rows)),
            "KnnIndex", allow_empty=True,
        )  # fmt: skip
        scale = _finite_vector(scale, n_rows, "scale", positive=False)
        weights = _finite_vector(weights, n_features, "weights", positive=True)
        self._store(Mt.indptr, Mt.indices, scale, weights, n_rows, n_features, Mt.data)

    @classmethod
    def trusted(cls, indptr, indices, scale, weights, n_rows, n_features, data) -> KnnIndex:
        """An index of arrays this package built and checked (no validation pass), read-only."""
        self = cls.__new__(cls)
        self._store(indptr, indices, scale, weights, n_rows, n_features, data)
        return self

    def _store(self, indptr, indices, scale, weights, n_rows, n_features, data):
        values = {"indptr": indptr, "indices": indices, "scale": scale, "weights": weights, "data": data}
        for name, value in values.items():
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "n_rows", n_rows)
        object.__setattr__(self, "n_features", n_features)
        object.__setattr__(self, "weighted", bool(np.any(data != 1.0)))

    def __setattr__(self, name, value):
        raise AttributeError("a KnnIndex is read-only: build a new one with knn_index")

    def __reduce__(self):
        # pickled as its arrays, rebuilt without a validation pass: the constructor would copy them,
        # and a worker reading the index zero-copy from Ray's object store must not (a pickle is
        # trusted anyway: unpickling can run any code)
        return KnnIndex.trusted, (
            self.indptr, self.indices, self.scale, self.weights, self.n_rows, self.n_features, self.data
        )  # fmt: skip


def _finite_vector(v, n, name, positive):
    v = np.array(v, dtype=np.float64)
    if v.shape != (n,) or not np.all(np.isfinite(v)) or np.any(v < 0) or (positive and np.any(v == 0)):
        raise ValueError(f"{name} must be {n} finite {'positive' if positive else 'non-negative'} numbers")
    return v


def check_weights(weights, d: int) -> np.ndarray:
    """Feature weights ``w_f`` of the similarity: ``d`` finite positive numbers whose sum is finite
    (so that no similarity overflows); ``None`` gives ones."""
    if weights is None:
        return np.ones(d)
    w = _finite_vector(weights, d, "weights", positive=True)
    if not np.isfinite(w.sum()):
        raise ValueError("weights sum to infinity: similarities would overflow; rescale them")
    return w


def knn_index(M, weights=None, scale=None) -> KnnIndex:
    """Validate, transpose and normalise the binary rows of ``M`` once, in ``O(nnz)``.

    Parameters
    ----------
    M : scipy.sparse matrix, shape (n, d)
        Binary rows to search (any positive entry counts as 1); for items pass ``X.T``.
    weights : ndarray of shape (d,), optional
        Positive feature weights ``w_f`` (default ones: plain cosine); their sum must be finite.
    scale : ndarray of shape (n,), optional
        Factor ``s_b`` of every row, positive on non-empty rows (default ``1/||row||``: cosine).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import knn_index, knn_query
    >>> index = knn_index(X.T)  # the items, compared over their users
    >>> index.n_rows, index.n_features
    (4, 5)
    >>> knn_query(index, sp.csr_matrix([[1.0, 1, 0, 0, 0]]), 2).toarray().round(3)  # a new item's neighbours
    array([[0.816, 0.816, 0.   , 0.   ]])
    """
    M = check_feedback(M, "M")
    scale = None if scale is None else check_scale(scale, M, "scale")
    return knn_index_trusted(M, check_weights(weights, M.shape[1]), scale)


def knn_index_trusted(M, weights, scale=None) -> KnnIndex:
    """:func:`knn_index` of a canonical CSR ``M`` (binary, or weighted by :func:`check_weighted`),
    checked weights and scale."""
    Mt = M.T.tocsr()
    scale = inverse_norms(M) if scale is None else scale
    return KnnIndex.trusted(Mt.indptr, Mt.indices, scale, weights, M.shape[0], M.shape[1], Mt.data)


def check_scale(scale, M, name) -> np.ndarray:
    """Row factors of the kernel: finite, non-negative, positive on the non-empty rows of ``M``."""
    scale = np.array(scale, dtype=np.float64)
    counts = np.diff(M.indptr)
    if scale.shape != counts.shape or not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError(f"{name} must be {counts.size} finite non-negative numbers")
    if np.any(scale[counts > 0] == 0):
        raise ValueError(f"{name} must be positive on every non-empty row")
    return scale


def knn_query(
    index: KnnIndex,
    queries,
    k,
    query_ids=None,
    *,
    query_scale=None,
    num_threads=0,
    show_progress=None,
    desc="KNN",
    executor=None,
    block_size=None,
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
        Row of the indexed matrix each query stands for, excluded from its own neighbours; ``-1``
        for none (the default).
    query_scale : ndarray of shape (q,), optional
        Factor ``q_a`` of every query row, positive on non-empty rows (default ``1/||row||``:
        cosine); the similarity is ``q_a s_b sum_f Q_af M_bf w_f`` with ``s_b`` the index's scale.
    num_threads : int
        numba threads, 0 = all (in a worker task: its share).
    show_progress : bool or None
        tqdm bar over blocks of rows (``None``: on when standard error is a terminal).
    executor : Executor or {"serial", "processes", "ray"}, optional
        Where blocks of query rows are searched (:mod:`recsys_ltr.executors`; default in this
        process).  The index and the queries are shipped once; each task runs the kernel on a
        range of query rows against the whole index and returns the neighbours of those rows
        only.  The result is the same, bit for bit, on every executor.
    block_size : int, optional
        Query rows per task (default: the whole query in this process; on workers about four
        tasks per worker).  A task holds the kernel's ``O(n)`` accumulator per thread and
        ``block_size * k`` results.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (q, n)
        Row ``a`` lists ``KNN(a)`` most similar first (ties by id), values ``sim(a, b) > 0``.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import knn_index, knn_query
    >>> index = knn_index(X)  # built once
    >>> knn_query(index, X[:2], 1, query_ids=[0, 1]).toarray().round(3)  # users 0 and 1, themselves excluded
    array([[0.   , 0.816, 0.   , 0.   , 0.   ],
           [0.816, 0.   , 0.   , 0.   , 0.   ]])
    """
    if not isinstance(index, KnnIndex):
        raise TypeError(f"index must be a KnnIndex from knn_index, got {type(index).__name__}")
    k = check_k(k, index.n_rows, "rows")
    Q = check_feedback(queries, "queries", allow_empty=True)
    if Q.shape[1] != index.n_features:
        raise ValueError(f"queries have {Q.shape[1]} columns but the indexed rows have {index.n_features}")
    self_ids = _check_query_ids(query_ids, Q.shape[0], index.n_rows)
    query_scale = None if query_scale is None else check_scale(query_scale, Q, "query_scale")
    block_size = check_block_size(block_size)
    show_progress = progress_enabled(show_progress)
    return knn_query_trusted(index, Q, k, self_ids, num_threads, show_progress, desc, query_scale, executor, block_size)


def check_block_size(block_size) -> int | None:
    """``None`` (automatic) or a positive number of rows per task."""
    return None if block_size is None else check_positive_int(block_size, "block_size")


def _check_query_ids(query_ids, nq, n) -> np.ndarray:
    """``query_ids`` as int64 (one per query row, ``-1`` or a row in ``[0, n)``); default all ``-1``."""
    if query_ids is None:
        return np.full(nq, -1, np.int64)
    ids = np.asarray(query_ids)
    if ids.shape != (nq,):
        raise ValueError(f"query_ids must have one id per query row ({nq}), got shape {ids.shape}")
    if nq and not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"query_ids must be integers, got dtype {ids.dtype}")
    if nq and (ids.min() < -1 or ids.max() >= n):
        raise ValueError(f"query_ids must be -1 (none) or a row in [0, {n})")
    return ids.astype(np.int64)


def knn_query_trusted(
    index,
    Q,
    k,
    self_ids,
    num_threads=0,
    show_progress=False,
    desc="KNN",
    query_scale=None,
    executor=None,
    block_size=None,
):
    """:func:`knn_query` of canonical query rows ``Q`` (binary or weighted, like the index), int64 ``self_ids`` (-1: none), a
    checked ``query_scale`` (``None``: ``1/||row||``), an ``executor`` argument and ``block_size``
    (``None`` or a positive int)."""
    nq = Q.shape[0]
    check_executor(executor)
    query_scale = inverse_norms(Q) if query_scale is None else query_scale
    with executor_scope(executor) as ex, progress(show_progress, total=nq, desc=desc) as bar:
        if block_size is None:
            block_size = _default_block(nq, k, ex, show_progress)
        starts = range(0, nq, block_size)
        # a task carries its query rows; the index is shipped once
        blocks = (
            (Q[s : s + block_size], self_ids[s : s + block_size], query_scale[s : s + block_size]) for s in starts
        )
        pieces = [None] * len(starts)
        for position, piece in ex.map(_knn_rows, blocks, _KnnInputs(index, k, num_threads, len(starts))):
            pieces[position] = piece
            bar.update(piece.shape[0])
    return _stack_rows(pieces, index.n_rows)


def _default_block(nq, k, executor, show_progress) -> int:
    """Query rows per task: in this process one block (32 with a progress bar); on workers about
    four tasks per worker, each returning at most a
    :data:`~recsys_ltr._memory.BLOCK_BYTES` block."""
    if isinstance(executor, SerialExecutor):
        return max(1, -(-nq // (32 if show_progress else 1)))
    return max(1, min(-(-nq // (4 * executor.parallelism)), rows_per_block(8 * k)))


@dataclass(frozen=True)
class _KnnInputs:
    """What every block of :func:`knn_query_trusted` reads: shipped once to the workers."""

    index: KnnIndex
    k: int
    num_threads: int
    n_blocks: int  # of the whole query: the kernel runs serially only if all of them are small


def _knn_rows(inputs: _KnnInputs, block) -> sp.csr_matrix:
    """``KNN`` of one block of query rows ``(Q, self_ids, query_scale)`` (one task), as CSR rows."""
    Q, self_ids, query_scale = block
    index, nq = inputs.index, Q.shape[0]
    out_ids = np.zeros((nq, inputs.k), np.int32)
    out_sims = np.zeros((nq, inputs.k))
    out_count = np.zeros(nq, np.int64)
    n_chunks = min(nq, 16 * check_num_threads(inputs.num_threads))
    with numba_threads(inputs.num_threads):
        _knn_kernel(
            0,
            nq,
            n_chunks,
            Q.indptr,
            Q.indices,
            Q.data,
            query_scale,
            self_ids,
            index.indptr,
            index.indices,
            index.data,
            index.scale,
            index.weights,
            index.weighted,
            index.n_rows,
            out_ids,
            out_sims,
            out_count,
            work=product_work(Q.indices, index.indptr, nq, N_BUCKETS),  # a histogram walk per row
            calls=inputs.n_blocks,
        )
    return _dense_rows_to_csr(out_ids, out_sims, out_count, index.n_rows)


def _stack_rows(pieces, n_cols) -> sp.csr_matrix:
    """The CSR blocks of consecutive rows stacked, in canonical int32 form."""
    if len(pieces) == 1:
        return pieces[0]
    indptr = np.zeros(sum(p.shape[0] for p in pieces) + 1, INDEX_DTYPE)
    np.cumsum(np.concatenate([np.diff(p.indptr) for p in pieces]), out=indptr[1:])
    indices = np.concatenate([p.indices for p in pieces]).astype(INDEX_DTYPE, copy=False)
    data = np.concatenate([p.data for p in pieces])
    return sp.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, n_cols))


def weighted_cosine_knn(
    M, k, weights=None, *, queries=None, query_ids=None, num_threads=0, show_progress=None, desc="KNN"
):
    """The ``k`` most similar rows of the binary matrix ``M`` for every row (or query row).

    One-shot form of :func:`knn_index` + :func:`knn_query`; answering many small batches of
    queries against the same ``M`` should build the index once instead.

    Parameters
    ----------
    M : scipy.sparse matrix, shape (n, d)
        Binary rows to compare (any positive entry counts as 1); for items pass ``X.T``.
    k : int
        Neighbourhood size, ``1 <= k <= n - 1``.
    weights : ndarray of shape (d,), optional
        Positive feature weights ``w_f`` (default ones: plain cosine); their sum must be finite.
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

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import weighted_cosine_knn
    >>> # items compared over their users, user 4 counting twice
    >>> weighted_cosine_knn(X.T, 1, weights=np.array([1, 1, 1, 1, 2.0])).toarray().round(3)
    array([[0.   , 0.667, 0.   , 0.   ],
           [0.667, 0.   , 0.   , 0.   ],
           [0.   , 0.667, 0.   , 0.   ],
           [0.667, 0.   , 0.   , 0.   ]])
    """
    M = check_feedback(M, "M")
    index = knn_index_trusted(M, check_weights(weights, M.shape[1]))
    if queries is not None:
        return knn_query(index, queries, k, query_ids, num_threads=num_threads, show_progress=show_progress, desc=desc)
    k = check_k(k, index.n_rows, "rows")
    ids = (
        np.arange(M.shape[0], dtype=np.int64)
        if query_ids is None
        else _check_query_ids(query_ids, M.shape[0], M.shape[0])
    )
    return knn_query_trusted(index, M, k, ids, num_threads, progress_enabled(show_progress), desc)


def self_knn_trusted(
    M, k, weights=None, *, num_threads=0, show_progress=False, desc="KNN", executor=None, block_size=None
) -> sp.csr_matrix:
    """``KNN`` of every row of the canonical ``M`` (binary or weighted) among its rows (itself excluded)."""
    index = knn_index_trusted(M, np.ones(M.shape[1]) if weights is None else weights)
    ids = np.arange(M.shape[0], dtype=np.int64)
    return knn_query_trusted(index, M, k, ids, num_threads, show_progress, desc, None, executor, block_size)


def inverse_norms(M):
    """``1 / ||row||`` of a canonical CSR matrix, the Euclidean norm of its values (of a binary row:
    ``1 / sqrt(count)``, exactly); 0 for empty rows, which are never touched."""
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    return inverse_sqrt(np.bincount(rows, weights=M.data * M.data, minlength=M.shape[0]))


def inverse_sqrt(counts):
    """``1 / sqrt(counts)`` elementwise, 0 where a count is 0."""
    counts = np.asarray(counts, dtype=np.float64)
    return np.divide(1.0, np.sqrt(counts), out=np.zeros_like(counts), where=counts > 0)


def cosine_knn(X, k, *, side="item", num_threads=0, show_progress=None):
    """Item-item (``side="item"``) or user-user cosine KNN of a feedback matrix.

    ``cos(i, j) = |users(i) & users(j)| / sqrt(c(i) c(j))``; returns the ``n x n`` CSR
    neighbourhood described in the module docstring (at most ``k`` entries a row).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import cosine_knn
    >>> S = cosine_knn(X, 2)  # row i: KNN(i), most similar first
    >>> S.indices.tolist(), S.data.round(3).tolist()
    ([1, 2, 0, 2, 1, 3, 2, 0], [0.667, 0.333, 0.667, 0.667, 0.667, 0.667, 0.667, 0.333])
    """
    M = side_matrix(check_feedback(X), side)
    k = check_k(k, M.shape[0], f"{side}s")
    return self_knn_trusted(
        M, k, num_threads=num_threads, show_progress=progress_enabled(show_progress), desc=f"{side} KNN"
    )


def side_matrix(X, side):
    """The rows compared on ``side``: ``X^T`` (items) or ``X`` (users), canonical CSR."""
    if side not in _SIDES:
        raise ValueError(f"side must be one of {_SIDES}, got {side!r}")
    return X.T.tocsr() if side == "item" else X


def truncate_rows(S, k) -> sp.csr_matrix:
    """Keep the first ``k`` stored entries of every row of a row-ordered CSR neighbourhood.

    On a neighbourhood built for ``k_max >= k`` this is ``ktrunc`` for size ``k``.  ``S`` must be
    a canonical-structure CSR (e.g. an :class:`~recsys_ltr.neighbors.Affinity`'s matrix).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=float)
    >>> from recsys_ltr.neighbors import cosine_knn, truncate_rows
    >>> truncate_rows(cosine_knn(X, 2), 1).indices  # the k=1 prefix of every row
    array([1, 0, 1, 2], dtype=int32)
    """
    k = check_positive_int(k, "k")
    counts = np.diff(S.indptr)
    if counts.max(initial=0) <= k:  # nothing to cut (e.g. k = k_max)
        return S.copy()
    pos = np.arange(S.nnz) - np.repeat(S.indptr[:-1], counts)
    keep = pos < k
    indptr = np.zeros(S.shape[0] + 1, INDEX_DTYPE)
    np.cumsum(np.minimum(counts, k), out=indptr[1:])
    return sp.csr_matrix((S.data[keep], S.indices[keep], indptr), shape=S.shape)


def ktrunc(A, k, sim=None) -> sp.csr_matrix:
    """Algorithm 4.1: keep ``A_ij`` only for ``j in KNN(i)`` under the similarity ``sim``.

    Parameters
    ----------
    A : array or sparse matrix, shape (n, n)
        Affinity matrix (finite real values).
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

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from recsys_ltr.neighbors import ktrunc
    >>> A = sp.csr_matrix([[0.0, 3, 1], [2, 0, 5], [1, 1, 0]])
    >>> ktrunc(A, 1).toarray()  # each row's largest entry (ties: the lower id)
    array([[0., 3., 0.],
           [0., 0., 5.],
           [1., 0., 0.]])
    """
    A = _square(A, "A")
    S = A if sim is None else _square(sim, "sim")
    if S.shape != A.shape:
        raise ValueError(f"shape mismatch: A is {A.shape} but sim is {S.shape}")
    n = A.shape[0]
    k = check_k(k, n, "rows")
    out_ids = np.zeros((n, k), np.int64)
    out_count = np.zeros(n, np.int64)
    top_k_sparse(S.indptr, S.indices, S.data, True, True, out_ids, out_count)
    rows = np.repeat(np.arange(n), out_count)
    cols = out_ids[np.arange(k) < out_count[:, None]]
    values = np.asarray(A[rows, cols]).ravel() if rows.size else np.zeros(0)
    indptr = np.zeros(n + 1, INDEX_DTYPE)
    np.cumsum(out_count, out=indptr[1:])
    return sp.csr_matrix((values.astype(np.float64), cols.astype(INDEX_DTYPE), indptr), shape=(n, n))


def _square(A, name):
    A = check_sparse(A, name, allow_empty=True, nonnegative=False)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")
    return A


def cosine_rows(M, ids, weights=None) -> np.ndarray:
    """Dense cosines of rows ``ids`` of the canonical CSR ``M`` (binary or weighted) with every row of
    ``M`` (``sum_f M_af M_bf w_f / (||a|| ||b||)``, the similarity of :mod:`recsys_ltr.neighbors.knn`)."""
    Mw = M if weights is None else M @ sp.diags(weights)
    G = (Mw[ids] @ M.T).toarray()
    inv = inverse_norms(M)
    return G * inv[ids][:, None] * inv[None, :]
