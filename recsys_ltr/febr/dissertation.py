"""The dissertation's FEBR (sec. 4.5-4.6): OPT-ADG on the aggregates of an affinity's active items
and users -- FEBRi / FEBRu / FEBRiu over cosine, KUNN, SLIM or RP3β affinities.

The features of a pair are those of :mod:`recsys_ltr.febr.features` (six aggregators and the
missing indicator per side), z-scored over all pairs of at most
:data:`~recsys_ltr.febr.training.STAT_USERS` evenly spaced users.  With ``holdout = h > 0`` the
affinity is rebuilt on the feature part ``F`` and the items of ``F`` are non-violating (``-inf``,
counted as draws as in LightFM's sampler, so ``N_u = n - |L_u|``); with ``h = 0``, the
dissertation's training on ``X`` itself.  ``init="sum"`` starts at 1 on every ``sum`` aggregate:
item-p / user-p by Theorem 4.3.
"""

from __future__ import annotations

import logging

import numpy as np
from numba import njit

from .._progress import report_stage
from .._threads import numba_threads
from ..metrics import evaluate_trusted
from ..neighbors.affinity import Affinity, HoldsAffinities, kunn_weights
from ..neighbors.knn import check_k, knn_index_trusted, knn_query_trusted
from ..split import label_parts, sample_users_trusted
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
from .training import STAT_USERS, OptADGRecommender

__all__ = ["AffinityFEBR"]

_log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------
# numba scorer for the engine: state = (*FeatureExtractor.state (10 arrays), theta, mean,
# inv_scale, hyper = [regularization, known], monitor = [sum of weighted hinge losses]); flat, as
# parallel kernels take no nested tuples, and the feature functions read only its first 10
# entries.  known = 1: the extractor's own positives (the feature part F) score -inf
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


