"""FEBR: learning to rank on features extracted from the feedback matrix (dissertation sec. 4.5-4.6).

A FEBR model scores a pair by a learnt function of its features, ``f(u, i) = theta . (phi(u, i) -
mean) / scale``, trained for ADG by OPT-ADG (Eq. 4.7-4.10, Alg. 4.2) through the shared engine
:class:`recsys_ltr.warp.WarpSampler`::

    (1/|U|) sum_u sum_{i+ in L_u, v in V(u, i+)} C(|V|) (f(u, v) - f(u, i+) + 1) / (|L_u| |V|)
        + lam ||theta||^2,        C(k) = 1 - 1 / log2(k + 2)   (Eq. 4.8)

``u`` uniform, ``i+`` uniform in the labels ``L_u``, negatives uniform among the non-labels until
one violates the margin or ``beta_u = max(1, floor(N_u / gamma))`` draws are spent, then a step on
``C(floor(N_u / n_s)) (f(u, v) - f(u, i+) + 1) + lam ||theta||^2`` (``n_s`` draws spent).

Features, two families:

* **stacked** (default): the scores of fitted base recommenders -- raw and standardised within the
  user -- with item popularity and user activity (:mod:`recsys_ltr.febr.stacking`).  Training is
  leak-free: a training label must not be among the data its features were computed from, or a
  base that memorises its training positives would look perfect.  Each user's positives are split
  into a feature part ``F`` and labels ``L`` (``holdout``); the bases that make the training
  features are fitted on ``F``, the pairs are the candidate pools of :func:`~recsys_ltr.febr.
  stacking.build_pool` (every base's top candidates, the labels, a few random items: negatives are
  the pool's non-labels), and at prediction the bases are refitted on all of ``X``.  The labels
  are drawn as the evaluation protocol draws its held-out items (``label_exclude_top`` for the
  novelty protocol).  ``theta`` starts at the best single base on validation and early stopping
  keeps the best validation ADG, so the model never ends below that base on validation;
  ``scorer="lambdamart"`` re-ranks the pools' head with LambdaMART (:mod:`recsys_ltr.febr.rerank`).
* **the dissertation's** (``bases=None``): the aggregates of an affinity's active items / users
  (:mod:`recsys_ltr.febr.features`), z-scored over all pairs of at most 1000 evenly spaced users;
  with ``holdout = h > 0`` the affinity is rebuilt on ``F`` and the items of ``F`` are
  non-violating (``-inf``, counted as draws as in LightFM's sampler, so ``N_u = n - |L_u|``); with
  ``h = 0``, the dissertation's training on ``X`` itself.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from sklearn.base import clone

from .._io import _REGISTRY
from .._progress import progress
from .._validation import (
    check_feedback,
    check_ids,
    check_num_threads,
    check_positive_int,
    check_real,
    check_same_shape,
    check_seed,
)
from ..metrics import evaluate_checked
from ..models.base import Recommender
from ..neighbors.affinity import Affinity, kunn_weights
from ..neighbors.knn import _knn_index, _knn_query, check_k
from ..split import eligible_positives, holdout_checked, kfold_checked
from ..warp import WarpSampler
from .bases import fit_base, resolve_bases, reuse_or_fit
from .features import (
    _W,
    AGGREGATORS,
    SIDES,
    FeatureExtractor,
    _has,
    build_affinities,
    finish,
    pair_aggregates,
    pair_features,
)
from .rerank import SETTINGS, Trees, fit_lambdamart, predict_trees
from .stacking import (
    BaseFeatures,
    build_pool,
    concatenate_pools,
    context_statistics,
    feature_names,
    heads,
    n_features,
    pool_relevance,
    sample_users,
    z_column,
)

__all__ = ["FEBR"]

_SCORERS = ("linear", "lambdamart")
_INITS = ("auto", "best", "sum", "zeros")
_STAT_USERS = 1000  # z-statistics over the pairs of at most this many evenly spaced users
_VALIDATION_BYTES = 512 * 2**20  # cached base scores of the validation users (float32)
_CONTEXT_STATE = ("context_mean_", "context_scale_", "context_pop_", "context_act_")
_TREE_STATE = ("trees_feature_", "trees_threshold_", "trees_left_", "trees_right_", "trees_value_", "trees_roots_")


# ------------------------------------------------------------------------------------------
# numba scorer for the sampler: state = (*FeatureExtractor.state (10 arrays), theta, mean,
# inv_scale, hyper = [lam, known], monitor = [sum of weighted hinge losses]); flat, as parallel
# kernels take no nested tuples, and the feature functions read only its first 10 entries.
# known = 1: the extractor's own positives (the feature part F of the label holdout) score -inf
# ------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _side_z(agg, k, theta, mean, inv, o):
    """``theta . z`` over the 7 features of one side given its aggregates, without allocating."""
    c, mu, m2, lo, hi, s = agg
    b = o + _W - 1
    if c == 0.0:  # aggregates 0, indicator 1
        z = theta[b] * (1.0 - mean[b]) * inv[b]
        for g in range(_W - 1):
            z -= theta[o + g] * mean[o + g] * inv[o + g]
        return z
    f = finish(c, mu, m2, lo, hi, s, k)
    z = -theta[b] * mean[b] * inv[b]
    for g in range(_W - 1):
        z += theta[o + g] * (f[g] - mean[o + g]) * inv[o + g]
    return z


@njit(cache=True)
def _febr_score(state, u, i):
    sides, theta, mean, inv = state[8], state[10], state[11], state[12]
    if state[13][1] != 0.0 and _has(state[9], state[0], state[1], u, i):
        return -np.inf
    total = 0.0
    o = 0
    for side in range(2):
        if sides[side] != 0.0:
            total += _side_z(pair_aggregates(state, side, u, i), sides[2], theta, mean, inv, o)
            o += _W
    return total


@njit(cache=True)
def _febr_update(state, u, pos, neg, weight, lr):
    theta, inv, lam, monitor = state[10], state[12], state[13][0], state[14]
    d = theta.shape[0]
    p = np.empty(d)
    q = np.empty(d)
    pair_features(state, u, pos, p)
    pair_features(state, u, neg, q)
    hinge = 1.0
    for f in range(d):
        hinge += theta[f] * (q[f] - p[f]) * inv[f]
    monitor[0] += weight * hinge
    for f in range(d):
        theta[f] -= lr * (weight * (q[f] - p[f]) * inv[f] + 2.0 * lam * theta[f])


# ------------------------------------------------------------------------------------------
# numba scorer of stacked features over the training pools: state = (pool indptr, pool items,
# phi (pool entries x features), theta, mean, inv_scale, hyper = [lam], monitor, total = the sum
# of the iterates after every update, for their average)
# ------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _pool_entry(indptr, items, u, i):
    lo = indptr[u]
    return lo + np.searchsorted(items[lo : indptr[u + 1]], i)  # the engine draws pool items only


@njit(cache=True)
def _pool_score(state, u, i):
    phi, theta, mean, inv = state[2], state[3], state[4], state[5]
    p = _pool_entry(state[0], state[1], u, i)
    s = 0.0
    for f in range(theta.shape[0]):
        s += theta[f] * (phi[p, f] - mean[f]) * inv[f]
    return s


@njit(cache=True)
def _pool_update(state, u, pos, neg, weight, lr):
    phi, theta, inv, lam, monitor = state[2], state[3], state[5], state[6][0], state[7]
    p = _pool_entry(state[0], state[1], u, pos)
    q = _pool_entry(state[0], state[1], u, neg)
    hinge = 1.0
    for f in range(theta.shape[0]):
        hinge += theta[f] * (phi[q, f] - phi[p, f]) * inv[f]
    monitor[0] += weight * hinge
    total = state[8]
    for f in range(theta.shape[0]):
        theta[f] -= lr * (weight * (phi[q, f] - phi[p, f]) * inv[f] + 2.0 * lam * theta[f])
        total[f] += theta[f]


@njit(cache=True, parallel=True)
def _compose_kernel(S, tail, offsets, items, key):
    """``S[:, tail, :]`` (float64) with each row's head (``items[offsets[r]:offsets[r + 1]]``)
    re-ordered by ``key``: the head items take the head's places (their tail scores) in the order
    of ``key`` (ties: better place, then head order); places are assigned best first (ties: lower
    item id)."""
    n_rows, n = S.shape[0], S.shape[2]
    out = np.empty((n_rows, n))
    for r in prange(n_rows):
        for i in range(n):
            out[r, i] = S[r, tail, i]
        lo, hi = offsets[r], offsets[r + 1]
        its = items[lo:hi]
        neg_places = np.empty(hi - lo)
        for j in range(hi - lo):
            neg_places[j] = -out[r, its[j]]
        by_place = np.argsort(its, kind="mergesort")
        by_place = by_place[np.argsort(neg_places[by_place], kind="mergesort")]
        by_key = np.argsort(neg_places, kind="mergesort")
        by_key = by_key[np.argsort(-key[lo:hi][by_key], kind="mergesort")]
        for j in range(hi - lo):
            out[r, its[by_key[j]]] = -neg_places[by_place[j]]
    return out


class FEBR(Recommender):
    """Feature-extraction-based ranking trained by OPT-ADG (Alg. 4.2), optionally re-ranked by LambdaMART.

    Parameters
    ----------
    bases : "auto", list of Recommender, or None
        Stacked features (module docstring).  ``"auto"``: EASE (catalogues within EASE's
        ``dense_max_items``), ALS, RP3β, KUNN, user-p and item-p, each with a small grid of its main
        hyper-parameters searched leak-free on the training labels (:mod:`recsys_ltr.febr.bases`).
        A list: these recommenders with their parameters as given (a model already fitted on the
        same ``X`` is reused at prediction).  ``None``: the dissertation's features of ``affinity``.
    scorer : {"linear", "lambdamart"}
        How the head is re-ranked: the linear scorer trained by OPT-ADG, or LightGBM's LambdaMART
        on the same features (stacked features; needs LightGBM).
    candidates : int
        ``M``: every user's head -- the pairs trained on and re-ranked -- is the union of each
        base's ``M`` best candidates.  The other items keep the order of the best base.
    holdout : float in [0, 1) or int >= 2
        Fraction of each user's positives held out as training labels, with features from the rest;
        an int ``K``: out-of-fold labels -- each user's positives split in ``K`` parts, each part the
        labels of bases fitted on the other parts (``K`` fits of every base; stacked features only);
        ``0``: training on ``X`` itself (leaky: the dissertation's setting).
    label_exclude_top : int or None
        Draw the training labels outside the ``label_exclude_top`` most popular items, as the
        novelty protocol draws its held-out items, so that the ranker learns the target it is judged
        on (``None``: uniformly, as the standard protocol).
    validation_fraction : float in [0, 1)
        Without a ``validation`` matrix, ``fit`` holds out this fraction of each user's positives
        for early stopping and for choosing the starting base (scikit-learn's habit); ``0``: none.
    refit : bool
        After training on a held-out validation split, refit the bases (the affinities) on all of
        ``X``.
    affinity, side, k, affinity_params :
        The dissertation's features (``bases=None``): affinity kind ("cosine", "kunn", "slim",
        "rp3beta") or fitted Affinity object(s); FEBRi / FEBRu / FEBRiu (``"item"``, ``"user"``,
        ``"both"``); neighbourhood size; builder keyword arguments (e.g. ``{"l1": 0.1}`` for slim).
    lam : float >= 0
        ``lam ||theta||^2`` regulariser.
    learning_rate : float > 0
    iterations : int
        Maximum number of ``(u, i+)`` samples.
    gamma, beta :
        Rank truncation: at most ``max(1, floor(N_u / gamma))`` negative draws, or the cap ``beta``.
    eval_every : int
        Samples between two validation evaluations (``history_`` records).
    early_stopping : int or None
        Stop after this many evaluations without a better validation ADG (``None``: run all
        iterations); the best ``theta`` seen is kept either way.
    validation_users : int or None
        At most this many validation users (a fixed random sample) in the validation evaluations
        and in the search of the bases' settings.
    init : {"auto", "best", "sum", "zeros"}
        Starting ``theta``: the best base's within-user score (``"best"``, the default of stacked
        features), 1 on every ``sum`` aggregate (``"sum"``, Theorem 4.3: item-p / user-p, the
        default of the dissertation's features) or zeros.
    lambdamart_params : dict, optional
        LightGBM parameters over :data:`recsys_ltr.febr.rerank.DEFAULTS` (up to 500 rounds at
        learning rate 0.05, early stopping on NDCG@10 of the validation pools).  Default: the two
        :data:`~recsys_ltr.febr.rerank.SETTINGS` (7 leaves of at least 100 pairs; 31 of at least
        20), the better by validation ADG.
    random_state : int or None
        Seed of the splits, pools and sampler.  With ``num_threads=1`` a seed gives a bit-for-bit
        identical model; with more threads Hogwild updates interleave differently between runs.
    num_threads : int
        numba threads (0 = all).
    show_progress : bool or None
        Progress bar over training, validation ADG in its postfix (``None``: on in a terminal).

    Attributes
    ----------
    bases_ : list of Recommender
        The bases fitted on ``X`` (stacked features), named in ``base_names_``.
    item_affinity_, user_affinity_ : Affinity
        The affinities of the sides used (the dissertation's features).
    coef_, feature_mean_, feature_scale_ : ndarray (n_features,)
        ``theta`` and the standardisation of the features named in ``feature_names_`` (over the
        training pools, or over all pairs of at most 1000 evenly spaced users).
    trees_ : recsys_ltr.febr.rerank.Trees or None
        The LambdaMART trees (``scorer="lambdamart"``).
    history_ : list of dict
        One record every ``eval_every`` samples (``iteration``, ``loss``: mean weighted hinge per
        sample plus ``lam ||theta||^2``, ``violators``, ``draws``, ``val_adg``); record 0 holds the
        start, and for stacked features ``base_val_adg``, each base's validation ADG.  Not saved.
    best_iteration_ : int
        Samples drawn when the kept ``theta`` was reached.

    Notes
    -----
    Stacked FEBR's ``score`` is the tail base's scores with each user's head re-ordered by the learnt
    scorer: the head items swap the places (scores) that the tail base gives them, so items outside
    the head keep the tail base's order.  The dissertation's FEBR returns the linear scores up to a
    constant per user.  Scoring all items of a user costs the bases' own
    scoring plus ``O(n_bases n)``.  Stacked FEBR is item-based when all its bases are and passes
    ``recalculate_user`` to them.  The dissertation's FEBRi is item-based; FEBRu / FEBRiu use the
    stored ``KNN_k(u)``, recomputed from ``user_items`` with ``recalculate_user=True`` (cosine and
    kunn affinities).
    """

    def __init__(
        self,
        bases="auto",
        scorer="linear",
        candidates=100,
        holdout=0.2,
        label_exclude_top=None,
        validation_fraction=0.1,
        refit=True,
        affinity=None,
        side="item",
        k=100,
        affinity_params=None,
        lam=1e-4,
        learning_rate=0.01,
        iterations=1_000_000,
        gamma=50,
        beta=None,
        eval_every=50_000,
        early_stopping=5,
        validation_users=1000,
        init="auto",
        lambdamart_params=None,
        random_state=None,
        num_threads=0,
        show_progress=None,
    ):
        self.bases = bases
        self.scorer = scorer
        self.candidates = candidates
        self.holdout = holdout
        self.label_exclude_top = label_exclude_top
        self.validation_fraction = validation_fraction
        self.refit = refit
        self.affinity = affinity
        self.side = side
        self.k = k
        self.affinity_params = affinity_params
        self.lam = lam
        self.learning_rate = learning_rate
        self.iterations = iterations
        self.gamma = gamma
        self.beta = beta
        self.eval_every = eval_every
        self.early_stopping = early_stopping
        self.validation_users = validation_users
        self.init = init
        self.lambdamart_params = lambdamart_params
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    # ------------------------------------------------------------------ configuration
    @property
    def _stacked(self) -> bool:
        return self._param("bases") is not None

    @property
    def item_based(self):
        if self._stacked:
            return all(b.item_based for b in self.__dict__.get("bases_", ()))
        return self._param("side") == "item"

    @property
    def _sides(self):
        side = self._param("side")
        return ("item", "user") if side == "both" else (side,)

    @property
    def _model_state(self):
        if self._stacked:
            return ("linear_", "tail_base_", *_CONTEXT_STATE, *_TREE_STATE)
        return (*(f"{s}_affinity_" for s in self._sides), "linear_")

    def _required_state(self):
        return tuple(n for n in self._state_attributes if n not in _TREE_STATE)

    def _check_params(self):
        super()._check_params()
        bases = self.bases
        if bases is None:
            if self.affinity is None:
                raise ValueError("give bases (stacked features) or an affinity (the dissertation's features)")
            if self.side not in SIDES:
                raise ValueError(f"side must be one of {SIDES}, got {self.side!r}")
            if self.scorer != "linear":
                raise ValueError("scorer='lambdamart' re-ranks stacked features: give bases")
        else:
            if not (isinstance(bases, str) and bases == "auto") and not (
                isinstance(bases, (list, tuple)) and bases and all(isinstance(b, Recommender) for b in bases)
            ):
                raise TypeError(f"bases must be 'auto', a non-empty list of recommenders or None, got {bases!r}")
            if isinstance(bases, (list, tuple)) and any(isinstance(b, FEBR) for b in bases):
                raise TypeError("a FEBR model cannot be a base of FEBR")
            if self.affinity is not None:
                raise ValueError("affinity gives the dissertation's features and bases the stacked ones: give one")
        if self.scorer not in _SCORERS:
            raise ValueError(f"scorer must be one of {_SCORERS}, got {self.scorer!r}")
        if self.init not in _INITS:
            raise ValueError(f"init must be one of {_INITS}, got {self.init!r}")
        if (self.init == "best" and bases is None) or (self.init == "sum" and bases is not None):
            raise ValueError("init='best' goes with bases, init='sum' with affinity (bases=None)")
        check_positive_int(self.candidates, "candidates")
        if isinstance(self.holdout, (int, np.integer)) and not isinstance(self.holdout, (bool, np.bool_)):
            if self.holdout != 0:
                check_positive_int(self.holdout, "holdout", minimum=2)
                if bases is None:
                    raise ValueError("holdout=K (out-of-fold labels) goes with stacked features: give bases")
        else:
            check_real(self.holdout, "holdout", low=0.0, high=1.0, high_open=True)
        if self.holdout != 0 and bases is None and not isinstance(self.affinity, str):
            raise ValueError("holdout > 0 rebuilds the affinity on the feature part: give affinity as a kind")
        if self.label_exclude_top is not None:
            check_positive_int(self.label_exclude_top, "label_exclude_top", minimum=0)
        check_real(self.validation_fraction, "validation_fraction", low=0.0, high=1.0, high_open=True)
        if not isinstance(self.refit, (bool, np.bool_)):
            raise TypeError(f"refit must be a bool, got {self.refit!r}")
        check_real(self.lam, "lam", low=0.0)
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        check_positive_int(self.iterations, "iterations", minimum=0)
        check_positive_int(self.eval_every, "eval_every")
        check_positive_int(self.gamma if self.beta is None else self.beta, "gamma" if self.beta is None else "beta")
        for name in ("early_stopping", "validation_users"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name)
        for name in ("affinity_params", "lambdamart_params"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), dict):
                raise TypeError(f"{name} must be a dict or None, got {type(getattr(self, name)).__name__}")
        check_seed(self.random_state)

    def _check_data_params(self, X):
        if not self._stacked:
            for s in self._sides:
                check_k(self._param("k"), X.shape[1] if s == "item" else X.shape[0], f"{s}s")
        folds, most = self._param("holdout"), int(np.diff(X.indptr).max(initial=0))
        if isinstance(folds, (int, np.integer)) and folds > max(most, 2):  # not a bool: checked by _check_params
            raise ValueError(f"holdout={folds} folds, but no user has more than {most} positives to split")
        top = self._param("label_exclude_top")
        if top is not None and top >= X.shape[1]:
            raise ValueError(f"label_exclude_top={top} leaves no item to draw labels from ({X.shape[1]} items)")

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, validation=None):
        """Fit on the feedback matrix ``X``; ``validation`` (keyword, same shape, disjoint from
        ``X``) serves early stopping and model selection (without it ``validation_fraction`` of
        ``X`` is held out).  ``y`` must be ``None`` (scikit-learn's signature).  Returns ``self``."""
        if y is not None:
            raise TypeError("FEBR.fit takes the validation matrix as a keyword, fit(X, validation=V); y must be None")
        return super().fit(X, validation=validation)

    def _check_fit_params(self, X, validation=None):
        if validation is None:
            return {"validation": None}
        validation = check_feedback(validation, "validation")
        check_same_shape(X, validation, "X", "validation")
        overlap = X.multiply(validation).nnz
        if overlap:
            raise ValueError(
                f"validation and X share {overlap} (user, item) pair(s): validation positives must be "
                "held out of X (split.holdout gives disjoint parts)"
            )
        return {"validation": validation}

    def _fit(self, X, validation=None):
        rng = np.random.default_rng(self.random_state)
        X_fit = X
        if validation is None and self.validation_fraction > 0:
            X_fit, validation, _ = holdout_checked(X, float(self.validation_fraction), 0.0, rng)
            if validation.nnz == 0:
                X_fit, validation = X, None
        self.history_ = []
        with progress(self.show_progress, desc="FEBR", total=self.iterations) as bar:
            if self._stacked:
                self._fit_stacked(X_fit, validation, rng, bar)
            else:
                self._fit_dissertation(X_fit, validation, rng, bar)
        if X_fit is not X and self.refit:
            self._refit(X)

    def _label_parts(self, X, rng):
        """``[(F, L), ...]``: feature parts and their labels (module docstring; drawn outside the
        ``label_exclude_top`` most popular items when given): one holdout for a fraction, ``K``
        out-of-fold parts for an int ``K``, ``[(X, X)]`` for ``0``."""
        if self.holdout == 0:
            return [(X, X)]
        eligible = eligible_positives(X, self.label_exclude_top)
        if isinstance(self.holdout, (int, np.integer)):
            parts = list(kfold_checked(X, int(self.holdout), rng, eligible))
        else:
            parts = [holdout_checked(X, float(self.holdout), 0.0, rng, eligible)[:2]]
        if parts[0][1].nnz == 0:
            raise ValueError(f"holdout={self.holdout} leaves no label positive: users have too few interactions")
        return parts

    def _sgd(self, sampler, state, fns, theta, monitor, validate, bar, total=None):
        """OPT-ADG: SGD through the engine in chunks of ``eval_every`` samples, keeping the model of
        the best validation ADG (``validate(theta)``; the last one without validation).  With
        ``total`` (the sum of the iterates, updated by the update function) the model is the
        average of the iterates so far (Polyak-Ruppert averaging: the constant-step iterates
        wander, their average converges), else the current iterate."""
        start = theta.copy()
        best = (validate(start), start, 0) if validate is not None else None
        if best is not None:
            self.history_.append({"iteration": 0, "val_adg": best[0]})
        stale = done = updates = 0
        current = start
        while done < self.iterations:
            n = min(self.eval_every, self.iterations - done)
            monitor[0] = 0.0
            stats = sampler.sgd(state, *fns[:2], n, self.learning_rate, rows=fns[2])
            done, updates = done + n, updates + stats.violators
            if not np.all(np.isfinite(theta)):
                raise FloatingPointError(f"theta diverged after {done} samples: lower learning_rate")
            current = theta.copy() if total is None else (total / updates if updates else start)
            record = {
                "iteration": done,
                "loss": monitor[0] / n + self.lam * float(theta @ theta),
                "violators": stats.violators,
                "draws": stats.draws,
            }
            bar.update(n)
            if best is not None:
                record["val_adg"] = adg = validate(current)
                best, stale = ((adg, current, done), 0) if adg > best[0] else (best, stale + 1)
                bar.set_postfix(val_adg=f"{adg:.4f}")
            self.history_.append(record)
            if self.early_stopping is not None and stale >= self.early_stopping:
                break
        self.best_iteration_ = done if best is None else best[2]
        return current if best is None else best[1]

    # ------------------------------------------------------------------ stacked features
    def _fit_stacked(self, X, validation, rng, bar):
        names, specs = resolve_bases(self.bases, X.shape, self.num_threads)
        bar.set_postfix_str("bases on the feature parts")
        pools, settings = [], None
        for F, L in self._label_parts(X, rng):
            if settings is None:  # the grids are searched on the first part, their winners used on the others
                bases_F = [fit_base(spec, F, L, self.validation_users, rng) for spec in specs]
                settings = [b.get_params() for b in bases_F]
            else:
                bases_F = [clone(spec.template).set_params(**p).fit(F) for spec, p in zip(specs, settings)]
            context = context_statistics(bases_F, F, sample_users(F))
            pools.append(build_pool(bases_F, context, F, L, self.candidates, exclude_known=self.holdout != 0))
            del bases_F  # at most one fit of each base is held at a time
        pool = concatenate_pools(pools)
        bar.set_postfix_str("bases on X")
        self.bases_ = [reuse_or_fit(spec, p, X) for spec, p in zip(specs, settings)]
        self.base_names_ = names
        self.feature_names_ = feature_names(names)
        self._set_context(context_statistics(self.bases_, X, sample_users(X)))
        mean, scale = _pool_statistics(pool.phi)
        self.linear_ = np.vstack([np.zeros(mean.size), mean, scale])
        self._prepare_linear()
        theta = self.coef_  # a view of linear_[0]: SGD updates the model in place
        self._set_trees(None)
        self.tail_base_ = 0
        val = _Validation(self, X, validation, rng) if validation is not None else None
        best = 0
        if val is not None:
            base_adg = val.base_adg()
            self.history_.append({"iteration": 0, "base_val_adg": dict(zip(names, base_adg))})
            best = int(np.argmax(base_adg))
        self.tail_base_ = best
        if self.init in ("auto", "best"):
            theta[z_column(best)] = scale[z_column(best)]  # weight 1 on the best base's within-user score
        relevant, irrelevant = pool_relevance(pool, X.shape[1])
        total = np.zeros_like(theta)
        state = (
            pool.indptr,
            pool.items,
            pool.phi,
            theta,
            mean,
            1.0 / scale,
            np.array([float(self.lam)]),
            np.zeros(1),
            total,
        )
        sampler = WarpSampler.trusted(
            relevant,
            irrelevant,
            loss="adg",
            normalize=False,
            min_beta=1,
            random_state=self.random_state,
            num_threads=self.num_threads,
            **self._limit(),
        )
        validate = None if val is None else val.adg
        bar.set_postfix_str("OPT-ADG")
        fns = (_pool_score, _pool_update, {0: "query"})
        theta[:] = self._sgd(sampler, state, fns, theta, state[7], validate, bar, total)
        if self.scorer == "lambdamart":
            bar.set_postfix_str("LambdaMART")
            self._fit_lambdamart(pool, X, validation, val, rng)

    def _fit_lambdamart(self, pool, X, validation, val, rng):
        """LambdaMART on the pools: ``lambdamart_params``, or the :data:`~recsys_ltr.febr.rerank.
        SETTINGS` tried in turn and the best by validation ADG (the first without validation)."""
        train = _groups(pool)
        valid = None
        if validation is not None:
            valid = _groups(build_pool(self.bases_, self._context, X, validation, self.candidates, users=val.users))
        settings = (self.lambdamart_params,) if self.lambdamart_params is not None else SETTINGS
        if val is None:
            settings = settings[:1]
        seed, threads = int(rng.integers(2**31 - 1)), check_num_threads(self.num_threads)
        best = None
        for params in settings:
            trees, rounds = fit_lambdamart(train, valid, params, seed, threads)
            adg = val.adg(trees) if val is not None else -np.inf
            if val is not None:
                self.history_.append({"iteration": "lambdamart", "params": params, "rounds": rounds, "val_adg": adg})
            if best is None or adg > best[0]:
                best = (adg, trees, rounds)
        self._set_trees(best[1])
        self.lambdamart_iterations_ = best[2]

    def _refit(self, X):
        """Bases (affinities) refitted on all of ``X`` after training on a held-out split."""
        if self._stacked:
            self.bases_ = [clone(b).fit(X) for b in self.bases_]
            self._set_context(context_statistics(self.bases_, X, sample_users(X)))
            return
        item, user = build_affinities(X, self.affinity, self.side, self.k, self.affinity_params, self.num_threads)
        for name, value in (("item_affinity_", item), ("user_affinity_", user)):
            if value is not None:
                setattr(self, name, value)
        self._prepare_features(X)
        self.linear_[1], self.linear_[2] = _statistics(self.extractor_)

    def _limit(self):
        return {"gamma": self.gamma} if self.beta is None else {"beta": self.beta}

    def _set_context(self, context: BaseFeatures):
        self.context_mean_, self.context_scale_, self.context_pop_, self.context_act_ = context

    @property
    def _context(self) -> BaseFeatures:
        return BaseFeatures(self.context_mean_, self.context_scale_, self.context_pop_, self.context_act_)

    def _set_trees(self, trees):
        self.trees_ = trees
        for name, value in zip(_TREE_STATE, trees if trees is not None else (None,) * len(_TREE_STATE)):
            setattr(self, name, value)

    def _base_scores(self, rows, ids, recalculate):
        """``(B, n_bases, n_items)`` scores of the bases for the users ``ids`` (``rows``: their interactions)."""
        return np.stack(
            [np.asarray(b._score_rows(rows, ids, recalculate), dtype=np.float64) for b in self.bases_], axis=1
        )

    def _stacked_scores(self, rows, ids, recalculate):
        """Scores of every item for the users ``ids`` (``rows``: their interactions): the head of
        every user (each base's ``candidates`` best) in the scorer's order above the other items in
        the order of the tail base (module docstring)."""
        S = self._base_scores(rows, ids, recalculate)
        return self._compose(S, rows, self._head(S, rows))

    def head_features(self, user_ids):
        """Stacked features of the heads of training users: the pairs the scorer ranks.

        Every base scores every item of each user; the head is the union of each base's
        ``candidates`` best unseen items.  Pass bounded batches (``n_bases`` dense rows of scores
        per user), e.g. through :func:`recsys_ltr.executors.febr_features`.

        Returns
        -------
        indptr : ndarray (len(user_ids) + 1,)
            User ``user_ids[b]``'s head entries are ``indptr[b]:indptr[b + 1]``.
        items : ndarray
            The head items, per user in increasing order.
        phi : ndarray (len(items), n_features)
            Their features (columns named by ``feature_names_``) as the scorer receives them,
            before its standardisation by ``feature_mean_`` and ``feature_scale_``.
        """
        self._check_fitted()
        if not self._stacked:
            raise ValueError("head_features gives stacked features; the dissertation's are transform's")
        ids = check_ids(user_ids, self.n_users_, "user_ids")
        rows = self.user_items_[ids]
        return self._head(self._base_scores(rows, ids, False), rows)

    def _head(self, S, rows):
        """The head of a block: ``(indptr, items, phi)``, row ``r``'s head entries at
        ``indptr[r]:indptr[r + 1]`` (items and their features)."""
        # ties broken by the standardised popularity of the context: the training popularity's order
        items, phi, _, counts = heads(S, rows, None, self._context, self.context_pop_, self.candidates)
        valid = np.arange(items.shape[1])[None, :] < counts[:, None]
        indptr = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        return indptr, items[valid], phi[valid]

    def _compose(self, S, rows, head, scorer=None):
        """The tail base's scores with the head re-ordered by ``scorer`` (``theta`` or
        :class:`~recsys_ltr.febr.rerank.Trees`; default: the fitted one, the trees when there are):
        within each user, the head items swap the places (scores) that the tail base gives them, so
        nothing outside the head moves and a scorer that ranks like the tail base gives exactly its
        ranking."""
        indptr, items, phi = head
        scorer = (self.trees_ if self.trees_ is not None else self.coef_) if scorer is None else scorer
        if isinstance(scorer, Trees):
            key = predict_trees(scorer, phi)
        else:
            key = (phi - self.feature_mean_) @ (scorer / self.feature_scale_)
        return _compose_kernel(S, self.tail_base_, indptr, items, key.astype(np.float64))

    # ------------------------------------------------------------------ the dissertation's features
    def _fit_dissertation(self, X, validation, rng, bar):
        item, user = build_affinities(X, self.affinity, self.side, self.k, self.affinity_params, self.num_threads)
        for name, value in (("item_affinity_", item), ("user_affinity_", user)):
            if value is not None:
                setattr(self, name, value)
        self._prepare_features(X)
        mean, scale = _statistics(self.extractor_)
        self.linear_ = np.vstack([np.zeros(mean.size), mean, scale])
        self._prepare_linear()
        theta = self.coef_  # a view of linear_[0]: SGD updates the model in place
        if self.init in ("auto", "sum"):
            theta[AGGREGATORS.index("sum") :: _W] = 1.0
        extractor, t_mean, t_scale, positives, known = self._training_problem(X, rng)
        state = (*extractor.state, theta, t_mean, 1.0 / t_scale, np.array([float(self.lam), known]), np.zeros(1))
        rows = {0: "query", 2: "item"} if "item" in self._sides else {0: "query", 5: "query"}
        sampler = WarpSampler.trusted(
            positives,
            loss="adg",
            normalize=False,
            positive_draws="reject",
            min_beta=1,
            random_state=self.random_state,
            num_threads=self.num_threads,
            **self._limit(),
        )
        validate = None
        if validation is not None:
            users = _validation_users(validation, self.validation_users, rng)

            def validate(coef):
                score = lambda ids: self._dissertation_scores(X[ids], ids, False, coef)  # noqa: E731
                return evaluate_checked(score, X, validation, None, ["ADG"], users=users, num_threads=self.num_threads)[
                    "ADG"
                ]

        theta[:] = self._sgd(sampler, state, (_febr_score, _febr_update, rows), theta, state[14], validate, bar)

    def _training_problem(self, X, rng):
        """``(extractor, mean, scale, positives, known)`` of the training pairs: ``X`` itself, or
        with a label holdout the feature part ``F`` and the labels ``L`` (module docstring)."""
        if self.holdout == 0:
            return self.extractor_, self.feature_mean_, self.feature_scale_, X, 0.0
        ((F, L),) = self._label_parts(X, rng)
        item, user = build_affinities(F, self.affinity, self.side, self.k, self.affinity_params, self.num_threads)
        extractor = FeatureExtractor.trusted(F, self.k, item, user, self.num_threads)
        return (extractor, *_statistics(extractor), L, 1.0)

    def _prepare_features(self, X):
        k = self._param("k")
        self.extractor_ = FeatureExtractor.trusted(
            X, k, getattr(self, "item_affinity_", None), getattr(self, "user_affinity_", None), self.num_threads
        )
        self.feature_names_ = self.extractor_.feature_names
        kind = self.user_affinity_.kind if "user" in self._sides else None
        if kind in ("cosine", "kunn"):  # for recalculate_user: the O(nnz) work done once
            weights = np.ones(X.shape[1]) if kind == "cosine" else kunn_weights(X)
            self.user_index_ = _knn_index(X, weights)

    def _prepare_linear(self):
        self.coef_, self.feature_mean_, self.feature_scale_ = self.linear_  # views: rows of a C-ordered array

    def _dissertation_scores(self, rows, ids, recalculate, coef=None):
        if recalculate and "user" in self._sides:
            neighbors = self._user_neighbors(rows, ids)
        else:
            neighbors = self.extractor_.neighbors_of(ids)  # empty rows without a user side
        coef = self.coef_ if coef is None else coef
        return self.extractor_.linear_scores(coef, self.feature_mean_, self.feature_scale_, rows, neighbors)

    def _user_neighbors(self, rows, ids):
        """``KNN_k(u)`` of the users' rows recomputed against the training users."""
        if not hasattr(self, "user_index_"):
            kind = self.user_affinity_.kind
            raise ValueError(f"recalculate_user needs a cosine or kunn user affinity, this one is {kind!r}")
        query_ids = np.where(ids < self.n_users_, ids, -1)
        return _knn_query(self.user_index_, rows, self._param("k"), query_ids, self.num_threads)

    # ------------------------------------------------------------------ state and scoring
    def _prepare(self):
        super()._prepare()
        self.linear_ = np.ascontiguousarray(self.linear_, dtype=np.float64)
        self._prepare_linear()
        if not self._stacked and (
            getattr(self, "extractor_", None) is None or self.extractor_.X is not self.user_items_
        ):
            self._prepare_features(self.user_items_)

    def _score_rows(self, rows, ids, recalculate):
        if self._stacked:
            return self._stacked_scores(rows, ids, recalculate)
        return self._dissertation_scores(rows, ids, recalculate)

    def transform(self, user_ids):
        """Raw features ``(len(user_ids), n_items, n_features)`` of training users (the
        dissertation's features; pass bounded batches)."""
        self._check_fitted()
        if self._stacked:
            raise ValueError("transform gives the dissertation's features; stacked features are the bases' scores")
        return self.extractor_.transform(user_ids)

    def _item_affinity(self):
        if self._stacked or "item" not in self._sides:
            return super()._item_affinity()
        return self.item_affinity_

    def _item_similarity_rows(self, items):
        if self._stacked:  # the first base that has item similarities
            return self.bases_[0]._item_similarity_rows(items)
        return super()._item_similarity_rows(items)

    def _user_similarity_rows(self, users):
        if not self._stacked and "user" in self._sides:
            return self.user_affinity_.matrix[users].toarray()
        return super()._user_similarity_rows(users)

    # ------------------------------------------------------------------ persistence
    def _saved_params(self):
        """Bases are saved as ``{"class", "params"}`` with their state under ``base<j>__``; an
        Affinity given as ``affinity`` is saved in the state and recorded by its kind."""
        params = super()._saved_params()
        if self._stacked:
            params["bases"] = [{"class": type(b).__name__, "params": b._saved_params()} for b in self.bases_]
        given = params["affinity"]
        if given is not None and not isinstance(given, str):
            first = given[0] if isinstance(given, (tuple, list)) else given
            params["affinity"] = first.kind if isinstance(first, Affinity) else str(first)
        return params

    @classmethod
    def _decode_params(cls, params):
        bases = params.get("bases")
        if not isinstance(bases, list):
            return params
        decoded = []
        for spec in bases:
            base_cls = _REGISTRY.get(spec.get("class")) if isinstance(spec, dict) else None
            if base_cls is None or not issubclass(base_cls, Recommender) or not isinstance(spec.get("params"), dict):
                raise ValueError(f"bases holds {spec!r}, not a recommender's class and parameters")
            decoded.append(base_cls(**base_cls._decode_params(spec["params"])))
        return {**params, "bases": decoded}

    def _saved_state(self):
        state = super()._saved_state()
        if self._stacked:
            state["tail_base_"] = np.array([self.tail_base_])
            for j, base in enumerate(self.bases_):
                state.update({f"base{j}__{k}": v for k, v in base._saved_state().items() if k != "user_items_"})
        return state

    def _state_names(self):
        names = super()._state_names()
        if self._stacked and isinstance(self.bases, (list, tuple)):
            for j, base in enumerate(self.bases):
                names += tuple(f"base{j}__{n}" for n in base._state_names() if n != "user_items_")
        return names

    def _load_nested(self, state, specs):
        if not self._stacked:
            return
        if not isinstance(self.bases, (list, tuple)):
            raise ValueError("a stacked FEBR file must list its bases")
        self.bases_ = []
        for j, template in enumerate(self.bases):
            base = clone(template)
            prefix = f"base{j}__"
            sub = {n[len(prefix) :]: v for n, v in state.items() if n.startswith(prefix)}
            sub_specs = {n[len(prefix) :]: s for n, s in specs.items() if n.startswith(prefix)}
            sub["user_items_"], sub_specs["user_items_"] = self.user_items_, {"type": "csr"}
            base._load_state(sub, sub_specs)
            base._prepare()
            self.bases_.append(base)
        self.base_names_ = [type(b).__name__ for b in self.bases_]
        self.feature_names_ = feature_names(self.base_names_)

    def _check_state(self):
        super()._check_state()
        if self._stacked:
            nb, n = len(self.bases_), self.n_items_
            d = n_features(nb)
            tail = np.asarray(self.tail_base_)
            if tail.shape != (1,) or tail.dtype.kind not in "iu" or not 0 <= int(tail[0]) < nb:
                raise ValueError(f"tail_base_ must be one base index in [0, {nb})")
            self.tail_base_ = int(tail[0])
            shapes = {"context_mean_": (nb,), "context_scale_": (nb,), "context_pop_": (n,), "context_act_": (2,)}
            self._check_dense_state(shapes)
            if np.any(self.context_scale_ <= 0) or self.context_act_[1] <= 0:
                raise ValueError("context scales must be positive")
            trees = [getattr(self, name, None) for name in _TREE_STATE]
            if all(t is None for t in trees):
                self._set_trees(None)
            elif any(t is None for t in trees):
                raise ValueError("the LambdaMART trees are incomplete")
            else:
                self._set_trees(Trees.from_arrays(trees, d))
        else:
            for s in self._sides:
                value = getattr(self, f"{s}_affinity_")
                if self.k > value.k_max:
                    raise ValueError(f"{s}_affinity_ has k_max={value.k_max} < k={self.k}")
            d = _W * len(self._sides)
        lin = self.linear_
        if lin.shape != (3, d) or np.any(lin[2] <= 0):
            raise ValueError(f"linear_ must hold theta, mean and a positive scale of {d} features")


class _Validation:
    """The validation users' base scores on ``X`` (float32, cached within a memory budget) for the
    early-stopping evaluations of stacked FEBR."""

    def __init__(self, model, X, validation, rng):
        nb, n = len(model.bases_), X.shape[1]
        budget = max(1, _VALIDATION_BYTES // (4 * nb * n))
        limit = budget if model.validation_users is None else min(budget, model.validation_users)
        users = _validation_users(validation, limit, rng)
        self.model, self.X, self.validation, self.users = model, X, validation, users
        self.rows = X[users]
        self.S = np.stack(
            [np.asarray(b._score_rows(self.rows, users, False), dtype=np.float32) for b in model.bases_], axis=1
        )
        self.head = model._head(self.S.astype(np.float64), self.rows)  # the head does not depend on theta
        self.position = np.full(X.shape[0], -1, np.int64)
        self.position[users] = np.arange(users.size)

    def _evaluate(self, score_fn):
        return evaluate_checked(
            score_fn, self.X, self.validation, None, ["ADG"], users=self.users, num_threads=self.model.num_threads
        )["ADG"]

    def base_adg(self) -> np.ndarray:
        """Validation ADG of every base alone."""
        return np.array(
            [self._evaluate(lambda ids, b=b: self.S[self.position[ids], b, :]) for b in range(self.S.shape[1])]
        )

    def adg(self, scorer=None) -> float:
        """Validation ADG of ``scorer`` (``theta`` or trees; ``None``: the fitted one)."""
        scores = self.model._compose(self.S, self.rows, self.head, scorer)  # one block: the sample is bounded
        return self._evaluate(lambda ids: scores[self.position[ids]])


def _groups(pool):
    """``(phi, label, sizes)`` of a pool for LightGBM: its rows grouped per query (empty ones left out)."""
    sizes = np.diff(pool.indptr)
    return pool.phi, pool.label, sizes[sizes > 0]


def _validation_users(validation, limit, rng) -> np.ndarray:
    """Validation users of the evaluations: at most ``limit`` (a fixed random sample), sorted."""
    users = np.flatnonzero(np.diff(validation.indptr) > 0)
    if limit is None or users.size <= limit:
        return users
    return np.sort(rng.choice(users, limit, replace=False))


def _pool_statistics(phi) -> tuple[np.ndarray, np.ndarray]:
    mean = phi.mean(axis=0)
    scale = phi.std(axis=0)
    scale[scale <= 1e-12 * np.maximum(1.0, np.abs(mean))] = 1.0
    return mean, scale


def _statistics(extractor):
    """z-statistics over all items of at most ``_STAT_USERS`` evenly spaced users (a fixed sample:
    scaling is only a preconditioner, and a full pass costs as much as scoring every user)."""
    m = extractor.X.shape[0]
    return extractor.statistics(np.unique(np.linspace(0, m - 1, min(m, _STAT_USERS)).astype(np.int64)))
