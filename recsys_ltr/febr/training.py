"""OPT-ADG (dissertation sec. 4.6, Alg. 4.2): the training shared by :class:`~recsys_ltr.febr.FEBR`
and :class:`~recsys_ltr.febr.AffinityFEBR`.

A FEBR model scores a pair by a learnt linear function of its features, ``f(u, i) = theta . (phi(u,
i) - mean) / scale``, trained for ADG through the shared engine :class:`recsys_ltr.warp.WarpSampler`::

    (1/|U|) sum_u sum_{i+ in L_u, v in V(u, i+)} C(|V|) (f(u, v) - f(u, i+) + 1) / (|L_u| |V|)
        + regularization ||theta||^2,        C(k) = 1 - 1 / log2(k + 2)   (Eq. 4.8)

``u`` uniform, ``i+`` uniform in the labels ``L_u``, negatives uniform among the non-labels until
one violates the margin or ``beta_u = max(1, floor(N_u / gamma))`` draws are spent, then a step on
``C(floor(N_u / n_s)) (f(u, v) - f(u, i+) + 1) + regularization ||theta||^2`` (``n_s`` draws spent).

:class:`OptADG` is the loop (chunks of ``eval_every`` samples, early stopping on the validation
metric, a callback per checkpoint); :class:`OptADGRecommender` what both estimators share: their
parameters (:data:`OPTADG_PARAMETERS`, declared once), the validation carved out of ``X`` for the
users a given one leaves out (every user when none is given) and the refit on all of ``X``.  The
label holdout (a training label must not be among the data its features were computed from) is
``recsys_ltr.split.label_parts``.  A subclass makes
the scorer from the training part and the prediction-time state from the final matrix (``_train``).

Names: ``regularization`` is the dissertation's ``lambda``, ``max_iter`` counts ``(u, i+)`` samples
(SGD steps), ``gamma`` and ``beta`` are the rank truncation of sec. 3.5.
"""

from __future__ import annotations

import inspect
import logging
from typing import NamedTuple

import numpy as np

from .._progress import progress, report_stage
from .._validation import check_feedback, check_positive_int, check_real, check_same_shape, check_seed
from ..metrics import metric_name
from ..models.base import Recommender
from ..split import eligible_positives, holdout_trusted, top_items_trusted

__all__ = [
    "AUTO_VALIDATION_CUTOFF",
    "AUTO_VALIDATION_METRIC",
    "MIN_VALIDATION_USERS",
    "OPTADG_PARAMETERS",
    "STAT_USERS",
    "VALIDATION_SCORES",
    "OptADG",
    "OptADGRecommender",
]

_log = logging.getLogger(__name__)

#: Statistics of the features (their standardisation, the bases' score moments) are taken over at
#: most this many evenly spaced users: a fixed sample, as scaling is only a preconditioner.
STAT_USERS = 1000

#: ``validation_users="auto"``: at least :data:`MIN_VALIDATION_USERS` validation users, and every
#: one while a base's scores of the sample hold at most :data:`VALIDATION_SCORES` values.  An
#: evaluation costs about users x items, so a small catalogue buys a larger, less noisy sample at
#: the price of 1,000 users of 2,048 items (msweb, 285 items: every validation user, 2,767 in place
#: of 1,000, chose a better tail base: test ADG .5616 against .5599, 3 seeds).
MIN_VALIDATION_USERS = 1000
#: The scores of one base over the validation sample that ``validation_users="auto"`` may add users
#: up to (:data:`MIN_VALIDATION_USERS`).
VALIDATION_SCORES = 2**21


#: ``validation_metric="auto"`` (stacked FEBR's default): NDCG at :data:`AUTO_VALIDATION_CUTOFF`.  The
#: scorer re-orders only each user's head, so a metric of the head sees its gains where ADG dilutes
#: them in the ranks of the tail: judged by NDCG@20, ``FEBR()`` kept its scorer more often and ended
#: higher than judged by ADG on ADG, MAP, Recall@20 and NDCG@20 alike, on each of the five benchmark
#: sets (3 seeds each, ``benchmarks/febr_defaults.py``; e.g. movielens-1m-implicit ADG .2252 against
#: .2242, NDCG@20 .3865 against .3738).
AUTO_VALIDATION_METRIC = "NDCG"
#: The cutoff of ``validation_metric="auto"``: the top-20 lists users judge (smaller catalogues: all).
AUTO_VALIDATION_CUTOFF = 20

