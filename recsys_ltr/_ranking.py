"""Numba kernels of the evaluator: ranks of held-out items by counting, and metrics of those ranks.

Inputs are trusted (validated by :mod:`recsys_ltr.metrics`): CSR rows with sorted indices in
``[0, n_items)``, test rows disjoint from train and exclude rows (train and exclude may overlap),
a score block of matching shape.
NaN is the one thing checked here (one vectorised pass per row, inside the parallel loop): rows
holding a NaN score are flagged, so the caller can raise.

Order of items for a user: score descending, then ``tiebreak`` ascending, where ``tiebreak[i]`` is
item ``i``'s position when all items are sorted by (train popularity descending, item id
ascending).  Item ``a`` *precedes* ``b`` when ``s[a] > s[b]``, or ``s[a] == s[b]`` and
``tiebreak[a] < tiebreak[b]``: a strict total order, so every rank is exact.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._parallel import row_kernel
from ._topk import clear_row, scatter_row, sort_ascending, sort_best_first

# Column order of the metric kernel's output; the cutoff metrics follow, CUTOFF_METRICS per cutoff.
BASE_METRICS = ("ADG", "ATOP", "MAP", "NDCG", "AUC", "MRR")
CUTOFF_METRICS = ("REC", "P", "NDCG", "MAP", "HR")


@njit(cache=True, inline="always")
def _precedes(s_a, t_a, s_b, t_b):
    return (s_a > s_b) | ((s_a == s_b) & (t_a < t_b))  # bitwise: no branch


#: Users with at most this many test items are ranked by one vectorised pass per test item;
#: above it, by one binary-search pass over the catalogue (:func:`_count_by_buckets`).
LINEAR_MAX = 64


@njit(cache=True)
def _count_preceding(scores, tiebreak, s, t):
    """Number of items of the whole catalogue preceding the key (s, t)."""
    above = 0
    ties = 0
    for i in range(scores.shape[0]):  # branch-free, vectorised by LLVM
        v = scores[i]
        above += v > s
        ties += v == s
    if ties > 1:  # the key's own item always ties with itself
        for i in range(scores.shape[0]):
            if scores[i] == s and tiebreak[i] < t:
                above += 1
    return above


@njit(cache=True)
def _count_nan(scores):
    nans = 0
    for i in range(scores.shape[0]):
        nans += scores[i] != scores[i]
    return nans


@njit(cache=True, inline="always")
def _is_noncandidate(i, tr_idx, ex_idx, ptr):
    """Whether item ``i`` is in the sorted train or exclude row; ``ptr`` holds the two merge
    positions and advances past ``i`` (items must be queried in ascending order)."""
    hit = False
    if ptr[0] < tr_idx.shape[0] and tr_idx[ptr[0]] == i:
        ptr[0] += 1
        hit = True
    if ptr[1] < ex_idx.shape[0] and ex_idx[ptr[1]] == i:
        ptr[1] += 1
        hit = True
    return hit


@njit(cache=True)
def _bucket(s_sorted, t_sorted, s, t, cnt):
    """``cnt[p] += 1`` for the key (s, t), p = number of the sorted keys preceding it (a branch-free
    binary search): after all keys, sorted key q is preceded by ``cnt[:q + 1].sum()`` of them."""
    base = 0
    size = s_sorted.shape[0]
    while size > 1:
        half = size >> 1
        if _precedes(s_sorted[base + half], t_sorted[base + half], s, t):
            base += half
        size -= half
    base += _precedes(s_sorted[base], t_sorted[base], s, t)
    cnt[base] += 1


@njit(cache=True)
def _count_by_buckets(scores, tiebreak, te_idx, tr_idx, ex_idx, out):
    """Number of candidates preceding each test item, into ``out``, in O(n_items log m).

    The m test items are sorted by precedence; each candidate of the catalogue is located among
    them by binary search, and ``cnt[p]`` counts the candidates preceded by exactly p test items.
    Such a candidate precedes the sorted test items p, p+1, ... (minus itself when it is test
    item p).  Non-candidates are skipped in the same pass by merging the sorted train and
    exclude rows (O(1) per item).  Returns the number of candidates.
    """
    m = te_idx.shape[0]
    perm = np.arange(m)
    sort_best_first(perm, scores[te_idx], -tiebreak[te_idx].astype(np.float64))  # score desc, tiebreak asc
    s_sorted = scores[te_idx[perm]]
    t_sorted = tiebreak[te_idx[perm]]
    s_last, t_last = s_sorted[m - 1], t_sorted[m - 1]
    cnt = np.zeros(m + 1, dtype=np.int64)
    ptr = np.zeros(2, dtype=np.int64)
    n_cand = 0
    for i in range(scores.shape[0]):
        if _is_noncandidate(i, tr_idx, ex_idx, ptr):
            continue
        n_cand += 1
        s = scores[i]
        t = tiebreak[i]
        if _precedes(s_last, t_last, s, t):
            continue  # preceded by every test item: precedes none
        _bucket(s_sorted, t_sorted, s, t, cnt)
    before = -1  # the test item itself falls in its own bucket
    for q in range(m):
        before += cnt[q]
        out[perm[q]] = before
    return n_cand


@njit(cache=True)
def _rank_row(scores, tiebreak, tr_idx, te_idx, ex_idx, ranks_out, linear_max):
    """Ranks of one user's test items among the candidates; returns (n_candidates, saw_nan).

    Non-candidates are the union of the train and exclude rows (an item in both counts once).
    Few test items (m <= ``linear_max``): one vectorised pass over the catalogue per test item,
    then the preceding non-candidates are subtracted, O(n_items m) in all.  Many test items:
    :func:`_count_by_buckets`, which skips the non-candidates in its single pass.
    """
    m = te_idx.shape[0]
    if m > linear_max:
        n_cand = _count_by_buckets(scores, tiebreak, te_idx, tr_idx, ex_idx, ranks_out)
        return n_cand, _count_nan(scores) > 0
    for j in range(m):
        ranks_out[j] = _count_preceding(scores, tiebreak, scores[te_idx[j]], tiebreak[te_idx[j]])
    n_removed = 0
    ptr = np.zeros(2, dtype=np.int64)
    while ptr[0] < tr_idx.shape[0] or ptr[1] < ex_idx.shape[0]:  # merge: each non-candidate once
        a = tr_idx[ptr[0]] if ptr[0] < tr_idx.shape[0] else scores.shape[0]
        b = ex_idx[ptr[1]] if ptr[1] < ex_idx.shape[0] else scores.shape[0]
        item = min(a, b)
        _is_noncandidate(item, tr_idx, ex_idx, ptr)
        n_removed += 1
        s, t = scores[item], tiebreak[item]
        for j in range(m):
            if _precedes(s, t, scores[te_idx[j]], tiebreak[te_idx[j]]):
                ranks_out[j] -= 1
    return scores.shape[0] - n_removed, _count_nan(scores) > 0


@njit(cache=True, parallel=True)
def rank_block(scores, tiebreak, tr_ptr, tr_idx, te_ptr, te_idx, ex_ptr, ex_idx, linear_max):
    """Ranks of every test item of a block of users (rows of ``scores``).

    Returns ``ranks`` aligned with ``te_idx`` (0-based ranks among the user's candidates),
    ``n_candidates`` per row and ``nan_rows`` (True where a score of the row is NaN).
    Rows without test items get ``n_candidates = -1`` (not computed).
    """
    n_rows = scores.shape[0]
    ranks = np.empty(te_idx.shape[0], dtype=np.int64)
    n_cand = np.full(n_rows, -1, dtype=np.int64)
    nan_rows = np.zeros(n_rows, dtype=np.bool_)
    for r in prange(n_rows):
        lo, hi = te_ptr[r], te_ptr[r + 1]
        if hi == lo:
            continue
        n_cand[r], nan_rows[r] = _rank_row(
            scores[r],
            tiebreak,
            tr_idx[tr_ptr[r] : tr_ptr[r + 1]],
            te_idx[lo:hi],
            ex_idx[ex_ptr[r] : ex_ptr[r + 1]],
            ranks[lo:hi],
            linear_max,
        )
    return ranks, n_cand, nan_rows


@njit(cache=True)
def _metric_row(r, n, cutoffs, out):
    """Metrics of one user from the sorted ranks ``r`` of its m test items among n candidates."""
    m = r.shape[0]
    adg = 0.0
    atop = 0.0
    ap = 0.0
    idcg = 0.0
    misordered = 0
    for j in range(m):
        adg += 1.0 / np.log2(r[j] + 2.0)
        idcg += 1.0 / np.log2(j + 2.0)
        atop += 1.0 - r[j] / (n - 1.0) if n > 1 else 1.0
        ap += (j + 1.0) / (r[j] + 1.0)
        misordered += r[j] - j  # irrelevant candidates ranked above the j-th relevant item
    n_irr = n - m
    out[0] = adg / m
    out[1] = atop / m
    out[2] = ap / m
    out[3] = adg / idcg
    out[4] = 1.0 - misordered / (m * n_irr) if n_irr > 0 else 1.0
    out[5] = 1.0 / (r[0] + 1.0)
    nb, nc = len(BASE_METRICS), len(CUTOFF_METRICS)
    for c in range(cutoffs.shape[0]):
        k = cutoffs[c]
        hits = 0  # number of ranks < k
        dcg = 0.0
        apk = 0.0
        while hits < m and r[hits] < k:
            dcg += 1.0 / np.log2(r[hits] + 2.0)
            apk += (hits + 1.0) / (r[hits] + 1.0)
            hits += 1
        ideal = 0.0
        for j in range(min(m, k)):
            ideal += 1.0 / np.log2(j + 2.0)
        out[nb + nc * c] = hits / m
        out[nb + nc * c + 1] = hits / k
        out[nb + nc * c + 2] = dcg / ideal
        out[nb + nc * c + 3] = apk / min(m, k)
        out[nb + nc * c + 4] = 1.0 if hits > 0 else 0.0


@njit(cache=True, parallel=True)
def evaluate_block(scores, tiebreak, tr_ptr, tr_idx, te_ptr, te_idx, ex_ptr, ex_idx, linear_max, cutoffs):
    """Metric table of a block of users, every row having at least one test item.

    Ranks and metrics in one parallel region (one barrier per block).  Returns ``table``
    (n_rows, 6 + 5 * len(cutoffs)) -- columns :data:`BASE_METRICS`, then :data:`CUTOFF_METRICS` per
    cutoff k -- and ``nan_rows`` as in :func:`rank_block`.
    """
    n_rows = scores.shape[0]
    table = np.empty((n_rows, len(BASE_METRICS) + len(CUTOFF_METRICS) * cutoffs.shape[0]))
    nan_rows = np.zeros(n_rows, dtype=np.bool_)
    for r in prange(n_rows):
        lo, hi = te_ptr[r], te_ptr[r + 1]
        ranks = np.empty(hi - lo, dtype=np.int64)
        n_cand, nan_rows[r] = _rank_row(
            scores[r],
            tiebreak,
            tr_idx[tr_ptr[r] : tr_ptr[r + 1]],
            te_idx[lo:hi],
            ex_idx[ex_ptr[r] : ex_ptr[r + 1]],
            ranks,
            linear_max,
        )
        sort_ascending(ranks)
        _metric_row(ranks, n_cand, cutoffs, table[r])
    return table, nan_rows


@njit(cache=True, parallel=True)
def metrics_from_ranks(ranks, te_ptr, n_cand, rows, cutoffs):
    """Metric table (len(rows), 6 + 5 * len(cutoffs)) from the output of :func:`rank_block`.

    ``rows`` lists the rows to score (each with at least one test item); columns as in
    :func:`evaluate_block`.  For callers ranking with :func:`recsys_ltr.metrics.rank_test_items`.
    """
    out = np.empty((rows.shape[0], len(BASE_METRICS) + len(CUTOFF_METRICS) * cutoffs.shape[0]))
    for j in prange(rows.shape[0]):
        r = rows[j]
        sorted_ranks = ranks[te_ptr[r] : te_ptr[r + 1]].copy()
        sort_ascending(sorted_ranks)
        _metric_row(sorted_ranks, n_cand[r], cutoffs, out[j])
    return out


# ------------------------------------------------------------------------------ sparse scores
@njit(cache=True)
def _product_ranks(acc, touched, skip, tiebreak, te, tr, ex):
    """Ascending ranks of the test items ``te`` for the scores ``acc`` of one row of ``R @ B``
    (non-negative: the columns outside ``touched`` score 0), in O((touched + non-candidates) log m).

    ``skip`` flags the non-candidates (``tr`` and ``ex``) and is cleared here.  Positive-score
    candidates are bucketed among the sorted test items as in :func:`_count_by_buckets`.  A test
    item j scoring 0 is also preceded by the zero-score candidates with a smaller tiebreak:
    ``t_j`` items in all have one, minus those scoring > 0 and the zero-score non-candidates.
    """
    m = te.shape[0]
    perm = np.empty(m, np.int64)
    s_te = np.empty(m)
    neg_t = np.empty(m)  # float64 keys, as recommend's: the sort compiles once
    for q in range(m):  # loops, not fancy indexing and array expressions: several times faster to compile
        perm[q] = q
        s_te[q] = acc[te[q]]
        neg_t[q] = -tiebreak[te[q]]
    sort_best_first(perm, s_te, neg_t)
    s_sorted = np.empty(m)
    t_sorted = np.empty(m, np.int64)
    for q in range(m):
        s_sorted[q] = s_te[perm[q]]
        t_sorted[q] = tiebreak[te[perm[q]]]
    cnt = np.zeros(m + 1, np.int64)
    for i in touched:
        if acc[i] > 0.0 and not skip[i]:
            _bucket(s_sorted, t_sorted, acc[i], tiebreak[i], cnt)
    q0 = 0  # test items scoring > 0 come first
    while q0 < m and s_sorted[q0] > 0.0:
        q0 += 1
    zero_s = np.zeros(m - q0)
    zero_t = t_sorted[q0:]
    below = np.zeros(m - q0 + 1, np.int64)  # items with a smaller tiebreak than a zero-score test item
    if q0 < m:
        for i in touched:
            if acc[i] > 0.0:
                _bucket(zero_s, zero_t, 0.0, tiebreak[i], below)
    for items in (tr, ex):
        for i in items:
            if skip[i]:  # each non-candidate once (train and exclude may overlap)
                skip[i] = False
                if q0 < m and not acc[i] > 0.0:
                    _bucket(zero_s, zero_t, 0.0, tiebreak[i], below)
    ranks = np.empty(m, np.int64)
    before = 0
    for q in range(m):
        before += cnt[q]
        ranks[q] = before - 1 if q < q0 else before
    smaller = 0
    for q in range(q0, m):
        smaller += below[q - q0]
        ranks[q] += t_sorted[q] - smaller
    return ranks


@row_kernel(seconds_per_unit=4.9e-9)
def evaluate_product_block(
    r_indptr, r_indices, r_data, b_indptr, b_indices, b_data, tiebreak, tr_ptr, tr_idx, te_ptr, te_idx, ex_ptr, ex_idx,
    cutoffs, n_chunks,
):  # fmt: skip
    """:func:`evaluate_block` for the scores ``R @ B`` (CSR, non-negative values) without dense rows:
    each row is scattered into an accumulator and only its touched columns, the non-candidates and
    the test items are visited.  Same sums as the dense product, hence the same table bit for bit.
    Rows are dealt to ``n_chunks`` strided chunks, each with its own O(n_items) scratch."""
    n_rows = r_indptr.shape[0] - 1
    n = tiebreak.shape[0]
    table = np.empty((n_rows, len(BASE_METRICS) + len(CUTOFF_METRICS) * cutoffs.shape[0]))
    for c in prange(n_chunks):
        acc = np.zeros(n)
        seen = np.zeros(n, np.bool_)
        skip = np.zeros(n, np.bool_)
        touched = np.empty(n, np.int64)
        for r in range(c, n_rows, n_chunks):
            tr = tr_idx[tr_ptr[r] : tr_ptr[r + 1]]
            ex = ex_idx[ex_ptr[r] : ex_ptr[r + 1]]
            n_non = 0
            for items in (tr, ex):
                for i in items:
                    n_non += not skip[i]
                    skip[i] = True
            n_touched = scatter_row(r, r_indptr, r_indices, r_data, b_indptr, b_indices, b_data, acc, seen, touched)
            te = te_idx[te_ptr[r] : te_ptr[r + 1]]
            ranks = _product_ranks(acc, touched[:n_touched], skip, tiebreak, te, tr, ex)
            clear_row(acc, seen, touched, n_touched)
            _metric_row(ranks, n - n_non, cutoffs, table[r])
    return table
