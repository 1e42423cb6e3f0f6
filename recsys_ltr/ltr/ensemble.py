"""LightGBM's LambdaMART behind the query-document interface, and blends of query-document rankers.

* :class:`LambdaMART` wraps ``lightgbm.LGBMRanker(objective="lambdarank")`` (optional dependency:
  ``pip install "recsys-ltr[lightgbm]"``) so that it takes ``fit(X, y, qid)`` / ``predict(X, qid)``.
* :class:`RankBlend` scores ``Σ_m w_m z_m(x)`` where ``z_m`` is member ``m``'s score standardised
  within each query (mean 0, deviation 1; a query on which a member is constant gets 0), so that
  members with different score scales can be mixed; ``fit(..., eval_set=...)`` chooses the
  weights on held-out queries (a grid over the simplex, mean NDCG@k).
"""

from __future__ import annotations

import itertools

import numpy as np
from sklearn.base import clone

from .._validation import check_num_threads, check_positive_int, check_random_state, check_real
from ..query_metrics import ndcg_at_k
from ._base import QueryRanker, check_query_data

__all__ = ["LambdaMART", "RankBlend", "standardize_per_query"]


def standardize_per_query(scores, offsets):
    """Scores minus their query's mean, divided by the query's standard deviation (0 where a query's
    scores are all equal); query ``j`` owns rows ``offsets[j]:offsets[j + 1]``."""
    sizes = np.diff(offsets)
    mean = np.add.reduceat(scores, offsets[:-1]) / sizes
    centred = scores - np.repeat(mean, sizes)
    std = np.sqrt(np.add.reduceat(centred * centred, offsets[:-1]) / sizes)
    std = np.repeat(std, sizes)
    return np.divide(centred, std, out=np.zeros_like(centred), where=std > 1e-12 * (1 + np.abs(np.repeat(mean, sizes))))


class LambdaMART(QueryRanker):
    """LightGBM lambdarank (gradient-boosted trees, LambdaMART) with ``fit(X, y, qid)``.

    Parameters are LightGBM's (see ``lightgbm.LGBMRanker``); ``num_threads`` maps to ``n_jobs``
    and ``random_state`` to ``seed``.  Labels must be integers (LightGBM's relevance gains).

    Attributes
    ----------
    booster_ : lightgbm.Booster  the trained trees (``booster_.predict(X, num_iteration=k)``
        scores with the first ``k`` trees)
    n_features_in_ : int
    """

    def __init__(
        self,
        n_estimators=100,
        learning_rate=0.05,
        num_leaves=31,
        min_child_samples=20,
        num_threads=1,
        random_state=None,
    ):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.num_threads = num_threads
        self.random_state = random_state

    def fit(self, X, y, qid):
        """Train the trees on the queries of ``(X, y, qid)``; returns ``self``."""
        try:
            import lightgbm
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError('LambdaMART needs lightgbm: pip install "recsys-ltr[lightgbm]"') from exc
        check_positive_int(self.n_estimators, "n_estimators")
        check_positive_int(self.num_leaves, "num_leaves", minimum=2)
        check_positive_int(self.min_child_samples, "min_child_samples")
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        threads = check_num_threads(self.num_threads)
        X, y, offsets, _ = self._check_fit_data(X, y, qid)
        if np.any(y != np.round(y)):
            raise ValueError("LambdaMART needs integer relevance labels (LightGBM's label gains)")
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        model = lightgbm.LGBMRanker(
            objective="lambdarank",
            n_estimators=int(self.n_estimators),
            learning_rate=float(self.learning_rate),
            num_leaves=int(self.num_leaves),
            min_child_samples=int(self.min_child_samples),
            n_jobs=threads,
            random_state=seed,
            verbose=-1,
        )
        model.fit(X, y.astype(np.int64), group=np.diff(offsets))
        self.booster_ = model.booster_
        return self

    def predict(self, X, qid) -> np.ndarray:
        """The trees' score of each row (higher = more relevant)."""
        X, _ = self._check_predict_data(X, qid)
        return self.booster_.predict(X, num_threads=check_num_threads(self.num_threads))


class RankBlend(QueryRanker):
    """Weighted blend of query-document rankers on per-query standardised scores.

    Parameters
    ----------
    estimators : list of estimators
        Members with ``fit(X, y, qid)`` / ``predict(X, qid)``; clones are fitted.
    weights : sequence of float >= 0 or None, default=None
        Member weights when ``fit`` gets no ``eval_set`` (None: equal weights).
    grid_steps : int >= 1, default=10
        With ``eval_set``, the weights are searched over the simplex points whose coordinates are
        multiples of ``1 / grid_steps``.
    k : int >= 1, default=10
        Cutoff of the NDCG that chooses the weights.

    Attributes
    ----------
    estimators_ : list  the fitted members
    weights_ : ndarray (n_members,)  the weights used (summing to 1)
    eval_score_ : float or None  mean NDCG@k of the chosen weights on ``eval_set``
    """

    def __init__(self, estimators, weights=None, grid_steps=10, k=10):
        self.estimators = estimators
        self.weights = weights
        self.grid_steps = grid_steps
        self.k = k

    def fit(self, X, y, qid, eval_set=None):
        """Fit every member on ``(X, y, qid)``; with ``eval_set=(X_val, y_val, qid_val)`` choose the
        weights maximising the mean NDCG@k on it (ties: the first grid point, in lexicographic
        order of the weights of the last members first).  Returns ``self``."""
        if not isinstance(self.estimators, (list, tuple)) or len(self.estimators) == 0:
            raise ValueError("estimators must be a non-empty list of rankers")
        check_positive_int(self.grid_steps, "grid_steps")
        check_positive_int(self.k, "k")
        self._check_fit_data(X, y, qid)
        self.estimators_ = [clone(est).fit(X, y, qid) for est in self.estimators]
        self.eval_score_ = None
        if eval_set is None:
            self.weights_ = self._given_weights()
            return self
        Xv, yv, qv = eval_set
        Xv, yv, offsets = check_query_data(Xv, yv, qv)
        Z = np.column_stack([standardize_per_query(est.predict(Xv, qv), offsets) for est in self.estimators_])
        best = None
        for w in _simplex_grid(len(self.estimators_), int(self.grid_steps)):
            per_query = ndcg_at_k(yv, Z @ w, qv, int(self.k))
            if np.all(np.isnan(per_query)):
                raise ValueError("eval_set has no query with a relevant document (label > 0)")
            value = float(np.nanmean(per_query))
            if best is None or value > best[0]:
                best = (value, w)
        self.eval_score_, self.weights_ = best
        return self

    def _given_weights(self):
        n = len(self.estimators)
        if self.weights is None:
            return np.full(n, 1.0 / n)
        w = np.array([check_real(v, "weights") for v in self.weights], dtype=np.float64)
        if w.shape != (n,) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"weights must be {n} non-negative numbers with a positive sum, got {self.weights!r}")
        return w / w.sum()

    def predict(self, X, qid) -> np.ndarray:
        """``Σ_m w_m z_m``: the members' per-query standardised scores, weighted."""
        X, offsets = self._check_predict_data(X, qid)
        Z = np.column_stack([standardize_per_query(est.predict(X, qid), offsets) for est in self.estimators_])
        return Z @ self.weights_


def _simplex_grid(n, steps):
    """Weight vectors with coordinates in ``{0, 1/steps, ..., 1}`` summing to 1."""
    for head in itertools.product(range(steps + 1), repeat=n - 1):
        if sum(head) <= steps:
            yield np.array([*head, steps - sum(head)], dtype=np.float64) / steps
