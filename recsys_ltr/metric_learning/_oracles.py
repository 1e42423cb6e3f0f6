"""Separation oracles of MLR: the most violated ranking of each query (McFee & Lanckriet 2010, sec. 4).

For a query ``q`` with relevant set ``X+`` (``p`` points) and irrelevant set ``X-`` (``N`` points),
the partial-order feature map (Joachims 2005; McFee Eq. 3-4) with ``φ(q, x) = -(q - x)(q - x)ᵀ``
gives ``<W, ψ(q, y)> = Σ_{i in X+, j in X-} y_ij (d_j - d_i) / (p N)``, ``d_x = ||q - x||²_W``.
The oracle returns ``y' = argmax_y Δ(y_q, y) + <W, ψ(q, y)>`` (McFee Eq. 2), i.e. the ranking of
largest violation ``Δ(y_q, y) - <W, ψ(q, y_q) - ψ(q, y)>``.

Every loss here is invariant to reordering within ``X+`` or within ``X-``, so ``y'`` keeps each
set sorted by distance (Yue et al. 2007) and is an *interleaving*, fixed by ``c_i``, the number of
irrelevant points ranked before the ``i``-th nearest relevant point (``c`` non-decreasing, in
``[0, N]``).  With the irrelevant distances sorted, ``d_(1) <= ... <= d_(N)``, the objective is
separable over the relevant points::

    Σ_i ℓ_i(c_i) + (2 / (p N)) Σ_i Σ_{j <= c_i} (d_i - d_(j))     + const,

where ``ℓ_i`` is the loss term of the ``i``-th relevant point at position ``i + c_i`` (1-based):

* AUC: ``ℓ_i = c / (p N)``; every pair decides alone, ``c_i = #{j : d_(j) < d_i + 1/2}``
  (Joachims 2005), ``O(p + N)`` after sorting.
* MAP: ``ℓ_i = -(i / (i + c)) / p``;  MRR: ``ℓ_1 = -1 / (1 + c)``, none for ``i > 1``;
  P@k: ``ℓ_i = -[i + c <= k] / k``;  NDCG@k: ``ℓ_i = -D(i + c) / IDCG``.

These four are maximised exactly by one dynamic programme over ``i`` with running prefix maxima
over ``c`` (the monotone-interleaving DP in the spirit of Yue et al. 2007 and Chakrabarti et al.
2008), restricted to the ``K`` relevant points that carry a loss term (``K = p`` for MAP, ``1`` for
MRR, ``min(p, k)`` for P@k and NDCG); the others take their unconstrained optimum
``max(c0_i, c_K)`` (``c0_i = #{j : d_(j) < d_i}``), summed for every ``c_K`` in ``O(p + N)``.
Cost per query: ``O(K N + (p + N) log(p + N))``, i.e. ``O(p N)`` for MAP as Yue et al.'s greedy
oracle, ``O(k N)`` for P@k / NDCG and linear for MRR.

Losses are ``Δ(y_q, y) = Score(y_q) - Score(y)``.  McFee's paper writes ``1 - Score(y)``, which
is the same when the perfect ranking scores 1; for P@k with ``k > p`` it scores ``p / k`` and the
difference keeps ``Δ(y_q, y_q) = 0``.  NDCG uses McFee's discount ``D(1) = 1``,
``D(i) = 1 / log2(i)`` for ``2 <= i <= k``, ``0`` beyond, normalised by the ideal DCG
``Σ_{i <= min(p, k)} D(i)`` (McFee's printed normaliser ``Σ_{i <= k} D(i)`` gives the perfect
ranking a score below 1 when ``p < k``; with Δ taken as a difference the two are proportional).

The coefficients returned for ``Ψ_q = ψ(q, y_q) - ψ(q, y') = Σ_x w_x φ(q, x)`` are
``w_i = 2 c_i / (p N)`` for the ``i``-th relevant point and ``w_j = -2 a_j / (p N)`` for the
``j``-th irrelevant one, ``a_j`` the number of relevant points ranked after it.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["LOSSES", "most_violated_ranking", "oracle_block", "ranking_score"]

LOSSES = ("auc", "map", "mrr", "prec@k", "ndcg")
_AUC, _MAP, _MRR, _PAK, _NDCG = range(5)


@njit(cache=True)
def _discount(pos, k):
    """McFee's NDCG discount at 1-based position ``pos``."""
    if pos == 1:
        return 1.0
    if pos <= k:
        return 1.0 / np.log2(pos)
    return 0.0


