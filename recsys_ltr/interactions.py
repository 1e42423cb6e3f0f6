"""Implicit-feedback interaction data: a binary users x items matrix with id maps.

:class:`Interactions` turns an event log (a DataFrame, parallel arrays or a sparse matrix)
into the canonical feedback matrix every estimator takes (what
:func:`recsys_ltr._validation.check_feedback` returns), and keeps the maps between external
ids (any hashable values) and internal indices ``0..n-1``.

Building it runs these steps, in order, all vectorised:

1. duplicate ``(user, item)`` events are summed (no weight column: each event weighs 1);
2. a pair is a positive when its summed weight passes the binarization rule: ``weight > 0``
   when ``threshold`` is None, else ``weight >= threshold`` (``rule=">="``) or
   ``weight > threshold`` (``rule=">"``); other pairs are dropped;
3. an optional iterative k-core keeps users with ``>= min_user_count`` and items with
   ``>= min_item_count`` positives (repeated until stable);
4. users and items left without any positive are dropped (``drop_empty``).

Internal indices follow the sorted order of the external ids (the order of first appearance
when the ids are not mutually comparable).
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._validation import check_bool, check_feedback, check_positive_int, check_sparse

__all__ = ["Interactions", "UnknownIdError"]

_RULES = (">=", ">")


class UnknownIdError(KeyError, ValueError):
    """An external id absent from the id map (catch it as ``KeyError`` or ``ValueError``)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Interactions:
    """Binary users x items feedback with external <-> internal id maps.

    Build instances with :meth:`from_dataframe`, :meth:`from_arrays` or :meth:`from_sparse`;
    the constructor takes an already canonical matrix and its id maps.

    Parameters
    ----------
    matrix : sparse matrix (n_users, n_items)
        Binary feedback; any positive stored value is one interaction.
    user_ids, item_ids : array-like or None
        External id of each row / column (default ``0..n-1``); must be unique.
    item_features : sparse matrix (n_items, n_features) or None
        Item content aligned with the internal item index (e.g. tag counts).
    item_feature_names : array-like or None
        One name per feature column.

    Attributes
    ----------
    matrix : scipy.sparse.csr_matrix
        Canonical CSR users x items matrix of float64 ones (int32 sorted indices).
    user_ids, item_ids : numpy.ndarray
        External ids by internal index.
    item_features : scipy.sparse.csr_matrix or None
    item_feature_names : numpy.ndarray or None
    """

    def __init__(self, matrix, user_ids=None, item_ids=None, item_features=None, item_feature_names=None):
        self.matrix = check_feedback(matrix, "matrix")
        n_users, n_items = self.matrix.shape
        self.user_ids = _id_array(user_ids, n_users, "user_ids")
        self.item_ids = _id_array(item_ids, n_items, "item_ids")
        self._user_index = pd.Index(self.user_ids)
        self._item_index = pd.Index(self.item_ids)
        self._user_tuples = _holds_tuples(self._user_index)
        self._item_tuples = _holds_tuples(self._item_index)
        self.item_features = None
        self.item_feature_names = None
        if item_features is not None:
            self.item_features, self.item_feature_names = _check_features(item_features, item_feature_names, n_items)
        elif item_feature_names is not None:
            raise ValueError("item_feature_names given without item_features")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dataframe(
        cls,
        df,
        user_col="user",
        item_col="item",
        weight_col=None,
        threshold=None,
        rule=">=",
        min_user_count=0,
        min_item_count=0,
        drop_empty=True,
    ) -> Interactions:
        """Build from a DataFrame with one event per row.

        Parameters
        ----------
        df : pandas.DataFrame
        user_col, item_col : column labels
            External user / item ids (any hashable values, no missing values).
        weight_col : column label or None
            Event weight or rating; None counts each row as weight 1.
        threshold : float or None
            Binarization threshold applied to the summed weight of each pair; None means any
            positive weight is a positive (negative weights are then an error).
        rule : {">=", ">"}
            How ``threshold`` is applied.
        min_user_count, min_item_count : int
            Iterative k-core: minimum positives per user / item (0 = no filter).
        drop_empty : bool
            Drop users and items without any positive (always true when a k-core is asked).

        Returns
        -------
        Interactions
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
        cols = [user_col, item_col] + ([] if weight_col is None else [weight_col])
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"column(s) {missing} not in the DataFrame (columns: {list(df.columns)})")
        weights = None if weight_col is None else df[weight_col].to_numpy()
        return cls.from_arrays(
            df[user_col].to_numpy(),
            df[item_col].to_numpy(),
            weights,
            threshold=threshold,
            rule=rule,
            min_user_count=min_user_count,
            min_item_count=min_item_count,
            drop_empty=drop_empty,
        )

    @classmethod
    def from_arrays(
        cls,
        users,
        items,
        weights=None,
        threshold=None,
        rule=">=",
        min_user_count=0,
        min_item_count=0,
        drop_empty=True,
    ) -> Interactions:
        """Build from parallel arrays of external user ids, item ids and optional weights.

        See :meth:`from_dataframe` for the parameters.
        """
        users, items = _column(users, "users"), _column(items, "items")
        if users.size != items.size:
            raise ValueError(f"users and items have different lengths: {users.size} != {items.size}")
        if users.size == 0:
            raise ValueError("no interactions: users and items are empty")
        if weights is None:
            weights = np.ones(users.size)
        else:
            weights = _column(weights, "weights", "numbers")
            if weights.size != users.size:
                raise ValueError(f"weights has length {weights.size}, users/items have {users.size}")
            weights = _numeric(weights, "weights")
        u_codes, user_ids = _factorize(users, "users")
        i_codes, item_ids = _factorize(items, "items")
        # duplicate (user, item) events are summed; an overflowing sum is an error
        X = check_sparse(
            sp.coo_matrix((weights, (u_codes, i_codes)), shape=(user_ids.size, item_ids.size)),
            "weights",
            allow_empty=True,
            nonnegative=False,
        )
        return cls._finish(
            X, user_ids, item_ids, threshold, rule, min_user_count, min_item_count, drop_empty, "weights"
        )

    @classmethod
    def from_sparse(
        cls,
        X,
        user_ids=None,
        item_ids=None,
        threshold=None,
        rule=">=",
        min_user_count=0,
        min_item_count=0,
        drop_empty=False,
    ) -> Interactions:
        """Build from a users x items scipy sparse matrix (or dense 2-D array) of weights.

        Stored entries are weights; explicitly stored zeros are an error unless ``threshold``
        is given (the rule then makes them, like negative weights, explicit negatives).
        Unlike the other constructors the matrix's index is kept as is (``drop_empty=False``):
        empty rows and columns stay unless ``drop_empty`` or a k-core asks otherwise.
        ``user_ids`` / ``item_ids`` (default ``0..n-1``) must match the matrix's shape.
        See :meth:`from_dataframe` for the other parameters.
        """
        if not (sp.issparse(X) or isinstance(X, (np.ndarray, Interactions))):
            raise TypeError(f"X must be a 2-D scipy sparse matrix or numpy array, got {type(X).__name__}")
        # raw structure checked before any conversion; weights may be negative (explicit negatives)
        X = check_sparse(X, "X", allow_empty=True, nonnegative=False)
        if threshold is None and np.any(X.data == 0):
            raise ValueError(
                f"X stores {int(np.sum(X.data == 0))} explicit zero(s): call X.eliminate_zeros() "
                "or give a threshold that makes them explicit negatives"
            )
        user_ids = _id_array(user_ids, X.shape[0], "user_ids")
        item_ids = _id_array(item_ids, X.shape[1], "item_ids")
        return cls._finish(X, user_ids, item_ids, threshold, rule, min_user_count, min_item_count, drop_empty, "X")

    @classmethod
    def _finish(cls, X, user_ids, item_ids, threshold, rule, min_user_count, min_item_count, drop_empty, name):
        """Binarize the summed weights of ``X``, apply the k-core, drop empties, build."""
        min_user = check_positive_int(min_user_count, "min_user_count", minimum=0)
        min_item = check_positive_int(min_item_count, "min_item_count", minimum=0)
        if check_bool(drop_empty, "drop_empty"):
            min_user, min_item = max(min_user, 1), max(min_item, 1)
        X = _binarize(X, threshold, rule, name)
        if X.nnz == 0:
            raise ValueError(f"no positive interactions (threshold={threshold!r}, rule={rule!r})")
        rows, cols = _k_core(X, min_user, min_item)
        kept = X[rows][:, cols]
        if kept.nnz == 0:
            raise ValueError(
                f"the k-core filter removed every interaction: min_user_count={min_user_count} and "
                f"min_item_count={min_item_count} are repeatedly applied until each kept user has at least "
                f"min_user_count positives and each kept item at least min_item_count, and nothing is left "
                f"of the {X.nnz} positives (before filtering the most active user had "
                f"{int(np.diff(X.indptr).max())} and the most popular item {int(np.bincount(X.indices).max())}); "
                "lower min_user_count / min_item_count (0 disables the filter)"
            )
        return cls(kept, user_ids[rows], item_ids[cols])

    def with_item_features(self, features, item_ids=None, feature_names=None) -> Interactions:
        """Return a copy carrying item content aligned with the internal item index.

        Parameters
        ----------
        features : sparse matrix or 2-D array (n_rows, n_features)
            Non-negative, finite item content (e.g. tag counts).
        item_ids : array-like of length n_rows or None
            External item id of each row; must be unique.  Items absent from it get an empty
            row and rows of unknown items are ignored.  None: rows already follow the internal
            item index.
        feature_names : array-like of length n_features or None
        """
        F = check_sparse(features, "item features", allow_empty=True)
        if item_ids is not None:
            item_ids = _column(item_ids, "item_ids")
            if item_ids.size != F.shape[0]:
                raise ValueError(f"item_ids has length {item_ids.size}, features has {F.shape[0]} rows")
            dup = pd.Index(item_ids).duplicated()
            if dup.any():
                raise ValueError(
                    f"item_ids must be unique (one feature row per item); duplicated: {item_ids[dup][:5].tolist()}"
                )
            pos = self._item_index.get_indexer(item_ids)
            keep = np.flatnonzero(pos >= 0)
            sel = sp.csr_matrix((np.ones(keep.size), (pos[keep], keep)), shape=(self.n_items, F.shape[0]))
            F = (sel @ F).tocsr()
        out = Interactions.__new__(Interactions)
        out.__dict__.update(self.__dict__)
        out.item_features, out.item_feature_names = _check_features(F, feature_names, self.n_items)
        return out

    # ------------------------------------------------------------------ views
    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape

    @property
    def n_users(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_items(self) -> int:
        return self.matrix.shape[1]

    @property
    def nnz(self) -> int:
        return self.matrix.nnz

    @property
    def item_popularity(self) -> np.ndarray:
        """Number of users with each item (int64, by internal item index)."""
        return np.bincount(self.matrix.indices, minlength=self.n_items).astype(np.int64)

    @property
    def user_activity(self) -> np.ndarray:
        """Number of items of each user (int64, by internal user index)."""
        return np.diff(self.matrix.indptr).astype(np.int64)

    def user_index(self, ids):
        """Internal indices of external user ids (scalar in, int out).

        A tuple is one id when any user id is a tuple (``user_index((1, 2))``), else a sequence
        of ids like a list or an array.  Unknown ids raise :class:`UnknownIdError` (a
        ``KeyError`` and a ``ValueError``).
        """
        return _lookup(self._user_index, ids, "user", self._user_tuples)

    def item_index(self, ids):
        """Internal indices of external item ids; as :meth:`user_index`."""
        return _lookup(self._item_index, ids, "item", self._item_tuples)

    def to_dataframe(self, user_col="user", item_col="item") -> pd.DataFrame:
        """One row per positive, external ids, ordered by internal (user, item)."""
        X = self.matrix
        rows = np.repeat(np.arange(self.n_users), np.diff(X.indptr))
        return pd.DataFrame({user_col: self.user_ids[rows], item_col: self.item_ids[X.indices]})

    def __repr__(self) -> str:
        feats = "" if self.item_features is None else f", {self.item_features.shape[1]} item features"
        return f"Interactions({self.n_users} users x {self.n_items} items, {self.nnz} positives{feats})"


# ---------------------------------------------------------------------- helpers
def _column(values, name: str, what: str = "hashable ids (numbers, strings or tuples)") -> np.ndarray:
    if isinstance(values, (pd.Series, pd.Index)):
        arr = values.to_numpy()
    elif isinstance(values, np.ndarray):
        arr = values
    else:  # a list: let pandas infer, so that mixed ids are not all cast to strings
        arr = pd.Series(list(values)).to_numpy()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    _check_hashable(arr, name, what)
    return arr


def _numeric(arr: np.ndarray, name: str) -> np.ndarray:
    if np.iscomplexobj(arr) or (arr.dtype == object and any(isinstance(v, complex) for v in arr.ravel()[:1000])):
        raise TypeError(f"{name} has complex values; weights must be real")
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be numeric, got non-numeric values") from None
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _check_hashable(arr: np.ndarray, name: str, what: str) -> None:
    """Ids must be hashable scalars or tuples: a nested list or array is a 2-D id, refused."""
    if arr.dtype == object:
        bad = next((v for v in arr if isinstance(v, (list, np.ndarray, dict, set))), None)
        if bad is not None:
            raise TypeError(f"{name} must be 1-D {what}, got an element {bad!r}")


def _factorize(values: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:  # ids of mutually incomparable types: keep first-appearance order
        codes, uniques = pd.factorize(values, sort=False)
    if np.any(codes < 0):
        raise ValueError(f"{name} contains missing ids (NaN/None)")
    return codes, np.asarray(uniques)


def _id_array(ids, n: int, name: str) -> np.ndarray:
    if ids is None:
        return np.arange(n)
    ids = _column(ids, name)
    if ids.size != n:
        raise ValueError(f"{name} has length {ids.size} but the matrix has {n} {name.split('_')[0]}s")
    if pd.isna(ids).any():
        raise ValueError(f"{name} contains missing ids (NaN/None)")
    if not pd.Index(ids).is_unique:
        dup = pd.Index(ids)[pd.Index(ids).duplicated()][:5].tolist()
        raise ValueError(f"{name} must be unique; duplicated: {dup}")
    return ids.copy()


def _binarize(X: sp.csr_matrix, threshold, rule, name: str) -> sp.csr_matrix:
    """Keep the pairs whose (summed) weight passes the rule, as ones."""
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {_RULES}, got {rule!r}")
    data = X.data
    if threshold is None:
        if np.any(data < 0):
            raise ValueError(
                f"{name}: {int(np.sum(data < 0))} (user, item) pair(s) have negative weight; give a threshold "
                "to treat them as explicit negatives"
            )
        keep = data > 0
    else:
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise TypeError(f"threshold must be a real number or None, got {threshold!r}")
        if not np.isfinite(threshold):
            raise ValueError(f"threshold must be finite, got {threshold}")
        keep = data >= threshold if rule == ">=" else data > threshold
    X = sp.csr_matrix((keep.astype(np.float64), X.indices, X.indptr), shape=X.shape)
    X.eliminate_zeros()
    return X


def _k_core(X: sp.csr_matrix, min_user: int, min_item: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns surviving the iterative k-core (each pass is vectorised)."""
    rows = np.arange(X.shape[0])
    cols = np.arange(X.shape[1])
    while True:
        r_keep = np.diff(X.indptr) >= min_user
        c_keep = np.bincount(X.indices, minlength=X.shape[1]) >= min_item
        if r_keep.all() and c_keep.all():
            return rows, cols
        X = X[r_keep][:, c_keep]
        rows, cols = rows[r_keep], cols[c_keep]
        if X.shape[0] == 0 or X.shape[1] == 0:
            return rows, cols


