"""LambdaMART trees (LightGBM's ``lambdarank`` objective) as plain arrays.

:func:`fit_lambdamart` trains by ``lightgbm.train`` (optional dependency, ``pip install
"recsys-ltr[lightgbm]"``) on rows grouped per query, with early stopping on NDCG@10 of validation
queries when given; the fitted trees are copied into plain arrays (:class:`Trees`) evaluated by a
numba kernel: a saved model needs no LightGBM to predict, and a file's trees are checked like any
other array (every child index in range, every split on an existing feature) before they are used.
Used by :class:`~recsys_ltr.ltr.LambdaMART` and by FEBR's re-ranker (:class:`~recsys_ltr.febr.FEBR`,
``scorer="lambdamart"``).
"""

from __future__ import annotations

import difflib
import json
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .._validation import check_positive_int

__all__ = [
    "DEFAULTS",
    "TREE_STATE",
    "Trees",
    "check_lambdamart_params",
    "fit_lambdamart",
    "load_tree_state",
    "predict_trees",
    "set_tree_state",
]

#: LightGBM settings under every LambdaMART fit (the ``params`` of :func:`fit_lambdamart` override them).
DEFAULTS = {
    "objective": "lambdarank",
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_data_in_leaf": 20,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "feature_fraction": 0.8,
    "eval_at": [10],
    "verbosity": -1,
}
_ROUNDS = 500  # boosting rounds at most (early stopping after 50 without progress)
_ROUND_ALIASES = (
    "num_iterations",
    "num_iteration",
    "n_iter",
    "num_tree",
    "num_trees",
    "num_round",
    "num_rounds",
    "nrounds",
    "num_boost_round",
    "n_estimators",
    "max_iter",
)

_DTYPES = (np.int32, np.float64, np.int32, np.int32, np.float64, np.int32)


class Trees(NamedTuple):
    """Regression trees in arrays: node ``j`` of the forest splits on ``feature[j]`` at
    ``threshold[j]`` (``x <= threshold``: ``left[j]``, else ``right[j]``; children are global node
    ids) or, when ``feature[j] == -1``, is a leaf worth ``value[j]``; ``roots`` lists each tree's
    root.  The prediction is the sum of the leaves reached."""

    feature: np.ndarray  #: int32
    threshold: np.ndarray  #: float64
    left: np.ndarray  #: int32
    right: np.ndarray  #: int32
    value: np.ndarray  #: float64
    roots: np.ndarray  #: int32

    @classmethod
    def from_arrays(cls, arrays, n_features: int) -> Trees:
        """Checked trees from six loaded arrays (integers checked to fit int32 before the cast)."""
        arrays = [np.asarray(a) for a in arrays]
        for a, dtype in zip(arrays, _DTYPES):
            if np.dtype(dtype).kind == "i" and (a.dtype.kind not in "iu" or (a.size and np.abs(a).max() >= 2**31)):
                raise ValueError("tree node ids and features must be 32-bit integers")
        return cls(*(a.astype(dtype) for a, dtype in zip(arrays, _DTYPES))).check(n_features)

    def check(self, n_features: int) -> Trees:
        """Raise ``ValueError`` unless the arrays form valid trees over ``n_features`` features."""
        n = self.feature.shape[0]
        arrays = (self.feature, self.threshold, self.left, self.right, self.value)
        if any(a.ndim != 1 or a.shape[0] != n for a in arrays) or self.roots.ndim != 1:
            raise ValueError("tree arrays must be 1-D and of one length")
        if not (np.all(np.isfinite(self.threshold)) and np.all(np.isfinite(self.value))):
            raise ValueError("tree thresholds and values must be finite")
        internal = self.feature >= 0
        if np.any(self.feature < -1) or np.any(self.feature >= n_features):
            raise ValueError(f"tree splits must use features in [0, {n_features})")
        children = np.concatenate([self.left[internal], self.right[internal], self.roots])
        if children.size and (children.min() < 0 or children.max() >= n):
            raise ValueError("tree children and roots must be node ids of the forest")
        # children come after their parent (depth-first numbering): no cycles, every walk ends
        ids = np.flatnonzero(internal)
        if np.any(self.left[internal] <= ids) or np.any(self.right[internal] <= ids):
            raise ValueError("tree children must follow their parent")
        return self


@njit(parallel=True, cache=True)
def _predict(X, feature, threshold, left, right, value, roots):
    out = np.zeros(X.shape[0])
    for r in prange(X.shape[0]):
        total = 0.0
        for t in range(roots.shape[0]):
            j = roots[t]
            while feature[j] >= 0:
                j = left[j] if X[r, feature[j]] <= threshold[j] else right[j]
            total += value[j]
        out[r] = total
    return out


#: The fitted attributes that save a model's :class:`Trees`, one per field (``trees_feature_`` ...).
TREE_STATE = tuple(f"trees_{name}_" for name in Trees._fields)


def set_tree_state(owner, trees: Trees | None) -> None:
    """``owner.trees_`` and the arrays :data:`TREE_STATE` that save it (all ``None`` without trees)."""
    owner.trees_ = trees
    for name, value in zip(TREE_STATE, trees if trees is not None else (None,) * len(TREE_STATE)):
        setattr(owner, name, value)