@njit(cache=True)
def _ideal_dcg(p, k):
    total = 0.0
    for pos in range(1, min(p, k) + 1):
        total += _discount(pos, k)
    return total


@njit(cache=True)
def _loss_term(code, i, c, p, k, idcg):
    """``ℓ_i(c)`` for the ``i``-th relevant point (0-based) with ``c`` irrelevant points before it."""
    pos = i + 1 + c
    if code == _MAP:
        return -(i + 1.0) / pos / p
    if code == _MRR:
        return -1.0 / pos if i == 0 else 0.0
    if code == _PAK:
        return -1.0 / k if pos <= k else 0.0
    return -_discount(pos, k) / idcg  # NDCG


@njit(cache=True)
def _n_loss_terms(code, p, k):
    if code == _MAP:
        return p
    if code == _MRR:
        return 1
    return min(p, k)


@njit(cache=True)
def ranking_score(code, c, p, n_irr, k):
    """Score of the interleaving ``c`` (AUC, AP, RR, P@k or NDCG@k; 1 = perfect when attainable)."""
    if code == _AUC:
        return 1.0 - np.sum(c) / (p * n_irr)
    idcg = _ideal_dcg(p, k) if code == _NDCG else 1.0
    total = 0.0
    for i in range(p):
        total -= _loss_term(code, i, c[i], p, k, idcg)
    return total


@njit(cache=True)
def _auc_interleaving(dr, di):
    c = np.empty(dr.size, dtype=np.int64)
    j = 0
    for i in range(dr.size):
        while j < di.size and di[j] < dr[i] + 0.5:
            j += 1
        c[i] = j
    return c


@njit(cache=True)
def _dp_interleaving(code, dr, di, k):
    """Exact maximiser of ``Σ_i ℓ_i(c_i) + (2/(pN)) Σ_i Σ_{j<=c_i} (d_i - d_(j))`` (module docstring)."""
    p, n = dr.size, di.size
    scale = 2.0 / (p * n)
    cum = np.zeros(n + 1)
    for j in range(n):
        cum[j + 1] = cum[j] + di[j]
    c0 = np.searchsorted(di, dr)  # unconstrained optimum of the distance part
    K = _n_loss_terms(code, p, k)
    idcg = _ideal_dcg(p, k) if code == _NDCG else 1.0
    ptr = np.empty((K, n + 1), dtype=np.int64)
    F = np.empty(n + 1)
    prev = np.zeros(n + 1)  # max over c' <= c of the previous stage
    for i in range(K):
        best, arg = -np.inf, 0
        for c in range(n + 1):
            F[c] = _loss_term(code, i, c, p, k, idcg) + scale * (c * dr[i] - cum[c]) + prev[c]
            if F[c] > best:
                best, arg = F[c], c
            ptr[i, c] = arg
        for c in range(n + 1):
            prev[c] = F[ptr[i, c]]
    # tail: relevant points K.. take max(c0_i, c_K); T(c) = their total for c_K = c
    tail_fixed = 0.0
    for i in range(K, p):
        tail_fixed += scale * (c0[i] * dr[i] - cum[c0[i]])
    best, c_last = -np.inf, 0
    t, cnt, sd, fixed_done = K, 0, 0.0, 0.0
    for c in range(n + 1):
        while t < p and c0[t] < c:  # tail points whose optimum is now below c are clamped to c
            cnt += 1
            sd += dr[t]
            fixed_done += scale * (c0[t] * dr[t] - cum[c0[t]])
            t += 1
        value = F[c] + tail_fixed - fixed_done + scale * (c * sd - cnt * cum[c])
        if value > best:
            best, c_last = value, c
    c_out = np.empty(p, dtype=np.int64)
    c_out[K - 1] = c_last
    for i in range(K - 1, 0, -1):
        c_out[i - 1] = ptr[i - 1, c_out[i]]
    for i in range(K, p):
        c_out[i] = max(c0[i], c_last)
    return c_out


@njit(cache=True)
def _interleaving(code, dr, di, k):
    if code == _AUC:
        return _auc_interleaving(dr, di)
    return _dp_interleaving(code, dr, di, k)


