"""Top-k selection, the one module for it: numba primitives and the row-ranking kernels.

Order used everywhere: a larger primary key (score) first, then a larger secondary key (e.g.
training popularity, the evaluator's tie rule), then the smaller id.  Distances are ranked by
passing their negation.

* :func:`better`, :func:`heap_offer`, :func:`heap_sort_best_first` -- a bounded heap whose root is
  the worst kept element (O(m log k) over m candidates); :func:`sort_best_first` and
  :func:`sort_ascending` -- in-place heap sorts used instead of ``np.sort`` / ``np.argsort`` in
  kernels, which compile several times slower;
* :func:`select_best_positive` -- linear-time selection of positive values by a histogram of
  their bit patterns (the similarity kernel's hot path);
* :func:`top_k_dense` -- the best ``k`` columns of every row of a dense block, with per-row and
  global exclusions (``recommend``, content neighbours, ``similar_items`` of dense models);
* :func:`top_k_factor_product` -- the same for the rows of a product of two dense factor matrices,
  tile by tile (``recommend`` of the factor models);
* :func:`top_k_sparse_product` -- the same for the rows of a product of two non-negative CSR
  matrices, without the dense rows (``recommend`` of the neighbourhood models);
* :func:`top_k_sparse` -- the best ``k`` stored entries of every row of a CSR matrix
  (``similar_items`` of sparse models, ``ktrunc``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._memory import rows_per_block
from ._parallel import row_kernel
from ._progress import progress

__all__ = [
    "better",
    "heap_offer",
    "heap_sort_best_first",
    "rank_dense_rows",
    "rows_times_dense",
    "select_best_positive",
    "sort_ascending",
    "sort_best_first",
    "sparse_dense_product",
    "top_k_dense",
    "top_k_factor_product",
    "top_k_sparse",
    "top_k_sparse_product",
]

#: Scores one thread of :func:`top_k_factor_product` multiplies at once (8 MiB, within a shared cache):
#: on gowalla (40,981 items) 25-row tiles; 16 and 64 rows were slower.
TILE_FLOATS = 2**20
#: A zero that numba types as ``int64``: a literal ``0`` reaching a helper (as a constant argument or
#: as the start of a counter) makes numba compile that helper once more for ``Literal[int](0)``, about
#: 0.1-0.3 s each on first use.
ZERO = np.int64(0)


# ------------------------------------------------------------------------------ bounded heap
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
        _sift_down(heap, size, ZERO, primary, secondary)
    return size


@njit(cache=True)
def heap_sort_best_first(heap, size, primary, secondary):
    """Sort ``heap[:size]`` in place, best element first."""
    for last in range(size - 1, 0, -1):
        heap[0], heap[last] = heap[last], heap[0]
        _sift_down(heap, last, ZERO, primary, secondary)


@njit(cache=True)
def sort_best_first(ids, primary, secondary):
    """Sort the ids ``ids`` in place, best first (heap sort: O(m log m), and it compiles in a
    fraction of the time of ``np.sort`` + a stable ``np.argsort``, which matters on first use)."""
    for t in range(ids.shape[0]):
        heap_offer(ids, t, ids[t], primary, secondary)  # in-place heapify: ids[t:] not yet read
    heap_sort_best_first(ids, ids.shape[0], primary, secondary)


@njit(cache=True, inline="always")
def _sort_keyed_best_first(ids, keys, m):
    """Sort ``ids[:m]`` with their ``keys[:m]`` in place, best first (larger key, then smaller id):
    heap sort on the contiguous keys, not a gather from a full score row at every comparison."""
    for start in range(m // 2 - 1, -1, -1):
        _sift_down_worst(ids, keys, m, start)
    for last in range(m - 1, 0, -1):
        ids[0], ids[last] = ids[last], ids[0]
        keys[0], keys[last] = keys[last], keys[0]
        _sift_down_worst(ids, keys, last, ZERO)


@njit(cache=True)
def _sift_down_worst(ids, keys, size, pos):
    """Sift down in a heap whose root is the worst element (the order of :func:`_sort_keyed_best_first`)."""
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        c = child + 1
        if c < size and (keys[c] < keys[child] or (keys[c] == keys[child] and ids[c] > ids[child])):
            child = c
        if keys[child] > keys[pos] or (keys[child] == keys[pos] and ids[child] < ids[pos]):
            return
        ids[pos], ids[child] = ids[child], ids[pos]
        keys[pos], keys[child] = keys[child], keys[pos]
        pos = child


@njit(cache=True)
def sort_ascending(a):
    """Sort the integers ``a`` in place, ascending (heap sort, for the same compile-time reason)."""
    n = a.shape[0]
    for start in range(n // 2 - 1, -1, -1):
        _sift_down_max(a, n, start)
    for last in range(n - 1, 0, -1):
        a[0], a[last] = a[last], a[0]
        _sift_down_max(a, last, ZERO)


@njit(cache=True)
def _sift_down_max(a, size, pos):
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and a[child + 1] > a[child]:
            child += 1
        if a[child] <= a[pos]:
            return
        a[pos], a[child] = a[child], a[pos]
        pos = child


# ------------------------------------------------------------------------------ linear-time selection
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


@njit(cache=True, inline="always")
def _copy(src, dst, start, m):
    """``dst[start:start + m] = src[:m]`` without the slice assignment's shape check (whose error
    message alone takes seconds to compile)."""
    for t in range(m):
        dst[start + t] = src[t]


@njit(cache=True, inline="always")
def _take_best(cand, vals, m, need, out, start, scratch):
    """Write the best ``need <= m`` of ``cand[:m]`` (values ``vals[:m]``, ties: smaller id) to
    ``out[start:start + need]`` in no particular order.  Reorders the prefix of ``cand``."""
    if need == m:
        _copy(cand, out, start, m)
        return
    for t in range(m):
        scratch[t] = vals[t]
    kth = _kth_largest(scratch, m, need)
    pos = start
    n_ties = ZERO
    for t in range(m):
        if vals[t] > kth:
            out[pos] = cand[t]
            pos += 1
        elif vals[t] == kth:
            cand[n_ties] = cand[t]  # t >= n_ties: that part of the prefix is already read
            n_ties += 1
    rest = start + need - pos  # the smallest ids among the ties: selected, not sorted
    for t in range(n_ties):
        scratch[t] = -cand[t]  # ids are exact in float64
    largest = -_kth_largest(scratch, n_ties, rest)
    for t in range(n_ties):
        if cand[t] <= largest:
            out[pos] = cand[t]
            pos += 1


# Histogram pre-selection: the bit pattern of a positive double increases with its value, so
# its top bits (exponent and 6 mantissa bits: 64 buckets an octave from 2**-24 up) give
# monotone buckets.  One counting pass finds the bucket holding the k-th largest value; only
# that bucket needs an exact selection.
_SHIFT = 46
_BASE = int(np.float64(2.0**-24).view(np.int64)) >> _SHIFT
N_BUCKETS = 25 * 64 + 1


@njit(cache=True, inline="always")
def select_best_positive(cand, vals, bits, bucket, hist, scratch, m, k, primary, out):
    """Best ``min(k, m)`` of ``cand[:m]`` (positive values ``vals[:m]`` = ``primary[cand]``,
    ``bits`` = ``vals`` viewed as int64; ``hist`` of length :data:`N_BUCKETS`, all zeros) into
    ``out``, best first (ties: smaller id), in time linear in ``m``; returns their number and
    leaves ``hist`` zeroed."""
    if m > k:
        edge = 0  # becomes the highest bucket used
        for t in range(m):
            q = min(max((bits[t] >> _SHIFT) - _BASE, 0), N_BUCKETS - 1)
            bucket[t] = q
            hist[q] += 1
            edge = max(edge, q)
        above = 0
        while above + hist[edge] < k:
            above += hist[edge]
            edge -= 1
        size = ZERO
        n_edge = ZERO
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
        _copy(cand, out, ZERO, m)
    for t in range(m):
        scratch[t] = primary[out[t]]
    _sort_keyed_best_first(out, scratch, m)
    return m


# ------------------------------------------------------------------------------ row kernels
@njit(cache=True, inline="always")
def _flag_row(skip, ex_indptr, ex_indices, r, excluded, on):
    """Flag row ``r``'s excluded columns in ``skip`` (``on``), or give them back their global
    ``excluded`` value (``not on``): per-row exclusions on one scratch mask in O(row)."""
    for p in range(ex_indptr[r], ex_indptr[r + 1]):
        skip[ex_indices[p]] = on or excluded[ex_indices[p]]


@njit(cache=True)
def _best_of_row(row, secondary, skip, drop_zero, drop_nonfinite, heap, out_ids, out_scores):
    """Best ``len(heap)`` columns of the dense ``row`` outside ``skip`` into ``out_ids`` and
    ``out_scores`` (padded with ``-1`` / ``-inf``); ``heap`` is scratch.  See :func:`top_k_dense`."""
    n_out = heap.shape[0]
    size = ZERO
    worst = -np.inf  # score of the heap's root once full: most columns fail this one test
    for i in range(row.shape[0]):
        v = row[i]
        if v < worst:
            continue
        if skip[i] or (drop_zero and v == 0.0) or (drop_nonfinite and not np.isfinite(v)):
            continue
        if size == n_out and not better(i, heap[0], row, secondary):
            continue
        size = heap_offer(heap, size, i, row, secondary)
        if size == n_out:
            worst = row[heap[0]]
    heap_sort_best_first(heap, size, row, secondary)
    for t in range(size):
        out_ids[t] = heap[t]
        out_scores[t] = row[heap[t]]
    for t in range(size, n_out):
        out_ids[t] = -1
        out_scores[t] = -np.inf


@njit(parallel=True, cache=True)
def top_k_dense(scores, secondary, ex_indptr, ex_indices, excluded, drop_zero, drop_nonfinite, out_ids, out_scores):
    """Best ``out_ids.shape[1]`` columns of every row of the dense ``scores`` block.

    Row ``r`` skips the columns in ``ex_indices[ex_indptr[r]:ex_indptr[r + 1]]`` and every column
    with ``excluded[c]``; ``drop_zero`` skips columns scored 0 and ``drop_nonfinite`` those scored
    ``-inf``/``+inf``/NaN.  Order: score, then ``secondary``, then smaller id.  Rows with fewer candidates are padded
    with id ``-1`` and score ``-inf``.  Inputs are trusted (ids in range, shapes matching).
    """
    n_out = out_ids.shape[1]
    if n_out == 0:
        return
    for r in prange(scores.shape[0]):
        skip = excluded.copy()
        _flag_row(skip, ex_indptr, ex_indices, r, excluded, True)
        heap = np.empty(n_out, np.int64)
        _best_of_row(scores[r], secondary, skip, drop_zero, drop_nonfinite, heap, out_ids[r], out_scores[r])


@njit(parallel=True, nogil=True, cache=True)
def top_k_factor_product(U, VT, secondary, ex_indptr, ex_indices, excluded, tile, n_chunks, out_ids, out_scores):
    """:func:`top_k_dense` of the scores ``U @ VT`` without the dense block: tiles of ``tile`` rows
    are dealt to ``n_chunks`` strided chunks; each multiplies its tile (BLAS ``dot``, to be limited
    to one thread by the caller) and ranks the rows while the tile is in cache.  No BLAS threads
    wait beside numba's, and a chunk slowed by another process holds up little of the loop."""
    n_out = out_ids.shape[1]
    n_rows = U.shape[0]
    if n_out == 0:
        return
    n_tiles = (n_rows + tile - 1) // tile
    for c in prange(n_chunks):
        skip = excluded.copy()
        heap = np.empty(n_out, np.int64)
        for t in range(c, n_tiles, n_chunks):
            lo = t * tile
            hi = min(lo + tile, n_rows)
            scores = np.dot(U[lo:hi], VT)
            for r in range(lo, hi):
                _flag_row(skip, ex_indptr, ex_indices, r, excluded, True)
                _best_of_row(scores[r - lo], secondary, skip, False, False, heap, out_ids[r], out_scores[r])
                _flag_row(skip, ex_indptr, ex_indices, r, excluded, False)


