"""Stacked FEBR: learning to rank on the scores of base recommenders, trained by OPT-ADG (Alg. 4.2).

The dissertation's FEBR admits any feature extracted from the feedback matrix (sec. 4.5); here the
features of a pair are the scores that fitted base recommenders give it, raw and standardised
within the user, with item popularity and user activity (:mod:`recsys_ltr.febr.stacking`).
Training is leak-free: a training label must not be among the data its features were computed
from, or a base that memorises its training positives would look perfect.  Each user's positives
are split into a feature part ``F`` and labels ``L`` (``holdout``); the bases that make the
training features are fitted on ``F``, the pairs are the candidate pools of
:func:`~recsys_ltr.febr.stacking.build_pool` (every base's top candidates: negatives are the pool's
non-labels), and at prediction the bases are refitted on all of ``X``.  The labels are drawn as
the evaluation protocol draws its held-out items (``label_exclude_top`` for the novelty protocol).
``theta`` starts at the tail (the best single base on validation, or the mean of the within-user
standardised scores of the bases tied with it when that mean is better) and early stopping keeps the
best validation value (ADG, or ``validation_metric``), so the model never ends below that tail on
validation; ``scorer="lambdamart"`` re-ranks the pools' head with LambdaMART (:mod:`recsys_ltr.ltr.trees`).  The training itself is
:mod:`recsys_ltr.febr.training`'s.
"""

from __future__ import annotations

import logging

import numpy as np

from .._progress import report_stage
from .._threads import numba_threads
from .._validation import check_ids, check_positive_int, check_real
from ..ltr.trees import TREE_STATE, Trees, check_lambdamart_params, load_tree_state, predict_trees, set_tree_state
from ..models.base import Recommender
from ..split import sample_users_trusted
from ..warp import WarpSampler
from .bases import check_bases, fit_on, named_bases, pools_of_label_parts, resolve_bases
from .scoring import (
    ValidationScores,
    compose,
    confirmation_scores,
    fit_reranker,
    linear_key,
    paired_gain,
    pool_score,
    pool_update,
    tail_scores,
)
from .stacking import (
    BaseFeatures,
    context_statistics,
    feature_names,
    heads,
    n_features,
    pool_relevance,
    stacked_scores,
    with_items,
    z_column,
)
from .training import STAT_USERS, OptADGRecommender, check_user_limit

__all__ = ["FEBR"]

_log = logging.getLogger(__name__)

_SCORERS = ("linear", "lambdamart")

#: ``training_users="auto"``: the label users of the training pools are a random sample when their
#: base scores (users x items x bases, over the label parts) would exceed this many values.  Building
#: the pools costs about that (each base's dense row of every user), while the scorer's weights (three
#: per base) gain nothing measurable from more queries: on gowalla (29,858 users x 40,981 items, six
#: bases) the pools of every user took 135 s of a 333 s fit, those of 8,733 users 42 s of 242 s, with
#: the same test figures (``benchmarks/gowalla_febr.py``, both validation metrics).  No sample on the
#: five data sets of the benchmark tables (citeulike-a, the largest, scores 5.7e8 values).
POOL_SCORES = 2**31

_CONTEXT_STATE = ("context_mean_", "context_scale_", "context_pop_", "context_act_")


