"""LightGBM's LambdaMART behind the query-document interface, and blends of query-document rankers.

* :class:`LambdaMART` trains LightGBM's ``lambdarank`` objective (optional dependency:
  ``pip install "recsys-ltr[lightgbm]"``) through :func:`recsys_ltr.ltr.trees.fit_lambdamart`
  and keeps the trees as arrays (:class:`recsys_ltr.ltr.trees.Trees`), so that it takes
  ``fit(X, y, qid)`` / ``predict(X, qid)`` and a saved model predicts without LightGBM.
* :class:`RankBlend` scores ``Σ_m w_m z_m(x)`` where ``z_m`` is member ``m``'s score standardised
  within each query (mean 0, deviation 1; a query on which a member is constant gets 0), so that
  members with different score scales can be mixed; ``fit(..., eval_set=...)`` chooses the
  weights on held-out queries (a grid over the simplex, mean NDCG@k).
"""

from __future__ import annotations

import itertools

import numpy as np
from sklearn.base import clone

from .._io import Persistable
from .._threads import check_num_threads, numba_threads
from .._validation import check_positive_int, check_random_state, check_real
from ..query_metrics import ndcg_at_k
from ._base import QueryRanker, check_query_data
from .trees import TREE_STATE, fit_lambdamart, load_tree_state, predict_trees, set_tree_state

__all__ = ["LambdaMART", "RankBlend", "standardize_per_query"]


def standardize_per_query(scores, offsets):
    """Scores minus their query's mean, divided by the query's standard deviation (0 where a query's
    scores are all equal); query ``j`` owns rows ``offsets[j]:offsets[j + 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> from recsys_ltr.ltr.ensemble import standardize_per_query
    >>> standardize_per_query(np.array([1.0, 3.0, 5.0, 5.0]), offsets=np.array([0, 2, 4]))
    array([-1.,  1.,  0.,  0.])
    """
    sizes = np.diff(offsets)
    mean = np.add.reduceat(scores, offsets[:-1]) / sizes
    centred = scores - np.repeat(mean, sizes)
    std = np.sqrt(np.add.reduceat(centred * centred, offsets[:-1]) / sizes)
    std = np.repeat(std, sizes)
    return np.divide(centred, std, out=np.zeros_like(centred), where=std > 1e-12 * (1 + np.abs(np.repeat(mean, sizes))))


#: the largest label LightGBM's default ``label_gain`` (2**l - 1 for l < 31) covers
_MAX_LABEL = 30