@njit(parallel=True, cache=True)
def top_k_candidates(U, V, candidates, secondary, ex_indptr, ex_indices, excluded, out_ids, out_scores):
    """:func:`top_k_dense` of row ``r``'s scores ``U[r] . V[c]`` over its ``candidates[r]`` alone
    (item ids, ``-1`` for none; e.g. an approximate index's): the same skips, order and padding.
    Inputs are trusted (ids in range, shapes matching)."""
    n_out = out_ids.shape[1]
    k = candidates.shape[1]
    if n_out == 0:
        return
    for r in prange(U.shape[0]):
        skip = excluded.copy()
        _flag_row(skip, ex_indptr, ex_indices, r, excluded, True)
        items = np.sort(candidates[r])  # a tie between positions is then one between smaller ids
        scores = np.full(k, -np.inf)
        second = np.zeros(k)
        heap = np.empty(n_out, np.int64)
        size = ZERO
        for j in range(k):
            c = items[j]
            if c < 0 or skip[c] or (j > 0 and c == items[j - 1]):
                continue
            scores[j] = np.dot(U[r], V[c])
            second[j] = secondary[c]
            size = heap_offer(heap, size, j, scores, second)
        heap_sort_best_first(heap, size, scores, second)
        for t in range(size):
            out_ids[r, t] = items[heap[t]]
            out_scores[r, t] = scores[heap[t]]
        for t in range(size, n_out):
            out_ids[r, t] = -1
            out_scores[r, t] = -np.inf


