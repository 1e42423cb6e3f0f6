"""FEBR: feature-extraction-based ranking trained for ADG by OPT-ADG (dissertation sec. 4.5-4.6).

Features ``phi(u, i)`` are the aggregates of :mod:`recsys_ltr.febr.features` (item side, user side or
both), z-scored with the mean and scale of every feature over the training pairs (all items of at
most 1000 evenly spaced users); the scorer is
linear, ``f(u, i) = theta . (phi(u, i) - mean) / scale``.  Training minimises the surrogate of
``1 - ADG`` (Eq. 4.7-4.10)::

    (1/|U|) sum_u sum_{i+ in O+_u, v in V(u, i+)} C(|V|) (f(u, v) - f(u, i+) + 1) / (|O+_u| |V|)
        + lam ||theta||^2,        C(k) = 1 - 1 / log2(k + 2)   (Eq. 4.8)

with OPT-ADG (Alg. 4.2) run by the shared engine :class:`recsys_ltr.warp.WarpSampler`: ``u``
uniform, ``i+`` uniform in ``O+_u``, negatives uniform among the items outside ``O+_u`` until one
violates the margin or ``beta_u = max(1, floor(N_u / gamma))`` draws are spent (``N_u = n - |O+_u|``;
the repeat-until loop of Alg. 4.2 always draws once), then a step on
``C(floor(N_u / n_s)) (f(u, v) - f(u, i+) + 1) + lam ||theta||^2`` (``n_s`` draws spent; the
regulariser is stepped with every violating triplet).  Features of the sampled pairs are computed
on the fly, never stored.

Label holdout (``holdout > 0``, beyond the paper).  Features of a training positive ``(u, i+)``
computed from ``X`` see ``u``'s own interaction with ``i+``: the affinities ``A_{i+ j}`` (cosine,
KUNN, SLIM) are fitted on data where ``u`` co-consumed ``i+`` and ``j``, so training positives look
stronger than the test items they stand for (a rare item consumed only by ``u`` has all of ``u``'s
items as active neighbours).  With ``holdout = h`` each user's positives are split at random
(:func:`recsys_ltr.split.holdout`) into a feature part ``F`` (``1 - h``) and a label part ``L``
(``h``); affinities, features and z-statistics for training are built from ``F`` alone, positives
are drawn from ``L`` and negatives outside ``L``, with the items of ``F`` made non-violating (score
``-inf``: they are positives, counted as draws as in LightFM's sampler, so ``N_u = n - |L_u|``).
The learned ``theta`` then scores features built from all of ``X`` with ``X``'s own
z-statistics, as the paper's model does.  This is the usual stacking remedy for target leakage.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._validation import check_feedback, check_positive_int, check_real, check_same_shape, check_seed
from ..metrics import evaluate_checked
from ..models.base import Recommender
from ..neighbors.affinity import Affinity, kunn_weights
from ..neighbors.knn import _knn_index, _knn_query, check_k
from ..split import holdout_checked
from ..warp import WarpSampler
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

__all__ = ["FEBR"]

_INITS = ("sum", "zeros")
_STAT_USERS = 1000  # z-statistics over the pairs of at most this many evenly spaced users


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


class FEBR(Recommender):
    """Feature-extraction-based ranking (FEBRi / FEBRu / FEBRiu) trained by OPT-ADG.

    Parameters
    ----------
    affinity : {"cosine", "kunn", "slim", "rp3beta"}, Affinity or (item Affinity, user Affinity)
        Affinity kind computed from the training matrix with ``k_max = k`` (cosine: ``A = cos``;
        kunn: Eq. 4.5/4.6; slim: fsSLIM ``W^T`` with ``k`` cosine neighbours; rp3beta: RP3β's
        ``W^T`` with ``k`` targets per item; slim and rp3beta item side only), or fitted affinities
        (built from the same training matrix).
    side : {"item", "user", "both"}
        FEBRi, FEBRu or FEBRiu.
    k : int
        Neighbourhood size of ``KNN_k`` (``<= k_max`` of given affinities).
    lam : float >= 0
        ``lam ||theta||^2`` regulariser.
    learning_rate : float > 0
    iterations : int
        Maximum number of ``(u, i+)`` samples (outer loop of Alg. 4.2).
    gamma : int >= 1
        Rank truncation: at most ``max(1, floor(N_u / gamma))`` negative draws per sample
        (Alg. 4.2, whose repeat-until loop always draws once).
    beta : int, optional
        Absolute cap on negative draws instead of ``gamma`` (takes precedence when given).
    eval_every : int
        Samples between two validation evaluations (and ``history_`` records).
    early_stopping : int or None
        With a validation matrix: stop after this many evaluations without a better validation
        ADG (``None``: run all iterations).  The best ``theta`` seen is kept either way.
    holdout : float in [0, 1)
        Fraction of each user's positives used as training labels, with features from the rest
        (module docstring; beyond the paper).  ``0``: the paper's training on ``X`` itself.  Needs
        ``affinity`` given as a kind, which is rebuilt on the feature part.
    validation_users : int or None
        Evaluate validation ADG on at most this many validation users (a fixed random sample
        drawn with ``random_state``) to make early stopping cheap; ``None``: all of them.
    init : {"sum", "zeros"}
        Initial ``theta``: 1 on the ``sum`` feature of every side (the item-p / user-p ranking,
        Theorem 4.3) or all zeros.
    affinity_params : dict, optional
        Keyword arguments of the affinity builder (e.g. ``{"l1": 0.1, "l2": 1.0}`` for slim).
    random_state : int or None
        Seed of the sampler.  With ``num_threads=1`` a seed gives a bit-for-bit identical model;
        with more threads Hogwild updates interleave differently from run to run.
    num_threads : int
        numba threads (0 = all) for affinities, features, training and scoring.
    show_progress : bool
        Progress bars while computing affinities.

    Attributes
    ----------
    item_affinity_, user_affinity_ : Affinity
        The affinities of the sides used (saved with the model).
    coef_ : ndarray (n_features,)
        ``theta`` of the z-scored features (names in ``feature_names_``).
    feature_mean_, feature_scale_ : ndarray (n_features,)
        z-scoring statistics: mean and standard deviation of every raw feature over the
        training pairs (all items) of at most 1000 evenly spaced users, all users when there are
        fewer (scale 1 for a constant feature).
    history_ : list of dict
        One record every ``eval_every`` samples: ``iteration``, ``loss`` (mean weighted hinge per
        sample in the interval plus ``lam ||theta||^2``: the SGD estimate of the objective; with
        several threads racing updates it is approximate), ``violators``, ``draws`` and, with
        validation, ``val_adg`` (record 0 is the initial ``theta``).  Not saved.
    best_iteration_ : int
        Samples drawn when the kept ``theta`` was reached.

    Notes
    -----
    ``score``/``recommend`` compute all items of a user at once by scattering over the reverse
    neighbourhoods (:class:`~recsys_ltr.febr.features.FeatureExtractor`), ``O(|O+_u| k + n)``.  Ties
    (e.g. every item without active neighbours) are broken by training popularity, then id, so a
    user without history gets the popularity order.  FEBRi is item-based: ``recommend`` scores new
    users from ``user_items`` without refitting.  FEBRu/FEBRiu use the stored ``KNN_k(u)`` of
    training users; ``recalculate_user=True`` recomputes it from ``user_items`` (cosine and kunn
    affinities only).
    """

    def __init__(
        self,
        affinity="cosine",
        side="item",
        k=100,
        lam=1e-3,
        learning_rate=0.01,
        iterations=2_000_000,
        gamma=50,
        beta=None,
        eval_every=100_000,
        early_stopping=5,
        holdout=0.0,
        validation_users=None,
        init="sum",
        affinity_params=None,
        random_state=None,
        num_threads=0,
        show_progress=False,
    ):
        self.affinity = affinity
        self.side = side
        self.k = k
        self.lam = lam
        self.learning_rate = learning_rate
        self.iterations = iterations
        self.gamma = gamma
        self.beta = beta
        self.eval_every = eval_every
        self.early_stopping = early_stopping
        self.holdout = holdout
        self.validation_users = validation_users
        self.init = init
        self.affinity_params = affinity_params
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

    # ------------------------------------------------------------------ configuration
    @property
    def item_based(self):
        return self._param("side") == "item"

    @property
    def _sides(self):
        side = self._param("side")
        return ("item", "user") if side == "both" else (side,)

    @property
    def _model_state(self):
        return (*(f"{s}_affinity_" for s in self._sides), "linear_")

    def _check_params(self):
        super()._check_params()
        if self.side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {self.side!r}")
        check_real(self.lam, "lam", low=0.0)
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        check_positive_int(self.iterations, "iterations", minimum=0)
        check_positive_int(self.eval_every, "eval_every")
        if self.beta is None:
            check_positive_int(self.gamma, "gamma")
        else:
            check_positive_int(self.beta, "beta")
        if self.early_stopping is not None:
            check_positive_int(self.early_stopping, "early_stopping")
        if check_real(self.holdout, "holdout", low=0.0, high=1.0, high_open=True) > 0:
            if not isinstance(self.affinity, str):
                raise ValueError("holdout > 0 rebuilds the affinity on the feature part: give affinity as a kind")
        if self.validation_users is not None:
            check_positive_int(self.validation_users, "validation_users")
        if self.init not in _INITS:
            raise ValueError(f"init must be one of {_INITS}, got {self.init!r}")
        if self.affinity_params is not None and not isinstance(self.affinity_params, dict):
            raise TypeError(f"affinity_params must be a dict or None, got {type(self.affinity_params).__name__}")
        check_seed(self.random_state)

    def _check_data_params(self, X):
        for s in self._sides:
            check_k(self._param("k"), X.shape[1] if s == "item" else X.shape[0], f"{s}s")

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, validation=None):
        """Fit on the feedback matrix ``X``; ``validation`` (keyword, same shape, disjoint from
        ``X``) enables early stopping on validation ADG.  ``y`` must be ``None`` (scikit-learn's
        signature).  Returns ``self``."""
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
        item, user = build_affinities(X, self.affinity, self.side, self.k, self.affinity_params, self.num_threads)
        for name, value in (("item_affinity_", item), ("user_affinity_", user)):
            if value is not None:
                setattr(self, name, value)
        Recommender._prepare(self)  # popularity, for the validation evaluations
        self._prepare_features()
        self.feature_mean_, self.feature_scale_ = _statistics(self.extractor_)
        self._train(X, validation)

    def _training_problem(self, X):
        """``(extractor, mean, scale, positives, known)`` of the training pairs: ``X`` itself, or
        with a label holdout the feature part ``F`` and the labels ``L`` (module docstring)."""
        if self.holdout == 0:
            return self.extractor_, self.feature_mean_, self.feature_scale_, X, 0.0
        F, L, _ = holdout_checked(X, float(self.holdout), 0.0, np.random.default_rng(self.random_state))
        if L.nnz == 0:
            raise ValueError(f"holdout={self.holdout} leaves no label positive: users have too few interactions")
        item, user = build_affinities(F, self.affinity, self.side, self.k, self.affinity_params, self.num_threads)
        extractor = FeatureExtractor.trusted(F, self.k, item, user, self.num_threads)
        return (extractor, *_statistics(extractor), L, 1.0)

    def _train(self, X, validation):
        d = self.extractor_.n_features
        theta = np.zeros(d)
        if self.init == "sum":
            theta[AGGREGATORS.index("sum") :: _W] = 1.0
        self.coef_ = theta
        extractor, mean, scale, positives, known = self._training_problem(X)
        state = (*extractor.state, theta, mean, 1.0 / scale, np.array([float(self.lam), known]), np.zeros(1))
        limit = {"gamma": self.gamma} if self.beta is None else {"beta": self.beta}
        rows = {0: "query", 2: "item"} if "item" in self._sides else {0: "query", 5: "query"}
        sampler = WarpSampler.trusted(
            positives,
            loss="adg",
            normalize=False,
            positive_draws="reject",
            **limit,
            min_beta=1,
            random_state=self.random_state,
            num_threads=self.num_threads,
        )
        self.history_ = []
        best = (-np.inf, theta.copy(), 0)
        stale = 0
        done = 0
        if validation is not None:
            users = self._validation_users(validation)
            best = (self._validation_adg(X, validation, users), theta.copy(), 0)
            self.history_.append({"iteration": 0, "val_adg": best[0]})
        while done < self.iterations:
            n = min(self.eval_every, self.iterations - done)
            state[14][0] = 0.0
            stats = sampler.sgd(state, _febr_score, _febr_update, n, self.learning_rate, rows=rows)
            done += n
            record = {
                "iteration": done,
                "loss": state[14][0] / n + self.lam * float(theta @ theta),
                "violators": stats.violators,
                "draws": stats.draws,
            }
            if not np.all(np.isfinite(theta)):
                raise FloatingPointError(f"theta diverged after {done} samples: lower learning_rate")
            if validation is not None:
                record["val_adg"] = adg = self._validation_adg(X, validation, users)
                if adg > best[0]:
                    best, stale = (adg, theta.copy(), done), 0
                else:
                    stale += 1
            self.history_.append(record)
            if self.early_stopping is not None and stale >= self.early_stopping:
                break
        if validation is not None:
            theta[:] = best[1]
        self.best_iteration_ = best[2] if validation is not None else done
        self.linear_ = np.vstack([theta, self.feature_mean_, self.feature_scale_])  # saved as one array

    def _validation_users(self, validation):
        """Users of the validation evaluations: at most ``validation_users`` (fixed sample), sorted."""
        users = np.flatnonzero(np.diff(validation.indptr) > 0)
        if self.validation_users is None or len(users) <= self.validation_users:
            return users
        return np.sort(np.random.default_rng(self.random_state).choice(users, self.validation_users, replace=False))

    def _validation_adg(self, X, validation, users):
        return evaluate_checked(self.score, X, validation, None, ["ADG"], users=users, num_threads=self.num_threads)[
            "ADG"
        ]

    # ------------------------------------------------------------------ state
    def _prepare_features(self):
        k = self._param("k")
        self.extractor_ = FeatureExtractor.trusted(
            self.user_items_,
            k,
            getattr(self, "item_affinity_", None),
            getattr(self, "user_affinity_", None),
            self.num_threads,
        )
        self.feature_names_ = self.extractor_.feature_names
        kind = self.user_affinity_.kind if "user" in self._sides else None
        if kind in ("cosine", "kunn"):  # for recalculate_user: the O(nnz) work done once
            weights = np.ones(self.n_items_) if kind == "cosine" else kunn_weights(self.user_items_)
            self.user_index_ = _knn_index(self.user_items_, weights)

    def _prepare(self):
        super()._prepare()
        if getattr(self, "extractor_", None) is None or self.extractor_.X is not self.user_items_:
            self._prepare_features()
        self.coef_, self.feature_mean_, self.feature_scale_ = (np.ascontiguousarray(r) for r in self.linear_)

    def _check_state(self):
        super()._check_state()
        for s in self._sides:
            value = getattr(self, f"{s}_affinity_")
            if self.k > value.k_max:
                raise ValueError(f"{s}_affinity_ has k_max={value.k_max} < k={self.k}")
        d = _W * len(self._sides)
        lin = self.linear_
        if lin.shape != (3, d) or np.any(lin[2] <= 0):
            raise ValueError(f"linear_ must hold theta, mean and a positive scale of {d} features")

    # ------------------------------------------------------------------ scoring
    def _score_rows(self, rows, ids, recalculate):
        if recalculate and "user" in self._sides:
            neighbors = self._user_neighbors(rows, ids)
        else:
            neighbors = self.extractor_.neighbors_of(ids)  # empty rows without a user side
        return self.extractor_.linear_scores(self.coef_, self.feature_mean_, self.feature_scale_, rows, neighbors)

    def _user_neighbors(self, rows, ids):
        """``KNN_k(u)`` of the users' rows recomputed against the training users."""
        if not hasattr(self, "user_index_"):
            kind = self.user_affinity_.kind
            raise ValueError(f"recalculate_user needs a cosine or kunn user affinity, this one is {kind!r}")
        query_ids = np.where(ids < self.n_users_, ids, -1)
        return _knn_query(self.user_index_, rows, self._param("k"), query_ids, self.num_threads)

    def transform(self, user_ids):
        """Raw features ``(len(user_ids), n_items, n_features)`` of training users (pass batches)."""
        self._check_fitted()
        return self.extractor_.transform(user_ids)

    def _item_affinity(self):
        if "item" not in self._sides:
            return super()._item_affinity()
        return self.item_affinity_

    def _user_similarity_rows(self, users):
        if "user" in self._sides:
            return self.user_affinity_.matrix[users].toarray()
        return super()._user_similarity_rows(users)

    # ------------------------------------------------------------------ persistence
    def _saved_params(self):
        """An Affinity given as ``affinity`` is saved in the fitted state and recorded in the
        parameters by its kind (a reloaded model predicts identically; refitting it recomputes that
        kind, and kind ``"custom"`` cannot be refitted)."""
        params = super()._saved_params()
        given = params["affinity"]
        if not isinstance(given, str):
            first = given[0] if isinstance(given, (tuple, list)) else given
            params["affinity"] = first.kind if isinstance(first, Affinity) else str(first)
        return params


def _statistics(extractor):
    """z-statistics over all items of at most ``_STAT_USERS`` evenly spaced users (a fixed sample:
    scaling is only a preconditioner, and a full pass costs as much as scoring every user)."""
    m = extractor.X.shape[0]
    return extractor.statistics(np.unique(np.linspace(0, m - 1, min(m, _STAT_USERS)).astype(np.int64)))