class FEBR(OptADGRecommender):
    """Stacked FEBR: OPT-ADG (Algorithm 4.2) on the scores of base recommenders, optionally re-ranked by
    LambdaMART (module docstring).

    Parameters
    ----------
    bases : "auto" or list of Recommender or of (str, Recommender)
        ``"auto"``: the default bases of :data:`recsys_ltr.febr.bases.AUTO_BASES`, each at its one-line
        default (EASE, dense on small catalogues and sparse on large ones, ALS, RP3β, KUNN, user-p,
        item-p and, up to 2,048 items, fsSLIM).  A list: these recommenders with their parameters as
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
        own (:data:`~recsys_ltr.febr.scoring.MIN_CONFIRMATION_USERS`).
    training_users : int, "auto" or None
        The most label users whose pools the scorer trains on, a random sample of each label part
        (``"auto"``: as many as keep their base scores within :data:`POOL_SCORES` values, users x
        items x bases over the label parts; every user of the benchmark sets up to citeulike-a,
        8,733 of gowalla's 29,858); ``None``: all.
    init : {"best", "zeros"}
        Starting ``theta``: the tail's weights on the bases' within-user scores.
    lambdamart_params : dict, optional
        LightGBM parameters over :data:`recsys_ltr.ltr.trees.DEFAULTS` (up to 500 rounds at
        learning rate 0.05, early stopping on NDCG@10 of the validation pools).  Default: the two
        :data:`~recsys_ltr.febr.scoring.LAMBDAMART_SETTINGS`, the better on validation.
    fallback_p : float in [0, 1] or None
        The trained scorer is kept only when it beats the tail alone on validation users held out
        from the early stopping: a positive mean gain (of ``validation_metric``) that a one-sided
        paired Wilcoxon test finds at ``p < fallback_p`` (the signed-rank test alone can favour a
        scorer that lifts most users a little and loses more on a few); else FEBR ranks as the tail.
        The same test decides which bases are tied with the best on every validation user: the
        tail is their mean when it is better there than the best alone.  With too few validation
        users to hold any out, the tail is one base: the best only when it beats the first of
        ``bases`` so (else the first).  ``None``: the scorer always kept, the tail the best base.

    Attributes
    ----------
    bases_ : list of Recommender
        The bases fitted on ``X``, named in ``base_names_``.
    coef_, feature_mean_, feature_scale_ : ndarray (n_features,)
        ``theta`` and the standardisation (over the training pools) of the features named in
        ``feature_names_``.
    tail_weights_ : ndarray (n_bases,)
        The tail, whose order the items outside the head keep: weight 1 on one base (the best on
        validation; with too few validation users, only when it beats the first base
        significantly), or equal weights on the within-user standardised scores of the bases tied
        with the best (``fallback_p``) when their mean is better on validation.
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
        ``base_val_adg``, each base's validation ADG, or ``base_val_<metric>``) and the samples drawn
        when the kept ``theta`` was reached.

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
    >>> model.base_names_, len(model.feature_names_)
    (['ItemKNN', 'RP3beta'], 9)
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

    def __init__(
        self,
        bases="auto",
        scorer="linear",
        candidates=100,
        holdout=0.2,
        label_exclude_top=None,
        validation_fraction=0.1,
        refit=True,
        regularization=1e-4,
        learning_rate=0.01,
        max_iter=1_000_000,
        gamma=50,
        beta=None,
        eval_every=50_000,
        early_stopping=5,
        validation_users="auto",
        training_users="auto",
        validation_metric="ADG",
        init="best",
        lambdamart_params=None,
        fallback_p=0.05,
        random_state=0,
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
        self.regularization = regularization
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.gamma = gamma
        self.beta = beta
        self.eval_every = eval_every
        self.early_stopping = early_stopping
        self.validation_users = validation_users
        self.training_users = training_users
        self.validation_metric = validation_metric
        self.init = init
        self.lambdamart_params = lambdamart_params
        self.fallback_p = fallback_p
        self.random_state = random_state
        self.num_threads = num_threads
        self.show_progress = show_progress

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
    def _train(self, X, validation, rng, bar):
        with numba_threads(self.num_threads):
            pool = self._fit_bases(X, rng, bar)
            self._train_scorer(pool, X, validation, rng, bar)

    def _fit_bases(self, X, rng, bar):
        """The bases on the label parts, the training pools of their features, then the bases fitted
        on ``X``."""
        names, specs = resolve_bases(self.bases, X.shape, self.num_threads)
        stage = lambda message: report_stage(bar, _log, message)  # noqa: E731
        parts = self._label_parts(X, rng)
        pool = pools_of_label_parts(
            specs,
            names,
            parts,
            self.candidates,
            self.holdout != 0,
            self._training_limit(X.shape[1], len(specs), len(parts)),
            rng,
            stage,
            self.excluded_items_,
        )
        self._check_trainable(pool)
        self.base_names_ = names
        self.feature_names_ = feature_names(names)
        self._fit_prediction_bases(specs, X, stage)
        return pool

    def _fit_prediction_bases(self, specs, X, stage):
        """``bases_`` (:func:`~recsys_ltr.febr.bases.fit_on`) and their context statistics on ``X``."""
        self.bases_ = fit_on(specs, self.base_names_, X, stage)
        self._set_context(context_statistics(self.bases_, X, sample_users_trusted(X, STAT_USERS)))

    def _training_limit(self, n_items, n_bases, n_parts):
        """The most label users of each part's training pool (``None``: all)."""
        if isinstance(self.training_users, str):  # "auto"
            return max(1, POOL_SCORES // (n_items * n_bases * n_parts))
        return self.training_users

    def _check_trainable(self, pool):
        """Refuse, before any training, a pool where no user has a label and a non-label in its head."""
        sizes = np.diff(pool.indptr)
        labels = np.diff(np.concatenate(([0], np.cumsum(pool.label)))[pool.indptr])
        if not np.any((labels > 0) & (labels < sizes)):
            raise ValueError(
                f"no user has a held-out label among the bases' top candidates={self.candidates} beside an item that "
                f"is not one: nothing to train on (holdout={self.holdout}, label_exclude_top="
                f"{self.label_exclude_top}); raise candidates, lower label_exclude_top or give users more positives"
            )

    def _train_scorer(self, pool, X, validation, rng, bar):
        """``theta`` by OPT-ADG from the tail (the best on validation), then the trees."""
        mean, scale = pool.statistics()
        theta = self._set_linear(mean, scale)
        set_tree_state(self, None)
        val = ValidationScores(self, X, validation, rng) if validation is not None else None
        tests = None if val is None or self.fallback_p is None else confirmation_scores(self, X, validation, val, rng)
        self._choose_tail(val, tests)
        if self.init == "best":
            self._start_at_tail(theta, scale)
        relevant, irrelevant = pool_relevance(pool, X.shape[1])
        state = (pool.indptr, pool.items, pool.phi, theta, mean, 1.0 / scale)
        state += (np.array([float(self.regularization)]), np.zeros(1), np.zeros_like(theta))
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
        report_stage(bar, _log, "training (OPT-ADG)")
        fns = (pool_score, pool_update, {0: "query"})
        theta[:] = self._sgd(sampler, state, fns, theta, state[7], None if val is None else val.value, bar, state[8])
        if self.scorer == "lambdamart":
            report_stage(bar, _log, "LambdaMART")
            trees, self.lambdamart_iterations_ = fit_reranker(self, pool, X, validation, val, rng)
            set_tree_state(self, trees)
        if tests is not None:
            report_stage(bar, _log, "paired test against the tail")
            self.stacked_gain_ = paired_gain(tests.value(per_user=True) - tests.user_values(self.tail_weights_))
            if not self._significant(self.stacked_gain_):  # noise or a loss: the tail alone
                theta[:] = 0.0
                self._start_at_tail(theta, scale)
                set_tree_state(self, None)

    def _start_at_tail(self, theta, scale):
        """``theta`` ranking the head as the tail does: the tail's weights on the within-user scores."""
        for b in np.flatnonzero(self.tail_weights_):
            theta[z_column(b)] = scale[z_column(b)] * self.tail_weights_[b]

    def _choose_tail(self, val, tests):
        """The tail: the best base by the validation value of every validation user (the selection
        sample ``val`` and the test users ``tests``), or the mean of the bases tied with it (not
        beaten by it at ``fallback_p`` over those users) when that mean is better there.  When the
        tests must reuse ``val`` (fewer than 2 x MIN_CONFIRMATION_USERS validation users), a choice
        among several bases is noise (msweb's novelty protocol: 16 users): the first base stays
        unless the best beats it significantly."""
        nb = len(self.bases_)
        self.tail_weights_, self.tail_gain_ = np.eye(nb)[0], None
        if val is None:
            return
        samples = [val] if tests is None or tests is val else [val, tests]
        users = [np.concatenate([s.user_values(w) for s in samples]) for w in np.eye(nb)]
        values = np.array([u.mean() for u in users])
        record = {"iteration": 0, "base_" + self._val_key: dict(zip(self.base_names_, values))}
        self.history_.append(record)
        best = int(np.argmax(values))
        self.tail_weights_ = np.eye(nb)[best]
        if tests is None:  # fallback_p=None: no tests
            return
        if tests is val:
            self.tail_gain_ = paired_gain(users[best] - users[0])
            self.tail_weights_ = np.eye(nb)[best if self._significant(self.tail_gain_) else 0]
            return
        tied = [b for b in range(nb) if b == best or not self._significant(paired_gain(users[best] - users[b]))]
        if len(tied) < 2:
            return
        mean = np.zeros(nb)
        mean[tied] = 1.0 / len(tied)
        mixed = np.concatenate([s.user_values(mean) for s in samples]).mean()
        record["tail_mean_" + self._val_key] = {"bases": [self.base_names_[b] for b in tied], "value": float(mixed)}
        if mixed > values[best]:
            self.tail_weights_ = mean

    @property
    def tail_bases_(self) -> list[str]:
        """Names of the bases the tail weighs (one, or the tied bases it averages)."""
        return [self.base_names_[b] for b in np.flatnonzero(self.tail_weights_)]

    def _significant(self, gain: dict) -> bool:
        """A positive mean gain at a one-sided ``p_value`` below ``fallback_p``."""
        return gain["gain"] > 0 and gain["p_value"] < self.fallback_p

    def _refit(self, X, bar):
        """The bases refitted on all of ``X`` after training on a held-out split (a base the user
        fitted on ``X`` itself is reused)."""
        with numba_threads(self.num_threads):
            specs = resolve_bases(self.bases, X.shape, self.num_threads)[1]
            self._fit_prediction_bases(specs, X, lambda message: report_stage(bar, _log, message))

    # ------------------------------------------------------------------ state
    def _set_context(self, context: BaseFeatures):
        self.context_mean_, self.context_scale_, self.context_pop_, self.context_act_ = context

    @property
    def _context(self) -> BaseFeatures:
        return BaseFeatures(self.context_mean_, self.context_scale_, self.context_pop_, self.context_act_)

    # ------------------------------------------------------------------ scoring
    def _ranked_scores(self, rows, ids, recalculate):
        """The head of every user (each base's ``candidates`` best) in the scorer's order above the
        other items in the order of the tail (module docstring)."""
        S = stacked_scores(self.bases_, rows, ids, recalculate)
        excluded = with_items(rows, self.excluded_items_)
        indptr, items, phi = self._head(S, rows, excluded)
        return compose(tail_scores(S, excluded, self.tail_weights_), (indptr, items), self._head_key(phi))

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
            return self._head(stacked_scores(self.bases_, rows, ids), rows)

    #: the method :func:`recsys_ltr.febr.febr_features` runs on each block of users
    _features_method = "head_features"

    def _feature_floats(self) -> int:
        """Dense floats per user of :meth:`head_features` (the bases' rows of scores)."""
        return len(self.bases_) * self.n_items_

    def _head(self, S, rows, excluded=None):
        """The head of a block: ``(indptr, items, phi)``, row ``r``'s head entries at
        ``indptr[r]:indptr[r + 1]`` (items and their features); ``excluded``: ``rows`` with the
        model's excluded items, when the caller has them."""
        # ties broken by the standardised popularity of the context: the training popularity's order
        candidates = self._param("candidates")
        excluded = with_items(rows, self.excluded_items_) if excluded is None else excluded
        items, phi, _, counts = heads(S, rows, None, self._context, self.context_pop_, candidates, excluded)
        valid = np.arange(items.shape[1])[None, :] < counts[:, None]
        indptr = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        return indptr, items[valid], phi[valid]

    def _head_key(self, phi, scorer=None) -> np.ndarray:
        """The scorer's value of the head features ``phi``: ``scorer`` (``theta`` or
        :class:`~recsys_ltr.ltr.trees.Trees`), default the fitted one (the trees when there are)."""
        scorer = (self.trees_ if self.trees_ is not None else self.coef_) if scorer is None else scorer
        if isinstance(scorer, Trees):
            return predict_trees(scorer, phi)
        return linear_key(phi, self.feature_mean_, scorer / self.feature_scale_)

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