@njit(parallel=True, cache=True)
def top_k_sparse(indptr, indices, data, positive_only, skip_diagonal, out_ids, out_count):
    """Best ``out_ids.shape[1]`` stored entries of every row of a CSR matrix with sorted indices
    (value descending, ties by smaller column), non-zero values only (``positive_only``: > 0);
    ``skip_diagonal`` leaves column ``r`` out of row ``r``.  Writes the columns, best first, and
    their number per row."""
    k = out_ids.shape[1]
    for i in prange(indptr.shape[0] - 1):
        lo = indptr[i]
        hi = indptr[i + 1]
        # heap over positions in the row: sorted indices make "smaller position" = "smaller id"
        key = data[lo:hi]
        tie = np.zeros(hi - lo)
        heap = np.empty(min(k, hi - lo), np.int64)
        size = ZERO
        for p in range(hi - lo):
            v = key[p]
            if v == 0.0 or (positive_only and v < 0.0) or (skip_diagonal and indices[lo + p] == i):
                continue
            size = heap_offer(heap, size, p, key, tie)
        heap_sort_best_first(heap, size, key, tie)
        for t in range(size):
            out_ids[i, t] = indices[lo + heap[t]]
        out_count[i] = size


@njit(cache=True, inline="always")
def scatter_row(r, r_indptr, r_indices, r_data, b_indptr, b_indices, b_data, acc, seen, touched):
    """Add row ``r`` of ``R @ B`` (CSR ``R``, ``B``) into the zeroed accumulator ``acc``, in the order
    of :func:`sparse_dense_product` (bitwise equal sums); the columns first
    touched are appended to ``touched`` (flagged in ``seen``).  Returns their number."""
    n_touched = 0
    for p in range(r_indptr[r], r_indptr[r + 1]):
        j = r_indices[p]
        x = r_data[p]
        for q in range(b_indptr[j], b_indptr[j + 1]):
            i = b_indices[q]
            if not seen[i]:
                seen[i] = True
                touched[n_touched] = i
                n_touched += 1
            acc[i] += x * b_data[q]
    return n_touched


