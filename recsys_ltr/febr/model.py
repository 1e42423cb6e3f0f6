"""Stacked FEBR: learning to rank on the scores of base recommenders, trained by OPT-ADG (Alg. 4.2).

The dissertation's FEBR admits any feature extracted from the feedback matrix (sec. 4.5); here the
features of a pair are the scores that fitted base recommenders give it, raw and standardised
within the user, with item popularity and user activity (:mod:`recsys_ltr.febr.stacking`).
Training is leak-free: a training label must not be among the data its features were computed
from, or a base that memorises its training positives would look perfect.  Each user's positives
are split into a feature part ``F`` and labels ``L`` (``holdout``); the bases that make the
training features are fitted on ``F``, the pairs are the candidate pools of
:func:`~recsys_ltr.febr.stacking.build_pool` (every base's top candidates: negatives are the pool's
non-labels; the validation positives are never among them), the validation decisions score their
users with the bases fitted on the training part, and at prediction the bases are refitted on all
of ``X``.  The labels are drawn as
the evaluation protocol draws its held-out items (``label_exclude_top`` for the novelty protocol).
``theta`` starts at the tail (the best single base on validation, or the mean of the within-user
standardised scores of the bases tied with it when that mean beats it significantly) and early stopping keeps the
best validation value (ADG, or ``validation_metric``), so the model never ends below that tail on
validation; ``scorer="lambdamart"`` re-ranks the pools' head with LambdaMART
(:mod:`recsys_ltr.ltr.trees`).  The training itself is :mod:`recsys_ltr.febr.training`'s.
"""

from __future__ import annotations

import logging

import numpy as np

from .._progress import report_stage
from .._threads import check_num_threads, numba_threads
from .._validation import check_ids, check_positive_int, check_real
from ..ltr.trees import TREE_STATE, check_lambdamart_params, load_tree_state, set_tree_state
from ..models.base import Recommender
from ..models.updates import Update
from .bases import check_bases, fit_stack, named_bases, resolve_bases, training_pool
from .scoring import Linear, compose, head_key, pool_problem, tail_scores
from .stacking import BaseFeatures, Stack, feature_names, kept_columns, n_features, z_column
from .training import OptADGRecommender, check_user_limit
from .validation import best_reranker, choose_tail, draw_samples, keep_scorer

__all__ = ["FEBR"]

_log = logging.getLogger(__name__)

_SCORERS = ("linear", "lambdamart")


_CONTEXT_STATE = ("context_mean_", "context_scale_", "context_pop_", "context_act_")


