"""The interface shared by the query-document learners: ``fit(X, y, qid)``, ``predict(X, qid)``.

``X`` (n, d) holds one feature row per query-document pair, ``y`` (n,) graded relevance labels
(>= 0, higher is more relevant) and ``qid`` (n,) integer query ids with each query's rows
contiguous (LETOR and LightGBM order).  :func:`check_query_data` validates the three once at the
public boundary; :class:`QueryRanker` adds the fitted-state checks and an NDCG ``score``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..metric_learning._base import check_dense
from ..query_metrics import check_labels, contiguous_query_offsets, ndcg_at_k

__all__ = ["QueryRanker", "check_query_data", "informative_queries"]


def check_query_data(X, y, qid) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Validate query-document rows.

    Parameters
    ----------
    X : array (n, d)  finite real features
    y : array (n,) or None  finite non-negative relevance labels (``None`` at prediction time)
    qid : int array (n,)  query ids, each query's rows contiguous

    Returns
    -------
    X : float64 (n, d)
    y : float64 (n,) or None
    offsets : int64 (n_queries + 1,)  query ``j`` owns rows ``offsets[j]:offsets[j + 1]``

    Examples
    --------
    >>> from recsys_ltr.ltr import check_query_data
    >>> X, y, offsets = check_query_data([[0.1], [0.4], [0.3]], [1, 0, 2], qid=[7, 7, 9])
    >>> offsets  # query 7 owns rows 0:2, query 9 row 2
    array([0, 2, 3])
    """
    X = check_dense(X, "X")
    if np.shape(qid) != (X.shape[0],):
        raise ValueError(f"qid must have shape ({X.shape[0]},), got {np.shape(qid)}")
    offsets = contiguous_query_offsets(qid)
    if y is not None:
        y = check_labels(y, X.shape[0])
    return X, y, offsets


def informative_queries(y, offsets) -> np.ndarray:
    """Indices of the queries with at least two different labels (the others carry no ordering:
    one document, or all documents equally relevant)."""
    lo = np.minimum.reduceat(y, offsets[:-1])
    hi = np.maximum.reduceat(y, offsets[:-1])
    return np.flatnonzero(hi > lo)


class QueryRanker(BaseEstimator):
    """Base of the query-document learners: validation of ``(X, y, qid)`` and an NDCG score.

    Subclasses implement ``fit(X, y, qid)`` (returning ``self``) and ``predict(X, qid)``
    (one score per row, higher = more relevant), and list their fitted attributes in
    ``_state_attributes`` (see :class:`~recsys_ltr._io.Persistable`): the model is fitted when it
    has them all, so a fit that failed half-way leaves an unfitted model.
    """

    _state_attributes: tuple = ()

    def __sklearn_is_fitted__(self):
        return bool(self._state_attributes) and all(hasattr(self, name) for name in self._state_attributes)

    def _start_fit(self, X, y, qid):
        """Validated ``(X, y, offsets)`` of a fit; records the parameters fitted with (``params_``,
        what ``save`` writes) and ``n_features_in_``."""
        X, y, offsets = check_query_data(X, y, qid)
        self.params_ = self.get_params(deep=False)
        self.n_features_in_ = X.shape[1]
        return X, y, offsets

    def _check_fit_data(self, X, y, qid):
        """:meth:`_start_fit` plus ``queries``, the informative queries' indices.  Raises
        ``ValueError`` when no query is informative."""
        X, y, offsets = self._start_fit(X, y, qid)
        queries = informative_queries(y, offsets)
        if queries.size == 0:
            raise ValueError(
                "no query has two documents with different labels: every query has a single "
                "document or all its labels equal, so there is no ordering to learn"
            )
        return X, y, offsets, queries

    def _check_predict_data(self, X, qid):
        """Validated ``(X, offsets)`` of a fitted model (``NotFittedError`` when unfitted)."""
        check_is_fitted(self)
        X, _, offsets = check_query_data(X, None, qid)
        self._check_n_features(X)
        return X, offsets

    def _check_n_features(self, X):
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted on {self.n_features_in_}")

    def score(self, X, y, qid, k: int = 10) -> float:
        """Mean NDCG@k of ``predict(X, qid)`` over the queries with a relevant document."""
        per_query = ndcg_at_k(y, self.predict(X, qid), qid, k)
        if np.all(np.isnan(per_query)):
            raise ValueError("no query has a relevant document (label > 0): NDCG is undefined")
        return float(np.nanmean(per_query))