@njit(cache=True, inline="always")
def clear_row(acc, seen, touched, n_touched):
    """Zero what :func:`scatter_row` wrote, in O(touched columns)."""
    for t in range(n_touched):
        acc[touched[t]] = 0.0
        seen[touched[t]] = False


@row_kernel(seconds_per_unit=7.7e-9)
def top_k_sparse_product(
    r_indptr,
    r_indices,
    r_data,
    b_indptr,
    b_indices,
    b_data,
    ex_indptr,
    ex_indices,
    excluded,
    secondary,
    fill,
    n_chunks,
    out_ids,
    out_scores,
):
    """:func:`top_k_dense` (``drop_zero`` and ``drop_nonfinite`` off) of the rows of ``R @ B`` for
    CSR ``R`` and ``B`` with non-negative values, without the dense rows: each row is scattered
    into an accumulator and only its touched columns are ranked; the columns scoring 0 follow in
    the order ``fill`` (every column by ``secondary`` descending, then smaller id; empty: columns
    scoring 0 are left out, as ``drop_zero`` would).  Scores are
    summed in the order of :func:`sparse_dense_product`: bitwise equal.
    Rows are dealt to ``n_chunks`` strided chunks (several per thread: a thread slowed by another
    process on its core holds up less of the loop)."""
    n_rows = r_indptr.shape[0] - 1
    n_cols = excluded.shape[0]
    n_out = out_ids.shape[1]
    for c in prange(n_chunks):
        acc = np.zeros(n_cols)
        seen = np.zeros(n_cols, np.bool_)
        touched = np.empty(n_cols, np.int64)
        skip = excluded.copy()
        heap = np.empty(n_out, np.int64)
        for r in range(c, n_rows, n_chunks):  # strided: heavy rows clustered by id are shared out
            _flag_row(skip, ex_indptr, ex_indices, r, excluded, True)
            n_touched = scatter_row(r, r_indptr, r_indices, r_data, b_indptr, b_indices, b_data, acc, seen, touched)
            size = ZERO
            for t in range(n_touched):
                i = touched[t]
                if acc[i] > 0.0 and not skip[i]:
                    size = heap_offer(heap, size, i, acc, secondary)
            heap_sort_best_first(heap, size, acc, secondary)
            for t in range(size):
                out_ids[r, t] = heap[t]
                out_scores[r, t] = acc[heap[t]]
            pos = 0
            while size < n_out and pos < fill.shape[0]:
                i = fill[pos]
                pos += 1
                if not skip[i] and not acc[i] > 0.0:
                    out_ids[r, size] = i
                    out_scores[r, size] = 0.0
                    size += 1
            for t in range(size, n_out):
                out_ids[r, t] = -1
                out_scores[r, t] = -np.inf
            clear_row(acc, seen, touched, n_touched)
            _flag_row(skip, ex_indptr, ex_indices, r, excluded, False)