@njit(cache=True)
def _query_weights(c, n_irr):
    """``w`` of the sorted relevant (``2 c_i / (pN)``) and irrelevant (``-2 a_j / (pN)``) points."""
    p = c.size
    scale = 2.0 / (p * n_irr)
    w_rel = scale * c.astype(np.float64)
    w_irr = np.empty(n_irr)
    i = 0
    for j in range(n_irr):
        while i < p and c[i] <= j:  # relevant points ranked before irrelevant j
            i += 1
        w_irr[j] = -scale * (p - i)
    return w_rel, w_irr


@njit(parallel=True, cache=True)
def oracle_block(D, q0, rel_ptr, rel_idx, irr_ptr, irr_idx, explicit_irr, code, k, weights, delta):
    """Most violated ranking of queries ``q0 .. q0 + b - 1`` from their squared distances ``D (b, n)``.

    Relevant sets are CSR rows ``rel_ptr/rel_idx``; irrelevant sets the rows of ``irr_ptr/irr_idx``
    when ``explicit_irr``, else every other point.  Writes row ``t`` of ``weights (b, n)``
    (coefficients of ``φ(q, x)`` in ``Ψ_q``) and ``delta[t] = Δ(y_q, y')``.
    """
    b, n = D.shape
    for t in prange(b):
        q = q0 + t
        rel = rel_idx[rel_ptr[q] : rel_ptr[q + 1]]
        if explicit_irr:
            irr = irr_idx[irr_ptr[q] : irr_ptr[q + 1]]
        else:
            mark = np.zeros(n, dtype=np.bool_)
            mark[q] = True
            for x in rel:
                mark[x] = True
            irr = np.flatnonzero(~mark)
        dr_all = np.empty(rel.size)
        for a in range(rel.size):
            dr_all[a] = D[t, rel[a]]
        di_all = np.empty(irr.size)
        for a in range(irr.size):
            di_all[a] = D[t, irr[a]]
        order_r = np.argsort(dr_all, kind="mergesort")
        order_i = np.argsort(di_all, kind="mergesort")
        c = _interleaving(code, dr_all[order_r], di_all[order_i], k)
        w_rel, w_irr = _query_weights(c, irr.size)
        for x in range(n):
            weights[t, x] = 0.0
        for a in range(rel.size):
            weights[t, rel[order_r[a]]] = w_rel[a]
        for a in range(irr.size):
            weights[t, irr[order_i[a]]] = w_irr[a]
        delta[t] = ranking_score(code, np.zeros(rel.size, dtype=np.int64), rel.size, irr.size, k) - ranking_score(
            code, c, rel.size, irr.size, k
        )


def most_violated_ranking(d_rel, d_irr, loss, k=10):
    """The oracle on one query, for inspection and tests.

    Parameters
    ----------
    d_rel, d_irr : arrays
        Squared learned distances from the query to its relevant and irrelevant points.
    loss : {"auc", "map", "mrr", "prec@k", "ndcg"}
    k : int
        Cut-off of ``prec@k`` and ``ndcg``.

    Returns
    -------
    order : int array (p + N,)
        The ranking ``y'``: candidate ids from nearest-ranked to last, relevant points numbered
        ``0 .. p-1`` and irrelevant ones ``p .. p+N-1`` in the order given.
    delta : float
        ``Δ(y_q, y')``.
    violation : float
        ``Δ(y_q, y') - <W, ψ(q, y_q) - ψ(q, y')>``.
    """
    d_rel, d_irr = np.asarray(d_rel, dtype=np.float64), np.asarray(d_irr, dtype=np.float64)
    code = LOSSES.index(loss)
    p, n = d_rel.size, d_irr.size
    order_r, order_i = np.argsort(d_rel, kind="mergesort"), np.argsort(d_irr, kind="mergesort")
    c = _interleaving(code, d_rel[order_r], d_irr[order_i], k)
    w_rel, w_irr = _query_weights(c, n)
    delta = ranking_score(code, np.zeros(p, dtype=np.int64), p, n, k) - ranking_score(code, c, p, n, k)
    margin = -(w_rel @ d_rel[order_r] + w_irr @ d_irr[order_i])  # <W, Ψ_q> = -Σ w_x d_x
    order, j = [], 0
    for i in range(p):
        while j < c[i]:
            order.append(p + order_i[j])
            j += 1
        order.append(order_r[i])
    order.extend(p + order_i[j:])
    return np.array(order, dtype=np.int64), float(delta), float(delta - margin)
