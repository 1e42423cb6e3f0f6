"""Common base of the recommenders: the estimator contract (fitting, scoring, files); what a fitted
model answers is :mod:`recsys_ltr.models.answers`', ranked by :mod:`recsys_ltr.models.ranking`.

Every model is a scikit-learn estimator (``__init__`` stores parameters; ``fit(X, y=None)`` learns
the attributes ending in ``_`` and returns ``self``; unfitted use raises
``sklearn.exceptions.NotFittedError``) with implicit's recommender habits:

* ``score(user_ids)`` -- dense ``(len(user_ids), n_items)`` block of scores of training users (the
  ranking scores of every item, as in Cornac; not scikit-learn's goodness-of-fit ``score``), the
  interface of :func:`recsys_ltr.metrics.evaluate`;
* ``recommend(userid, user_items=None, N=10, filter_already_liked_items=True, filter_items=None,
  recalculate_user=False, items=None)`` -- ``(ids, scores)`` of the top ``N`` items, 1-D for one
  user and 2-D for an array of users, ranked by score, then by training popularity, then by
  smaller item id (the evaluator's tie rule: a user without history gets the popularity order);
* ``similar_items(itemid, N=10, recalculate_item=False, item_users=None, filter_items=None,
  items=None)`` and ``similar_users(userid, N=10, filter_users=None, users=None)`` -- shaped like
  ``recommend``'s answers (the item or user itself excluded, unlike implicit: see
  :meth:`Recommender.similar_items`);
* ``save(path)`` / ``load(path)`` -- one ``.npz`` holding the arrays and a JSON header
  (:mod:`recsys_ltr._io`), read with ``allow_pickle=False``.

A fitted model answers from its fitted state and the parameters it was fitted with
(``params_``): ``set_params`` after ``fit`` changes nothing until the next ``fit``, and
``save``/``load`` round-trips the answers exactly.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import metadata_routing
from sklearn.utils.validation import check_is_fitted

from .._io import Persistable
from .._progress import progress_enabled
from .._threads import numba_threads
from .._topk import sparse_dense_product
from .._validation import (
    check_feedback,
    check_ids,
    check_positive_int,
    check_weighted,
)
from .answers import Answers
from .updates import Update, check_update, replace_columns, replace_rows

__all__ = ["Recommender"]


class Recommender(Answers, Persistable, BaseEstimator):
    """Base class: subclasses implement ``_fit(X)`` and ``_score_rows(rows, ids, recalculate)``.

    ``show_progress`` of every model: ``True``/``False``, or ``None`` (the default) for a progress
    bar only when standard error is a terminal, as in implicit (logs and CI stay quiet).

    Fitted attributes common to all models: ``user_items_`` (the training matrix, CSR),
    ``item_popularity_`` (training interaction count per item, the tie-breaker) and ``params_``
    (the parameters of the fit).

    Class attribute ``item_based``: ``True`` when scores depend only on the user's row of
    interactions, so ``recommend`` scores an updated row from ``user_items`` without refitting.
    Class attribute ``uses_weights``: ``True`` when the model reads the values of ``X`` (and of
    ``user_items`` / ``item_users``) as weights, ``False`` when it binarises them.
    User ids are the training matrix's rows; a user outside it is scored from ``user_items`` with
    ``recalculate_user=True``, the same for every model (an id ``>= n_users`` without it raises).
    """

    # score(user_ids) takes ids, not metadata to route: no set_score_request (scikit-learn would
    # otherwise generate one, with its metadata-routing docstring, on every model)
    __metadata_request__score = {"user_ids": metadata_routing.UNUSED}

    item_based = True
    #: the model reads the stored values of its input as weights (:func:`~recsys_ltr._validation.check_weighted`:
    #: counts, confidences, :mod:`recsys_ltr.weighting`); ``False``: any positive value is one interaction
    uses_weights = False
    #: fitted attributes saved by :meth:`save` besides ``user_items_``
    _model_state: tuple[str, ...] = ()
    #: log the start and the end of every fit at ``INFO`` (models whose fit can take long): the
    #: data's size and the setting, then the seconds, on the logger of the model's module
    _log_fit = False

    @property
    def _state_attributes(self):
        return ("user_items_", *self._model_state)

    # ------------------------------------------------------------------ fitting and scoring
    def fit(self, X, y=None, **fit_params):
        """Fit on the users x items feedback matrix ``X``.

        Any positive entry is an interaction; models with ``uses_weights`` read the values as
        weights (counts, confidences), the others binarise them.  ``y`` is ignored
        (scikit-learn's signature); ``fit_params`` are the model's keyword-only extra inputs (e.g.
        FEBR's ``validation``).  Returns ``self``.
        """
        return self._fit_trusted(self._check_input(X, "X"), **fit_params)

    def _check_input(self, X, name, allow_empty=False):
        """``X`` in the canonical form this model reads: weighted or binary (``uses_weights``)."""
        return (check_weighted if self.uses_weights else check_feedback)(X, name, allow_empty=allow_empty)

    def _fit_trusted(self, X, **fit_params):
        """:meth:`fit` of a canonical feedback matrix, validated once at the public boundary: used
        as it is (no check, no copy) by models that fit others inside their own fit (FEBR's bases)."""
        self.__dict__.pop("params_", None)
        self._check_params()
        self._check_data_params(X)
        fit_params = self._check_fit_params(X, **fit_params)
        self.user_items_ = X
        logger = logging.getLogger(type(self).__module__)
        if self._log_fit and logger.isEnabledFor(logging.INFO):
            name = type(self).__name__
            logger.info("%s fit: %d users x %d items, %d positives; %s", name, *X.shape, X.nnz, self._fit_description())
            t0 = time.perf_counter()
            self._fit(X, **fit_params)
            logger.info("%s fit: done in %.2f s%s", name, time.perf_counter() - t0, self._fit_outcome())
        else:
            self._fit(X, **fit_params)
        self.params_ = self.get_params(deep=False)
        self._prepare()
        return self

    def _fit_description(self) -> str:
        """The setting a fit's first log line names: the parameters besides threads, progress and
        seed, ``name=value`` in the constructor's order."""
        quiet = ("num_threads", "show_progress", "random_state", "memory_limit")
        params = self.get_params(deep=False)
        return ", ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items() if k not in quiet
        )

    def _fit_outcome(self) -> str:
        """What a fit's last log line adds after the seconds (e.g. EASE's solver)."""
        return ""

    def _param(self, name):
        """A parameter as fitted (``params_``), or as set while fitting."""
        params = self.__dict__.get("params_")
        return getattr(self, name) if params is None else params[name]

    def _check_params(self):
        check_positive_int(self.num_threads, "num_threads", minimum=0)
        progress_enabled(self.show_progress)

    def _progress(self) -> bool:
        """Whether this fit shows progress bars: ``show_progress``, ``None`` meaning on when
        standard error is a terminal (:func:`recsys_ltr._progress.progress_enabled`)."""
        return progress_enabled(self.show_progress)

    def _check_data_params(self, X):
        """Checks of the parameters against the data (e.g. ``k`` below the catalogue size)."""

    def _check_fit_params(self, X, **fit_params) -> dict:
        """Validate the extra inputs of ``fit`` (none by default)."""
        if fit_params:
            raise TypeError(f"{type(self).__name__}.fit got unexpected keyword argument(s) {sorted(fit_params)}")
        return fit_params

    def _fit(self, X, **fit_params):
        raise NotImplementedError

    def _prepare(self):
        """Derive the non-saved attributes after ``fit`` or ``load``."""
        self.item_popularity_ = np.bincount(self.user_items_.indices, minlength=self.user_items_.shape[1]).astype(
            np.float64
        )

    def _score_rows(self, rows, ids, recalculate):
        """Dense scores for the canonical user rows ``rows`` standing for users ``ids``."""
        return sparse_dense_product(*self._score_product(rows, ids, recalculate))

    def _score_product(self, rows, ids, recalculate):
        """``(R, B)``, canonical CSR, when the scores of ``rows`` are ``R @ B`` (neighbourhood
        models), so that ``recommend`` ranks them sparsely; ``None`` otherwise."""
        return None

    def _score_factors(self, rows, ids, recalculate):
        """``(U, V)``, dense, when the scores of ``rows`` are ``U @ V.T`` (factor models), so
        that ``recommend`` ranks them tile by tile; ``None`` otherwise."""
        return None

    def _nonnegative_product(self, rows, ids, recalculate):
        """:meth:`_score_product` when its ``B`` is non-negative (a row's unstored scores are then
        its lowest, which the sparse rankings rely on); ``None`` otherwise."""
        product = self._score_product(rows, ids, recalculate)
        return product if product is not None and product[1].data.min(initial=0.0) >= 0.0 else None

    def score_product(self, user_ids):
        """``(R, B)``, canonical CSR, with ``R @ B`` equal to ``score(user_ids)`` and ``B >= 0``, or
        ``None`` when this model's scores are not such a product: the scores as
        :func:`recsys_ltr.metrics.evaluate` ranks them without dense rows (neighbourhood models)."""
        self._check_fitted()
        ids = check_ids(user_ids, self.n_users_, "user_ids")
        return self._nonnegative_product(self.user_items_[ids], ids, False)

    @property
    def n_users_(self) -> int:
        self._check_fitted()
        return self.user_items_.shape[0]

    @property
    def n_items_(self) -> int:
        self._check_fitted()
        return self.user_items_.shape[1]

    def _check_fitted(self):
        check_is_fitted(self, "user_items_")

    def __sklearn_is_fitted__(self):
        return hasattr(self, "user_items_")

    def score(self, user_ids) -> np.ndarray:
        """Dense ``(len(user_ids), n_items)`` ranking scores of training users (higher is better).

        Not scikit-learn's goodness-of-fit ``score``: this is the scores of every item for each
        user, the input of :func:`recsys_ltr.metrics.evaluate`.  Pass bounded batches of users.
        """
        self._check_fitted()
        ids = check_ids(user_ids, self.n_users_, "user_ids")
        with numba_threads(self.num_threads):
            return self._score_rows(self.user_items_[ids], ids, False)

    # ------------------------------------------------------------------ updates without a refit
    def partial_fit_users(self, userids, user_items):
        """Re-learn users from their full rows without a refit (implicit's ``partial_fit_users``).

        ``user_items`` (sparse, ``len(userids) x n_items_``, read as :meth:`fit` reads ``X``) holds
        the whole history of each of ``userids``: a known id's row is replaced, new ids
        (``n_users_``, ``n_users_ + 1``, ... in any order) grow the model.  Only these users'
        parameters are re-learnt, the rest of the model is kept (:mod:`recsys_ltr.models.updates`
        says what each model re-learns); a model that cannot raises ``NotImplementedError`` and is
        left unchanged.  New items come first, by :meth:`partial_fit_items`; no ids: nothing to do.
        Returns ``self``.
        """
        return self._partial_fit("user", userids, user_items)

    def partial_fit_items(self, itemids, item_users):
        """Re-learn items from their full columns without a refit (implicit's ``partial_fit_items``).

        ``item_users`` (sparse, ``len(itemids) x n_users_``) holds the users of each of
        ``itemids``; new ids (``n_items_``, ...) grow the catalogue.  As :meth:`partial_fit_users`
        with users and items swapped.  Returns ``self``.
        """
        return self._partial_fit("item", itemids, item_users)

    def _partial_fit(self, kind, ids, matrix):
        self._check_fitted()
        n, width = (self.n_users_, self.n_items_) if kind == "user" else (self.n_items_, self.n_users_)
        ids = check_update(ids, n, kind)
        if ids.size == 0:  # an empty batch of a pipeline: nothing to re-learn
            return self
        name = "user_items" if kind == "user" else "item_users"
        M = self._check_input(matrix, name, allow_empty=True)
        if M.shape != (ids.size, width):
            other = "items" if kind == "user" else "users"
            first = " (new items first: partial_fit_items)" if kind == "user" else ""
            raise ValueError(
                f"{name} must have one row per id of {kind}ids and the model's n_{other}_ columns: "
                f"({ids.size}, {width}), got {M.shape}{first}"
            )
        grow = replace_rows if kind == "user" else replace_columns
        with numba_threads(self.num_threads):
            self._update(kind, ids, M, grow(self.user_items_, ids, M)).apply()
        return self

    def _update(self, kind, ids, M, grown) -> Update:
        """The re-learnt state of ``ids`` (``kind`` ``"user"`` or ``"item"``) given their rows or
        columns ``M`` and the ``grown`` training matrix, not applied yet."""
        state = self._users_state(ids, M, grown) if kind == "user" else self._items_state(ids, M, grown)
        return Update(self, grown, state)

    def _users_state(self, ids, rows, grown) -> dict:
        """Fitted attributes re-learnt for users ``ids``: none for an item-based model (a user is
        its row)."""
        if self.item_based:
            return {}
        raise NotImplementedError(f"{type(self).__name__} learns its users only by fit: refit it on the grown matrix")

    def _items_state(self, ids, cols, grown) -> dict:
        """Fitted attributes re-learnt for items ``ids`` from their columns ``cols``."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot re-learn items without a refit (its item parameters are "
            "learnt together): refit it on the grown matrix"
        )

    # ------------------------------------------------------------------ persistence
    def _load_state(self, state, specs):
        super()._load_state(state, specs)
        self.user_items_ = self._check_input(self.user_items_, "user_items_")
        self.params_ = self.get_params(deep=False)
        self._load_nested(state, specs)
        self._check_data_params(self.user_items_)
        self._check_state()

    def _check_dense_state(self, shapes):
        """Check loaded dense attributes against their expected ``shapes`` (name -> shape)."""
        for name, shape in shapes.items():
            value = getattr(self, name)
            if not isinstance(value, np.ndarray) or value.shape != tuple(shape) or value.dtype.kind != "f":
                got = getattr(value, "shape", type(value).__name__)
                raise ValueError(f"{name} must be a dense float array of shape {tuple(shape)}, got {got}")

    def _check_state(self):
        """Cross-check the loaded fitted state before use by numba kernels (each family its own)."""