# ------------------------------------------------------------------------------ Python helpers
def rank_dense_rows(
    rows_of,
    items,
    n_out,
    n_cols,
    *,
    exclude_self=True,
    drop_zero=True,
    drop_nonfinite=False,
    show_progress=False,
    desc="",
):
    """Best ``n_out`` columns of the dense rows ``rows_of(chunk)`` (one per id of ``chunk``,
    ``n_cols`` columns) for every id of ``items``, in chunks of at most
    :data:`recsys_ltr._memory.BLOCK_BYTES`; ``exclude_self`` leaves column ``items[r]`` out of its own row, ``drop_zero`` and
    ``drop_nonfinite`` as in :func:`top_k_dense`.  Ties by smaller id.  ``show_progress``: a
    tqdm bar (named ``desc``) over the chunks."""
    out_ids = np.empty((items.size, n_out), np.int64)
    out_scores = np.empty((items.size, n_out))
    no_secondary = np.zeros(n_cols)
    excluded = np.zeros(n_cols, dtype=np.bool_)
    step = rows_per_block(8 * n_cols)
    with progress(show_progress, total=items.size, desc=desc, unit="row") as bar:
        for lo in range(0, items.size, step):
            chunk = items[lo : lo + step]
            ex_indptr = (
                np.arange(chunk.size + 1, dtype=np.int32) if exclude_self else np.zeros(chunk.size + 1, np.int32)
            )
            block = np.ascontiguousarray(rows_of(chunk), dtype=np.float64)
            top_k_dense(
                block,
                no_secondary,
                ex_indptr,
                chunk.astype(np.int32),
                excluded,
                drop_zero,
                drop_nonfinite,
                out_ids[lo : lo + step],
                out_scores[lo : lo + step],
            )
            bar.update(chunk.size)
    return out_ids, out_scores


@njit(parallel=True, cache=True)
def _spmm_dense(r_indptr, r_indices, r_data, b_indptr, b_indices, b_data, out):
    for r in prange(r_indptr.shape[0] - 1):
        for p in range(r_indptr[r], r_indptr[r + 1]):
            j = r_indices[p]
            x = r_data[p]
            for q in range(b_indptr[j], b_indptr[j + 1]):
                out[r, b_indices[q]] += x * b_data[q]


def sparse_dense_product(R, B) -> np.ndarray:
    """Dense ``R @ B`` for canonical CSR ``R`` (a block of users) and CSR ``B``, parallel over rows."""
    out = np.zeros((R.shape[0], B.shape[1]))
    _spmm_dense(R.indptr, R.indices, R.data, B.indptr, B.indices, B.data, out)
    return out


@njit(parallel=True, cache=True)
def rows_times_dense(indptr, indices, data, B, out):
    """``out += R @ B`` for the CSR rows ``R`` and the C-ordered dense ``B``, in parallel over rows."""
    for r in prange(indptr.shape[0] - 1):
        for p in range(indptr[r], indptr[r + 1]):
            j = indices[p]
            x = data[p]
            for c in range(B.shape[1]):
                out[r, c] += x * B[j, c]