class AffinityFEBR(HoldsAffinities, OptADGRecommender):
    """The dissertation's FEBR: OPT-ADG (Algorithm 4.2) on an affinity's active-item / active-user
    aggregates (module docstring).

    Parameters
    ----------
    affinity : str or Affinity or pair of Affinity
        The affinity kind ("cosine", "kunn", "slim", "rp3beta"), built on the training data, or
        fitted Affinity object(s) (one per side; ``holdout=0`` then, as they cannot be rebuilt).
    side : {"item", "user", "both"}
        FEBRi, FEBRu or FEBRiu.
    k : int
        Neighbourhood size of the active items / users.
    affinity_params : dict, optional
        Keyword arguments of the affinity's builder (e.g. ``{"l1": 0.1}`` for slim).
    holdout, label_exclude_top, validation_fraction, refit, regularization, learning_rate, \
max_iter, gamma, beta, eval_every, early_stopping, validation_users, validation_metric, random_state, \
num_threads, show_progress :
        OPT-ADG's, see :class:`~recsys_ltr.febr.training.OptADGRecommender`; ``refit`` rebuilds
        the affinities on all of ``X``.
    init : {"sum", "zeros"}
        Starting ``theta``: 1 on every ``sum`` aggregate (Theorem 4.3: item-p / user-p) or zeros.

    Attributes
    ----------
    item_affinity_, user_affinity_ : Affinity
        The affinities of the sides used.
    coef_, feature_mean_, feature_scale_ : ndarray (n_features,)
        ``theta`` and the standardisation of the features named in ``feature_names_``.
    history_, best_iteration_ :
        As :class:`~recsys_ltr.febr.FEBR`'s.

    Notes
    -----
    ``score`` returns the linear scores up to a constant per user.  FEBRi is item-based; FEBRu /
    FEBRiu use the stored ``KNN_k(u)``, recomputed from ``user_items`` with
    ``recalculate_user=True`` (cosine and kunn affinities).

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.febr import AffinityFEBR
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = AffinityFEBR(affinity="cosine", side="item", k=20, max_iter=20_000, random_state=0).fit(X)
    >>> model.feature_names_
    ['item_mean', 'item_std', 'item_min', 'item_max', 'item_len', 'item_sum', 'item_b']
    >>> model.transform([0, 1]).shape  # (users, items, features)
    (2, 100, 7)
    """

    _INITS = ("sum", "zeros")

    _parameters = {"affinity": "cosine", "side": "item", "k": 100, "affinity_params": None}
    _shared_defaults = {"validation_users": 1000}

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
        if self.affinity is None:
            raise ValueError("affinity must be a kind or fitted Affinity object(s)")
        if self.side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {self.side!r}")
        if self.holdout != 0 and not isinstance(self.affinity, str):
            raise ValueError("holdout > 0 rebuilds the affinity on the feature part: give affinity as a kind")
        if self.affinity_params is not None and not isinstance(self.affinity_params, dict):
            raise TypeError(f"affinity_params must be a dict or None, got {type(self.affinity_params).__name__}")

    def _check_data_params(self, X):
        super()._check_data_params(X)
        for s in self._sides:
            check_k(self._param("k"), X.shape[1] if s == "item" else X.shape[0], f"{s}s")

    # ------------------------------------------------------------------ training
    def _train(self, X, validation, final, rng, bar):
        with numba_threads(self.num_threads):
            report_stage(bar, _log, "affinities and features")
            self._set_features(X)
            theta = self._set_linear(*_statistics(self.extractor_))
            if self.init == "sum":
                theta[AGGREGATORS.index("sum") :: _W] = 1.0
            extractor, t_mean, t_scale, positives, known = self._training_problem(X, rng)
            hyper = np.array([float(self.regularization), known])
            state = (*extractor.state, theta, t_mean, 1.0 / t_scale, hyper, np.zeros(1))
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
            validate = None if validation is None else self._validator(X, validation, rng)
            report_stage(bar, _log, "training (OPT-ADG)")
            self._run_optadg(sampler, state, (_febr_score, _febr_update, rows), theta, state[14], None, validate, bar)
            if final is not X:  # the affinities rebuilt on all of the data after training on a held-out split
                report_stage(bar, _log, "refit on all of X")
                self._set_features(final)
                self.linear_[1], self.linear_[2] = _statistics(self.extractor_)

    def _validator(self, X, validation, rng):
        """``theta -> validation value`` (``validation_metric``) over at most ``validation_users``
        validation users."""
        users = sample_users_trusted(validation, self._validation_limit(X.shape[1]), rng)
        metric = self._validation_metric(X.shape[1])

        def validate(coef):
            score = lambda ids: self._linear_scores(X[ids], ids, False, coef)  # noqa: E731
            return evaluate_trusted(score, X, validation, None, [metric], users=users, num_threads=self.num_threads)[
                metric
            ]

        return validate

    def _training_problem(self, X, rng):
        """``(extractor, mean, scale, positives, known)`` of the training pairs: ``X`` itself, or
        with a label holdout the feature part ``F`` and the labels ``L`` (module docstring)."""
        if self.holdout == 0:
            return self.extractor_, self.feature_mean_, self.feature_scale_, X, 0.0
        ((F, L),) = label_parts(X, self.holdout, rng, self.label_exclude_top)
        item, user = build_affinities(F, self.affinity, self.side, self.k, self.affinity_params, self.num_threads)
        extractor = FeatureExtractor.trusted(F, self.k, item, user, self.num_threads)
        return (extractor, *_statistics(extractor), L, 1.0)

    def _set_features(self, X):
        item, user = build_affinities(X, self.affinity, self.side, self.k, self.affinity_params, self.num_threads)
        for name, value in (("item_affinity_", item), ("user_affinity_", user)):
            if value is not None:
                setattr(self, name, value)
        self._prepare_features(X)

    # ------------------------------------------------------------------ state and scoring
    def _prepare_features(self, X):
        self.extractor_ = FeatureExtractor.trusted(
            X,
            self._param("k"),
            getattr(self, "item_affinity_", None),
            getattr(self, "user_affinity_", None),
            self.num_threads,
        )
        self.feature_names_ = self.extractor_.feature_names
        kind = self.user_affinity_.kind if "user" in self._sides else None
        if kind in ("cosine", "kunn"):  # for recalculate_user: the O(nnz) work done once
            weights = np.ones(X.shape[1]) if kind == "cosine" else kunn_weights(X)
            self.user_index_ = knn_index_trusted(X, weights)

    def _prepare(self):
        super()._prepare()
        if getattr(self, "extractor_", None) is None or self.extractor_.X is not self.user_items_:
            self._prepare_features(self.user_items_)

    def _ranked_scores(self, rows, ids, recalculate):
        return self._linear_scores(rows, ids, recalculate)

    def _linear_scores(self, rows, ids, recalculate, coef=None):
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
        return knn_query_trusted(self.user_index_, rows, self._param("k"), query_ids, self.num_threads)

    def transform(self, user_ids):
        """Raw features ``(len(user_ids), n_items, n_features)`` of training users (pass bounded
        batches, e.g. through :func:`recsys_ltr.febr.febr_features`)."""
        self._check_fitted()
        return self.extractor_.transform(user_ids)

    #: the method :func:`recsys_ltr.febr.febr_features` runs on each block of users
    _features_method = "transform"

    def _feature_floats(self) -> int:
        """Dense floats per user of :meth:`transform`."""
        return len(self.feature_names_) * self.n_items_

    def _item_affinity(self):
        return self.item_affinity_ if "item" in self._sides else super()._item_affinity()

    def _user_similarity_rows(self, users):
        if "user" in self._sides:
            return self.user_affinity_.matrix[users].toarray()
        return super()._user_similarity_rows(users)

    # ------------------------------------------------------------------ persistence
    def _saved_params(self):
        """An Affinity given as ``affinity`` is saved in the state and recorded by its kind."""
        params = super()._saved_params()
        given = params["affinity"]
        if not isinstance(given, str):
            first = given[0] if isinstance(given, (tuple, list)) else given
            params["affinity"] = first.kind if isinstance(first, Affinity) else str(first)
        return params

    def _check_state(self):
        super()._check_state()
        for s in self._sides:
            value = getattr(self, f"{s}_affinity_")
            if self.k > value.k_max:
                raise ValueError(f"{s}_affinity_ has k_max={value.k_max} < k={self.k}")
        self._check_linear(_W * len(self._sides))


def _statistics(extractor):
    """z-statistics over all items of at most :data:`~recsys_ltr.febr.training.STAT_USERS` evenly
    spaced users (a full pass costs as much as scoring every user)."""
    return extractor.statistics(sample_users_trusted(extractor.X, STAT_USERS))
