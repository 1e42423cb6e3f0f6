"""Common base of the recommenders: scoring, top-N recommendation and persistence.

Every model is a scikit-learn estimator (``__init__`` stores parameters, ``fit(X)`` learns the
attributes ending in ``_`` and returns ``self``) with implicit's recommender habits:

* ``score(user_ids)`` -- dense ``(len(user_ids), n_items)`` block of scores of training users,
  the interface of ``recsys_ltr.metrics.evaluate``;
* ``recommend(userid, user_items=None, N=10, ...)`` -- ``(ids, scores)`` of the top ``N`` items,
  1-D for one user and 2-D for an array of users, ranked by score, then by training popularity,
  then by smaller item id (the evaluator's tie rule; a user without history therefore gets the
  popularity order);
* ``similar_items(itemid, N=10)`` -- ``(ids, scores)`` shaped like ``recommend``'s (the item
  itself excluded, unlike implicit: see :meth:`Recommender.similar_items`);
* ``save(path)`` / ``load(path)`` -- one ``.npz`` holding the arrays and a JSON header, read with
  ``allow_pickle=False``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from sklearn.base import BaseEstimator

from .._io import npz_path, read_npz, write_npz
from .._validation import check_feedback, check_ids, check_positive_int, numba_threads
from ..neighbors.affinity import Affinity
from ..neighbors.knn import better, heap_offer, heap_sort_best_first

__all__ = ["FORMAT_VERSION", "Recommender", "rank_dense_rows", "rank_rows", "sparse_dense_product"]

#: Version of the file layout written by :meth:`Recommender.save`.
FORMAT_VERSION = 1
_FORMAT = "recsys_ltr.model"

_BLOCK_FLOATS = 2**22  # bound on one dense score block in recommend (32 MiB of float64)
_REGISTRY: dict[str, type] = {}


@njit(parallel=True, cache=True)
def _spmm_dense(r_indptr, r_indices, r_data, b_indptr, b_indices, b_data, out):
    for r in prange(r_indptr.shape[0] - 1):
        for p in range(r_indptr[r], r_indptr[r + 1]):
            j = r_indices[p]
            x = r_data[p]
            for q in range(b_indptr[j], b_indptr[j + 1]):
                out[r, b_indices[q]] += x * b_data[q]


def sparse_dense_product(R, B) -> np.ndarray:
    """Dense ``R @ B`` for CSR ``R`` (a block of users) and CSR ``B``, in parallel over rows."""
    if R.shape[1] != B.shape[0]:
        raise ValueError(f"shape mismatch: {R.shape} @ {B.shape}")
    out = np.zeros((R.shape[0], B.shape[1]))
    _spmm_dense(
        R.indptr,
        R.indices,
        R.data.astype(np.float64, copy=False),
        B.indptr,
        B.indices,
        B.data.astype(np.float64, copy=False),
        out,
    )
    return out


@njit(parallel=True, cache=True)
def _top_n(scores, popularity, liked_indptr, liked_indices, excluded, out_ids, out_scores):
    n_out = out_ids.shape[1]
    for r in prange(scores.shape[0]):
        skip = excluded.copy()
        for p in range(liked_indptr[r], liked_indptr[r + 1]):
            skip[liked_indices[p]] = True
        row = scores[r]
        heap = np.empty(n_out, np.int64)
        size = 0
        for i in range(row.shape[0]):
            if skip[i] or (size == n_out and not better(i, heap[0], row, popularity)):
                continue
            size = heap_offer(heap, size, i, row, popularity)
        heap_sort_best_first(heap, size, row, popularity)
        for t in range(size):
            out_ids[r, t] = heap[t]
            out_scores[r, t] = row[heap[t]]
        for t in range(size, n_out):
            out_ids[r, t] = -1
            out_scores[r, t] = -np.inf


class Recommender(BaseEstimator):
    """Base class: subclasses implement ``_fit(X)`` and ``_score_rows(rows, ids, recalculate)``.

    Fitted attributes common to all models: ``user_items_`` (the training matrix, CSR) and
    ``item_popularity_`` (training interaction count per item, the tie-breaker).

    Class attribute ``item_based``: ``True`` when scores depend only on the user's row of
    interactions, so ``recommend`` scores a new or updated user from ``user_items`` without
    refitting.  User-based models do so only with ``recalculate_user=True``.
    """

    item_based = True
    #: kind of the fitted affinities (checked on load; ``None``: any)
    _affinity_kind: str | None = None
    #: names of fitted attributes saved by :meth:`save` besides ``user_items_``
    _state_attributes: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    # ------------------------------------------------------------------ fitting and scoring
    def fit(self, X):
        """Fit on the users x items feedback matrix ``X`` (any positive entry = interaction)."""
        X = check_feedback(X)
        self._validate_params(X)
        self.user_items_ = X
        self._fit(X)
        self._prepare()
        return self

    def _validate_params(self, X):
        check_positive_int(self.num_threads, "num_threads", minimum=0)
        if not isinstance(self.show_progress, (bool, np.bool_)):
            raise TypeError(f"show_progress must be a bool, got {self.show_progress!r}")

    def _fit(self, X):
        raise NotImplementedError

    def _prepare(self):
        """Derive the non-saved attributes after ``fit`` or ``load``."""
        self.item_popularity_ = np.diff(self.user_items_.tocsc().indptr).astype(np.float64)

    def _score_rows(self, rows, ids, recalculate):
        """Dense scores for the user rows ``rows`` (CSR) standing for users ``ids``."""
        raise NotImplementedError

    @property
    def n_users_(self) -> int:
        self._check_fitted()
        return self.user_items_.shape[0]

    @property
    def n_items_(self) -> int:
        self._check_fitted()
        return self.user_items_.shape[1]

    def _check_fitted(self):
        if not hasattr(self, "user_items_"):
            raise AttributeError(f"this {type(self).__name__} is not fitted yet; call fit(X) first")

    def score(self, user_ids) -> np.ndarray:
        """Dense ``(len(user_ids), n_items)`` scores of training users (higher is better).

        The caller bounds memory by passing batches of users.
        """
        ids = check_ids(user_ids, self.n_users_, "user_ids")
        with numba_threads(self.num_threads):
            return self._score_rows(self.user_items_[ids], ids, False)

    # ------------------------------------------------------------------ recommendation
    def recommend(
        self, userid, user_items=None, N=10, filter_already_liked_items=True, filter_items=None, recalculate_user=False
    ):
        """Top-``N`` items for one user or an array of users.

        Parameters
        ----------
        userid : int or array of int
            Training user id(s).  With ``user_items`` and an item-based model (or
            ``recalculate_user=True``) they may be new ids ``>= n_users``.
        user_items : scipy.sparse matrix, shape (len(userid), n_items), optional
            The users' interactions, one row per id (default: their training rows).  Used to
            filter liked items and, for item-based models or with ``recalculate_user``, to
            score (no refit needed); user-based models otherwise score the training rows.
        N : int
            Number of items to return.
        filter_already_liked_items : bool
            Exclude the items of ``user_items`` (or of the training rows).
        filter_items : array of int, optional
            Items excluded for every user.
        recalculate_user : bool
            Rebuild the user's state from ``user_items`` (user-based models: their neighbours).

        Returns
        -------
        (ids, scores) : ndarrays
            Shape ``(N',)`` for a scalar ``userid`` (``N' <= N`` when fewer items remain) and
            ``(len(userid), min(N, n_items))`` for an array, padded with id ``-1`` and score
            ``-inf`` where a user has fewer candidates.
        """
        self._check_fitted()
        N = check_positive_int(N, "N")
        scalar = np.ndim(userid) == 0
        rows, ids = self._user_rows(userid, user_items, recalculate_user)
        # without recalculation a user-based model scores from the stored training rows
        scored = rows if self.item_based or recalculate_user else self.user_items_[ids]
        excluded = np.zeros(self.n_items_, bool)
        if filter_items is not None:
            excluded[check_ids(filter_items, self.n_items_, "filter_items")] = True
        liked = rows if filter_already_liked_items else sp.csr_matrix(rows.shape)
        n_out = min(N, self.n_items_)
        out_ids = np.empty((len(ids), n_out), np.int64)
        out_scores = np.empty((len(ids), n_out))
        step = max(1, _BLOCK_FLOATS // self.n_items_)
        with numba_threads(self.num_threads):
            for lo in range(0, len(ids), step):
                block = slice(lo, lo + step)
                scores = self._score_rows(scored[block], ids[block], recalculate_user)
                part = liked[block]
                _top_n(
                    scores,
                    self.item_popularity_,
                    part.indptr.astype(np.int64),
                    part.indices.astype(np.int64),
                    excluded,
                    out_ids[block],
                    out_scores[block],
                )
        if scalar:
            valid = out_ids[0] >= 0
            return out_ids[0][valid], out_scores[0][valid]
        return out_ids, out_scores

    def _user_rows(self, userid, user_items, recalculate):
        arr = np.asarray(userid)
        if user_items is None:
            if recalculate:
                raise ValueError("recalculate_user=True needs the users' rows in user_items")
            ids = check_ids(userid, self.n_users_, "userid")
            return self.user_items_[ids], ids
        if self.item_based or recalculate:  # new users allowed: any id >= 0
            if np.any(arr < 0):
                raise ValueError(f"userid must be >= 0 (ids >= n_users are new users): {arr[arr < 0][:5].tolist()}")
            ids = check_ids(arr, np.iinfo(np.int64).max, "userid")
        else:
            ids = check_ids(arr, self.n_users_, "userid")
        if not sp.issparse(user_items):
            raise TypeError(f"user_items must be a scipy sparse matrix, got {type(user_items).__name__}")
        if user_items.shape != (len(ids), self.n_items_):
            raise ValueError(
                f"user_items must have one row per userid and {self.n_items_} item columns: "
                f"expected shape {(len(ids), self.n_items_)}, got {user_items.shape}"
            )
        return check_feedback(user_items, "user_items", allow_empty=True), ids

    def similar_items(self, itemid, N=10):
        """``(ids, scores)`` of the ``N`` items most similar to ``itemid``, most similar first.

        The similarity is the model's item affinity (ItemKNN, KUNN, SLIM: the stored ``KNN``
        rows), ties by smaller id; items with similarity 0 are left out.  User-based models
        compute the item's cosine (KUNN: Eq. 4.5) neighbours on demand and
        :class:`~recsys_ltr.models.Popularity` returns the popularity order.

        Unlike implicit, whose ``similar_items`` lists the item itself first (its self-similarity
        is maximal for cosine), the item itself is never returned: self-affinity is not defined
        for SLIM (``W_ii = 0``) nor maximal for KUNN.  implicit's ``similar_items(i, N + 1)``
        with its first entry dropped corresponds to ``similar_items(i, N)``.

        Returns
        -------
        (ids, scores) : ndarrays
            Shapes as in :meth:`recommend`: ``(N',)`` for a scalar ``itemid`` (``N' <= N`` when
            fewer items qualify) and ``(len(itemid), min(N, n_items - 1))`` for an array,
            padded with id ``-1`` and score ``-inf``.
        """
        self._check_fitted()
        N = check_positive_int(N, "N")
        scalar = np.ndim(itemid) == 0
        items = check_ids(itemid, self.n_items_, "itemid")
        n_out = min(N, max(1, self.n_items_ - 1))
        with numba_threads(self.num_threads):
            out_ids, out_scores = self._similar(items, n_out)
        if scalar:
            valid = out_ids[0] >= 0
            return out_ids[0][valid], out_scores[0][valid]
        return out_ids, out_scores

    def _similar(self, items, n_out):
        """Padded ``(ids, scores)`` of the ``n_out`` best items of the item affinity's rows."""
        return rank_rows(self._item_affinity().matrix[items], n_out)

    def _item_affinity(self) -> Affinity:
        raise NotImplementedError(f"{type(self).__name__} has no item-item affinity")

    # ------------------------------------------------------------------ persistence
    def save(self, path):
        """Write the parameters and fitted state to ``path`` (``.npz`` appended if missing).

        Fitted attributes may be sparse matrices, :class:`Affinity` objects or dense arrays.
        """
        self._check_fitted()
        arrays, state = {}, {}
        for name in ("user_items_",) + self._state_attributes:
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                state[name] = {"type": "dense"}
                arrays[name] = value
                continue
            if isinstance(value, Affinity):
                state[name] = {"type": "affinity", "k_max": value.k_max, "kind": value.kind, "side": value.side}
                value = value.matrix
            else:
                state[name] = {"type": "csr"}
            state[name]["shape"] = list(value.shape)
            for part in ("data", "indices", "indptr"):
                arrays[f"{name}.{part}"] = getattr(value, part)
        header = {
            "format": _FORMAT,
            "version": FORMAT_VERSION,
            "class": type(self).__name__,
            "params": self.get_params(),
            "state": state,
        }
        write_npz(path, header, arrays)

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; ``Recommender.load`` accepts any model class."""
        header, arrays = read_npz(path, _FORMAT, FORMAT_VERSION)
        path = npz_path(path)
        if not isinstance(header.get("state"), dict):
            raise ValueError(f"{path}: header field 'state' is missing or not a dict")
        model_cls = _REGISTRY.get(header["class"])
        if model_cls is None or not issubclass(model_cls, cls):
            raise ValueError(f"{path} holds a {header['class']!r} model, not a {cls.__name__}")
        try:
            model = model_cls(**header["params"])
        except TypeError as exc:
            raise ValueError(f"{path}: parameters do not fit {model_cls.__name__}: {exc}") from exc
        model._check_state_names(set(header["state"]), path)
        for name, spec in header["state"].items():
            setattr(model, name, _read_state(arrays, name, spec, path))
        try:
            model.user_items_ = check_feedback(model.user_items_, "user_items_")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: malformed fitted attribute 'user_items_': {exc}") from exc
        try:  # the same parameter validation as fit, against the stored training matrix
            model._validate_params(model.user_items_)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: invalid parameters: {exc}") from exc
        model._check_state(path)
        model._prepare()
        return model

    def _check_state_names(self, names, path):
        """Raise unless ``names``, the fitted attributes stored in ``path``, are the ones to load."""
        expected = {"user_items_", *self._state_attributes}
        if names != expected:
            raise ValueError(f"{path}: fitted state holds {sorted(names)}, expected {sorted(expected)}")

    def _check_dense_state(self, path, shapes):
        """Check loaded dense attributes against their expected ``shapes`` (name -> shape)."""
        for name, shape in shapes.items():
            value = getattr(self, name)
            if not isinstance(value, np.ndarray) or value.shape != tuple(shape):
                got = getattr(value, "shape", type(value).__name__)
                raise ValueError(f"{path}: {name} must be a dense array of shape {tuple(shape)}, got {got}")

    def _check_state(self, path):
        """Cross-check loaded affinities (side, kind, shape, ``k_max``) before use by numba kernels."""
        for name in self._state_attributes:
            value = getattr(self, name)
            side = name.split("_")[0]  # "item_affinity_" / "user_affinity_"
            n = self.n_items_ if side == "item" else self.n_users_
            if not isinstance(value, Affinity) or value.side != side:
                raise ValueError(f"{path}: {name} must be an Affinity with side={side!r}")
            if self._affinity_kind is not None and value.kind != self._affinity_kind:
                raise ValueError(f"{path}: {name} is a {value.kind!r} affinity, expected {self._affinity_kind!r}")
            if value.n != n:
                raise ValueError(f"{path}: {name} is {value.n} x {value.n} but the model has {n} {side}s")
            if value.k_max > max(1, n - 1):
                raise ValueError(f"{path}: {name}.k_max={value.k_max} exceeds the {n - 1} possible neighbours")


def rank_rows(S, n_out):
    """The ``n_out`` largest non-zero entries of every row of the sparse ``S``, ties by smaller
    column, as ``(ids, scores)`` arrays of shape ``(n_rows, n_out)`` padded with ``-1`` / ``-inf``."""
    S = sp.csr_matrix(S)
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    keep = S.data != 0
    rows, cols, vals = rows[keep], S.indices[keep], S.data[keep]
    order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    starts = np.searchsorted(rows, np.arange(S.shape[0]))
    pos = np.arange(rows.size) - starts[rows]
    keep = pos < n_out
    out_ids = np.full((S.shape[0], n_out), -1, np.int64)
    out_scores = np.full((S.shape[0], n_out), -np.inf)
    out_ids[rows[keep], pos[keep]] = cols[keep]
    out_scores[rows[keep], pos[keep]] = vals[keep]
    return out_ids, out_scores


def rank_dense_rows(rows_of, items, n_out, n_cols):
    """:func:`rank_rows` of the dense rows ``rows_of(chunk)`` (one per id of ``chunk``, ``n_cols``
    columns), computed for ``items`` in chunks of at most ``_BLOCK_FLOATS`` floats."""
    out_ids = np.empty((items.size, n_out), np.int64)
    out_scores = np.empty((items.size, n_out))
    step = max(1, _BLOCK_FLOATS // n_cols)
    for lo in range(0, items.size, step):
        block = slice(lo, lo + step)
        out_ids[block], out_scores[block] = rank_rows(sp.csr_matrix(rows_of(items[block])), n_out)
    return out_ids, out_scores


def _read_state(arrays, name, spec, path):
    try:
        if spec["type"] == "dense":
            value = arrays[name]
            if not np.issubdtype(value.dtype, np.number) or not np.all(np.isfinite(value)):
                raise ValueError("a dense state must be a finite numeric array")
            return value
        parts = [arrays[f"{name}.{part}"] for part in ("data", "indices", "indptr")]
        shape = tuple(int(s) for s in spec["shape"])
        matrix = sp.csr_matrix(tuple(parts), shape=shape)
        matrix.check_format(full_check=True)
        if spec["type"] == "affinity":
            return Affinity(matrix, spec["k_max"], spec["kind"], spec["side"])
        if spec["type"] != "csr":
            raise ValueError(f"unknown state type {spec['type']!r}")
        return matrix
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: malformed fitted attribute {name!r}: {exc}") from exc
