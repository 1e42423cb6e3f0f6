"""Common base of the recommenders: scoring, top-N recommendation, similar items/users, files.

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
import warnings

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from sklearn.base import BaseEstimator
from sklearn.utils import metadata_routing
from sklearn.utils.validation import check_is_fitted

from .. import _topk
from .._io import Persistable
from .._memory import rows_per_block
from .._parallel import product_work, strided_chunks
from .._progress import progress_enabled
from .._threads import limit_threads, numba_threads
from .._topk import top_k_dense, top_k_factor_product, top_k_sparse_product
from .._validation import (
    INDEX_DTYPE,
    check_bool,
    check_feedback,
    check_ids,
    check_item_selection,
    check_positive_int,
    check_weighted,
)
from ..neighbors.affinity import Affinity
from ..neighbors.knn import inverse_norms

_ID_MAX = np.iinfo(np.int64).max

__all__ = ["Recommender", "cosine_rows", "sparse_dense_product"]


@njit(parallel=True, cache=True)
def _spmm_dense(r_indptr, r_indices, r_data, b_indptr, b_indices, b_data, out):
    for r in prange(r_indptr.shape[0] - 1):
        for p in range(r_indptr[r], r_indptr[r + 1]):
            j = r_indices[p]
            x = r_data[p]
            for q in range(b_indptr[j], b_indptr[j + 1]):
                out[r, b_indices[q]] += x * b_data[q]


def sparse_dense_product(R, B) -> np.ndarray:
    """Dense ``R @ B`` for canonical CSR ``R`` (a block of users) and CSR ``B``, parallel over rows."""
    out = np.zeros((R.shape[0], B.shape[1]))
    _spmm_dense(R.indptr, R.indices, R.data, B.indptr, B.indices, B.data, out)
    return out


def cosine_rows(M, ids, weights=None) -> np.ndarray:
    """Dense cosines of rows ``ids`` of the canonical CSR ``M`` (binary or weighted) with every row of
    ``M`` (``sum_f M_af M_bf w_f / (||a|| ||b||)``, the similarity of :mod:`recsys_ltr.neighbors.knn`)."""
    Mw = M if weights is None else M @ sp.diags(weights)
    G = (Mw[ids] @ M.T).toarray()
    inv = inverse_norms(M)
    return G * inv[ids][:, None] * inv[None, :]


class Recommender(Persistable, BaseEstimator):
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
    #: kind of the fitted affinities (checked on load; ``None``: any)
    _affinity_kind: str | None = None
    #: fitted attributes saved by :meth:`save` besides ``user_items_``
    _model_state: tuple[str, ...] = ()
    #: ``similar_items`` leaves out items of similarity 0 (no evidence)
    _similar_drop_zero = True
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

    # ------------------------------------------------------------------ recommendation
    def recommend(
        self,
        userid,
        user_items=None,
        N=10,
        filter_already_liked_items=True,
        filter_items=None,
        recalculate_user=False,
        items=None,
    ):
        """Top-``N`` items for one user or an array of users.

        Parameters
        ----------
        userid : int or array of int
            Training user id(s), rows of the training matrix: ``[0, n_users)``.  A user outside
            the training data (any id ``>= n_users``, e.g. an id of your own) is scored from
            ``user_items`` with ``recalculate_user=True``; without it such an id is an error.
        user_items : sparse matrix or 2-D array, shape (len(userid), n_items), optional
            The users' interactions, one row per id (default: their training rows); weights for
            models with ``uses_weights``, binarised by the others.  Used to
            filter liked items and, for item-based models or with ``recalculate_user``, to
            score (no refit needed); user-based models otherwise score the training rows.
        N : int
            Number of items to return.
        filter_already_liked_items : bool
            Exclude the items of ``user_items`` (or of the training rows).
        filter_items : array of int, optional
            Items excluded for every user.
        recalculate_user : bool
            Score the users from ``user_items`` alone, with no stored state of theirs: new users,
            or training users with updated rows (user-based models rebuild their neighbours, ALS
            solves for the user's factors; models that learn users only by ``fit`` raise).
        items : array of int, optional
            Rank only these items (implicit's ``items``); cannot be combined with ``filter_items``.

        Returns
        -------
        (ids, scores) : ndarrays
            Shape ``(N',)`` for a scalar ``userid`` (``N' <= N`` when fewer items remain) and
            ``(len(userid), min(N, n_candidates))`` for an array, padded with id ``-1`` and score
            ``-inf`` where a user has fewer candidates.

        Examples
        --------
        >>> import numpy as np
        >>> from recsys_ltr.datasets import make_synthetic
        >>> from recsys_ltr.models import ItemKNN
        >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
        >>> model = ItemKNN(k=20).fit(X)
        >>> ids, scores = model.recommend(0, N=3)
        >>> ids
        array([29, 52,  4])
        >>> model.recommend(0, N=3, filter_items=[29])[0]  # never item 29
        array([52,  4, 95])
        >>> model.recommend(0, N=2, items=np.arange(10))[0]  # only among items 0-9
        array([4, 6])
        >>> model.recommend(np.array([0, 1]), N=2)[0]  # a batch: one row per user
        array([[29, 52],
               [59, 41]])
        >>> row = X[[0]].tolil()  # user 0 after a new click on item 52, no refit
        >>> row[0, 52] = 1.0
        >>> model.recommend(0, user_items=row, N=3)[0]
        array([29,  4, 51])
        """
        self._check_fitted()
        N = check_positive_int(N, "N")
        filter_already_liked_items = check_bool(filter_already_liked_items, "filter_already_liked_items")
        recalculate_user = check_bool(recalculate_user, "recalculate_user")
        rows, ids = self._user_rows(userid, user_items, recalculate_user)  # checks userid first
        scalar = np.ndim(userid) == 0
        # without recalculation a user-based model scores from the stored training rows
        scored = rows if self.item_based or recalculate_user else self.user_items_[ids]
        excluded = check_item_selection(filter_items, items, self.n_items_, "items")
        # canonical int32 CSR either way (rows are checked at the boundary): the kernels take its arrays as they are
        liked = rows if filter_already_liked_items else sp.csr_matrix(rows.shape, dtype=np.float64)
        n_out = min(N, self.n_items_ if items is None else int(np.count_nonzero(~excluded)))
        out_ids = np.empty((len(ids), n_out), np.int64)
        out_scores = np.empty((len(ids), n_out))
        with numba_threads(self.num_threads):
            product = self._nonnegative_product(scored, ids, recalculate_user)
            if product is not None:
                self._top_n_of_product(*product, liked, excluded, out_ids, out_scores)
                return _unpad(out_ids, out_scores) if scalar else (out_ids, out_scores)
            factors = self._score_factors(scored, ids, recalculate_user)
            if factors is not None:
                self._top_n_of_factors(*factors, liked, excluded, out_ids, out_scores)
                return _unpad(out_ids, out_scores) if scalar else (out_ids, out_scores)
            step = rows_per_block(8 * self.n_items_)
            for lo in range(0, len(ids), step):
                block = slice(lo, lo + step)
                scores = np.ascontiguousarray(
                    self._score_rows(scored[block], ids[block], recalculate_user), dtype=np.float64
                )
                part = liked[block]
                top_k_dense(
                    scores,
                    self.item_popularity_,
                    part.indptr,
                    part.indices,
                    excluded,
                    False,
                    False,
                    out_ids[block],
                    out_scores[block],
                )
        return _unpad(out_ids, out_scores) if scalar else (out_ids, out_scores)

    def _top_n_of_product(self, R, B, liked, excluded, out_ids, out_scores):
        """``recommend``'s ranking of the scores ``R @ B`` (non-negative CSR) without dense blocks."""
        fill = np.lexsort((np.arange(self.n_items_), -self.item_popularity_))
        top_k_sparse_product(
            R.indptr, R.indices, R.data, B.indptr, B.indices, B.data,
            liked.indptr, liked.indices,
            excluded, self.item_popularity_, fill, strided_chunks(R.shape[0]), out_ids, out_scores,
            work=product_work(R.indices, B.indptr, R.shape[0], B.shape[1]),
        )  # fmt: skip

    def _top_n_of_factors(self, U, V, liked, excluded, out_ids, out_scores):
        """``recommend``'s ranking of the scores ``U @ V.T`` in cache-sized tiles, the BLAS pool held
        to one thread: no BLAS threads spin beside numba's, and the ranking reads the tile from cache
        (gowalla, every user, beside another job: 4.2 s against 7.5 s by dense blocks)."""
        tile = max(1, _topk.TILE_FLOATS // self.n_items_)
        U, V = (np.ascontiguousarray(F, dtype=np.float64) for F in (U, V))
        with limit_threads(self.num_threads, blas=1):
            top_k_factor_product(
                U, V.T, self.item_popularity_,
                liked.indptr, liked.indices,
                excluded, tile, strided_chunks(-(-U.shape[0] // tile)), out_ids, out_scores,
            )  # fmt: skip

    def _user_rows(self, userid, user_items, recalculate):
        """The rows ``recommend`` scores and the checked ids: a training id in ``[0, n_users)``, or
        with ``recalculate_user=True`` any id ``>= 0`` (a user outside the training data, scored
        from ``user_items``)."""
        if recalculate:
            if user_items is None:
                raise ValueError("recalculate_user=True needs the users' rows in user_items")
            ids = check_new_ids(userid, "userid", "n_users")
        else:
            ids = check_ids(userid, self.n_users_, "userid", _NEW_USER_HINT)
        if user_items is None:
            return self.user_items_[ids], ids
        rows = self._check_input(user_items, "user_items", allow_empty=True)
        if rows.shape != (len(ids), self.n_items_):
            raise ValueError(
                f"user_items must have one row per userid and {self.n_items_} item columns: "
                f"expected shape {(len(ids), self.n_items_)}, got {rows.shape}"
            )
        return rows, ids

    # ------------------------------------------------------------------ similar items and users
    def similar_items(self, itemid, N=10, recalculate_item=False, item_users=None, filter_items=None, items=None):
        """``(ids, scores)`` of the ``N`` items most similar to ``itemid``, most similar first.

        The similarity is the model's item affinity (ItemKNN, KUNN, SLIM, RP3beta: the stored
        ``KNN`` rows; EASE: the weights ``B``; factor models: the cosine of the item factors;
        user-based models: the cosine of the items' user columns, KUNN's Eq. 4.5 weighting),
        ties by smaller id; items with similarity 0 are left out, so fewer than ``N`` may come back
        (e.g. from a neighbourhood of ``k < N`` items), with a ``UserWarning`` saying so.
        :class:`~recsys_ltr.models.Popularity` returns the popularity order.

        Unlike implicit, whose ``similar_items`` lists the item itself first (its self-similarity
        is maximal for cosine), the item itself is never returned: self-affinity is not defined
        for SLIM (``W_ii = 0``) nor maximal for KUNN.  implicit's ``similar_items(i, N + 1)``
        with its first entry dropped corresponds to ``similar_items(i, N)``.

        Parameters
        ----------
        itemid : int or array of int
            Item id(s); with ``recalculate_item`` they may be new ids ``>= n_items``.
        N : int
        recalculate_item : bool
            Compute the items' similarities from ``item_users`` (their users, one row per id)
            instead of the fitted state (models with an item side built from users: item and
            user cosine / KUNN neighbourhoods, ALS).
        item_users : sparse matrix or 2-D array, shape (len(itemid), n_users), optional
        filter_items, items : array of int, optional
            As in :meth:`recommend`.

        Returns
        -------
        (ids, scores) : ndarrays
            ``(N',)`` for a scalar ``itemid`` and ``(len(itemid), min(N, n_items - 1))`` for an
            array, padded with id ``-1`` and score ``-inf``.

        Examples
        --------
        >>> from recsys_ltr.datasets import make_synthetic
        >>> from recsys_ltr.models import ItemKNN
        >>> X = make_synthetic(n_users=200, n_items=100, density=0.05, random_state=0).matrix
        >>> model = ItemKNN(k=20).fit(X)
        >>> model.similar_items(5, N=3)[0]  # item 5 itself is never in its answer
        array([51,  6, 55])
        """
        self._check_fitted()
        N = check_positive_int(N, "N")
        excluded = check_item_selection(filter_items, items, self.n_items_, "items")
        if check_bool(recalculate_item, "recalculate_item"):
            if item_users is None:
                raise ValueError("recalculate_item=True needs the items' users in item_users")
            ids = check_new_ids(itemid, "itemid", "n_items")
            cols = self._check_input(item_users, "item_users", allow_empty=True)
            if cols.shape != (len(ids), self.n_users_):
                raise ValueError(f"item_users must have shape {(len(ids), self.n_users_)}, got {cols.shape}")
            rows_of = lambda chunk: self._recalculated_item_rows(cols[chunk])  # noqa: E731
            positions = np.arange(len(ids))
        else:
            if item_users is not None:
                raise ValueError("item_users is used only with recalculate_item=True")
            ids = check_ids(itemid, self.n_items_, "itemid")
            S = self._item_similarity_matrix()
            if S is not None and S.data.min(initial=0.0) >= 0.0:
                found = self._rank_similar_sparse(S, ids, N, excluded, np.ndim(itemid) == 0)
                return self._warn_if_short(found, N, excluded, "item")
            rows_of, positions = self._item_similarity_rows, ids
        found = self._rank_similar(rows_of, positions, ids, N, excluded, self.n_items_, np.ndim(itemid) == 0)
        return self._warn_if_short(found, N, excluded, "item")

    def similar_users(self, userid, N=10, filter_users=None, users=None):
        """``(ids, scores)`` of the ``N`` training users most similar to ``userid`` (the user left
        out), shaped like :meth:`similar_items`: the model's user affinity (user-based
        neighbourhoods), the cosine of the user factors (factor models), else the cosine of the
        users' training rows.  ``filter_users`` / ``users`` as ``filter_items`` / ``items``."""
        self._check_fitted()
        N = check_positive_int(N, "N")
        excluded = check_item_selection(filter_users, users, self.n_users_, "users")
        ids = check_ids(userid, self.n_users_, "userid")
        found = self._rank_similar(
            self._user_similarity_rows, ids, ids, N, excluded, self.n_users_, np.ndim(userid) == 0
        )
        return self._warn_if_short(found, N, excluded, "user")

    def _warn_if_short(self, found, N, excluded, side):
        """``found`` as it is, with a warning when an id got fewer than ``N`` answers although more
        candidates exist: the others have similarity 0 in this model and are left out."""
        ids = np.atleast_2d(found[0])
        if ids.shape[0] and np.count_nonzero(ids >= 0, axis=1).min() < min(N, len(excluded) - 1 - excluded.sum()):
            k = self.get_params().get("k")  # the neighbourhood of the side the model is based on
            limited = isinstance(k, int) and self.item_based == (side == "item")
            kept = f" (it keeps the k={k} nearest neighbours)" if limited else ""
            warnings.warn(
                f"{type(self).__name__}.similar_{side}s found fewer than N={N} {side}s for some ids: the other "
                f"{side}s have similarity 0 in this model{kept} and are left out",
                UserWarning,
                stacklevel=3,
            )
        return found

    def _rank_similar(self, rows_of, positions, self_ids, N, excluded, n, scalar):
        n_out = min(N, max(1, n - 1))
        out_ids = np.empty((len(positions), n_out), np.int64)
        out_scores = np.empty((len(positions), n_out))
        secondary = np.zeros(n)
        step = rows_per_block(8 * n)
        with numba_threads(self.num_threads):
            for lo in range(0, len(positions), step):
                chunk = slice(lo, lo + step)
                block = np.ascontiguousarray(rows_of(positions[chunk]), dtype=np.float64)
                own = self_ids[chunk]
                inside = own < n  # a recalculated new item has no column of its own
                ex_indptr = np.concatenate(([0], np.cumsum(inside))).astype(INDEX_DTYPE)
                top_k_dense(
                    block,
                    secondary,
                    ex_indptr,
                    own[inside].astype(INDEX_DTYPE),
                    excluded,
                    self._similar_drop_zero,
                    True,
                    out_ids[chunk],
                    out_scores[chunk],
                )
        return _unpad(out_ids, out_scores) if scalar else (out_ids, out_scores)

    def _rank_similar_sparse(self, S, ids, N, excluded, scalar):
        """``similar_items`` over the CSR similarity rows ``S`` (non-negative, zeros left out), ranked
        without dense rows: the product of a row selector with ``S``, the item itself excluded."""
        n = self.n_items_
        n_out = min(N, max(1, n - 1))
        out_ids = np.empty((len(ids), n_out), np.int64)
        out_scores = np.empty((len(ids), n_out))
        ptr = np.arange(len(ids) + 1, dtype=INDEX_DTYPE)
        own = ids.astype(INDEX_DTYPE)
        with numba_threads(self.num_threads):
            top_k_sparse_product(
                ptr, own, np.ones(len(ids)), S.indptr, S.indices, S.data, ptr, own, excluded, np.zeros(n),
                np.empty(0, np.int64), strided_chunks(len(ids)), out_ids, out_scores,
                work=product_work(own, S.indptr, len(ids), n),
            )  # fmt: skip
        return _unpad(out_ids, out_scores) if scalar else (out_ids, out_scores)

    def _item_similarity_matrix(self):
        """The CSR matrix whose rows :meth:`_item_similarity_rows` returns densely, for models that
        store it sparsely and leave zero similarities out; ``None`` otherwise."""
        return None

    def _item_similarity_rows(self, items) -> np.ndarray:
        """Dense similarities of ``items`` to every item (default: the item affinity's rows)."""
        return self._item_affinity().matrix[items].toarray()

    def _item_affinity(self):
        raise NotImplementedError(f"{type(self).__name__} has no item-item affinity")

    def _recalculated_item_rows(self, cols) -> np.ndarray:
        raise ValueError(f"{type(self).__name__} cannot compute similarities of items from item_users")

    def _user_similarity_rows(self, users) -> np.ndarray:
        """Dense similarities of ``users`` to every training user (default: cosine of rows)."""
        return cosine_rows(self.user_items_, users)

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
        """Cross-check loaded affinities (side, kind, shape, ``k_max``) before use by numba kernels."""
        for name in self._model_state:
            value = getattr(self, name)
            if not name.endswith("_affinity_"):
                continue
            side = name.split("_")[0]  # "item_affinity_" / "user_affinity_"
            n = self.n_items_ if side == "item" else self.n_users_
            if not isinstance(value, Affinity) or value.side != side:
                raise ValueError(f"{name} must be an Affinity with side={side!r}")
            if self._affinity_kind is not None and value.kind != self._affinity_kind:
                raise ValueError(f"{name} is a {value.kind!r} affinity, expected {self._affinity_kind!r}")
            if value.n != n:
                raise ValueError(f"{name} is {value.n} x {value.n} but the model has {n} {side}s")
            if value.k_max > max(1, n - 1):
                raise ValueError(f"{name}.k_max={value.k_max} exceeds the {n - 1} possible neighbours")


_NEW_USER_HINT = (
    "; ids are the rows of the training matrix: to score a user outside it, pass their interactions as "
    "user_items with recalculate_user=True"
)


def check_new_ids(ids, name, bound) -> np.ndarray:
    """Ids that may be new (``>= n``): any integer ``>= 0``."""
    arr = np.asarray(ids)
    if arr.size and np.issubdtype(arr.dtype, np.number) and np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0 (ids >= {bound} are new): {arr[arr < 0][:5].tolist()}")
    return check_ids(arr, _ID_MAX, name)


def _unpad(ids, scores):
    valid = ids[0] >= 0
    return ids[0][valid], scores[0][valid]
