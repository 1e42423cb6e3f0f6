"""Factorized sparse approximate inverse (FSAI) of a sparse symmetric positive definite matrix.

Kolotilina & Yeremin, "Factorized sparse approximate inverse preconditionings I", SIAM J. Matrix
Anal. Appl. 14 (1993): for a lower-triangular sparsity pattern ``S`` (row ``i`` holds ``i`` and
some columns before it in an elimination order), the rows

    g_i = y / sqrt(y_i)    with    A[S_i, S_i] y = e_i

give a lower-triangular ``Z`` with ``Z A Z^T`` of unit diagonal and ``A^{-1} ~ Z^T Z``; with the
full pattern ``S_i = {j <= i}``, ``Z`` is the inverse of the Cholesky factor and the inverse is
exact.  It is the factored form of SANSA's sparse approximate inverse (Spišák et al., RecSys
2023: sparse approximate ``LDL^T`` of the Gram matrix, then a sparse approximate inverse of the
factor), computed here row by row: with ``A[S_i, S_i] = L L^T`` (``i`` last), ``g_i = L^{-T} e_last``.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from ._gram import local_block

__all__ = ["elimination_order", "fsai_factor", "fsai_pattern_sizes"]

_BATCHES = 50  # kernel calls per factorisation (progress steps)


def elimination_order(popularity: np.ndarray) -> np.ndarray:
    """Rank of every item in the elimination order: ascending popularity, ties by smaller id.

    Popular items come last, so their rows may use the most items (measured on lastfm-2k and
    gowalla: closer to the exact inverse than the descending order at the same pattern size).
    """
    order = np.lexsort((np.arange(popularity.size), popularity))
    rank = np.empty(popularity.size, np.int64)
    rank[order] = np.arange(popularity.size)
    return rank


def fsai_pattern_sizes(A: sp.csr_matrix, rank: np.ndarray, k: int) -> np.ndarray:
    """Row pointer of the factor: row ``i`` holds ``i`` and at most ``k`` earlier neighbours."""
    sizes = np.minimum(_earlier_counts(A.indptr, A.indices, rank), k) + 1
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)


@njit(parallel=True, cache=True)
def _earlier_counts(indptr, indices, rank):
    """Stored columns ``j`` of every row ``i`` with ``rank[j] < rank[i]`` (no temporary of ``A``'s size)."""
    n = indptr.shape[0] - 1
    counts = np.zeros(n, np.int64)
    for i in prange(n):
        for p in range(indptr[i], indptr[i + 1]):
            if rank[indices[p]] < rank[i]:
                counts[i] += 1
    return counts


def fsai_factor(A: sp.csr_matrix, rank: np.ndarray, k: int, step=None) -> sp.csr_matrix:
    """The FSAI factor ``Z`` of the SPD ``A`` (CSR, sorted indices), ``A^{-1} ~ Z^T Z``.

    Row ``i``'s pattern is ``i`` and the ``k`` columns ``j`` with ``rank[j] < rank[i]`` of largest
    ``A_ij`` (ties by smaller ``j``; zeros of ``A`` never enter).  ``step(n_rows)`` is called after
    each batch of rows.  Run it with one BLAS thread: the rows are solved in parallel.
    """
    n = A.shape[0]
    indptr = fsai_pattern_sizes(A, rank, k)
    indices = np.empty(indptr[-1], np.int32)
    data = np.empty(indptr[-1])
    a_indptr = A.indptr.astype(np.int64)
    bounds = np.linspace(0, n, min(n, _BATCHES) + 1).astype(np.int64)
    for lo, hi in itertools.pairwise(bounds):
        _fsai_rows(a_indptr, A.indices, A.data, rank, lo, hi, indptr, indices, data)
        if step is not None:
            step(int(hi - lo))
    Z = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    Z.sort_indices()
    return Z


@njit(parallel=True, cache=True)
def _fsai_rows(a_indptr, a_indices, a_data, rank, lo, hi, indptr, indices, data):
    """Rows ``lo..hi-1`` of the factor into the preallocated CSR arrays (sizes from ``indptr``)."""
    n_chunks = min(hi - lo, 64)
    for c in prange(n_chunks):
        for i in range(lo + c, hi, n_chunks):
            s = indptr[i + 1] - indptr[i]
            pattern = _earlier_neighbours(a_indptr, a_indices, a_data, rank, i, s - 1)
            indices[indptr[i] : indptr[i + 1]] = pattern
            data[indptr[i] : indptr[i + 1]] = _last_column_of_inverse_factor(
                local_block(a_indptr, a_indices, a_data, pattern)
            )


@njit(cache=True)
def _earlier_neighbours(a_indptr, a_indices, a_data, rank, i, k):
    """The ``k`` columns before row ``i`` in the order with the largest ``A_ij`` (ties by smaller
    column), in increasing column order, followed by ``i`` itself."""
    lo, hi = a_indptr[i], a_indptr[i + 1]
    columns = np.empty(hi - lo, np.int64)
    values = np.empty(hi - lo)
    m = 0
    for p in range(lo, hi):
        j = a_indices[p]
        if rank[j] < rank[i]:
            columns[m] = j
            values[m] = a_data[p]
            m += 1
    columns, values = columns[:m], values[:m]
    if m > k:  # stable sort by decreasing value keeps the smaller column first among ties
        columns = np.sort(columns[np.argsort(-values, kind="mergesort")[:k]])
    pattern = np.empty(columns.size + 1, np.int64)
    pattern[:-1] = columns
    pattern[-1] = i
    return pattern


@njit(cache=True)
def _last_column_of_inverse_factor(M):
    """``L^{-T} e_last`` for the Cholesky factor ``M = L L^T``: the FSAI row ``y / sqrt(y_last)``
    with ``M y = e_last``, since ``y = L^{-T} L^{-1} e_last`` and ``L^{-1} e_last = e_last / L_ss``."""
    L = np.linalg.cholesky(M)
    s = M.shape[0]
    g = np.zeros(s)
    g[s - 1] = 1.0 / L[s - 1, s - 1]
    for i in range(s - 2, -1, -1):  # back substitution with L^T
        v = 0.0
        for t in range(i + 1, s):
            v += L[t, i] * g[t]
        g[i] = -v / L[i, i]
    return g
