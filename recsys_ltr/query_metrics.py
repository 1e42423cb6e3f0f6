"""Per-query ranking metrics for query-document learning to rank: graded NDCG@k and average precision.

Not the recommendation metrics of :mod:`recsys_ltr.metrics`, which rank a user's *candidates*
(the catalogue minus the training positives) against binary held-out positives over the *full*
list (binary gain, no cutoff, ties by popularity).  Here each query ranks its own labelled
documents, gains are graded and NDCG is cut at ``k`` (the LETOR convention, to compare with
published query-document results and LightGBM).

Conventions (LETOR / Järvelin & Kekäläinen 2002):

* gain of a document with graded label ``l`` is ``2**l - 1``; the discount at rank ``i`` (1-based)
  is ``1 / log2(i + 1)``; NDCG@k = DCG@k / ideal DCG@k, with both truncated at ``min(k, n_docs)``;
* a document is *relevant* for average precision when its label is > 0;
* ties in the scores keep the input order (stable sort on the negated score), so results are
  deterministic;
* **queries without any relevant document** (all labels 0) have no defined NDCG or AP: every
  ordering is equally good.  Their per-query value is ``NaN`` and they are left out of every mean
  (:func:`ranking_report` says how many were left out).  Counting them as 0 or 1 would only add
  the same constant to every method.

Rows of one query need not be contiguous: queries are grouped by :func:`query_groups`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._validation import check_positive_int

__all__ = [
    "average_precision",
    "check_labels",
    "contiguous_query_offsets",
    "ndcg_at_k",
    "query_groups",
    "ranking_report",
]


def _check_qid(qid) -> np.ndarray:
    qid = np.asarray(qid)
    if qid.ndim != 1:
        raise ValueError(f"qid must be 1-D, got shape {qid.shape}")
    if qid.size == 0:
        raise ValueError("qid is empty")
    if not np.issubdtype(qid.dtype, np.integer):
        raise TypeError(f"qid must hold integers, got dtype {qid.dtype}")
    return qid


def query_groups(qid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group rows by query id.

    Returns
    -------
    order : int64 array (n_rows,)
        Row indices sorted by query id (stable, so rows keep their order inside a query).
    offsets : int64 array (n_queries + 1,)
        Query ``j`` owns ``order[offsets[j]:offsets[j + 1]]``.
    unique_qid : int64 array (n_queries,)
        The query ids, ascending.

    Examples
    --------
    >>> from recsys_ltr.query_metrics import query_groups
    >>> query_groups([7, 3, 7, 3, 3])
    (array([1, 3, 4, 0, 2]), array([0, 3, 5]), array([3, 7]))
    """
    qid = _check_qid(qid)
    unique_qid, inverse, counts = np.unique(qid, return_inverse=True, return_counts=True)
    order = np.argsort(inverse, kind="stable").astype(np.int64)
    offsets = np.zeros(unique_qid.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return order, offsets, unique_qid.astype(np.int64)


def contiguous_query_offsets(qid) -> np.ndarray:
    """Offsets of the queries of ``qid`` when each query's rows are contiguous (LETOR and
    LightGBM order): query ``j`` owns rows ``offsets[j]:offsets[j + 1]``, queries in order of
    appearance.  Raises ``ValueError`` when a query id appears in more than one run of rows.

    Examples
    --------
    >>> from recsys_ltr.query_metrics import contiguous_query_offsets
    >>> contiguous_query_offsets([7, 7, 3, 3, 3])
    array([0, 2, 5])
    """
    qid = _check_qid(qid)
    starts = np.flatnonzero(qid[1:] != qid[:-1]) + 1
    offsets = np.concatenate([[0], starts, [qid.size]]).astype(np.int64)
    run_ids = qid[offsets[:-1]]
    if np.unique(run_ids).size != run_ids.size:
        ids, counts = np.unique(run_ids, return_counts=True)
        raise ValueError(
            f"qid is not grouped: the rows of query {int(ids[counts > 1][0])} are split into "
            f"{int(counts.max())} separate runs; sort the rows by query (keeping each query's order) first"
        )
    return offsets


def _real_array(a, name: str) -> np.ndarray:
    """``a`` as a float64 array; complex, object and non-numeric dtypes are a ``TypeError``."""
    a = np.asarray(a)
    if np.iscomplexobj(a) or not (np.issubdtype(a.dtype, np.number) or a.dtype.kind == "b"):
        raise TypeError(f"{name} must be real numbers, got dtype {a.dtype}")
    return a.astype(np.float64)


def check_labels(y, n_rows: int) -> np.ndarray:
    """``y`` as float64 graded relevance labels of ``n_rows`` rows (real, finite, >= 0).

    Examples
    --------
    >>> from recsys_ltr.query_metrics import check_labels
    >>> check_labels([0, 2, 1], n_rows=3)
    array([0., 2., 1.])
    """
    y = _real_array(y, "y")
    if y.shape != (n_rows,):
        raise ValueError(f"y must have shape ({n_rows},), got {y.shape}")
    if np.any(~np.isfinite(y)) or np.any(y < 0):
        raise ValueError("y must hold finite non-negative relevance labels")
    return y


def _check_inputs(y, scores, qid):
    scores = _real_array(scores, "scores")
    if scores.ndim != 1:
        raise ValueError(f"scores must be 1-D, got shape {scores.shape}")
    if scores.shape != np.shape(qid):
        raise ValueError(f"shape mismatch: scores {scores.shape}, qid {np.shape(qid)}")
    y = check_labels(y, scores.size)
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    order, offsets, _ = query_groups(qid)
    return y[order], scores[order], offsets


@njit(cache=True)
def _ndcg_one(scores, labels, k):
    """NDCG@k of one query (NaN without relevant document); ``k <= 0`` means no cutoff."""
    n = labels.size
    kk = n if (k <= 0 or k > n) else k
    rank = np.argsort(-scores, kind="mergesort")
    ideal = np.sort(labels)[::-1]
    if ideal[0] <= 0.0:
        return np.nan
    # gains 2^l - 1 scaled by 2^-max(l): the ratio is unchanged and 2^l never overflows
    top = ideal[0]
    floor = 2.0**-top
    dcg = 0.0
    idcg = 0.0
    for i in range(kk):
        disc = 1.0 / np.log2(i + 2.0)
        dcg += (2.0 ** (labels[rank[i]] - top) - floor) * disc
        idcg += (2.0 ** (ideal[i] - top) - floor) * disc
    return dcg / idcg


@njit(cache=True)
def _ap_one(scores, labels):
    """Average precision of one query, relevant = label > 0 (NaN without relevant document)."""
    rank = np.argsort(-scores, kind="mergesort")
    hits = 0
    total = 0.0
    for i in range(labels.size):
        if labels[rank[i]] > 0.0:
            hits += 1
            total += hits / (i + 1.0)
    if hits == 0:
        return np.nan
    return total / hits


@njit(cache=True, parallel=True)
def _per_query(scores, labels, offsets, k, metric):
    n_q = offsets.size - 1
    out = np.empty(n_q)
    for q in prange(n_q):
        s, e = offsets[q], offsets[q + 1]
        if metric == 0:
            out[q] = _ndcg_one(scores[s:e], labels[s:e], k)
        else:
            out[q] = _ap_one(scores[s:e], labels[s:e])
    return out


def ndcg_at_k(y, scores, qid, k: int = 10) -> np.ndarray:
    """Per-query NDCG@k (gain ``2**l - 1``, log2 discount), ordered by ascending query id.

    ``k=None`` means no cutoff.  Queries without a relevant document give ``NaN``.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.query_metrics import ndcg_at_k
    >>> y, qid = [2, 0, 1, 0, 0], [1, 1, 1, 2, 2]  # query 2 has no relevant document
    >>> np.round(ndcg_at_k(y, scores=[0.1, 0.9, 0.5, 0.3, 0.2], qid=qid, k=3), 4)
    array([0.5869,    nan])
    """
    k = None if k is None else check_positive_int(k, "k")
    labels, s, offsets = _check_inputs(y, scores, qid)
    return _per_query(s, labels, offsets, 0 if k is None else int(k), 0)


def average_precision(y, scores, qid) -> np.ndarray:
    """Per-query average precision (relevant = label > 0), ordered by ascending query id.

    Examples
    --------
    >>> from recsys_ltr.query_metrics import average_precision
    >>> average_precision(y=[1, 0, 1], scores=[0.9, 0.8, 0.1], qid=[0, 0, 0])
    array([0.83333333])
    """
    labels, s, offsets = _check_inputs(y, scores, qid)
    return _per_query(s, labels, offsets, 0, 1)


def ranking_report(y, scores, qid, ks=(1, 3, 5, 10)) -> dict:
    """Mean NDCG@k for each ``k`` in ``ks`` and MAP over queries with a relevant document.

    Returns a dict ``{"NDCG@1": ..., ..., "MAP": ..., "n_queries": ..., "n_excluded": ...}``
    where ``n_excluded`` counts the queries without relevant document (left out of the means).

    Examples
    --------
    >>> from recsys_ltr.query_metrics import ranking_report
    >>> report = ranking_report([2, 0, 1, 0, 0], [0.1, 0.9, 0.5, 0.3, 0.2], [1, 1, 1, 2, 2], ks=(1, 3))
    >>> {name: round(value, 4) for name, value in report.items()}
    {'NDCG@1': 0.0, 'NDCG@3': 0.5869, 'MAP': 0.5833, 'n_queries': 1, 'n_excluded': 1}
    """
    ap = average_precision(y, scores, qid)
    valid = ~np.isnan(ap)
    if not valid.any():
        raise ValueError("no query has a relevant document (label > 0): metrics are undefined")
    out = {f"NDCG@{k}": float(np.mean(ndcg_at_k(y, scores, qid, k)[valid])) for k in ks}
    out["MAP"] = float(np.mean(ap[valid]))
    out["n_queries"] = int(valid.sum())
    out["n_excluded"] = int((~valid).sum())
    return out