class LambdaMART(Persistable, QueryRanker):
    """LightGBM lambdarank (gradient-boosted trees, LambdaMART) with ``fit(X, y, qid)``.

    Parameters
    ----------
    n_estimators : int >= 1, default=100
        Boosting rounds (trees).
    learning_rate : float > 0, default=0.05
        Shrinkage of every tree.
    num_leaves : int >= 2, default=31
        Leaves per tree.
    min_child_samples : int >= 1, default=20
        Fewest rows in a leaf (LightGBM's ``min_data_in_leaf``).
    bagging_fraction, feature_fraction : float in (0, 1], default=1.0
        Fraction of the rows (resampled every round) and of the features each tree sees.
    num_threads : int, default=1
        LightGBM's and the tree kernel's threads (0: all).
    random_state : int, Generator or None
        Seed of LightGBM.

    Labels must be integers (LightGBM's relevance gains ``2^l - 1``).  ``save(path)`` /
    ``LambdaMART.load(path)`` persist a fitted model (``.npz`` + JSON header; no LightGBM needed to
    load or predict).

    Attributes
    ----------
    trees_ : recsys_ltr.ltr.trees.Trees
        The trained trees as arrays.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X, qid = rng.normal(size=(300, 5)), np.repeat(np.arange(30), 10)  # 30 queries of 10 documents
    >>> y = np.digitize(X @ [1.0, 0.5, 0.0, 0.0, 0.0], [0.5, 1.5])  # graded labels 0, 1, 2
    >>> from recsys_ltr.ltr import LambdaMART
    >>> from recsys_ltr.query_metrics import ndcg_at_k
    >>> model = LambdaMART(n_estimators=20, random_state=0).fit(X[:200], y[:200], qid[:200])  # needs lightgbm
    >>> round(float(np.nanmean(ndcg_at_k(y[200:], model.predict(X[200:], qid[200:]), qid[200:], k=5))), 4)
    0.9831
    """

    _state_attributes = TREE_STATE

    def __init__(
        self,
        n_estimators=100,
        learning_rate=0.05,
        num_leaves=31,
        min_child_samples=20,
        bagging_fraction=1.0,
        feature_fraction=1.0,
        num_threads=1,
        random_state=0,
    ):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.bagging_fraction = bagging_fraction
        self.feature_fraction = feature_fraction
        self.num_threads = num_threads
        self.random_state = random_state

    def _check_params(self):
        check_positive_int(self.n_estimators, "n_estimators")
        check_positive_int(self.num_leaves, "num_leaves", minimum=2)
        check_positive_int(self.min_child_samples, "min_child_samples")
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        for name in ("bagging_fraction", "feature_fraction"):
            check_real(getattr(self, name), name, low=0.0, high=1.0, low_open=True)
        check_num_threads(self.num_threads)
        check_random_state(self.random_state)

    def fit(self, X, y, qid):
        """Train the trees on the queries of ``(X, y, qid)``; returns ``self``."""
        self._check_params()
        X, y, offsets, _ = self._check_fit_data(X, y, qid)
        if np.any(y != np.round(y)) or y.max(initial=0) > _MAX_LABEL:
            raise ValueError(
                f"LambdaMART needs integer relevance labels in [0, {_MAX_LABEL}] (LightGBM's label gains), "
                f"got labels up to {y.max(initial=0):g}"
            )
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        params = {
            "num_iterations": int(self.n_estimators),
            "learning_rate": float(self.learning_rate),
            "num_leaves": int(self.num_leaves),
            "min_data_in_leaf": int(self.min_child_samples),
            "bagging_fraction": float(self.bagging_fraction),
            "bagging_freq": int(self.bagging_fraction < 1.0),
            "feature_fraction": float(self.feature_fraction),
        }
        trees, _ = fit_lambdamart((X, y, np.diff(offsets)), None, params, seed, check_num_threads(self.num_threads))
        set_tree_state(self, trees)
        return self

    def _saved_state(self):
        return {**super()._saved_state(), "n_features_in_": np.array([self.n_features_in_])}

    def _state_names(self):
        return (*TREE_STATE, "n_features_in_")

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        d = state.get("n_features_in_")
        if d is None or d.shape != (1,) or d.dtype.kind not in "iu" or not 1 <= d[0] < 2**31:
            raise ValueError("n_features_in_ must be one positive integer")
        self.n_features_in_ = int(d[0])
        load_tree_state(self, self.n_features_in_)

    def predict(self, X, qid, num_iteration=None) -> np.ndarray:
        """The trees' score of each row (higher = more relevant); ``num_iteration``: score with the
        first trees only (all when ``None``)."""
        X, _ = self._check_predict_data(X, qid)
        trees = self.trees_
        if num_iteration is not None:
            trees = trees._replace(roots=trees.roots[: check_positive_int(num_iteration, "num_iteration")])
        with numba_threads(check_num_threads(self.num_threads)):
            return predict_trees(trees, X)