def load_tree_state(owner, n_features: int) -> None:
    """``owner.trees_`` rebuilt and checked (:meth:`Trees.from_arrays`) from the loaded arrays
    :data:`TREE_STATE` (``None`` when the file holds none of them; some only: ``ValueError``)."""
    arrays = [getattr(owner, name, None) for name in TREE_STATE]
    if all(a is None for a in arrays):
        set_tree_state(owner, None)
    elif any(a is None for a in arrays):
        raise ValueError("the LambdaMART trees are incomplete")
    else:
        set_tree_state(owner, Trees.from_arrays(arrays, n_features))


def predict_trees(trees: Trees, X) -> np.ndarray:
    """Sum of the leaves reached by every row of the float64 matrix ``X`` (checked trees)."""
    return _predict(np.ascontiguousarray(X, dtype=np.float64), *trees)


def _flatten(booster) -> Trees:
    """The trees of a LightGBM booster as :class:`Trees` (numerical ``<=`` splits only)."""
    feature, threshold, left, right, value, roots = [], [], [], [], [], []

    def visit(node):
        j = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        value.append(0.0)
        if "leaf_value" in node:
            value[j] = float(node["leaf_value"])
            return j
        if node.get("decision_type", "<=") != "<=":
            raise ValueError(f"unsupported LightGBM split {node.get('decision_type')!r}")
        feature[j] = int(node["split_feature"])
        threshold[j] = float(node["threshold"])
        left[j] = visit(node["left_child"])
        right[j] = visit(node["right_child"])
        return j

    for tree in booster.dump_model()["tree_info"]:
        roots.append(visit(tree["tree_structure"]))
    as32 = lambda a: np.asarray(a, dtype=np.int32)  # noqa: E731
    return Trees(as32(feature), np.asarray(threshold), as32(left), as32(right), np.asarray(value), as32(roots))


def check_lambdamart_params(params, name="lambdamart_params") -> None:
    """Refuse keys of ``params`` that are not LightGBM parameters (LightGBM itself only logs
    "Unknown parameter" and trains without them), with the closest names.  Without LightGBM, or
    with a LightGBM whose parameter table cannot be read, :func:`fit_lambdamart` is the check."""
    try:
        from lightgbm.basic import _ConfigAliases  # LightGBM's table of parameters and their aliases

        table = _ConfigAliases._get_all_param_aliases()
    except (ImportError, AttributeError):
        return
    known = set(table).union(*map(set, table.values()))
    unknown = sorted(str(k) for k in params if k not in known)
    if unknown:
        hints = {k: difflib.get_close_matches(k, known, n=2) for k in unknown}
        said = "; ".join(
            f"{k!r} (did you mean {' or '.join(map(repr, h))}?)" if h else repr(k) for k, h in hints.items()
        )
        raise ValueError(f"{name}: not LightGBM parameters: {said}")


def fit_lambdamart(train, valid, params, random_state, num_threads):
    """Train LightGBM's LambdaMART on ``train = (phi, label, group sizes)`` (rows grouped per user)
    with early stopping on ``valid`` (same form, or ``None``: all rounds); ``params`` override
    :data:`DEFAULTS` (``num_iterations`` or an alias: the rounds, default 500).  Returns ``(trees, rounds)``."""
    try:
        import lightgbm  # the optional extra recsys-ltr[lightgbm]
    except ImportError as exc:
        raise ImportError(
            'LambdaMART needs LightGBM: pip install "recsys-ltr[lightgbm]" (or pip install lightgbm)'
        ) from exc
    check_lambdamart_params(params or {})
    settings = {**DEFAULTS, **(params or {})}
    rounds = _ROUNDS
    for alias in _ROUND_ALIASES:  # LightGBM's names of the number of rounds
        rounds = check_positive_int(settings.pop(alias, rounds), f"lambdamart_params[{alias!r}]")
    settings.update(seed=random_state, num_threads=num_threads, deterministic=True, force_row_wise=True)

    def dataset(part, reference=None):
        phi, label, groups = part
        return lightgbm.Dataset(phi, label.astype(np.int32), group=groups, reference=reference, free_raw_data=True)

    train_set = dataset(train)
    fit_args = {}
    if valid is not None and valid[1].any():
        fit_args = {
            "valid_sets": [dataset(valid, train_set)],
            "callbacks": [lightgbm.early_stopping(50, first_metric_only=True, verbose=False)],
        }
    try:
        booster = lightgbm.train(settings, train_set, num_boost_round=rounds, **fit_args)
    except lightgbm.basic.LightGBMError as exc:  # our DEFAULTS are valid: the user's settings are not
        raise ValueError(f"LightGBM refused lambdamart_params={params!r}: {exc}") from None
    rounds = booster.best_iteration or booster.current_iteration()
    try:
        if rounds < booster.current_iteration():
            booster = lightgbm.Booster(model_str=booster.model_to_string(num_iteration=rounds))
        trees = _flatten(booster)
    except json.JSONDecodeError:  # LightGBM dumps an infinite or NaN leaf as bare inf/nan: not JSON
        trees = None
    if trees is None or not (np.all(np.isfinite(trees.value)) and np.all(np.isfinite(trees.threshold))):
        raise FloatingPointError(
            f"LambdaMART diverged: LightGBM's trees hold infinite or NaN leaf values (learning_rate="
            f"{settings.get('learning_rate')!r}); lower the learning rate"
        )
    return trees, int(rounds)