#: OPT-ADG's parameters, declared once for both FEBR estimators: the keyword-only parameters after a
#: class's own (``_parameters``), with their defaults (``init``: the class's first ``_INITS``; a class's
#: ``_shared_defaults`` replace others), in the order of the signature.
OPTADG_PARAMETERS = {
    "holdout": 0.2,
    "label_exclude_top": None,
    "validation_fraction": 0.1,
    "refit": True,
    "regularization": 1e-4,
    "learning_rate": 0.01,
    "max_iter": 1_000_000,
    "gamma": 50,
    "beta": None,
    "eval_every": 50_000,
    "early_stopping": 5,
    "validation_users": "auto",
    "validation_metric": "ADG",
    "init": None,
    "random_state": 0,
    "num_threads": 0,
    "show_progress": None,
}


def _constructor(own: dict, shared: dict):
    """An ``__init__`` that only stores its parameters, ``own`` (positional or keyword) then ``shared``
    (keyword-only), its signature the one scikit-learn's ``get_params`` and the docs read."""
    kinds = [(name, default, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name, default in own.items()]
    kinds += [(name, default, inspect.Parameter.KEYWORD_ONLY) for name, default in shared.items()]
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    signature = inspect.Signature([self] + [inspect.Parameter(n, kind, default=d) for n, d, kind in kinds])

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)

    __init__.__signature__ = signature
    return __init__


def check_user_limit(value, name) -> None:
    """Check a limit on users: a positive int, ``"auto"`` or ``None``."""
    if isinstance(value, str) and value != "auto":
        raise ValueError(f"{name} must be a positive int, 'auto' or None, got {value!r}")
    if value is not None and not isinstance(value, str):
        check_positive_int(value, name)