def _check_features(F, names, n_items: int):
    F = check_sparse(F, "item_features", allow_empty=True)  # finite, non-negative, canonical
    if F.shape[0] != n_items:
        raise ValueError(f"item_features has {F.shape[0]} rows, expected one per item ({n_items})")
    F.eliminate_zeros()
    if names is not None:
        names = _column(names, "item_feature_names")
        if names.size != F.shape[1]:
            raise ValueError(f"item_feature_names has {names.size} names for {F.shape[1]} feature columns")
    return F, names


def _holds_tuples(index: pd.Index) -> bool:
    return index.dtype == object and any(isinstance(v, tuple) for v in index)


def _lookup(index: pd.Index, ids, kind: str, tuple_ids: bool):
    # a tuple is one id when the ids include tuples, else a sequence of ids
    scalar = np.ndim(ids) == 0 or (isinstance(ids, tuple) and tuple_ids)
    arr = _column([ids] if scalar else ids, f"{kind} ids")
    pos = index.get_indexer(arr) if arr.size else np.empty(0, dtype=np.int64)
    unknown = pos < 0
    if unknown.any():
        bad = arr[unknown][:5].tolist()
        raise UnknownIdError(f"unknown {kind} id(s): {bad}" + (" ..." if unknown.sum() > 5 else ""))
    pos = pos.astype(np.int64)
    return int(pos[0]) if scalar else pos