class FEBR(OptADGRecommender):
    """Stacked FEBR: OPT-ADG (Algorithm 4.2) on the scores of base recommenders, optionally re-ranked by
    LambdaMART (module docstring).

    Parameters
    ----------
    bases : "auto" or list of Recommender or of (str, Recommender)
        ``"auto"``: the default bases of :data:`recsys_ltr.febr.bases.AUTO_BASES`, each at its one-line
        default (EASE, dense on small catalogues and sparse on large ones, GF-CF, ChebyCF, ALS, RP3β,
        KUNN, user-p, item-p and, up to 2,048 items, fsSLIM), chosen on the training data: on large data
        the user-side neighbourhoods, EASE, GF-CF and ChebyCF are left out past a cost limit
        (:class:`~recsys_ltr.febr.bases.Workload`).  A list: these recommenders with their parameters as
        given (a model already fitted on the same ``X`` is reused at prediction), each named by its
        class or, as in scikit-learn's ``StackingClassifier``, by the name it is paired with; the
        names (``base_names_``) name the features and are saved with the model.
    scorer : {"linear", "lambdamart"}
        How the head is re-ranked: the linear scorer trained by OPT-ADG, or LightGBM's LambdaMART
        on the same features (needs LightGBM).
    candidates : int
        ``M``: every user's head -- the pairs trained on and re-ranked -- is the union of each
        base's ``M`` best candidates.  The other items keep the order of the tail.
    holdout : float in [0, 1) or int >= 2
        Fraction of each user's positives held out as training labels, with features from the rest;
        an int ``K``: out-of-fold labels -- each user's positives split in ``K`` parts, each part the
        labels of bases fitted on the other parts (``K`` fits of every base); ``0``: training on
        ``X`` itself (leaky).
    label_exclude_top, validation_fraction, refit, regularization, learning_rate, max_iter, gamma, \
beta, eval_every, early_stopping, validation_users, validation_metric, random_state, num_threads, \
show_progress :
        OPT-ADG's, see :class:`~recsys_ltr.febr.training.OptADGRecommender`; ``refit`` refits the
        bases on all of ``X``; ``validation_users`` (``"auto"``: from the catalogue size) bounds each
        validation sample, and the early-stopping sample leaves the paired test below users of their
        own (:data:`~recsys_ltr.febr.validation.MIN_CONFIRMATION_USERS`).
    training_users : int, "auto" or None
        The most label users whose pools the scorer trains on, a random sample of each label part
        (``"auto"``: as many as keep their base scores within :data:`POOL_SCORES` values, users x
        items x bases over the label parts, and at most :data:`POOL_USERS` users; every user of the
        benchmark sets up to citeulike-a, 3,742 of gowalla's 29,858); ``None``: all.
    init : {"best", "zeros"}
        Starting ``theta``: the tail's weights on the bases' within-user scores.
    lambdamart_params : dict, optional
        LightGBM parameters over :data:`recsys_ltr.ltr.trees.DEFAULTS` (up to 500 rounds at
        learning rate 0.05, early stopping on NDCG@10 of the validation pools).  Default: the two
        :data:`~recsys_ltr.febr.validation.LAMBDAMART_SETTINGS`, the better on validation.
    fallback_p : float in [0, 1] or None
        The trained scorer is kept only when it beats the tail alone on validation users held out
        from the early stopping: a positive mean gain (of ``validation_metric``) that a one-sided
        paired t-test finds at ``p < fallback_p`` (a test of the mean, the value compared: a
        signed-rank test can favour a scorer that lifts most users a little and loses more on a
        few); else FEBR ranks as the tail.
        The same test decides which bases are tied with the best on every validation user and
        whether their mean, the tail then, beats the best alone there.  With too few validation
        users to hold any out, the tail is one base: the best only when it beats the first of
        ``bases`` so (else the first).  ``None``: the scorer always kept, the tail the best base.

    Attributes
    ----------
    bases_ : list of Recommender
        The bases fitted on ``X``, named in ``base_names_``: when the scorer falls back to the tail
        (``fallback_p``), only the tail's bases, whose ranking FEBR's then is (the refit and every
        prediction cost theirs alone; ``history_``'s record 0 names every base validated).
    coef_, feature_mean_, feature_scale_ : ndarray (n_features,)
        ``theta`` and the standardisation (over the training pools) of the features named in
        ``feature_names_``.
    tail_weights_ : ndarray (n_bases,)
        The tail, whose order the items outside the head keep: weight 1 on one base (the best on
        validation; with too few validation users, only when it beats the first base
        significantly), or equal weights on the within-user standardised scores of the bases tied
        with the best (``fallback_p``) when their mean beats it on validation at ``fallback_p``.
    tail_bases_ : list of str
        The names of the bases with a tail weight.
    tail_gain_ : dict or None
        The test against the first base: ``users``, mean per-user validation ``gain`` and
        ``p_value`` (``None`` when it is not needed; not saved).
    trees_ : recsys_ltr.ltr.trees.Trees or None
        The LambdaMART trees (``scorer="lambdamart"``).
    stacked_gain_ : dict
        The paired test's ``users``, mean per-user validation ``gain`` and ``p_value`` (with
        validation and ``fallback_p``; not saved).
    history_, best_iteration_ :
        OPT-ADG's records (:class:`~recsys_ltr.febr.training.OptADGRecommender`; record 0 holds
        ``base_val_adg``, each base's validation ADG, or ``base_val_<metric>``; the last, with
        ``fallback_p``, the paired test: ``iteration="paired test"``, whether the scorer was
        ``kept`` and ``stacked_gain_``) and the samples drawn when the kept ``theta`` was reached
        (0 when FEBR fell back to the tail).

    Notes
    -----
    ``score`` is the tail's scores with each user's head re-ordered by the learnt scorer: the head
    items swap the places (scores) that the tail gives them, so items outside the head keep the
    tail's order.  The values are monotone in FEBR's ranking and comparable across a user's items
    (the tail's scale: one base's scores, or a mean of within-user standardised scores), not the
    scorer's own: those cannot keep the other items in place (the head above all: ``FEBR()`` test
    ADG .2227 against .2240 on movielens-1m-implicit).  Scoring all items of a user costs the bases'
    own scoring plus ``O(n_bases n)``.  The model is item-based when all its bases are, and passes
    ``recalculate_user`` to them.

    Examples
    --------
    >>> from recsys_ltr.datasets import make_synthetic
    >>> from recsys_ltr.febr import FEBR
    >>> from recsys_ltr.models import ItemKNN, RP3beta
    >>> X = make_synthetic(n_users=300, n_items=100, density=0.1, factor_scale=3.0, random_state=0).matrix
    >>> model = FEBR(bases=[ItemKNN(k=20), RP3beta(k=20)], candidates=30, max_iter=20_000, random_state=0).fit(X)
    >>> sorted(model.history_[0]["base_val_ndcg@20"])  # every base judged on the carved validation
    ['ItemKNN', 'RP3beta']
    >>> model.stacked_gain_["p_value"] > 0.05, model.base_names_  # the scorer did not pay: the tail kept
    (True, ['ItemKNN'])
    >>> ids, scores = model.recommend(0, N=3)
    >>> ids.shape
    (3,)

    ``FEBR()`` alone stacks the default bases (:data:`recsys_ltr.febr.bases.AUTO_BASES`), each at its
    defaults.
    """

    _INITS = ("best", "zeros")
    _nested = ("bases", "bases_", "base", Recommender)
    _shared_state = ("user_items_",)
    _model_state = ("linear_", "tail_weights_", *_CONTEXT_STATE, *TREE_STATE)

    _shared_defaults = {"validation_metric": "auto"}
    _parameters = {
        "bases": "auto",
        "scorer": "linear",
        "candidates": 100,
        "training_users": "auto",
        "lambdamart_params": None,
        "fallback_p": 0.05,
    }

    # ------------------------------------------------------------------ configuration
    def _saved_params(self):
        params = super()._saved_params()  # the fitted bases' classes and parameters, with their names
        params["bases"] = [[name, spec] for name, spec in zip(self.base_names_, params["bases"])]
        return params

    @classmethod
    def _decode_params(cls, params):
        named = params.get("bases")
        if not isinstance(named, list) or not all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) for e in named
        ):
            raise ValueError("bases must list the fitted bases as [name, {class, params}] pairs")
        params = super()._decode_params({**params, "bases": [spec for _, spec in named]})
        return {**params, "bases": [(name, base) for (name, _), base in zip(named, params["bases"])]}

    def _nested_templates(self):
        return [base for _, base in named_bases(self.bases)]

    @property
    def item_based(self):
        return all(b.item_based for b in self.__dict__.get("bases_", ()))

    def _required_state(self):
        return tuple(n for n in self._state_attributes if n not in TREE_STATE)

    def _check_params(self):
        super()._check_params()
        check_bases(self.bases)
        if self.scorer not in _SCORERS:
            raise ValueError(f"scorer must be one of {_SCORERS}, got {self.scorer!r}")
        check_positive_int(self.candidates, "candidates")
        if self.lambdamart_params is not None and not isinstance(self.lambdamart_params, dict):
            raise TypeError(f"lambdamart_params must be a dict or None, got {type(self.lambdamart_params).__name__}")
        check_lambdamart_params(self.lambdamart_params or {})
        if self.fallback_p is not None:
            check_real(self.fallback_p, "fallback_p", low=0.0, high=1.0)
        check_user_limit(self.training_users, "training_users")

    def _check_holdout(self):
        if isinstance(self.holdout, (int, np.integer)) and not isinstance(self.holdout, (bool, np.bool_)):
            if self.holdout != 0:
                check_positive_int(self.holdout, "holdout", minimum=2)
        else:
            super()._check_holdout()

    def _check_data_params(self, X):
        super()._check_data_params(X)
        folds, most = self._param("holdout"), int(np.diff(X.indptr).max(initial=0))
        if isinstance(folds, (int, np.integer)) and folds > max(most, 2):  # not a bool: checked by _check_params
            raise ValueError(f"holdout={folds} folds, but no user has more than {most} positives to split")

    # ------------------------------------------------------------------ training
    def _train(self, X, validation, final, rng, bar):
        """The training pool of the bases fitted on the label parts, the scorer learnt with the bases
        fitted on ``X``, then the bases refitted on ``final`` for prediction."""
        with numba_threads(self.num_threads):
            names, specs = resolve_bases(self.bases, X, self.num_threads)
            self.base_names_, self.feature_names_ = names, feature_names(names)
            stage = lambda message: report_stage(bar, _log, message)  # noqa: E731
            pool = training_pool(
                specs, names, X, validation, self.holdout, self.label_exclude_top, self.candidates,
                self.training_users, rng, stage, self.excluded_items_,
            )  # fmt: skip
            self._set_stack(fit_stack(specs, names, X, self.candidates, self.excluded_items_, stage))
            if not self._train_scorer(pool, X, validation, rng, bar):
                specs = self._narrow_to_tail(specs)
            if final is not X:
                stage("refit on all of X")
                self.bases_ = []  # the training part's bases released before the refit
                stack = fit_stack(specs, self.base_names_, final, self.candidates, self.excluded_items_, stage)
                self._set_stack(stack)

    def _narrow_to_tail(self, specs):
        """Only the tail's bases kept once the scorer has fallen back to it: FEBR's ranking is the tail's
        (:func:`~recsys_ltr.febr.scoring.compose`), so the refit and every prediction cost theirs alone.
        Returns the kept bases' specs."""
        kept = np.flatnonzero(self.tail_weights_)
        self.linear_ = np.ascontiguousarray(self.linear_[:, kept_columns(kept, len(self.base_names_))])
        self._prepare_linear()
        self.tail_weights_ = self.tail_weights_[kept]
        self.base_names_ = [self.base_names_[b] for b in kept]
        self.feature_names_ = feature_names(self.base_names_)
        context = self._context
        self._set_stack(
            Stack(
                [self.bases_[b] for b in kept],
                context._replace(mean=context.mean[kept], scale=context.scale[kept]),
                self.candidates,
                self.excluded_items_,
            )
        )
        return [specs[b] for b in kept]

    def _train_scorer(self, pool, X, validation, rng, bar) -> bool:
        """The tail (the best on validation), ``theta`` by OPT-ADG from it, then the trees; the scorer
        kept only when it beats the tail on the test users (:mod:`recsys_ltr.febr.validation`).
        Returns whether it was kept."""
        mean, scale = pool.statistics()
        theta = self._set_linear(mean, scale)
        set_tree_state(self, None)
        if validation is not None:
            report_stage(bar, _log, "validation samples")
        samples = self._draw_samples(X, validation, rng)
        self._set_tail(samples)
        if self.init == "best":
            self._start_at_tail(theta, scale)
        validate = None
        if samples is not None:
            validate = lambda t: samples.selection.value(Linear(t, mean, scale), self.tail_weights_)  # noqa: E731
        report_stage(bar, _log, "training (OPT-ADG)")
        threads, seed = self.num_threads, self.random_state
        problem = pool_problem(pool, theta, mean, scale, X.shape[1], self.regularization, seed, threads, self._limit())
        self._run_optadg(*problem, validate, bar)
        if self.scorer == "lambdamart":
            report_stage(bar, _log, "LambdaMART")
            self._fit_trees(pool, validation, samples, rng)
        if samples is not None and samples.tests is not None:
            report_stage(bar, _log, "paired test against the tail")
            keep, self.stacked_gain_ = keep_scorer(samples.tests, self._scorer, self.tail_weights_, self.fallback_p)
            self.history_.append({"iteration": "paired test", "kept": keep, **self.stacked_gain_})
            if not keep:  # noise or a loss: the tail alone, reached before any sample
                theta[:] = 0.0
                self._start_at_tail(theta, scale)
                set_tree_state(self, None)
                self.best_iteration_ = 0
                return False
        return True

    def _draw_samples(self, X, validation, rng):
        """The validation samples of every decision (``None`` without validation)."""
        if validation is None:
            return None
        limit, metric = self._validation_limit(X.shape[1]), self._validation_metric(X.shape[1])
        return draw_samples(
            self._stack, X, validation, limit, metric, rng, self.num_threads, tests=self.fallback_p is not None
        )

    def _set_tail(self, samples):
        """``tail_weights_`` and ``tail_gain_`` (:func:`~recsys_ltr.febr.validation.choose_tail`; the
        first base without validation)."""
        if samples is None:
            self.tail_weights_, self.tail_gain_ = np.eye(len(self.base_names_))[0], None
            return
        tail = choose_tail(samples, self.base_names_, self.fallback_p, self._val_key)
        self.tail_weights_, self.tail_gain_ = tail.weights, tail.gain
        self.history_.append(tail.record)

    def _fit_trees(self, pool, validation, samples, rng):
        """The LambdaMART trees (:func:`~recsys_ltr.febr.validation.best_reranker`)."""
        seed, threads = int(rng.integers(2**31 - 1)), check_num_threads(self.num_threads)
        selection = None if samples is None else samples.selection
        trees, self.lambdamart_iterations_, records = best_reranker(
            pool, validation, selection, self.tail_weights_, self.lambdamart_params, seed, threads, self._val_key
        )
        self.history_.extend(records)
        set_tree_state(self, trees)

    def _start_at_tail(self, theta, scale):
        """``theta`` ranking the head as the tail does: the tail's weights on the within-user scores."""
        for b in np.flatnonzero(self.tail_weights_):
            theta[z_column(b)] = scale[z_column(b)] * self.tail_weights_[b]

    @property
    def tail_bases_(self) -> list[str]:
        """Names of the bases the tail weighs (one, or the tied bases it averages)."""
        return [self.base_names_[b] for b in np.flatnonzero(self.tail_weights_)]

    def _update(self, kind, ids, M, grown) -> Update:
        """Users are re-learnt by every base (the scorer, the tail and the context are kept); a base
        that cannot raises before any changes.  Items: the context's popularity and the never-candidates
        are of the fitted catalogue."""
        if kind == "item":
            raise NotImplementedError(
                "FEBR cannot add or re-learn items without a refit (its context statistics and scorer are of "
                "the fitted catalogue): refit it on the grown matrix"
            )
        return Update(self, grown, {}, tuple(base._update(kind, ids, M, grown) for base in self.bases_))

    # ------------------------------------------------------------------ state
    def _set_stack(self, stack: Stack):
        self.bases_ = stack.bases
        self.context_mean_, self.context_scale_, self.context_pop_, self.context_act_ = stack.context

    @property
    def _context(self) -> BaseFeatures:
        return BaseFeatures(self.context_mean_, self.context_scale_, self.context_pop_, self.context_act_)

    # ------------------------------------------------------------------ scoring
    @property
    def _stack(self) -> Stack:
        return Stack(self.bases_, self._context, self._param("candidates"), self.excluded_items_)

    @property
    def _scorer(self):
        """The fitted scorer of the head: the trees when there are, else the linear one."""
        return self.trees_ if self.trees_ is not None else Linear(self.coef_, self.feature_mean_, self.feature_scale_)

    def _ranked_scores(self, rows, ids, recalculate):
        """The head of every user (each base's ``candidates`` best) in the scorer's order above the
        other items in the order of the tail (module docstring); the tail's scores alone when the
        scorer ranks as it."""
        stack = self._stack
        S, excluded = stack.scores(rows, ids, recalculate), stack.excluded(rows)
        if self._ranks_as_tail:
            return tail_scores(S, excluded, self.tail_weights_)
        indptr, items, phi = stack.head(S, rows, excluded)
        return compose(tail_scores(S, excluded, self.tail_weights_), (indptr, items), head_key(self._scorer, phi))

    @property
    def _ranks_as_tail(self) -> bool:
        """Whether the scorer is the tail's start (:meth:`_start_at_tail`: a fallen-back FEBR), which
        ranks every head as the tail does, so that FEBR's scores are the tail's."""
        if self.trees_ is not None:
            return False
        start = np.zeros_like(self.coef_)
        self._start_at_tail(start, self.feature_scale_)
        return bool(np.array_equal(self.coef_, start))

    @property
    def _tail_base(self):
        """The one base whose scores FEBR's are (it ranks as a tail of one base and excludes no item),
        else ``None``: FEBR then ranks by that base's own routes (sparse products, factors)."""
        if len(self.bases_) == 1 and self.excluded_items_.size == 0 and self._ranks_as_tail:
            return self.bases_[0]
        return None

    def _score_product(self, rows, ids, recalculate):
        base = self._tail_base
        return None if base is None else base._score_product(rows, ids, recalculate)

    def _score_factors(self, rows, ids, recalculate):
        base = self._tail_base
        return None if base is None else base._score_factors(rows, ids, recalculate)

    def head_features(self, user_ids):
        """Stacked features of the heads of training users (the union of each base's ``candidates``
        best unseen items): the pairs the scorer ranks.  Returns ``(indptr, items, phi)``: user
        ``user_ids[b]``'s head items (increasing) at ``indptr[b]:indptr[b + 1]`` and their features
        (columns ``feature_names_``, before the scorer's standardisation by ``feature_mean_`` and
        ``feature_scale_``).  Pass bounded batches (``n_bases`` dense rows of scores per user), e.g.
        through :func:`recsys_ltr.febr.febr_features`."""
        self._check_fitted()
        ids = check_ids(user_ids, self.n_users_, "user_ids")
        rows = self.user_items_[ids]
        with numba_threads(self.num_threads):
            stack = self._stack
            return stack.head(stack.scores(rows, ids), rows)

    #: the method :func:`recsys_ltr.febr.febr_features` runs on each block of users
    _features_method = "head_features"

    def _feature_floats(self) -> int:
        """Dense floats per user of :meth:`head_features` (the bases' rows of scores)."""
        return len(self.bases_) * self.n_items_

    def _item_similarity_rows(self, items):
        return self.bases_[0]._item_similarity_rows(items)  # the first base's item similarities

    # ------------------------------------------------------------------ persistence
    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        self.base_names_ = [name for name, _ in named_bases(self.bases)]
        self.feature_names_ = feature_names(self.base_names_)

    def _check_state(self):
        super()._check_state()
        nb, n = len(self.bases_), self.n_items_
        d = n_features(nb)
        self._check_dense_state({"tail_weights_": (nb,), **dict(zip(_CONTEXT_STATE, ((nb,), (nb,), (n,), (2,))))})
        w = self.tail_weights_
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w):
            raise ValueError("tail_weights_ must be finite, non-negative and not all zero")
        if np.any(self.context_scale_ <= 0) or self.context_act_[1] <= 0:
            raise ValueError("context scales must be positive")
        load_tree_state(self, d)
        self._check_linear(d)