class OptADGRecommender(Recommender):
    """Base of the FEBR estimators: parameters and fit of OPT-ADG (module docstring).

    Subclasses define ``__init__`` (with the shared parameters below), ``_INITS`` (their starting
    points of ``theta``, the default first) and ``_train(X, validation, final, rng, bar)``: the scorer
    learnt from ``X`` (the training part) and ``validation``, the prediction-time state fitted on
    ``final`` (all of the data with ``refit``, else ``X``).

    Parameters
    ----------
    holdout : float in [0, 1)
        Fraction of each user's positives held out as training labels, with features from the rest
        (counts rounded at random, as ``validation_fraction``'s); ``0``: training on ``X`` itself
        (leaky: the dissertation's setting).
    label_exclude_top : int or None
        Draw the training labels outside the ``label_exclude_top`` most popular items, as the
        novelty protocol draws its held-out items (``None``: uniformly, as the standard protocol).
        Those items (``excluded_items_``, by popularity in ``X``) can then never be what the model
        predicts: they score ``-inf``, below every other item.
    validation_fraction : float in [0, 1)
        ``fit`` holds out this fraction of the positives of every user that has no ``validation``
        positive (of every user without a ``validation`` matrix) for early stopping and model
        selection (scikit-learn's habit); ``0``: none (the matrix alone).  Each user's count is
        rounded at random (``recsys_ltr.split.holdout_trusted``'s ``proportional``), so that users
        with few positives are validated on in proportion: rounded half up, a 10% holdout skips
        every user with fewer than 5, and validation then ranks the bases as the active users do
        (msweb: a tail that was below the best base on test).
    refit : bool
        After training on a held-out validation split, fit the prediction-time features on all of
        ``X`` (else on the training part).
    regularization : float >= 0
        ``lambda ||theta||^2``.
    learning_rate : float > 0
    max_iter : int
        Maximum number of ``(u, i+)`` samples (SGD steps).
    gamma, beta :
        Rank truncation: at most ``max(1, floor(N_u / gamma))`` negative draws, or the cap ``beta``.
    eval_every : int
        Samples between two validation evaluations (``history_`` records).
    early_stopping : int or None
        Stop after this many evaluations without a better validation value (``None``: run all
        samples); the best ``theta`` seen is kept either way.
    validation_users : int, "auto" or None
        At most this many validation users (a fixed random sample) in the validation evaluations;
        ``"auto"``: ``max(1000, 2**21 // n_items)`` (:data:`VALIDATION_SCORES`); ``None``: all.
    validation_metric : str
        The metric of every validation decision -- early stopping, and stacked FEBR's tail base and
        paired tests -- any name :func:`recsys_ltr.metrics.evaluate` takes (``"ADG"``, the objective
        OPT-ADG optimises and the dissertation's FEBR's default; ``"REC@20"`` when top-20 lists are
        what will be judged), or ``"auto"``: ``"NDCG@20"`` (the catalogue's size on fewer items),
        stacked FEBR's default (:data:`AUTO_VALIDATION_METRIC`).
    init : str
        Starting ``theta`` (subclasses).
    random_state : int or None
        Seed of the splits and the sampler.  With ``num_threads=1`` a seed gives a bit-for-bit
        identical model; with more threads Hogwild updates interleave differently between runs.
    num_threads : int
        numba threads (0 = all).
    show_progress : bool or None
        Progress bar over training, the validation value in its postfix (``None``: on in a terminal).

    Attributes
    ----------
    excluded_items_ : ndarray of int
        The ``label_exclude_top`` most popular items of ``X`` (empty without it), ranked last.
    coef_, feature_mean_, feature_scale_ : ndarray (n_features,)
        ``theta`` and the standardisation of the features named in ``feature_names_`` (the rows of
        ``linear_``).
    history_ : list of dict
        One record every ``eval_every`` samples (``iteration``, ``loss``: mean weighted hinge per
        sample plus ``regularization ||theta||^2``, ``violators``, ``draws``, ``val_adg``, or
        ``val_<metric>`` for another ``validation_metric``, e.g. ``val_rec@20``); record 0 holds the
        start.  Not saved.
    best_iteration_ : int
        Samples drawn when the kept ``theta`` was reached.
    """

    _INITS: tuple[str, ...] = ()
    #: the class's own parameters and their defaults, before :data:`OPTADG_PARAMETERS`
    _parameters: dict = {}
    #: defaults of :data:`OPTADG_PARAMETERS` that differ in this class
    _shared_defaults: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        shared = {**OPTADG_PARAMETERS, "init": cls._INITS[0] if cls._INITS else None, **cls._shared_defaults}
        cls.__init__ = _constructor(cls._parameters, shared)

    # ------------------------------------------------------------------ configuration
    def _check_params(self):
        super()._check_params()
        if self.init not in self._INITS:
            raise ValueError(f"init must be one of {self._INITS}, got {self.init!r}")
        self._check_holdout()
        if self.label_exclude_top is not None:
            check_positive_int(self.label_exclude_top, "label_exclude_top", minimum=0)
        check_real(self.validation_fraction, "validation_fraction", low=0.0, high=1.0, high_open=True)
        if not isinstance(self.refit, (bool, np.bool_)):
            raise TypeError(f"refit must be a bool, got {self.refit!r}")
        check_real(self.regularization, "regularization", low=0.0)
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        check_positive_int(self.max_iter, "max_iter", minimum=0)
        check_positive_int(self.eval_every, "eval_every")
        check_positive_int(self.gamma if self.beta is None else self.beta, "gamma" if self.beta is None else "beta")
        if self.early_stopping is not None:
            check_positive_int(self.early_stopping, "early_stopping")
        check_user_limit(self.validation_users, "validation_users")
        check_seed(self.random_state)
        if not isinstance(self.validation_metric, str):
            raise TypeError(f"validation_metric must be a metric name (str), got {self.validation_metric!r}")

    def _validation_metric(self, n_items) -> str:
        """The result name of ``validation_metric`` (:func:`recsys_ltr.metrics.metric_name`)."""
        spec = self._param("validation_metric")
        if spec == "auto":
            spec = f"{AUTO_VALIDATION_METRIC}@{min(AUTO_VALIDATION_CUTOFF, n_items)}"
        return metric_name(spec, n_items)

    @property
    def _val_key(self) -> str:
        """The ``history_`` key of a validation value while fitting: ``"val_adg"``, ``"val_rec@20"``."""
        return "val_" + self._validation_metric(self.user_items_.shape[1]).lower()

    def _check_holdout(self):
        check_real(self.holdout, "holdout", low=0.0, high=1.0, high_open=True)

    def _validation_limit(self, n_items):
        """The most validation users an evaluation samples (``None``: all)."""
        if isinstance(self.validation_users, str):  # "auto"
            return max(MIN_VALIDATION_USERS, VALIDATION_SCORES // n_items)
        return self.validation_users

    def _check_data_params(self, X):
        self._validation_metric(X.shape[1])
        top = self._param("label_exclude_top")
        if top is not None and top >= X.shape[1]:
            raise ValueError(f"label_exclude_top={top} leaves no item to draw labels from ({X.shape[1]} items)")

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, validation=None):
        """Fit on the feedback matrix ``X``; ``validation`` (keyword, same shape, disjoint from
        ``X``) serves early stopping and model selection, with ``validation_fraction`` of the
        positives of the users it leaves out (of every user without it) held out of ``X``.  ``y``
        must be ``None`` (scikit-learn's signature).  Returns ``self``."""
        if y is not None:
            raise TypeError(
                f"{type(self).__name__}.fit takes the validation matrix as a keyword, fit(X, validation=V); "
                "y must be None"
            )
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
        self._set_excluded(X)
        X_fit = X
        if self.validation_fraction > 0:
            X_fit, validation = self._validation_of_every_user(X, validation, rng)
        self.history_ = []
        with progress(self.show_progress, desc=type(self).__name__, total=self.max_iter) as bar:
            self._train(X_fit, validation, X if self.refit else X_fit, rng, bar)
            report_stage(bar, _log, f"done: {self.best_iteration_} samples kept")

    def _validation_of_every_user(self, X, validation, rng):
        """``(X_fit, validation)``: ``validation_fraction`` of the positives of every user without
        validation positives (every user without a matrix) held out of ``X``, each user's count
        rounded at random (``proportional``) and among the positives labels may be drawn from
        (``recsys_ltr.split.eligible_positives``).  A split rounded half up holds nothing out of the
        users with fewer than ``0.5 / val`` positives, and decisions judged on the others rank the
        bases as the active users do (msweb: 26,431 of 32,711 users without validation; RP3β, the
        best base on the others, .5554 against SLIM's .5614 on test).  A user keeps one eligible
        positive, so users with a single one are not validated on (msweb's novelty protocol: judged
        by their one item outside the 100 most popular, KUNN or SLIM ranked above EASE, the best on
        test).  With a matrix the draw has a generator of its own, so that a matrix of every user
        leaves the fit as it was."""
        counts = np.diff(X.indptr)
        rows = np.repeat(np.arange(X.shape[0]), counts)
        eligible = eligible_positives(X, self._param("label_exclude_top"))
        carved_from = np.bincount(rows[eligible], minlength=X.shape[0]) >= 2
        if validation is not None:
            carved_from &= np.diff(validation.indptr) == 0
            rng = rng.spawn(1)[0]
        eligible &= carved_from[rows]
        X_fit, carved, _ = holdout_trusted(X, float(self.validation_fraction), 0.0, rng, eligible, proportional=True)
        if carved.nnz == 0:
            return X, validation
        return X_fit, carved if validation is None else (validation + carved).tocsr()

    def _train(self, X, validation, final, rng, bar):
        raise NotImplementedError

    # ------------------------------------------------------------------ the linear scorer
    def _set_linear(self, mean, scale) -> np.ndarray:
        """``linear_ = [theta = 0, mean, scale]``; returns ``theta``, a view that SGD updates in place."""
        self.linear_ = np.vstack([np.zeros(mean.size), mean, scale])
        self._prepare_linear()
        return self.coef_

    def _prepare_linear(self):
        self.coef_, self.feature_mean_, self.feature_scale_ = self.linear_  # views: rows of a C-ordered array

    def _prepare(self):
        super()._prepare()
        self.linear_ = np.ascontiguousarray(self.linear_, dtype=np.float64)
        self._prepare_linear()
        self._set_excluded(self.user_items_)

    def _set_excluded(self, X):
        top = self._param("label_exclude_top")
        self.excluded_items_ = top_items_trusted(X, top) if top else np.zeros(0, np.int64)

    def _score_rows(self, rows, ids, recalculate):
        """:meth:`_ranked_scores` with the ``excluded_items_`` ranked last (never a label)."""
        scores = self._ranked_scores(rows, ids, recalculate)
        scores[:, self.excluded_items_] = -np.inf
        return scores

    def _check_linear(self, d: int):
        """Check a loaded ``linear_`` against the ``d`` features of the fitted parameters."""
        if self.linear_.shape != (3, d) or np.any(self.linear_[2] <= 0):
            raise ValueError(f"linear_ must hold theta, mean and a positive scale of {d} features")

    def _run_optadg(self, sampler, state, fns, theta, monitor, total, validate, bar):
        """``theta`` trained in place by :class:`OptADG` at this model's parameters, every checkpoint
        into ``history_`` and the progress bar; sets ``best_iteration_``."""
        key = self._val_key

        def checkpoint(record):
            self.history_.append(record)
            bar.update(record["iteration"] - bar.n)
            if key in record:
                bar.set_postfix({key: f"{record[key]:.4f}"})

        loop = OptADG(self.max_iter, self.eval_every, self.learning_rate, self.regularization, self.early_stopping)
        theta[:], self.best_iteration_ = loop.run(sampler, state, fns, theta, monitor, validate, total, checkpoint, key)

    def _limit(self) -> dict:
        """The engine's rank truncation: ``gamma`` or ``beta``."""
        return {"gamma": self.gamma} if self.beta is None else {"beta": self.beta}


class OptADG(NamedTuple):
    """OPT-ADG's loop (Alg. 4.2): SGD through the engine in chunks of ``eval_every`` samples, at most
    ``max_iter``, keeping the model of the best validation value and stopping after ``early_stopping``
    evaluations without a better one (``None``: never)."""

    max_iter: int
    eval_every: int
    learning_rate: float
    regularization: float
    early_stopping: int | None

    def run(self, sampler, state, fns, theta, monitor, validate=None, total=None, callback=None, val_key="val"):
        """``(theta, best_iteration)``: the model kept and the samples drawn when it was reached.

        ``sampler.sgd(state, *fns[:2], ...)`` updates ``theta`` (a view into ``state``) in place and
        adds each step's weighted hinge to ``monitor[0]``; ``validate(theta)`` is the validation value
        (``None``: the last model is kept).  With ``total`` (the sum of the iterates, updated by the
        update function) the model is the average of the iterates so far (Polyak-Ruppert averaging:
        the constant-step iterates wander, their average converges), else the current iterate.
        ``callback(record)`` gets every checkpoint's record (``iteration``, ``loss``: mean weighted
        hinge per sample plus ``regularization ||theta||^2``, ``violators``, ``draws`` and, with
        validation, ``val_key``; with validation, record 0 holds the start), as implicit's
        ``fit(callback=...)``."""
        start = theta.copy()
        best = (validate(start), start, 0) if validate is not None else None
        if best is not None and callback is not None:
            callback({"iteration": 0, val_key: best[0]})
        stale = done = updates = 0
        current = start
        while done < self.max_iter:
            n = min(self.eval_every, self.max_iter - done)
            monitor[0] = 0.0
            stats = sampler.sgd(state, *fns[:2], n, self.learning_rate, rows=fns[2])
            done, updates = done + n, updates + stats.violators
            if not np.all(np.isfinite(theta)):
                raise FloatingPointError(f"theta diverged after {done} samples: lower learning_rate")
            current = theta.copy() if total is None else (total / updates if updates else start)
            record = {
                "iteration": done,
                "loss": monitor[0] / n + self.regularization * float(theta @ theta),
                "violators": stats.violators,
                "draws": stats.draws,
            }
            if best is not None:
                record[val_key] = value = validate(current)
                best, stale = ((value, current, done), 0) if value > best[0] else (best, stale + 1)
            if callback is not None:
                callback(record)
            if self.early_stopping is not None and stale >= self.early_stopping:
                break
        return (current, done) if best is None else (best[1], best[2])