class RankBlend(Persistable, QueryRanker):
    """Weighted blend of query-document rankers on per-query standardised scores.

    Parameters
    ----------
    estimators : list of estimators
        Members with ``fit(X, y, qid)`` / ``predict(X, qid)``; clones are fitted.  ``save`` needs
        members of :mod:`recsys_ltr.ltr` (any :class:`~recsys_ltr.ltr.QueryRanker` with
        ``save``), each saved in the blend's file.
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
    eval_score_ : float or None  mean NDCG@k of the chosen weights on ``eval_set`` (not saved)

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X, qid = rng.normal(size=(300, 5)), np.repeat(np.arange(30), 10)  # 30 queries of 10 documents
    >>> y = np.digitize(X @ [1.0, 0.5, 0.0, 0.0, 0.0], [0.5, 1.5])  # graded labels 0, 1, 2
    >>> from recsys_ltr.ltr import ListMLE, ListNet, RankBlend
    >>> blend = RankBlend([ListMLE(random_state=0), ListNet(random_state=0)], grid_steps=4)
    >>> blend.fit(X[:200], y[:200], qid[:200], eval_set=(X[200:], y[200:], qid[200:])).weights_
    array([0.75, 0.25])
    """

    _state_attributes = ("weights_",)
    _nested = ("estimators", "estimators_", "member", QueryRanker)

    def __init__(self, estimators, weights=None, grid_steps=10, k=10):
        self.estimators = estimators
        self.weights = weights
        self.grid_steps = grid_steps
        self.k = k

    def fit(self, X, y, qid, eval_set=None):
        """Fit every member on ``(X, y, qid)``; with ``eval_set=(X_val, y_val, qid_val)`` choose the
        weights maximising the mean NDCG@k on it (ties: the first grid point, in lexicographic
        order of the weights of the last members first).  Returns ``self``."""
        self._check_params()
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

    def _check_params(self):
        if not isinstance(self.estimators, (list, tuple)) or len(self.estimators) == 0:
            raise ValueError("estimators must be a non-empty list of rankers")
        bad = [est for est in self.estimators if not (hasattr(est, "fit") and hasattr(est, "predict"))]
        if bad:
            raise TypeError(f"estimators must be rankers with fit(X, y, qid) and predict(X, qid), got {bad[0]!r}")
        check_positive_int(self.grid_steps, "grid_steps")
        check_positive_int(self.k, "k")
        if self.weights is not None:
            self._given_weights()

    def _given_weights(self):
        n = len(self.estimators)
        if self.weights is None:
            return np.full(n, 1.0 / n)
        if isinstance(self.weights, (str, bytes, dict, set)) or not hasattr(self.weights, "__iter__"):
            raise TypeError(f"weights must be a sequence of {n} non-negative numbers or None, got {self.weights!r}")
        w = np.array([check_real(v, "weights") for v in self.weights], dtype=np.float64)
        if w.shape != (n,) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"weights must be {n} non-negative numbers with a positive sum, got {self.weights!r}")
        return w / w.sum()

    def predict(self, X, qid) -> np.ndarray:
        """``Σ_m w_m z_m``: the members' per-query standardised scores, weighted."""
        X, offsets = self._check_predict_data(X, qid)
        Z = np.column_stack([standardize_per_query(est.predict(X, qid), offsets) for est in self.estimators_])
        return Z @ self.weights_

    # ------------------------------------------------------------------ persistence
    def _saved_params(self):
        """Members are saved as ``{"class", "params"}`` with their state under ``member<j>__``
        (the persistence layer's nested estimators)."""
        for est in self.estimators_:
            if not isinstance(est, Persistable):
                raise TypeError(f"cannot save a blend member of type {type(est).__name__}")
        params = super()._saved_params()
        weights = None if params["weights"] is None else [float(w) for w in params["weights"]]
        return {**params, "weights": weights}

    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        n = len(self.estimators)
        w = self.weights_
        if w.shape != (n,) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError(f"weights_ must be {n} non-negative weights summing to 1")
        self._load_nested(state, specs)
        dims = {m.n_features_in_ for m in self.estimators_}
        if len(dims) != 1:
            raise ValueError(f"the members were fitted on different numbers of features {sorted(dims)}")
        self.n_features_in_ = dims.pop()
        self.eval_score_ = None


def _simplex_grid(n, steps):
    """Weight vectors with coordinates in ``{0, 1/steps, ..., 1}`` summing to 1."""
    for head in itertools.product(range(steps + 1), repeat=n - 1):
        if sum(head) <= steps:
            yield np.array([*head, steps - sum(head)], dtype=np.float64) / steps
