"""The sparse Gram matrix ``G = X^T X`` of a feedback matrix and its local blocks ``G[pattern, pattern]``:
what EASE's sparse solve (its FSAI rows, :mod:`recsys_ltr._fsai`) and fsSLIM's item problems read.

``G`` stores ``nnz(G) <= min(n_items^2, sum_u n_u^2)`` entries of 12 bytes (a column index and a
float64), counted before they are allocated (:func:`gram_entries`), and costs ``O(sum_u n_u^2)`` time.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from . import _memory

__all__ = ["GRAM_ENTRY_BYTES", "gram", "gram_entries", "local_block"]

#: Bytes of one stored entry of the sparse Gram matrix: its int32 column and float64 value.
GRAM_ENTRY_BYTES = 12

_GRAM_CHUNKS = 256  # work units of the Gram kernel: each holds three arrays of n_items


def gram_entries(X, Xt=None) -> np.ndarray:
    """The stored entries of every row of :func:`gram`'s ``G`` (``Xt``: ``X^T`` as CSR, when the
    caller has it)."""
    Xt = X.T.tocsr() if Xt is None else Xt
    return _gram_rows(Xt.indptr, Xt.indices, Xt.data, X.indptr, X.indices, X.data, np.zeros(1, np.int64), None, None)


def gram(X, what: str) -> sp.csr_matrix:
    """``G = X^T X`` of the canonical CSR ``X`` with sorted indices and every diagonal entry stored,
    in the memory of the result and ``X^T``; refused up front with ``MemoryError`` when its entries
    would not fit in the memory available (``what`` names the model in the message).

    Row ``i`` sums ``x_ui x_u.`` over the users ``u`` of item ``i`` in increasing order, as scipy's
    product does, in parallel over the items: counted first (``G``'s row sizes), then filled.
    """
    Xt = X.T.tocsr()
    n = X.shape[1]
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(gram_entries(X, Xt), out=indptr[1:])
    need, room = GRAM_ENTRY_BYTES * float(indptr[-1]), _memory.available_bytes()
    if room is not None and need > room:
        raise MemoryError(
            f"{what} needs the Gram matrix X^T X of {n} items, {indptr[-1]:,} co-occurring pairs: about "
            f"{_memory.readable_bytes(need)}, but the memory available is {_memory.readable_bytes(room)}; fewer "
            "items (the rarest dropped) or fewer positives of the most active users shrink it"
        )
    indices, data = np.empty(indptr[-1], np.int32), np.empty(indptr[-1])
    _gram_rows(Xt.indptr, Xt.indices, Xt.data, X.indptr, X.indices, X.data, indptr, indices, data)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n))


@njit(parallel=True, cache=True)
def _gram_rows(t_indptr, t_indices, t_data, x_indptr, x_indices, x_data, indptr, indices, data):
    """The rows of ``X^T X`` (``X^T``: ``t_*``) and its diagonal: without ``indices`` their sizes
    (returned), with them the sorted columns and values at ``indptr``."""
    n = t_indptr.shape[0] - 1
    sizes = np.zeros(n, np.int64)
    n_chunks = min(n, _GRAM_CHUNKS)
    for c in prange(n_chunks):
        seen = np.full(n, -1, np.int64)  # the last row that touched a column
        total = np.zeros(n)
        touched = np.empty(n, np.int64)
        for i in range(c, n, n_chunks):
            m = 1
            seen[i], touched[0], total[i] = i, i, 0.0
            for p in range(t_indptr[i], t_indptr[i + 1]):
                u, x = t_indices[p], t_data[p]
                for q in range(x_indptr[u], x_indptr[u + 1]):
                    j = x_indices[q]
                    if seen[j] != i:
                        seen[j], touched[m], total[j] = i, j, 0.0
                        m += 1
                    total[j] += x * x_data[q]
            sizes[i] = m
            if indices is None:
                continue
            at = indptr[i]
            if 16 * m < n:  # a short row: its columns sorted
                for j in np.sort(touched[:m]):
                    indices[at], data[at] = j, total[j]
                    at += 1
            else:  # a long one: in order by a scan of the columns
                for j in range(n):
                    if seen[j] == i:
                        indices[at], data[at] = j, total[j]
                        at += 1
    return sizes


@njit(cache=True)
def local_block(a_indptr, a_indices, a_data, pattern):
    """``A[pattern, pattern]`` of a symmetric CSR ``A`` (sorted rows) for a ``pattern`` whose entries
    but the last increase: row ``a`` gives the entries of the columns ``pattern[:a + 1]``, found by
    galloping along it, so a long row of a popular item costs about ``a log(row / a)``, not its length."""
    s = pattern.shape[0]
    local = np.zeros((s, s))
    for a in range(s):
        start = a_indptr[pattern[a]]
        row = a_indices[start : a_indptr[pattern[a] + 1]]
        p = 0
        for b in range(min(a + 1, s - 1)):
            p = _gallop(row, p, pattern[b])
            if p < row.shape[0] and row[p] == pattern[b]:
                local[a, b] = local[b, a] = a_data[start + p]
    start, i = a_indptr[pattern[s - 1]], pattern[s - 1]
    row = a_indices[start : a_indptr[i + 1]]
    p = np.searchsorted(row, i)
    if p < row.shape[0] and row[p] == i:
        local[s - 1, s - 1] = a_data[start + p]
    return local


@njit(cache=True, inline="always")
def _gallop(row, lo, x):
    """The first position ``p >= lo`` of the sorted ``row`` with ``row[p] >= x`` (``row.size`` if none):
    steps doubling from ``lo``, then a bisection of the last step."""
    n, hi, step = row.shape[0], lo, 1
    while hi < n and row[hi] < x:
        lo, hi, step = hi + 1, hi + step, 2 * step
    hi = min(hi, n)
    while lo < hi:
        mid = (lo + hi) // 2
        if row[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo
